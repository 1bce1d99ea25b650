"""Red team on the approval gate, round 2: attacks on the fixes of round 1 (abcf280,
8d9c18f, 403353e): approvals bound to the plan a commit had when given, pushers excluded
like the author, approvals bound to the settings generation in force, the owners-only
gate asking prod's owners for project-wide items.

Each test is an attack by someone with write access to a pull request, and asserts what
a sound gate would do; an open finding is ``xfail(strict=True)``. The flows are driven as
tests/security/test_red_team_approval.py drives them: real GitHub webhook bodies, the
in-memory forge, the ledger on SQLite, plans recorded as a PR build records them (no
Spark).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.flow import dispatch, trust
from sluice.bot.flow.reviewed_plan import PYTHON_ITEM, PlanReview
from sluice.bot.forge.base import ForgeError
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase
from tests.helpers.gate_world import (
    GATED,
    KEY,
    MINUTE,
    NOW,
    OWNER,
    OWNERS_ONLY,
    ROOT,
    A,
    B,
    Bot,
    C,
    D,
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    yield made
    made.close()


BOBS = PlanReview("fp-bob", (("s.bobs_change", "k-bob"),), {}, {})


# -- 1. a review computed under the gate before is evaluated under an owners-only gate ------


def test_a_plan_reviewed_under_the_old_gate_does_not_pass_a_new_owners_only_gate(
    bot: Bot,
) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    # alice's PR changes the project's Python only. Built under main's gate (bob or carol
    # must approve), its review is what pr_build makes with owners_only=False: the Python
    # item, and nobody's ownership asked (the required approvers speak for it).
    built_under = bot.in_force().generation  # the settings a build records its review under
    python = PlanReview("fp-py", ((PYTHON_ITEM, "py-alice"),), {}, {}, generation=built_under)
    gw.plan(bot, A, python)
    bot.deliver("pull_request_review", gw.review("alice", "commented", A, 1))
    assert bot.approval(A).conclusion == "failure"  # bob or carol must approve
    # Another PR, approved and promoted, moves the gate to owners only: from now on a
    # change of the whole project (the Python) is every prod owner's to approve.
    bot.forge.commit(D, {"config.yaml": OWNERS_ONLY}, parents=(ROOT,), branch="main")
    parsed = trust.parse(trust.Source.of_config(OWNERS_ONLY, "config.yaml"))
    trust.pin(bot.ledger, KEY, D, parsed, "main", bot.clock.now)  # what promote() does
    bot.clock.now += MINUTE
    in_force = bot.in_force()
    assert in_force.gate.required_approvers.count == 0 and in_force.requires_approval
    # alice comments on her own PR (any review event evaluates the gate again): the review
    # on A still says "no owner to ask", now with no required approvers either.
    bot.forge.add_review(7, "alice", "COMMENTED", A)
    bot.deliver("pull_request_review", gw.review("alice", "commented", A, 2))
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary
    assert bot.approval(A).title == "The settings in force changed: plan again"
    assert bot.ledger.unapproved(KEY, python.items, in_force.generation) != [], (
        "alice's Python is approved for prod under the owners' gate with no owner's approval"
    )


# -- 2. a push made through a bot or app account is nobody's --------------------------------


def test_an_approver_pushing_through_a_bot_account_does_not_approve_their_push(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    gw.plan(bot, A, PlanReview("fp-a", (("s.alice", "k-a"),), {}, {}))
    # bob's workflow (on: push, on a branch of his) pushes his commit onto alice's branch
    # with the workflow's token: GitHub's synchronize names github-actions[bot].
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "github-actions[bot]"))
    assert "bob" not in bot.ledger.pushers(KEY, 7)
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert bot.ledger.unapproved(KEY, BOBS.items, bot.in_force().generation) != []
    assert "`github-actions[bot]` pushed to this pull request" in bot.approval(B).summary
    # A second approver makes it: whoever drove the bot, one of the two is someone else.
    gw.approve(bot, "carol", B, 42)
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    assert "2 of 2 required" in bot.approval(B).summary


# -- 3. a head pushed before the PR was opened ----------------------------------------------


def test_an_approver_whose_branch_another_opened_does_not_approve_their_push(bot: Bot) -> None:
    # bob pushes his change to a branch (GitHub's push webhook names him) ...
    push = realcase("github/push/woodpecker__HookTag.json", OWNER, ref="refs/heads/bobs",
                    after=B)  # fmt: skip
    push["sender"]["login"] = "bob"
    if isinstance(push.get("pusher"), dict):
        push["pusher"]["name"] = "bob"
    bot.deliver("push", push)  # the service does nothing with it
    # ... and asks alice to open the pull request for it ("could you open it, I'm off").
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    assert bot.ledger.pushers(KEY, 7) == {"alice"}
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 4. a synchronize delivered late records no pusher -------------------------------------


def test_a_late_synchronize_still_records_its_pusher(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice", updated=NOW))
    # bob pushes B (updated_at NOW+1s); alice's later event (a ready/sync at NOW+2s) is
    # delivered first, and bob's synchronize after it (webhooks are not ordered).
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice", updated=NOW + 2000))
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob", updated=NOW + 1000))
    assert "bob" in bot.ledger.pushers(KEY, 7), "bob pushed B, and may approve it now"


# -- 5. an approval in the same second as the plan made again counts for it -----------------


def test_an_approval_in_the_second_the_plan_changed_does_not_count_for_the_new_plan(
    bot: Bot,
) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.clock.now = NOW - 60 * MINUTE
    gw.plan(bot, A, PlanReview("fp-1", (("s.m", "k-1"),), {}, {}))
    # bob approves plan fp-1 at NOW + 0.3 s (GitHub's submitted_at says NOW: seconds only);
    # alice's `/sluice plan` publishes another plan of the same commit at NOW + 0.4 s.
    bot.clock.now = NOW
    made = bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=gw.iso(NOW))
    second = PlanReview("fp-2", (("s.m", "k-2"),), {}, {})
    bot.ledger.record_plan(KEY, 7, A, second, NOW + 400)
    bot.clock.now = NOW + 2000
    bot.deliver("pull_request_review", gw.review("bob", "approved", A, 41))
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary


# -- 6. a synchronize superseded in the queue records no pusher -----------------------------


def test_a_superseded_synchronize_still_records_its_pusher(bot: Bot, tmp_path: Path) -> None:
    from sluice.bot.events.neutral import event_from_json
    from sluice.bot.intake.group_commit import job_of
    from sluice.bot.queue.schema import Delivery
    from sluice.bot.queue.store import JobQueue

    # (A draft: its events build nothing, and this test needs no build.)
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", draft=True)
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice", draft=True))
    # bob pushes his commit B onto alice's PR; while the worker is busy elsewhere, a push
    # on top of it (C: alice pulling and pushing a follow-up, or pre-commit.ci's autofix)
    # arrives. C holds bob's change.
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(B,))
    queue = JobQueue(f"sqlite:///{tmp_path / 'queue.db'}")
    try:
        # Each push sends a push webhook and the PR's synchronize, as GitHub does.
        for n, (head, sender) in enumerate(((B, "bob"), (C, "alice"))):
            push = gw.push("change", head, sender)
            for m, (kind, payload) in enumerate(
                (
                    ("push", push),
                    ("pull_request", gw.pr_event("synchronize", head, sender, draft=True)),
                )
            ):
                parsed = parse_github(kind, payload)
                assert parsed is not None
                queue.accept_many([Delivery(f"d{n}{m}", "github", kind, job_of(parsed), 1.0)])
        bot.forge.push(7, C)
        while (job := queue.claim("w", 2.0)) is not None:  # the worker's turn comes
            dispatch.handle(bot.deps, event_from_json(job.payload))
            queue.finish(job.id, "w", now=3.0)
    finally:
        queue.close()
    assert "bob" not in bot.ledger.pushers(KEY, 7)  # his synchronize never ran
    bot.forge.pulls[7] = dataclasses.replace(bot.forge.pulls[7], draft=False)
    gw.plan(bot, C, BOBS)
    gw.approve(bot, "bob", C, 41)  # but his push to the branch counts: B is C's parent
    assert bot.approval(C).conclusion != "success", bot.approval(C).summary
    assert "@bob pushed to this pull request" in bot.approval(C).summary


# -- 7. the forge's commits: who wrote one, and pushes the pull request no longer holds ------


def test_a_commit_an_approver_wrote_is_theirs_whoever_pushed_it(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    # alice pushes a commit bob wrote (GitHub maps its author e-mail to bob).
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(A,), author="bob", committer="alice")
    bot.forge.push(7, C)
    bot.deliver("pull_request", gw.pr_event("synchronize", C, "alice"))
    gw.plan(bot, C, BOBS)
    gw.approve(bot, "bob", C, 41)
    assert bot.approval(C).conclusion != "success", bot.approval(C).summary
    gw.approve(bot, "carol", C, 42)
    assert bot.approval(C).conclusion == "success", bot.approval(C).summary


def test_a_push_the_pull_request_no_longer_holds_is_not_its_pushers(bot: Bot) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.deliver("push", gw.push("change", D, "bob"))  # a commit alice force-pushed away
    bot.deliver("push", gw.push("change", A, "alice"))
    gw.plan(bot, A, BOBS)
    gw.approve(bot, "bob", A, 41)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_where_the_forge_cannot_list_the_commits_every_push_to_the_branch_counts(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.deliver("push", gw.push("change", D, "bob"))

    def broken(number: int) -> None:
        raise ForgeError("listing the commits of pull request #7 failed: 502")

    monkeypatch.setattr(bot.forge, "pull_commits", broken)
    gw.plan(bot, A, BOBS)
    gw.approve(bot, "bob", A, 41)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary
