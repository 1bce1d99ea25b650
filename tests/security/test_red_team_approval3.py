"""Red team on the approval gate, round 3: attacks on the fixes of round 2 (fb1ac06): who
pushed taken from the branch's push hooks and the forge's commits, a push through a bot
account asking one approval more, an approval in the second its plan was published not
counting.

Each test is an attack by someone with write access to the repository who is also one of
the required approvers (``bob``), and asserts what a sound gate would do; an open finding
is ``xfail(strict=True)``. The flows are driven as tests/security/test_red_team_approval2.py
drives them: real GitHub webhook bodies, the in-memory forge, the ledger on SQLite, plans
recorded as a PR build records them (no Spark).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import approval
from sluice.bot.flow.gate_rules import bot_account
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import ForgeError, PushRecord
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase
from tests.helpers.gate_world import GATED, KEY, MINUTE, NOW, OWNER, OWNERS_ONLY, A, B, Bot, C, D

# Required approvers and the owners of changed models.
GATED_OWNERS = GATED + "    owners_must_approve: direct\n"
ACTIONS = "github-actions[bot]"  # who a workflow's GITHUB_TOKEN pushes and opens as
ROLES = {"alice": "write", "bob": "write", "carol": "admin", "mallory": "read"}


def _make(tmp_path: Path, config: str) -> Bot:
    return gw.make_bot(tmp_path, config, ROLES)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = _make(tmp_path, GATED)
    yield made
    made.close()


@pytest.fixture
def owners_bot(tmp_path: Path) -> Iterator[Bot]:
    made = _make(tmp_path, GATED_OWNERS)
    yield made
    made.close()


BOBS = PlanReview("fp-bob", (("s.bobs_change", "k-bob"),), {}, {})


# -- 1. a pull request a bot account opened: its author is the bot, so its pushes ask nothing


def test_a_pull_request_a_bot_opened_asks_one_approval_more(bot: Bot) -> None:
    # bob's workflow (workflow_dispatch, his inputs) commits his change, pushes a branch
    # and opens the pull request, all with the workflow's token: GitHub names
    # github-actions[bot] as the pusher, the opener and the PR's author.
    bot.deliver("push", gw.push("automation/bobs", B, ACTIONS))
    bot.forge.open_pull(7, head_sha=B, base="main", author=ACTIONS, head_ref="automation/bobs")
    bot.deliver("pull_request", gw.pr_event("opened", B, ACTIONS, author=ACTIONS,
                                          head_ref="automation/bobs"))  # fmt: skip
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert bot.ledger.unapproved(KEY, BOBS.items, bot.in_force().generation) != []


def test_a_bot_pushing_onto_a_person_s_pull_request_asks_one_approval_more(bot: Bot) -> None:
    # The same push onto alice's pull request (only the push hook names the bot: its
    # synchronize was superseded): one approval more, bob's is not enough.
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.deliver("push", gw.push("change", B, ACTIONS))
    bot.forge.push(7, B)
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    gw.approve(bot, "carol", B, 42)
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


# -- 2. the extra approval a bot's push asks for, given by an owner the PR itself names -----


def test_the_approval_more_a_bot_push_asks_is_not_from_an_owner_the_pr_named(
    owners_bot: Bot,
) -> None:
    bot = owners_bot
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    gw.plan(bot, A, PlanReview("fp-a", (("s.alice", "k-a"),), {}, {}))
    # bob's workflow pushes his change onto alice's PR: a new model whose header says
    # `owner mallory` (prod has no such model: the header's owner is taken).
    bot.forge.push(7, B)
    bot.deliver("push", gw.push("change", B, ACTIONS))
    bot.deliver("pull_request", gw.pr_event("synchronize", B, ACTIONS))
    new_model = PlanReview("fp-new", (("s.bobs_new", "k-new"),), {"s.bobs_new": "mallory"}, {})
    gw.plan(bot, B, new_model)
    gw.approve(bot, "bob", B, 41)
    gw.approve(bot, "mallory", B, 42)
    # Without the bot (bob pushing as himself), carol must approve: bob's push is his.
    # Through the bot, the only approver of the trusted list who approved is bob.
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


def test_the_approval_more_a_bot_push_asks_is_not_the_same_person_twice(
    owners_bot: Bot,
) -> None:
    # bob owns the new model too: his approval as approver and as owner is one person's.
    bot = owners_bot
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, ACTIONS))
    gw.plan(bot, B, PlanReview("fp-new", (("s.bobs_new", "k-new"),), {"s.bobs_new": "bob"}, {}))
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 3. a head pushed to a fork before someone else opened the pull request ----------------


def test_an_approver_whose_fork_branch_another_opened_does_not_approve_it(bot: Bot) -> None:
    # Red team round 3: bob pushes B to bob/warehouse (no webhook reaches octo/warehouse),
    # his commits under an e-mail GitHub maps to no account; alice opens the pull request
    # from bob's fork into main (GitHub lets anyone pick any fork's branch).
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                        fork=True)  # fmt: skip
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="bobs",
                                          head_repo="bob/warehouse"))  # fmt: skip
    assert bot.ledger.pushers(KEY, 7) == {"alice", "bob"}  # the fork's owner pushed to it
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    assert "@bob pushed to this pull request" in check.summary
    gw.approve(bot, "carol", B, 42)  # and whoever else pushed to the fork is unknown
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert "(it comes from a fork)" in bot.approval(B).summary


# -- 4. a GitLab service account is a bot account ------------------------------------------


@pytest.mark.parametrize(
    "login", ["service_account_6018816a18e515214e0c34c2b33523fc",
              "service_account_group_345_6018816a18e515214e0c34c2b33523fc"],
)  # fmt: skip
def test_a_gitlab_service_account_is_a_bot_account(login: str) -> None:
    assert bot_account(login)


@pytest.mark.parametrize(
    "login", ["github-actions[bot]", "Renovate[bot]", "project_12_bot_0123abcdef",
              "group_9_bot", "project_12_bot2"],
)  # fmt: skip
def test_bot_accounts_the_gate_knows(login: str) -> None:
    assert bot_account(login)


@pytest.mark.parametrize("login", ["bob", "bot", "project_bot", "robot-bob"])
def test_people_are_not_bot_accounts(login: str) -> None:
    assert not bot_account(login)


def test_a_scheduled_workflow_s_pull_request_pushed_onto_through_the_same_bot(bot: Bot) -> None:
    # A nightly workflow opens "refresh seeds" pull requests as github-actions[bot]; bob's
    # own workflow run pushes his change onto one through the same token. Whoever drove
    # the bot's push is unknown: bob alone must not be enough.
    bot.deliver("push", gw.push("automation/seeds", A, ACTIONS))
    bot.forge.open_pull(7, head_sha=A, base="main", author=ACTIONS, head_ref="automation/seeds")
    bot.deliver(
        "pull_request",
        gw.pr_event("opened", A, ACTIONS, author=ACTIONS, head_ref="automation/seeds"),
    )
    bot.forge.push(7, B)
    bot.deliver("push", gw.push("automation/seeds", B, ACTIONS))
    bot.deliver(
        "pull_request",
        gw.pr_event("synchronize", B, ACTIONS, author=ACTIONS, head_ref="automation/seeds"),
    )
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 5. a commit of the pull request pushed by the approver to another branch -------------


def test_a_commit_the_approver_pushed_to_another_branch_is_his_push(bot: Bot) -> None:
    # bob pushes B (his change) to `bobs`; alice takes it over: `git checkout -b change
    # origin/bobs && git push`, and opens the pull request from `change`.
    bot.deliver("push", gw.push("bobs", B, "bob"))
    bot.deliver("push", gw.push("change", B, "alice"))
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


def test_a_commit_the_approver_pushed_to_the_head_branch_before_opening_counts(
    bot: Bot,
) -> None:
    # The same through the PR's own branch: bob's push to `change` counts (round 2).
    bot.deliver("push", gw.push("change", B, "bob"))
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert "@bob pushed to this pull request" in bot.approval(B).summary


# -- 6. spellings: a login's case, a commit's author ----------------------------------------


def test_a_push_hook_naming_the_approver_in_another_case_still_excludes_him(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.deliver("push", gw.push("change", B, "BoB"))
    bot.forge.push(7, B)
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


def test_a_commit_the_approver_committed_in_another_case_still_excludes_him(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(A,), author="alice", committer="Bob")
    bot.forge.push(7, C)
    bot.deliver("pull_request", gw.pr_event("synchronize", C, "alice"))
    gw.plan(bot, C, BOBS)
    gw.approve(bot, "bob", C, 41)
    assert bot.approval(C).conclusion != "success", bot.approval(C).summary


def test_a_bot_push_in_another_case_still_asks_one_approval_more(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "GitHub-Actions[BOT]"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 7. the backfill budget's approver releasing a held build --------------------------------

BUDGET = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
    "    backfill:\n      max_intervals: 10\n      approver: bob\n"
)


def _budget_approved(bot: Bot, approver: str) -> bool:
    job = Job.start(bot.deps, bot.forge)
    try:
        return approval.budget_approved(job, bot.forge.pulls[7], approver)
    finally:
        job.close()


def test_the_budget_approver_does_not_release_a_build_he_pushed_through_a_bot(
    tmp_path: Path,
) -> None:
    bot = _make(tmp_path, BUDGET)
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("push", gw.push("change", B, ACTIONS))
        made = bot.forge.add_review(7, "bob", "APPROVED", B)
        bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=gw.iso(NOW))
        assert not _budget_approved(bot, "bob")
    finally:
        bot.close()


def test_the_budget_approver_does_not_release_a_build_he_pushed(tmp_path: Path) -> None:
    bot = _make(tmp_path, BUDGET)
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("push", gw.push("change", B, "Bob"))
        made = bot.forge.add_review(7, "bob", "APPROVED", B)
        bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=gw.iso(NOW))
        assert not _budget_approved(bot, "bob")
        made = bot.forge.add_review(7, "carol", "APPROVED", B)
        assert _budget_approved(bot, "carol")  # (carol as the approver: she did not push)
    finally:
        bot.close()


# -- 8. a push's head force-pushed away, the commits under it kept --------------------------


def test_a_push_whose_head_was_dropped_still_counts_for_the_commits_under_it(bot: Bot) -> None:
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(B,))
    bot.forge.commit(D, {"config.yaml": GATED}, parents=(B,))
    bot.deliver("push", gw.push("change", C, "bob", (B, C)))  # B and C in one push
    bot.deliver("push", gw.push("change", D, "alice"))  # `reset HEAD~1`, D, push --force
    bot.forge.open_pull(7, head_sha=D, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", D, "alice"))
    assert B in {c.sha for c in bot.forge.pull_commits(7) or ()}
    gw.plan(bot, D, BOBS)
    gw.approve(bot, "bob", D, 41)
    assert bot.approval(D).conclusion != "success", bot.approval(D).summary


# -- 9. a fork's maintainer pushing to it ---------------------------------------------------


def test_a_maintainer_pushing_to_a_fork_pull_request_does_not_approve_it(bot: Bot) -> None:
    # alice's PR from her fork allows edits by maintainers: bob pushes his change to it.
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", fork=True)
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice", head_repo="alice/warehouse"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob", head_repo="alice/warehouse"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 10. a push hook the pusher keeps from being sent ----------------------------------------


@pytest.mark.parametrize("recorded", ["bob", ""], ids=["the forge names bob", "nobody"])
def test_a_branch_whose_push_hook_never_came_is_not_approved_by_its_pusher_alone(
    bot: Bot, recorded: str
) -> None:
    # bob: `git push origin bobs:change junk/0 ... junk/5000` (no push webhook at all), his
    # commits under an e-mail GitHub maps to no account; alice opens the PR from `change`.
    # The forge's own record of pushes names bob (GitHub's repository activity), or
    # nobody (GitLab records a push of many branches as one event naming none): bob is
    # a pusher, or someone unknown is, and one approval more is asked.
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by=recorded)  # fmt: skip
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    if recorded:
        assert bot.ledger.pushes_of(KEY, [B]) == [(B, "bob", bot.forge.account_id("bob"))]
    else:
        assert "the forge names nobody who pushed it" in bot.approval(B).summary
    gw.approve(bot, "carol", B, 42)  # an approver who pushed nothing: bob's and hers
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


@pytest.mark.parametrize(
    "record",
    [("change", A, "alice"), ("other", B, "")],
    ids=["alice's push of another sha", "a push of the head to another branch naming nobody"],
)
def test_a_forge_record_of_someone_else_s_push_does_not_name_the_head_s_pusher(
    bot: Bot, record: tuple[str, str, str]
) -> None:
    # The forge's records name alice for another commit of the branch, or nobody (a
    # deleted account) for the head on another branch: neither says who pushed B (bob,
    # with no hook). Taking either as its pusher would ask nothing more, and bob's
    # approval would be enough. (A record of the head on another branch naming someone
    # names them as its pusher: red team round 5.)
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by="")  # fmt: skip
    bot.forge.push_log.append(record)
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert "the forge names nobody who pushed it" in bot.approval(B).summary
    assert bot.ledger.pushes_of(KEY, [B]) == []


def test_the_forge_failing_to_say_who_pushed_the_head_asks_one_approval_more(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GitHub's activity answers 502 (or the token may not read it): nobody is named, the
    # gate fails closed (one approval more, and the check says why, its text escaped),
    # and the service goes on handling the PR's events.
    asked: list[tuple[str, ...]] = []

    def down(shas: Collection[str]) -> list[PushRecord]:
        asked.append(tuple(shas))
        raise ForgeError("GitHub: reading who pushed failed: 502 @carol <img src=x> [x](y)")

    monkeypatch.setattr(bot.forge, "push_records", down)
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    summary = bot.approval(B).summary
    assert bot.approval(B).conclusion != "success", summary
    assert "could not say who pushed it" in summary and "one approval more" in summary
    assert "@&#8203;carol &lt;img src=x&gt; \\[x\\](y)" in summary, summary
    assert "<img" not in summary and "@carol <" not in summary  # (it asks @carol itself)
    gw.approve(bot, "carol", B, 42)  # bob's and carol's: two approvers
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    assert len(asked) <= 4  # each job asked once at the most (opened, two reviews)
    assert bot.ledger.pushes_of(KEY, [B]) == []


def test_the_forge_is_asked_once_per_head_per_job_and_not_again_once_it_named_the_pusher(
    bot: Bot,
) -> None:
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change",
                        pushed_by="bob")  # fmt: skip
    gw.plan(bot, B, BOBS)
    pr = bot.forge.pull_request(7)
    job = Job.start(bot.deps, bot.forge)
    try:
        approval.pushers_of(job, pr)
        approval.refresh(job, pr)
        assert approval.pushers_of(job, pr).accounts == {("bob", bot.forge.account_id("bob"))}
    finally:
        job.close()
    asked = [c for c in bot.forge.calls if c[0] == "push_records"]
    assert asked == [("push_records", ((A, B),))]  # its commits, in one listing
    gw.approve(bot, "bob", B, 41)  # another job: the ledger has bob's push, and the ask
    assert [c[0] for c in bot.forge.calls].count("push_records") == 1
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 11. a push while the pull request was closed (GitHub sends no synchronize then) --------


def test_a_push_while_the_pull_request_was_closed_counts_when_reopened(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.pulls[7] = dataclasses.replace(bot.forge.pulls[7], open=False)
    bot.deliver("push", gw.push("change", B, "bob"))  # no synchronize for a closed PR
    bot.forge.pulls[7] = dataclasses.replace(bot.forge.pulls[7], open=True, head_sha=B)
    bot.deliver("pull_request", gw.pr_event("reopened", B, "alice"))
    assert bot.ledger.pushers(KEY, 7) == {"alice"}
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert "@bob pushed to this pull request" in bot.approval(B).summary


# -- 12. "Approve this plan" clicked by whoever pushed -------------------------------------


@pytest.mark.parametrize("plan", ["fp-bob", None])
def test_a_click_by_whoever_pushed_to_the_branch_does_not_count(bot: Bot, plan: str | None) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.deliver("push", gw.push("change", B, "bob"))  # its synchronize superseded
    bot.forge.push(7, B)
    gw.plan(bot, B, BOBS)
    bob = bot.forge.account_id("bob")  # the check's button, or the web's:
    bot.ledger.click(KEY, 7, "Bob", B, plan, bot.clock.now, bob)
    bot.clock.now += MINUTE
    bot.forge.add_review(7, "alice", "COMMENTED", B)
    bot.deliver("pull_request_review", gw.review("alice", "commented", B, 40))
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    bot.ledger.click(KEY, 7, "carol", B, plan, bot.clock.now, bot.forge.account_id("carol"))
    bot.clock.now += MINUTE
    bot.deliver("pull_request_review", gw.review("alice", "commented", B, 43))
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


def test_owners_only_the_approval_more_is_not_from_an_owner_the_pr_named(
    tmp_path: Path,
) -> None:
    # Red team round 3: under a gate of owners only, bob changes his prod model through a
    # bot and adds s.decoy, whose header names mallory: the approval more the bot's push
    # asks comes from the owners prod records (bob, carol), never from mallory.
    bot = _make(tmp_path, OWNERS_ONLY)
    try:
        bot.deliver("push", gw.push("change", A, "alice"))
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("pull_request", gw.pr_event("synchronize", B, ACTIONS))
        owned = {"s.bobs_model": "bob", "s.decoy": "mallory"}  # prod's owner; the header's
        items = (("s.bobs_model", "k"), ("s.decoy", "k2"))
        gw.plan(bot, B, PlanReview("fp-own", items, owned, {}, prod_owners=("bob", "carol")))
        gw.approve(bot, "bob", B, 41)
        gw.approve(bot, "mallory", B, 42)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        gw.approve(bot, "carol", B, 43)  # an owner prod records
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


# -- 13. GitLab: a push hook names the username, never the display name ---------------------


def test_a_gitlab_push_hook_names_the_pusher_by_username_not_display_name() -> None:
    from sluice.bot.events.gitlab import parse_gitlab
    from sluice.bot.events.neutral import BranchPushEvent

    # bob's display name is anyone's to choose: "alice" (or empty) must not be his name.
    push = realcase("gitlab/push.docs.json", OWNER, user_name="alice", user_username="bob",
                    ref="refs/heads/change", after=B)  # fmt: skip
    event = parse_gitlab("Push Hook", push)
    assert isinstance(event, BranchPushEvent)
    assert (event.branch, event.sha, event.pusher) == ("change", B, "bob")


# -- 14. a synchronize names who pushed its head, for any pull request holding it ----------


def test_a_synchronize_s_sender_is_recorded_as_the_pusher_of_its_head(bot: Bot) -> None:
    # bob's push onto alice's PR: its synchronize says so even where no push hook came, so
    # a second PR holding the same commit (taken to another branch) counts bob too.
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    assert bot.ledger.pushes_of(KEY, [B]) == [(B, "bob", bot.forge.account_id("bob"))]
    assert bot.ledger.pushes_of(KEY, [A]) == []  # an opened event says who opened, not pushed
