"""Red team on the pushers tables keyed by account (ledger migration 9): variants of the
finding closed in tests/security/test_red_team_identity.py (a push under a freed login
kept when the branch is rebased).

The promise attacked: nobody pushes a change and approves it, whatever login they pushed
under and whoever had that login before or after them. A login is freed by a rename and
taken by another account; the pushers tables kept one row per login, so the second
account's push was dropped for the first's row. They now keep every (login, account id)
pair, and the gate compares pairs.

Driven as the identity red team drives the gate (tests/helpers/gate_world.py): real webhook
bodies, the in-memory forge (whose accounts keep their id through a rename and whose freed
logins go to new accounts), the ledger on SQLite, plans recorded as a PR build records them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import gate_world as gw
from tests.helpers.gate_world import (
    CHANGE,
    GITLAB_KEY,
    KEY,
    ROOT,
    TEAM,
    TEAM_GATED,
    A,
    B,
    Bot,
    C,
    D,
)

E = "e" * 40
ROLES = {"alice": "write", "bob": "write", "carol": "admin", "dave": "write",
         "mallory": "write", "trudy": "write"}  # fmt: skip


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"carol", "mallory", "trudy"})
    yield made
    made.close()


def _pushes(bot: Bot, head: str, sender: str) -> None:
    """``sender`` pushes ``head`` onto PR 7: its push hook, then its synchronize."""
    bot.forge.push(7, head)
    bot.deliver("push", gw.push("change", head, sender, (head,)))
    bot.deliver("pull_request", gw.pr_event("synchronize", head, sender))


def test_a_login_freed_and_taken_twice_keeps_each_account_that_pushed_under_it(
    one: Bot,
) -> None:
    # bob (pushes B) renames himself `bobx`; mallory takes `bob` and pushes C; she renames
    # herself `mal2` and trudy takes `bob` and pushes E: three accounts pushed as `bob`.
    # alice rebases (D: the same change in one new commit of hers): none of the three
    # approves, under the login they have now.
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    _pushes(one, B, "bob")
    bob = one.forge.rename("bob", "bobx")
    mallory = one.forge.rename("mallory", "bob")
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
    _pushes(one, C, "bob")
    one.forge.rename("bob", "mal2")
    one.forge.teams[TEAM] = frozenset({"carol", "mal2", "trudy"})
    trudy = one.forge.rename("trudy", "bob")
    one.forge.commit(E, {"config.yaml": TEAM_GATED}, parents=(C,))
    _pushes(one, E, "bob")
    assert len({bob, mallory, trudy}) == 3
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    _pushes(one, D, "alice")
    gw.plan(one, D, CHANGE)
    assert {(login, uid) for login, uid in one.ledger.pusher_accounts(KEY, 7)} >= {
        ("bob", bob),
        ("bob", mallory),
        ("bob", trudy),
    }
    gw.approve(one, "bob", D, 41)  # trudy
    gw.approve(one, "mal2", D, 42)  # mallory
    check = one.approval(D)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bob and @mal2 pushed to this pull request" in check.summary
    gw.approve(one, "carol", D, 43)  # nobody who pushed: the gate passes
    assert one.approval(D).conclusion == "success", one.approval(D).summary


def test_a_re_push_of_a_commit_under_a_freed_login_is_the_new_account_s(one: Bot) -> None:
    # The branch pushers' table had the same key by login: bob pushes B to `change` before
    # any PR, renames himself `bobx`; mallory takes `bob`, and pushes B to `change` again
    # (after the branch was moved away and back: GitHub tells each push). alice opens the
    # PR at B. Mallory's push of B, (bob, her id), was dropped for bob's (bob, 5).
    one.deliver("push", gw.push("change", B, "bob", (A, B)))
    bob = one.forge.rename("bob", "bobx")
    mallory = one.forge.rename("mallory", "bob")
    one.deliver("push", gw.push("change", A, "alice", (A,)))
    one.deliver("push", gw.push("change", B, "bob", (B,)))
    assert {(p.user, p.user_id) for p in one.ledger.pushes_of(KEY, [B])} == {
        ("bob", bob),
        ("bob", mallory),
    }
    one.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(one, B, CHANGE)
    gw.approve(one, "bob", B, 41)  # mallory
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bob pushed to this pull request" in check.summary


def test_a_login_only_row_from_before_ids_does_not_hide_the_account_that_pushes_later(
    one: Bot,
) -> None:
    # A row (bob, no id) recorded before ledger migration 7; then bob pushes again, his
    # synchronize carrying his id, and alice rebases (D). The row of his id was dropped for
    # the login's row (and his push hook's names a commit no longer in the PR), so once
    # renamed `bobx` he was compared with `bob` by login (not him) and counted as one of
    # the two approvals the login-only row asks. Kept now: his id is a pusher's.
    one.forge.teams[TEAM] = frozenset({"bob", "carol", "dave"})
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.ledger.record_pusher(KEY, 7, "bob", gw.NOW - gw.MINUTE)  # before migration 7: no id
    _pushes(one, B, "bob")
    bob = one.forge.rename("bob", "bobx")
    assert {("bob", None), ("bob", bob)} <= one.ledger.pusher_accounts(KEY, 7)
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    _pushes(one, D, "alice")
    gw.plan(one, D, CHANGE)
    gw.approve(one, "bobx", D, 41)
    gw.approve(one, "carol", D, 42)
    check = one.approval(D)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bobx pushed to this pull request" in check.summary
    assert "recorded by a login alone" in check.summary  # the old row still asks one more
    gw.approve(one, "dave", D, 43)
    assert one.approval(D).conclusion == "success", one.approval(D).summary


def test_a_commit_authored_under_a_freed_login_is_kept_when_the_branch_is_rebased(
    one: Bot,
) -> None:
    # The pushers found through commits were kept only for logins not recorded yet: bob
    # (id 5) pushed onto the PR and renamed himself; mallory takes `bob`, writes a commit
    # alice picks and pushes (the forge names its author `bob`: hers now). After alice's
    # rebase no commit names her: the author's row is kept beside bob's (bob, 5), by her
    # account as the forge names the commit's author (author.id, identity round 2).
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    _pushes(one, B, "bob")
    one.forge.rename("bob", "bobx")
    one.forge.rename("mallory", "bob")
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,), author="bob",
                     committer="alice")  # fmt: skip
    _pushes(one, C, "alice")
    gw.plan(one, C, CHANGE)
    gw.approve(one, "carol", C, 41)  # the gate runs while C is in the PR
    assert ("bob", one.forge.account_id("bob")) in one.ledger.pusher_accounts(KEY, 7)
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    _pushes(one, D, "alice")
    gw.plan(one, D, CHANGE)
    gw.approve(one, "bob", D, 42)  # mallory
    check = one.approval(D)
    assert "Not counted: @bob pushed to this pull request" in check.summary
    # No row is a login's alone now, so no approval more is asked: carol's is the one that
    # counts (mallory's does not).
    assert "Approved by @carol (1 of 1 required)" in check.summary, check.summary


# -- GitLab: the same through merge request hooks (a username freed and taken) -------------


def test_a_gitlab_push_under_a_freed_username_is_kept_when_the_branch_is_rebased(
    tmp_path: Path,
) -> None:
    # bob pushes B onto alice's MR, renames himself `bobx`; mallory takes `bob` and pushes
    # C; alice rebases (D). mallory approves as `bob`: her update hook's (bob, her id) is
    # a pusher's row of its own.
    bot = gw.make_gitlab_bot(tmp_path, TEAM_GATED, ROLES, members={"carol", "mallory"})
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "bob", oldrev=A))
        bob = bot.forge.rename("bob", "bobx")
        mallory = bot.forge.rename("mallory", "bob")
        bot.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
        bot.forge.push(7, C)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", C, "bob", oldrev=B))
        bot.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
        bot.forge.push(7, D)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", D, "alice", oldrev=C))
        assert {("bob", bob), ("bob", mallory)} <= bot.ledger.pusher_accounts(GITLAB_KEY, 7)
        gw.gitlab_plan(bot, D, CHANGE)
        gw.gitlab_approve(bot, "bob", D)  # mallory
        check = bot.approval(D)
        assert check.conclusion != "success", check.summary
        assert "Not counted: @bob pushed to this pull request" in check.summary
        gw.gitlab_approve(bot, "carol", D)
        assert bot.approval(D).conclusion == "success", bot.approval(D).summary
    finally:
        bot.close()
