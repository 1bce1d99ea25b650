"""Red team on identity, round 2: the pushers keyed by account (ledger migration 9), bot
accounts told by the forge by id, the settings' logins pinned as account ids (ledger
migration 10) and a head's pusher asked of the forge when no push hook came.

The promise attacked: nobody pushes a change and is its sole approver; one person never
counts as two approvals; only the people the prod branch's settings (as in force) name may
approve. Each test asserts what a sound gate does; an attack that works is
``xfail(strict=True)`` naming the code path and the fix proposed. The flows are driven as
tests/security/test_red_team_identity.py drives them (tests/helpers/gate_world.py): real
webhook bodies, the in-memory forge (accounts keep their id through a rename; its
``push_log`` is the forge's own record of pushes, kept whether or not a hook was sent), the
ledger on SQLite, plans recorded as a PR build records them (no Spark).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import PUSH_RECORDS_LIMIT
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import (
    CHANGE,
    GITLAB_KEY,
    KEY,
    ROOT,
    TEAM_GATED,
    A,
    B,
    Bot,
    C,
)

Y = "9" * 40
ROLES = {"alice": "write", "bob": "write", "carol": "admin", "dave": "write",
         "mallory": "write", "mal2": "write", "bobs-sock": "write"}  # fmt: skip


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol", "mallory"})
    yield made
    made.close()


# -- 1. a login-only pusher row (before ids) and a commit that names its login now ---------


def _bob_pushed_before_ids(bot: Bot) -> None:
    """alice opens PR 7 at A; bob wrote B and pushed it onto the PR before account ids were
    recorded (ledger migration 7): his synchronize's row and his push hook's row carry his
    login alone. B's author and committer are bob, as the forge maps B's e-mail."""
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice", head_ref="change"))
    bot.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="bob",
                     committer="bob")  # fmt: skip
    bot.forge.push(7, B, by="bob")
    bot.ledger.record_pusher(KEY, 7, "bob", gw.NOW - gw.MINUTE)  # no id: before migration 7
    bot.ledger.record_branch_push(KEY, "change", [B], "bob", gw.NOW - gw.MINUTE)
    gw.plan(bot, B, CHANGE)


def test_a_login_only_pusher_is_not_explained_by_a_commit_naming_his_old_login_again(
    one: Bot,
) -> None:
    # Was open: a login-only row was 'explained' by any commit naming its login now (a
    # login the forge maps from an e-mail its owner moves at will). Fixed: a login-only row
    # always asks one approval more (approval._pushers), and a commit's author is kept by
    # the account the forge names (pull_commits: GitHub's author.id), not by login.
    _bob_pushed_before_ids(one)
    one.forge.rename("bob", "bobx")  # still a member of octo/approvers, as `bobx`
    one.forge.rename("bobs-sock", "bob")  # his second account takes the freed login
    one.forge.people[B] = ("bob", "bob")  # and B's e-mail, moved to it, names `bob`
    gw.approve(one, "bobx", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "recorded by a login alone" in check.summary
    gw.approve(one, "carol", B, 42)  # a second approver: bob is never his own sole one
    assert one.approval(B).conclusion == "success", one.approval(B).summary


def test_a_login_only_pusher_renamed_is_named_by_his_commit_under_his_new_login(
    one: Bot,
) -> None:
    # Defended (the control): without the e-mail moved, the forge names B's author by the
    # login its account has now (`bobx`): a pusher, never his own approver; the row of
    # `bob` no commit names asks one approval more (carol's and mallory's).
    _bob_pushed_before_ids(one)
    one.forge.rename("bob", "bobx")
    gw.approve(one, "bobx", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @bobx pushed to this pull request" in check.summary
    gw.approve(one, "carol", B, 42)
    assert one.approval(B).conclusion != "success", one.approval(B).summary
    gw.approve(one, "mallory", B, 43)
    assert one.approval(B).conclusion == "success", one.approval(B).summary


# -- 2. a head's pusher asked of the forge only when no hook recorded a push of it ---------


def test_a_hookless_push_is_not_hidden_by_a_later_hooked_push_of_the_same_head(
    one: Bot,
) -> None:
    # mallory (octo/approvers) writes B (its author's e-mail alice's, which only excludes
    # alice) and pushes it to `change` in a push of over 5,000 branches: no hook. She then
    # moves the branch away the same way; alice, who fetched B, pushes it back (or makes
    # `change` again from B): a push hook of `change` at B, by alice, who opens the PR.
    # mallory approves alone; had the forge been asked, it named her.
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="alice",
                     committer="alice")  # fmt: skip
    one.forge.push_log.append(("change", B, "mallory"))  # the forge records it; no hook
    one.deliver("push", gw.push("change", B, "alice", (B,)))
    one.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    one.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(one, B, CHANGE)
    assert set(one.forge.pushers_of("change", B)) == {
        ("mallory", one.forge.account_id("mallory")),
        ("alice", one.forge.account_id("alice")),
    }
    gw.approve(one, "mallory", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary


def test_a_hookless_push_below_a_merge_someone_else_made_is_not_hidden(one: Bot) -> None:
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="alice",
                     committer="alice")  # fmt: skip
    one.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by="mallory")  # fmt: skip  # her push: no hook came
    one.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    one.forge.commit(C, {"config.yaml": TEAM_GATED}, parents=(B, ROOT), author="alice",
                     committer="alice")  # fmt: skip  # "Update branch": main merged in
    one.forge.push(7, C, by="alice")
    one.deliver("push", gw.push("change", C, "alice", (C,)))
    one.deliver("pull_request", gw.pr_event("synchronize", C, "alice", head_ref="change"))
    gw.plan(one, C, CHANGE)
    assert one.forge.pushers_of("change", B) == [("mallory", one.forge.account_id("mallory"))]
    gw.approve(one, "mallory", C, 41)
    check = one.approval(C)
    assert check.conclusion != "success", check.summary


def test_a_force_push_back_to_the_head_names_every_pusher_of_it(one: Bot) -> None:
    # Defended: mallory pushes B to `change` (no hook), moves the branch to Y (no hook);
    # alice pushes B back, her hook lost too, and opens the PR. The forge's record names
    # both pushers of `change` at B (every entry of that ref and sha, not the newest): the
    # head's pusher is asked of it, and mallory's approval does not count.
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="alice",
                     committer="alice")  # fmt: skip
    one.forge.commit(Y, {"config.yaml": TEAM_GATED}, parents=(A,))
    one.forge.push_log += [("change", B, "mallory"), ("change", Y, "mallory")]
    one.forge.push_log.append(("change", B, "alice"))
    one.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by="")  # fmt: skip
    one.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(one, B, CHANGE)
    gw.approve(one, "mallory", B, 41)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Not counted: @mallory pushed to this pull request" in check.summary
    gw.approve(one, "carol", B, 42)
    assert one.approval(B).conclusion == "success", one.approval(B).summary


def test_the_forge_s_bound_exhausted_on_purpose_asks_an_approver_more(one: Bot) -> None:
    # Defended: mallory pushes B to `change` with no hook, then buries that record under
    # PUSH_RECORDS_LIMIT pushes of other branches (GitLab's push events list every
    # branch's). The forge names nobody for the head: one approval more, from a required
    # approver. Her second account (no member) is not it; carol is.
    one.forge.commit(B, {"config.yaml": TEAM_GATED}, parents=(A,), author="alice",
                     committer="alice")  # fmt: skip
    one.forge.push_log.append(("change", B, "mallory"))
    one.forge.push_log += [(f"junk-{n}", Y, "mallory") for n in range(PUSH_RECORDS_LIMIT)]
    one.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by="")  # fmt: skip
    one.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(one, B, CHANGE)
    assert one.forge.pushers_of("change", B) == []
    gw.approve(one, "mallory", B, 41)
    gw.approve(one, "mal2", B, 42)
    check = one.approval(B)
    assert check.conclusion != "success", check.summary
    assert "names nobody who pushed it" in check.summary
    gw.approve(one, "carol", B, 43)
    check = one.approval(B)
    assert check.conclusion == "success", check.summary
    assert "@carol" in check.summary and "@mallory" in check.summary


# -- 3. GitLab: a service account whose username its maker chose -------------------------


def test_a_gitlab_service_account_named_as_a_person_is_a_bot_by_its_id(tmp_path: Path) -> None:
    # Defended (round 4's open finding, closed): mallory makes a service account and names
    # it `release-helper` (no bot's form), a member of the approvers' group. She pushes her
    # change through it and approves; its own approval is no person's either. GitLab says
    # of the account (GET /users/:id, `bot`) that it is a bot: one approval more, from a
    # required approver, and its approval counts for nothing.
    bot = gw.make_gitlab_bot(
        tmp_path, TEAM_GATED, ROLES, members={"carol", "mallory", "release-helper"}
    )
    try:
        bot.forge.bots["release-helper"] = True
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B, by="release-helper")
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "release-helper", oldrev=A))
        bot.ledger.record_plan(GITLAB_KEY, 7, B, CHANGE, bot.clock.now)
        bot.clock.now += gw.MINUTE
        gw.gitlab_approve(bot, "mallory", B)
        gw.gitlab_approve(bot, "release-helper", B)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "`release-helper` pushed to this pull request: a bot account" in check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


# -- 4. the settings' people: the pin written whole by two jobs at once -------------------


def test_an_owner_pinned_while_the_settings_logins_are_resolved_is_not_lost(
    tmp_path: Path,
) -> None:
    # Was open: the pin's people were read, completed and written whole by each job, so a
    # job resolving the settings' logins lost an owner another job pinned meanwhile. Fixed:
    # ledger.record_people adds only the logins the pin lacks, in one transaction, and
    # the callers use what the pin holds.
    bot = gw.make_bot(tmp_path, gw.GATED, ROLES)
    try:
        bot.in_force()
        pinned = bot.ledger.settings_in_force(KEY)
        assert pinned is not None and pinned.people is not None
        # The pin as recorded before ledger migration 10: nobody resolved yet.
        bot.ledger.pin_settings(KEY, pinned.sha, pinned.digest, pinned.text, str(pinned.file),
                                pinned.pinned_ts, replace=True, people=None)  # fmt: skip
        ovo = bot.forge.account_id("ovo")
        resolve = bot.forge.id_of
        promoted: list[bool] = []

        def id_of(login: str) -> int | None:
            if not promoted:  # another worker promotes a PR whose new model `ovo` owns
                promoted.append(True)
                job = Job.start(bot.deps, bot.forge)
                try:
                    project: Any = SimpleNamespace(models={"s.new": SimpleNamespace(owner="ovo")})
                    trust.pin_owners(job, project)
                finally:
                    job.close()
                people = bot.ledger.settings_in_force(KEY)
                assert people is not None and (people.people or {}).get("ovo") == ovo
            return resolve(login)

        bot.forge.id_of = id_of  # type: ignore[method-assign]
        bot.in_force()  # this job resolves bob and carol meanwhile
        after = bot.ledger.settings_in_force(KEY)
        assert after is not None and after.people is not None
        assert after.people.get("bob") == bot.forge.account_id("bob")
        assert after.people.get("ovo") == ovo, after.people
    finally:
        bot.close()


def test_a_pr_s_settings_and_model_owners_resolve_no_login_into_the_pin(
    tmp_path: Path,
) -> None:
    # Defended: alice's PR names `zed` (her second account's login, or one she means to
    # take) as a required approver and as a new model's owner. Its gate is evaluated: the
    # settings in force are read from the prod branch, never the PR's head, and owners are
    # pinned only when a promotion brings them; nothing asks the forge who `zed` is, and
    # the pin holds bob and carol alone.
    bot = gw.make_bot(tmp_path, gw.GATED, ROLES)
    try:
        theirs = gw.GATED.replace("[bob, carol]", "[bob, carol, zed]")
        bot.forge.commit(C, {"config.yaml": theirs}, parents=(A,))
        bot.forge.open_pull(7, head_sha=C, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", C, "alice", head_ref="change"))
        owned = PlanReview("fpzed0000001", (("s.new", "k"),), {"s.new": "zed"}, {})
        gw.plan(bot, C, owned)
        gw.approve(bot, "zed", C, 41)
        gw.refresh(bot)
        check = bot.approval(C)
        assert check.conclusion != "success", check.summary
        pinned = bot.ledger.settings_in_force(KEY)
        assert pinned is not None and pinned.people is not None
        assert set(pinned.people) == {"bob", "carol"}
        assert ("id_of", ("zed",)) not in bot.forge.calls
    finally:
        bot.close()
