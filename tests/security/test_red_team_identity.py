"""Red team on telling people apart by forge account id (commits 10bb254, cbbea2e, 8642c6d).

The promise attacked: nobody pushes a change and is its sole approver, and one person never
counts as two approvals. People are now compared by account id where both sides carry one,
by the case-folded login otherwise. The attacks look where ids and logins meet: who is
*eligible* is still decided by a login (required teams resolve to logins of now), while who
*approved* is an id recorded with the login it had then; and the ledger's pushers tables
were keyed by login (keyed by account since ledger migration 9).

Each test asserts what a sound gate does; an open finding is ``xfail(strict=True)``. The
flows are driven as tests/security/test_red_team_approval4.py drives them
(tests/helpers/gate_world.py): real webhook bodies, the in-memory forge (whose accounts keep
their id through a rename), the ledger on SQLite, plans recorded as a PR build records them
(no Spark). The web UI's "Approve this plan" is delivered as the event
sluice/bot/web/actions.py makes of the form: a ``CheckRunEvent`` of origin WEB, the
signed-in person's login and forge id as its requester (the web UI asks only that they can
read the repository).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.events.payload import PayloadError
from sluice.bot.flow import audit, dispatch
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.present.checks import APPROVAL, approve_identifier
from sluice.bot.web.access import SignedIn
from sluice.bot.web.session import Session
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import (
    CHANGE,
    GATED,
    KEY,
    OWNER,
    ROOT,
    TEAM,
    TEAM_GATED,
    A,
    B,
    Bot,
    C,
    D,
)
from tests.helpers.repair_red_team import GATE as REPAIR_GATE
from tests.helpers.repair_red_team import RepairWorld

ROLES = {"alice": "write", "bob": "write", "carol": "admin", "dave": "write", "mallory": "write"}
TEAM_OF_TWO = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n"
    "      teams: [octo/approvers]\n      count: 2\n"
)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_OF_TWO, ROLES, members={"dave", "carol", "bob"})
    yield made
    made.close()


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol"})
    yield made
    made.close()


def _web_approve(bot: Bot, login: str, head: str) -> int:
    """``login`` (the account holding it now) approves PR 7's plan at ``head`` from the web
    UI: the event the web UI's form queues (sluice/bot/web/actions.py), its requester the
    session's login and forge id. Returns that id."""
    uid = bot.forge.account_id(login)
    review = bot.ledger.review(KEY, 7, head)
    assert review is not None
    bound = bot.ledger.name_binding(KEY)  # the form carries the id the name is bound to
    event = CheckRunEvent(
        forge="github", repo=OWNER, installation_id=None, action="requested_action",
        check_name=APPROVAL, head_sha=head, numbers=(7,), requester=login,
        requester_id=uid, identifier=approve_identifier(review.fingerprint), origin=WEB,
        repo_id=None if bound is None else bound[1],
    )  # fmt: skip
    dispatch.handle(bot.deps, event)
    return uid


def _alice_opens(bot: Bot, head: str = B) -> None:
    bot.deliver("push", gw.push("change", head, "alice", (A, head)))
    bot.forge.open_pull(7, head_sha=head, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", head, "alice", head_ref="change"))


# -- 1. eligibility by the login an approval was recorded under, not its account's --------


# Closed: a click counts under the login its account has now (approval._clicks_now asks
# the forge), so the second account's click reads `zz-old`, no member.
def test_a_second_account_s_click_does_not_count_once_its_login_is_an_approver_s(
    two: Bot,
) -> None:
    _alice_opens(two)
    gw.plan(two, B, CHANGE)
    _web_approve(two, "zz", B)  # dave's second account, no member of octo/approvers
    assert two.approval(B).conclusion != "success", two.approval(B).summary
    two.forge.rename("zz", "zz-old")
    two.forge.rename("dave", "zz")  # dave takes the freed login
    assert two.forge.teams[TEAM] == {"zz", "carol", "bob"}
    gw.approve(two, "zz", B, 41)  # dave's own, one person's approval
    check = two.approval(B)
    assert check.conclusion != "success", check.summary


# Closed: the sock's click counts under its account's login now (`sock-2`), no member.
def test_a_pusher_does_not_approve_through_a_reader_s_web_approval_by_taking_its_login(
    one: Bot,
) -> None:
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.push(7, B)
    one.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    gw.plan(one, B, CHANGE)
    sock = _web_approve(one, "bobs-sock", B)
    assert one.approval(B).conclusion != "success", one.approval(B).summary
    one.forge.rename("bobs-sock", "sock-2")
    bob = one.forge.rename("bob", "bobs-sock")
    assert sock != bob
    gw.refresh(one)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary


def test_a_reader_s_web_approval_does_not_count_while_its_login_is_no_approver_s(
    one: Bot,
) -> None:
    # Defended (the same world, no rename): a reader's web approval is not an approver's.
    _alice_opens(one)
    gw.plan(one, B, CHANGE)
    _web_approve(one, "mallory", B)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @mallory" in check.summary
    gw.approve(one, "carol", B, 41)
    assert one.approval(B).conclusion == "success", one.approval(B).summary


# -- 2. one person under two logins: a review, a click and a web approval -------------------


def test_one_approver_under_two_logins_is_one_approval(two: Bot) -> None:
    # Defended: dave reviews as dave, renames himself `dave2`, clicks the check's button and
    # approves from the web UI as dave2: every word carries his account's id, one person.
    _alice_opens(two)
    gw.plan(two, B, CHANGE)
    gw.approve(two, "dave", B, 41)
    two.forge.rename("dave", "dave2")
    gw.click(two, "dave2", B)
    _web_approve(two, "dave2", B)
    check = two.approval(B)
    assert check.conclusion != "success", check.summary
    assert "(1 of 2 required)" in check.summary
    gw.approve(two, "carol", B, 42)
    assert two.approval(B).conclusion == "success", two.approval(B).summary


def test_a_pusher_renamed_does_not_approve_from_the_web_ui(one: Bot) -> None:
    # Defended: bob pushes onto alice's PR, renames himself `bobx` (still a member) and
    # approves from the web UI: the session's id is his account's.
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.push(7, B)
    one.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    gw.plan(one, B, CHANGE)
    one.forge.rename("bob", "bobx")
    _web_approve(one, "bobx", B)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bobx pushed to this pull request" in check.summary


# -- 3. the pushers table keyed by login: a freed login taken, a push's id dropped ----------


def test_a_push_under_a_freed_login_is_kept_when_the_branch_is_rebased(one: Bot) -> None:
    # Was open: sluice_pr_pushers was keyed by (repo, number, login), ON CONFLICT DO
    # NOTHING. bob (id 5) pushed onto alice's PR and renamed himself `bobx` (GitHub frees
    # `bob` at once); mallory (octo/approvers) takes `bob` and pushes her change: her
    # synchronize's (bob, her id) was dropped for bob's old row, and the pushers found
    # through commits were kept only for logins not recorded yet, so after alice's rebase
    # no record named her and she was the sole approver of her push. Closed by ledger
    # migration 9: the pushers tables are keyed by account, every (login, id) pair is kept,
    # and approval._recorded_pushes compares pairs, not logins.
    one.forge.teams[TEAM] = frozenset({"carol", "mallory"})
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.push(7, B)
    one.deliver("push", gw.push("change", B, "bob", (B,)))
    one.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    one.forge.rename("bob", "bobx")
    mallory = one.forge.rename("mallory", "bob")  # the freed login
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
    one.forge.push(7, C)
    one.deliver("push", gw.push("change", C, "bob", (C,)))
    one.deliver("pull_request", gw.pr_event("synchronize", C, "bob"))
    gw.plan(one, C, CHANGE)
    gw.approve(one, "bob", C, 41)
    assert one.approval(C).conclusion != "success", one.approval(C).summary  # caught here
    # alice rebases onto main: D holds the same change in a new commit.
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    one.forge.push(7, D)
    one.deliver("push", gw.push("change", D, "alice", (D,)))
    one.deliver("pull_request", gw.pr_event("synchronize", D, "alice"))
    gw.plan(one, D, CHANGE)
    assert one.forge.account_id("bob") == mallory
    gw.approve(one, "bob", D, 42)
    check = one.approval(D)
    assert check.conclusion != "success", check.summary


def test_a_push_under_a_freed_login_counts_while_its_commit_is_in_the_pr(one: Bot) -> None:
    # Defended: the same, without the rebase: her commit's branch push carries her id.
    one.forge.teams[TEAM] = frozenset({"carol", "mallory"})
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.push(7, B)
    one.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    one.forge.rename("bob", "bobx")
    one.forge.rename("mallory", "bob")
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
    one.forge.push(7, C)
    one.deliver("push", gw.push("change", C, "bob", (C,)))
    one.deliver("pull_request", gw.pr_event("synchronize", C, "bob"))
    gw.plan(one, C, CHANGE)
    gw.approve(one, "bob", C, 41)
    check = one.approval(C)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bob pushed to this pull request" in check.summary


def test_a_pusher_first_named_as_a_commit_s_author_does_not_approve_after_renaming(
    one: Bot,
) -> None:
    # Was open: closed with the login-only pusher of test 6: after the rebase the row
    # (bob, no id) is named by no commit of the PR, so it asks one approval more. Since
    # identity round 2 the commit's author is kept by the account the forge names (its
    # author.id), so the row is bob's account, whatever his login.
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    # alice cherry-picks bob's commit: authored by bob, committed and pushed by alice.
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="bob",
                     committer="alice")  # fmt: skip
    one.forge.push(7, B)
    one.deliver("push", gw.push("change", B, "alice", (B,)))
    one.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    gw.plan(one, B, PlanReview("fppicked0001", (("s.m", "k0"),), {}, {}))
    gw.refresh(one)
    assert ("bob", one.forge.account_id("bob")) in one.ledger.pusher_accounts(KEY, 7)
    # bob pushes his change onto the PR.
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
    one.forge.push(7, C)
    one.deliver("push", gw.push("change", C, "bob", (C,)))
    one.deliver("pull_request", gw.pr_event("synchronize", C, "bob"))
    gw.plan(one, C, CHANGE)
    gw.approve(one, "bob", C, 41)
    assert one.approval(C).conclusion != "success", one.approval(C).summary  # caught here
    # alice rebases onto main: D holds both changes in a new commit of hers.
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    one.forge.push(7, D)
    one.deliver("push", gw.push("change", D, "alice", (D,)))
    one.deliver("pull_request", gw.pr_event("synchronize", D, "alice"))
    gw.plan(one, D, CHANGE)
    one.forge.rename("bob", "bobx")
    gw.approve(one, "bobx", D, 42)
    check = one.approval(D)
    assert check.conclusion != "success", check.summary


def test_a_pusher_first_named_as_a_commit_s_author_does_not_approve_under_his_login(
    one: Bot,
) -> None:
    # Defended (the control): the same without the rename: the login-only row is his.
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="bob",
                     committer="alice")  # fmt: skip
    one.forge.push(7, B)
    one.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    gw.plan(one, B, PlanReview("fppicked0001", (("s.m", "k0"),), {}, {}))
    gw.refresh(one)
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
    one.forge.push(7, C)
    one.deliver("pull_request", gw.pr_event("synchronize", C, "bob"))
    one.forge.commit(D, {"config.yaml": TEAM_GATED}, parents=(ROOT,))
    one.forge.push(7, D)
    one.deliver("pull_request", gw.pr_event("synchronize", D, "alice"))
    gw.plan(one, D, CHANGE)
    gw.approve(one, "bob", D, 41)
    check = one.approval(D)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bob pushed to this pull request" in check.summary


# -- 4. a fork's owner, recorded by login alone ---------------------------------------------


def _fork_opened(bot: Bot, owner: str) -> None:
    """alice opens PR 7 from ``owner``'s personal fork (pushed there before she opened it)."""
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        fork=True)  # fmt: skip
    payload = gw.pr_event("opened", B, "alice", head_ref="change",
                          head_repo=f"{owner}/warehouse")  # fmt: skip
    payload["pull_request"]["head"]["repo"]["owner"].update(
        login=owner, type="User", id=bot.forge.account_id(owner)
    )
    bot.deliver("pull_request", payload)


def test_a_fork_s_owner_who_renamed_himself_does_not_approve_its_pr(tmp_path: Path) -> None:
    # Was open (MEDIUM): a fork's owner was recorded by login alone, so bob, owner of the
    # fork bob/warehouse, renamed himself `bobx` and his approval was one of the two a
    # fork's PR asks. Fixed: the owner is recorded with pull_request.head.repo.owner.id and
    # compared by it (GitLab's hook names the source namespace by path alone: no id there).
    bot = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol", "dave"})
    try:
        _fork_opened(bot, "bob")
        gw.plan(bot, B, CHANGE)
        bot.forge.rename("bob", "bobx")
        gw.approve(bot, "bobx", B, 41)
        gw.approve(bot, "carol", B, 42)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        gw.approve(bot, "dave", B, 43)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_fork_s_owner_under_his_login_does_not_approve_its_pr(tmp_path: Path) -> None:
    # Defended: the same without the rename: bob is the fork's owner, a pusher.
    bot = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol", "dave"})
    try:
        _fork_opened(bot, "bob")
        gw.plan(bot, B, CHANGE)
        gw.approve(bot, "bob", B, 41)
        gw.approve(bot, "carol", B, 42)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "Not counted: @bob pushed to this pull request" in check.summary
        gw.approve(bot, "dave", B, 43)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


# -- 5. owners: the same eligibility by a recorded login ---------------------------------------

OWNERS_ONLY = "sluice:\n  project: jaffle\n  gate:\n    owners_must_approve: direct\n"
OWNED = PlanReview(
    "fpowners0001",
    (("s.bobs_model", "k"),),
    {"s.bobs_model": "octo/owners"},
    {},
    prod_owners=("octo/owners",),
)


# Closed: the owners rule reads the click under its account's login now (`sock-2`).
def test_an_owner_who_pushed_does_not_approve_through_a_reader_s_click_by_taking_its_login(
    tmp_path: Path,
) -> None:
    bot = gw.make_bot(tmp_path, OWNERS_ONLY, ROLES)
    try:
        bot.forge.teams["octo/owners"] = frozenset({"bob", "carol"})
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
        gw.plan(bot, B, OWNED)
        _web_approve(bot, "bobs-sock", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        bot.forge.rename("bobs-sock", "sock-2")
        bot.forge.rename("bob", "bobs-sock")
        gw.refresh(bot)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
    finally:
        bot.close()


# -- 6. pushers recorded before ids were ------------------------------------------------------


def test_a_pusher_recorded_before_ids_does_not_approve_after_renaming_himself(one: Bot) -> None:
    # Was open (LOW): fixed as the proposal's interim: a login-only push no commit of the
    # PR names asks one approval more (approval._pushers), so bob's alone never passes.
    _alice_opens(one)
    one.ledger.record_pusher(KEY, 7, "bob", gw.NOW - gw.MINUTE)  # before migration 7: no id
    gw.plan(one, B, CHANGE)
    gw.approve(one, "bob", B, 41)
    assert one.approval(B).conclusion != "success", one.approval(B).summary
    one.forge.rename("bob", "bobx")
    gw.approve(one, "bobx", B, 42)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary


def test_a_pusher_recorded_before_ids_asks_one_approval_more_and_says_why(one: Bot) -> None:
    # Defended (the interim's cost): the login-only row asks a second approver; with
    # carol's the gate passes, so bob is never the sole approver of his push.
    _alice_opens(one)
    one.ledger.record_pusher(KEY, 7, "bob", gw.NOW - gw.MINUTE)  # before migration 7: no id
    gw.plan(one, B, CHANGE)
    one.forge.rename("bob", "bobx")
    gw.approve(one, "bobx", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "recorded by a login alone" in check.summary
    gw.approve(one, "carol", B, 42)
    assert one.approval(B).conclusion == "success", one.approval(B).summary


def test_a_login_only_pusher_a_commit_names_asks_no_approval_more(one: Bot) -> None:
    # Defended (the control): a commit's author, kept by the account the forge names
    # (author.id: no row by login alone), asks no approval more; one approver is enough.
    one.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="dave",
                     committer="alice")  # fmt: skip
    one.forge.push(7, B)
    one.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    gw.plan(one, B, CHANGE)
    gw.approve(one, "carol", B, 41)
    check = one.approval(B)
    assert check.conclusion == "success", check.summary
    assert ("dave", one.forge.account_id("dave")) in one.ledger.pusher_accounts(KEY, 7)


def test_the_author_renamed_does_not_approve_her_own_pr(one: Bot) -> None:
    # Defended: alice (a member of octo/approvers) opens the PR, renames herself `alice2`
    # and approves, by the check's button and by a review: her account's id is the author's.
    one.forge.teams[TEAM] = frozenset({"alice", "carol"})
    _alice_opens(one)
    gw.plan(one, B, CHANGE)
    one.forge.rename("alice", "alice2")
    assert one.forge.pull_request(7).author == "alice2"
    gw.click(one, "alice2", B)
    gw.approve(one, "alice2", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "own approval does not count" in check.summary
    gw.approve(one, "carol", B, 42)
    assert one.approval(B).conclusion == "success", one.approval(B).summary


# -- 7. GitLab: an approval binds to the head GitLab's own times say (never a webhook's) -----


def test_a_gitlab_approval_of_an_older_plan_is_not_rebound_by_a_freed_login(
    tmp_path: Path,
) -> None:
    # Defended: bob approves MR !7 at A; alice pushes B (another plan; GitLab keeps the
    # approval listed). bob renames himself `bobx` and mallory takes `bob`: her approval's
    # webhook names B under the login `bob`, but no webhook binds an approval: bob's is
    # bound by GitLab's own times (approved_at, the MR's versions) to A, stale; mallory's,
    # given after B's push, to B.
    bot = gw.make_gitlab_bot(tmp_path, TEAM_OF_TWO, ROLES, members={"bob", "carol", "mallory"})
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        gw.gitlab_plan(bot, A, PlanReview("fpolder00001", (("s.m", "k1"),), {}, {}))
        gw.gitlab_approve(bot, "bob", A)
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "alice", oldrev=A))
        gw.gitlab_plan(bot, B, CHANGE)
        bot.forge.rename("bob", "bobx")
        bot.forge.rename("mallory", "bob")
        gw.gitlab_approve(bot, "bob", B)  # mallory's, on B
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "(1 of 2 required)" in check.summary
        assert f"Stale: @bobx approved `{A[:7]}`, whose plan differs" in check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


OTHER = PlanReview("fpother00001", (("s.change", "k-fixed"),), {}, {})


def test_a_gitlab_approval_taken_back_does_not_come_back_after_a_rename(
    tmp_path: Path,
) -> None:
    # Was open (MEDIUM): review heads are keyed by login, so after a rename bob's account
    # had two rows and his listed approval was bound to the first (A, plan P), which he
    # had taken back. Fixed then by binding to the account's latest row; now no row binds:
    # GitLab lists bobx's approval given after B's push, so it counts for B alone
    # (approval._bound, from approved_at and the MR's versions).
    bot = gw.make_gitlab_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol"})
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        gw.gitlab_plan(bot, A, CHANGE)  # plan P
        gw.gitlab_approve(bot, "bob", A)
        gw.gitlab_unapprove(bot, "bob", A)  # bob takes it back
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "alice", oldrev=A))
        gw.gitlab_plan(bot, B, OTHER)  # alice's fix: plan Q
        bot.forge.rename("bob", "bobx")
        gw.gitlab_approve(bot, "bobx", B)  # bob approves the fix
        bot.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
        bot.forge.push(7, C)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", C, "mallory", oldrev=B))
        gw.gitlab_plan(bot, C, CHANGE)  # plan P again
        gw.refresh(bot)
        check = bot.approval(C)
        assert check.conclusion != "success", check.summary
    finally:
        bot.close()


def test_a_gitlab_approval_binds_to_its_account_s_latest_head_when_a_taking_back_is_lost(
    tmp_path: Path,
) -> None:
    # Defended: the same, but the unapproval's webhook never came (GitLab gives up on a
    # hook after failures), and bob approves B under his new login: the hooks bind nothing;
    # GitLab lists his approval given after B's push, so at C (plan P again) it is stale,
    # never bound to A.
    bot = gw.make_gitlab_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol"})
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        gw.gitlab_plan(bot, A, CHANGE)
        gw.gitlab_approve(bot, "bob", A)
        bot.forge.withdraw_reviews(7, "bob")  # taken back; its webhook lost
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "alice", oldrev=A))
        gw.gitlab_plan(bot, B, OTHER)
        bot.forge.rename("bob", "bobx")
        gw.gitlab_approve(bot, "bobx", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
        bot.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
        bot.forge.push(7, C)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", C, "mallory", oldrev=B))
        gw.gitlab_plan(bot, C, CHANGE)
        gw.refresh(bot)
        check = bot.approval(C)
        assert check.conclusion != "success", check.summary
        assert "Stale: @bobx" in check.summary
    finally:
        bot.close()


def test_a_gitlab_approval_taken_back_stays_taken_back_without_a_rename(
    tmp_path: Path,
) -> None:
    # Defended (the control): the same under one login: GitLab lists bob's approval given
    # after B's push, so at C (plan P again) his approval of Q is stale.
    bot = gw.make_gitlab_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol"})
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        gw.gitlab_plan(bot, A, CHANGE)
        gw.gitlab_approve(bot, "bob", A)
        gw.gitlab_unapprove(bot, "bob", A)
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "alice", oldrev=A))
        gw.gitlab_plan(bot, B, OTHER)
        gw.gitlab_approve(bot, "bob", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
        bot.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B,))
        bot.forge.push(7, C)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", C, "mallory", oldrev=B))
        gw.gitlab_plan(bot, C, CHANGE)
        gw.refresh(bot)
        check = bot.approval(C)
        assert check.conclusion != "success", check.summary
        assert "Stale: @bob" in check.summary
    finally:
        bot.close()


# -- 8. ids at the wire, and the logins the settings list ------------------------------------


@pytest.mark.parametrize("bad", [0, -7])
def test_a_webhook_whose_sender_id_is_no_account_is_refused(bad: int) -> None:
    # Defended: an id that is no positive integer is refused, never read as "unknown" (which
    # would fall back to comparing logins).
    payload = gw.pr_event("synchronize", B, "bob")
    payload["sender"]["id"] = bad
    with pytest.raises(PayloadError, match=r"sender\.id"):
        parse_github("pull_request", payload)


def test_an_account_that_took_a_listed_approver_s_freed_login_is_no_approver(
    tmp_path: Path,
) -> None:
    # Was open: required approvers were logins in the settings (GATED: users [bob, carol]),
    # so an account that took a freed listed login was a required approver. mallory, a
    # writer and no approver, pushes her change onto alice's PR; bob renames himself `bobx`
    # (GitHub frees `bob` at once); mallory's second account takes `bob` and approves: the
    # gate passed on the approval of an account nobody ever named an approver. Closed: the
    # logins the settings name are resolved to account ids when the settings come into
    # force (trust pins them, ledger migration 10) and compared by id; the check says the
    # listed login is another account's now.
    bot = gw.make_bot(tmp_path, GATED, ROLES)
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("pull_request", gw.pr_event("synchronize", B, "mallory"))
        gw.plan(bot, B, CHANGE)
        bot.forge.rename("bob", "bobx")
        taker = bot.forge.account_id("bob")  # mallory's second account takes `bob`
        assert taker not in (bot.forge.account_id("mallory"), bot.forge.account_id("bobx"))
        gw.approve(bot, "bob", B, 41)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "Not counted: @bob: the settings name that login, but it was another" in (
            check.summary
        )
        # bob, under his new login, is still the approver the settings named.
        gw.approve(bot, "bobx", B, 42)
        check = bot.approval(B)
        assert check.conclusion == "success", check.summary
        assert "@bobx" in check.summary
    finally:
        bot.close()


# -- 9. the web UI: a session's forge account is not another forge's ---------------------------


class _OneSession:
    def __init__(self, session: Session) -> None:
        self.session = session

    def current(self, _request: object) -> Session:
        return self.session


class _Forge:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def can_read(self, token: str, repo: str) -> bool:
        self.asked.append((token, repo))
        return True


def test_a_gitlab_session_does_not_act_on_a_github_repository() -> None:
    # Defended: ids are per forge (GitLab's id 5 is not GitHub's id 5): a person signed in
    # with GitLab as `bob` reads (and so approves on) no GitHub repository, whatever its
    # forge would answer; the GitHub sign-in is not even asked.
    session = Session("sid", "gitlab", "bob", "token", 2e9, "csrf", user_id=5)
    github, gitlab = _Forge(), _Forge()
    sessions: Any = _OneSession(session)
    sign_ins: dict[str, Any] = {"github": github, "gitlab": gitlab}
    access = SignedIn(sessions, sign_ins)
    request: Any = None
    assert not access.may_read(request, f"github:{OWNER}")
    assert github.asked == [] and gitlab.asked == []
    assert access.may_read(request, f"gitlab:{OWNER}")


# -- 10. drift repair: a second account's click is judged by its login of then ----------------


def test_a_second_account_s_repair_approval_does_not_count_once_its_login_is_an_approver_s(
    tmp_path: Path,
) -> None:
    # Defended (unlike the PR gate's click, test 1): "Approve the repair" is refused when
    # clicked by someone the gate does not name (repair_gate.may_approve, by the login the
    # click carries then), so carol's second account `zz` writes no approval row, and
    # carol renaming herself `zz` afterwards makes no approval of it.
    world = RepairWorld(tmp_path, REPAIR_GATE + "      teams: [octo/approvers]\n      count: 2\n")
    try:
        world.github.teams["octo/approvers"] = frozenset({"bob", "carol", "frank"})
        world.github.roles["zz"] = "write"
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        built = world.applied()
        world.click("zz", world.button("Approve the repair"))  # carol's second account
        assert any(w == "zz" for w, _, _ in world.rows(audit.REFUSAL)), world.rows(audit.REFUSAL)
        world.github.rename("zz", "zz-old")
        world.github.rename("carol", "zz")
        world.click("frank", world.button("Approve the repair"))
        assert world.applied() == built, "a refused click became an approval"
        assert world.drift().title == "Repair planned: 1 more approval needed"
        world.click("bob", world.button("Approve the repair"))
        assert world.applied() == built + 1, world.rows()
    finally:
        world.close()
