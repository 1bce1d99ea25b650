"""Red team, round 7: attacks on the gate's two clocks.

As the code stood at e4556ba and efb4c2d: ``Forge.upsert_comment`` returns when the forge
says the comment came to read its body (GitHub's and GitLab's ``updated_at``), and
``pr_build`` records a plan (``Ledger.record_plan``) or a hold (``Ledger.record_shown``)
once its comment is posted, by the service's clock and the forge's (ledger migration 15:
``plan_forge_ts``, ``forge_ts``; None from the forge: the service's time stands for it).
``approval.refresh`` reads ``plan_times`` and ``plans_shown`` by both clocks;
``gate_rules._approves`` compares a review (stamped by the forge) with the forge's times
and a click ("Approve this plan", stamped by the service when handled) with the
service's. A click's plan id must now be the plan's first 12 characters
(``checks.PLAN_IN_ACTION``).

The attacker is the pull request's author with write access (push, force-push, dismiss
a review on GitHub; on GitLab a Developer or Maintainer); the required approvers (bob,
carol) are honest and approve what Sluice showed them. Each test asserts what a sound
service does: an attack that works against the code as it is is ``xfail(strict=True)``
naming the code path and the fix proposed; the others are attacks tried and defended,
each saying which defence holds. GitHub is driven as the earlier rounds drive it (the
ledger on SQLite, real webhook bodies, the in-memory forge, plans recorded as a PR build
records them, by both clocks); GitLab through the whole service (the real app, GitLab at
the wire, the scripted warehouse), its clock set per test.

Findings (xfail unless closed):

1. ``gate_rules._standings`` orders a person's reviews (the forge's time: when given) and
   clicks (the service's: when the job handling it started) as if one clock stamped
   both. A click handled after the approver's later "changes requested" was given (the
   click queued behind the PR's running build, GitHub's whole-second ``submitted_at``
   in the click's second, or GitHub's clock behind the service's) sorts after it; the
   author then dismisses that review, and the click, taken back by it, counts again: the
   gate passes on an approval its approver withdrew. Closed: a person's reviews and clicks
   are taken in the order the service learnt of them (``Ledger.learn_words``, ledger
   migration 17: when each review's word was first read; a click when handled; at one
   time the click first, so a review read with it takes it back).
2. ``Ledger.plans_shown(forge=True)`` and ``plan_times(forge=True)`` put a publication
   kept before migration 15 (no forge time) at its service time among the others' forge
   times: with the forge's clock behind, a head's old publication sorts after another
   head's newer one, so a review given while the newer head's plan was shown counts for
   the old head once it is pushed back. Closed: publications are read in the order made
   (``shown_ts``), and the last made before an approval is the one shown.
3. The gate takes Sluice's comment to read what Sluice last published, but GitHub lets
   anyone with write access edit another's comment (GitLab a Maintainer): the author
   rewrites the plan it shows, and the approval of what the approver read counts for the
   head's real plan. No edit of the sticky comment is read (``run_command.on_comment``
   returns on any action but ``created``). Closed: an edit makes Sluice read the comment
   back (``comment_edits.on_edit``); rewritten, it is kept as a publication of no plan at
   the forge's time of the edit, and Sluice's text is put back.
4. A plan's post that GitHub applied but whose answer was lost records nothing: the
   comment shows the new plan, ``plans_shown`` still says the old one is shown, and once
   the queue gives up an approval given meanwhile counts for the head's old plan. Closed:
   a new body whose post fails (applied or not) is kept as a publication of no plan just
   after the last one (``Job.publish``, ``Ledger.record_unshown``, kind ``unanswered``).

Defended: a click handled before a later objection stays taken back by a dismissal; an
objection given before a click stands whatever the clocks; publications all kept with
GitHub's time keep their order with GitHub's clock behind; a click naming no plan is
compared with the service's times of publication (GitHub's clock ahead); the backfill
budget's approval against its hold's forge time (GitHub's clock behind or ahead); a click's
plan id only the plan's first 12 characters (efb4c2d); GitHub's answer never a time before
the comment read its body (the unchanged-body path returns its last ``updated_at``, which a
section's edit only moves later); on GitLab with its clock behind, an approval given before
the new head's plan was shown stays stale and one given after it counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.flow import approval
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import ForgeError
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase
from tests.helpers.forge_clients import GITHUB_REPO, github_forge
from tests.helpers.gate_world import (
    CHANGE,
    GATED,
    KEY,
    MINUTE,
    OTHER,
    OWNER,
    SECOND,
    A,
    B,
    Bot,
    given,
    published,
    review_hook,
)
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_gate import (
    S8,
    S9,
    approval_hook,
    approval_state,
    clock,
    commit_heads,
    deliver_update,
    move_head,
    mr_world,
    open_mr8,
    serving,
)
from tests.helpers.gitlab_service import GitLabService, moment
from tests.helpers.lifecycle_prod import GitLabWorld
from tests.helpers.own_runs import sluices_run


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


# == 1. a click and a later objection, by two clocks ====================================

# (how long after bob's click its job ran, how far GitHub's clock is behind the service's,
# how long after the click bob requested changes)
_SKEWS = {
    # The click queued behind the PR's running build (one PR's jobs run one at a time):
    # handled 40 s after bob clicked; bob objected 10 s after clicking. Clocks agree.
    "click queued behind a build": (40 * SECOND, 0, 10 * SECOND),
    # Handled at once, clocks agreeing: bob objects 500 ms after the click, in the same
    # second; GitHub writes submitted_at to the whole second, before the click's ms.
    "objection in the click's second": (0, 0, 500),
    # Handled at once; GitHub's clock 10 s behind the service's; bob objects 3 s later.
    "GitHub's clock behind": (0, 10 * SECOND, 3 * SECOND),
}


@pytest.mark.parametrize("skew", list(_SKEWS), ids=list(_SKEWS))
def test_a_dismissed_objection_does_not_revive_a_click_it_took_back(bot: Bot, skew: str) -> None:
    handled_after, behind, objected_after = _SKEWS[skew]
    gw.plan(bot, A, CHANGE)  # A's plan shown; bob reads it
    clicked = bot.clock.now // 1000 * 1000 + 200  # bob clicks "Approve this plan" then
    # ... then reads the diff again and requests changes: his last word. GitHub stamps it
    # by its own clock, to the second.
    objection_at = (clicked + objected_after - behind) // 1000 * 1000
    objection = given(bot, "bob", "CHANGES_REQUESTED", A, objection_at)
    # The click's job runs now (its ts: the service's clock when the job started).
    bot.clock.now = clicked + handled_after
    gw.click(bot, "bob", A)
    bot.clock.now += SECOND
    bot.deliver("pull_request_review", review_hook("bob", "changes_requested", A, objection,
                                                   objection_at))  # fmt: skip
    assert bot.approval(A).conclusion == "failure", bot.approval(A).summary
    assert bot.ledger.approved_by_pr(KEY, 7) == 0
    # alice, the author, has write access: GitHub lets her dismiss bob's review.
    bot.clock.now += MINUTE
    bot.forge.dismiss_review(7, objection)
    bot.deliver("pull_request_review", review_hook("bob", "dismissed", A, objection,
                                                   objection_at, action="dismissed",
                                                   sender="alice"))  # fmt: skip
    # bob's last word was "changes requested", given after his click: a dismissal takes a
    # word back, it gives none.
    check = bot.approval(A)
    assert check.conclusion == "failure", f"{skew}: bob's withdrawn click counts: {check.summary}"
    assert bot.ledger.approved_by_pr(KEY, 7) == 0


def test_a_dismissed_objection_does_not_revive_a_click_handled_before_it(bot: Bot) -> None:
    # Defended (the order of words, when both clocks agree and the click was handled at
    # once, whole seconds apart): a click, then "changes requested" a minute later, then
    # the author's dismissal: the click stays taken back.
    gw.plan(bot, A, CHANGE)
    gw.click(bot, "bob", A)
    bot.clock.now += MINUTE
    objection = given(bot, "bob", "CHANGES_REQUESTED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook("bob", "changes_requested", A, objection,
                                                   bot.clock.now))  # fmt: skip
    bot.forge.dismiss_review(7, objection)
    bot.deliver("pull_request_review", review_hook("bob", "dismissed", A, objection,
                                                   bot.clock.now, action="dismissed",
                                                   sender="alice"))  # fmt: skip
    assert bot.approval(A).conclusion == "failure", bot.approval(A).summary


def test_an_objection_before_a_click_still_stands_whatever_the_clocks(bot: Bot) -> None:
    # Defended (a click never lifts a standing objection, _standings): GitHub's clock 10 s
    # ahead, so bob's "changes requested" (given before his click) sorts after it; either
    # way he is objecting, and nothing passes.
    gw.plan(bot, A, CHANGE)
    objection = given(bot, "bob", "CHANGES_REQUESTED", A, bot.clock.now + 10 * SECOND)
    bot.deliver("pull_request_review", review_hook("bob", "changes_requested", A, objection,
                                                   bot.clock.now + 10 * SECOND))  # fmt: skip
    bot.clock.now += 2 * SECOND
    gw.click(bot, "bob", A)
    assert bot.approval(A).conclusion == "failure", bot.approval(A).summary


# == 2. publications from before migration 15 among newer ones ============================


def _forget_forge_times(bot: Bot) -> None:
    """The rows of PR 7 as ledger migration 15 leaves them: no forge time."""
    with sqlite3.connect(bot.root / "state.db") as conn:
        conn.execute("UPDATE sluice_pr_plans SET plan_forge_ts = NULL")
        conn.execute("UPDATE sluice_plan_shown SET forge_ts = NULL")


def test_a_publication_kept_before_the_forge_times_does_not_shadow_a_newer_one(
    bot: Bot,
) -> None:
    behind = 10 * MINUTE  # GitHub's clock runs ten minutes behind the service's
    t0 = bot.clock.now
    published(bot, A, CHANGE, t0 - behind)  # A's plan, published before the upgrade
    _forget_forge_times(bot)  # ... kept without its forge time (shown from t0)
    # Sluice upgraded. alice pushes B: its plan is published, GitHub stamps t0 - 8 min.
    bot.clock.now = t0 + 2 * MINUTE
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    published(bot, B, OTHER, bot.clock.now - behind)
    # carol's tab still has A's diff (GitHub binds her review to A) but the comment she
    # reads shows B's plan; she approves, GitHub stamps t0 + 30 s (service: t0 + 10.5 min).
    bot.clock.now = t0 + 10 * MINUTE + 30 * SECOND
    given(bot, "carol", "APPROVED", A, bot.clock.now - behind)
    bot.clock.now += MINUTE
    # alice force-pushes A back; its plan (the same) is published again.
    bot.forge.push(7, A)
    bot.deliver("pull_request", gw.pr_event("synchronize", A, "alice"))
    published(bot, A, CHANGE, bot.clock.now - behind)
    gw.refresh(bot)
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol approved while B's plan was shown; her review counts for A: {check.summary}"
    )


def test_publications_by_the_forges_clock_behind_keep_their_order(bot: Bot) -> None:
    # Defended (e4556ba: reviews compared with the forge's times of publication): every
    # row with its forge time, GitHub's clock ten minutes behind. A shown, B shown, carol's
    # review of A (a stale tab) while B's plan is shown, A pushed back: stale.
    behind = 10 * MINUTE
    published(bot, A, CHANGE, bot.clock.now - behind)
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    published(bot, B, OTHER, bot.clock.now - behind)
    given(bot, "carol", "APPROVED", A, bot.clock.now - behind)
    bot.clock.now += MINUTE
    bot.forge.push(7, A)
    bot.deliver("pull_request", gw.pr_event("synchronize", A, "alice"))
    published(bot, A, CHANGE, bot.clock.now - behind)
    gw.refresh(bot)
    check = bot.approval(A)
    assert check.conclusion != "success", check.summary
    assert "while another commit's plan was shown" in check.summary
    # Given again once A's plan is shown (GitHub's time, behind): counts.
    given(bot, "carol", "APPROVED", A, bot.clock.now - behind)
    bot.clock.now += SECOND
    gw.refresh(bot)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_a_click_is_compared_with_the_services_time_of_publication(bot: Bot) -> None:
    # Defended (e4556ba: a click, stamped by the service, against planned_here and
    # shown_here): GitHub's clock ten minutes *ahead*. B's plan published at service t; a
    # click on A's run naming no plan (an older button), handled while B's plan is shown,
    # does not count for A pushed back; compared with GitHub's times it would have (A's
    # first publication, by GitHub's clock, is after the click).
    ahead = 10 * MINUTE
    published(bot, A, CHANGE, bot.clock.now + ahead)
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    published(bot, B, OTHER, bot.clock.now + ahead)
    gw.click(bot, "bob", A)  # "approve": names no plan
    bot.clock.now += MINUTE
    bot.forge.push(7, A)
    bot.deliver("pull_request", gw.pr_event("synchronize", A, "alice"))
    published(bot, A, CHANGE, bot.clock.now + ahead)
    gw.refresh(bot)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary


# == the backfill budget's hold and a click's plan id ======================================


def _budget_approved(bot: Bot) -> bool:
    """``approval.budget_approved`` of PR 7 at its head, carol the approver (as
    ``pr_build._held`` asks before building over the budget)."""
    job = Job.start(bot.deps, bot.forge)
    try:
        return approval.budget_approved(job, bot.forge.pull_request(7), "carol")
    finally:
        job.close()


@pytest.mark.parametrize("skew", [-10 * MINUTE, 10 * MINUTE], ids=["behind", "ahead"])
def test_the_budget_approval_is_compared_with_the_holds_forge_time(bot: Bot, skew: int) -> None:
    # Defended (e4556ba: approval.budget_approved reads plans_shown(holds=True,
    # forge=True)): GitHub's clock ten minutes behind or ahead. B's plan shown; carol's
    # review of A (a stale tab) while it is; A pushed back and held over the budget. Her
    # review does not release A's build; one given once A's hold is shown does.
    published(bot, A, CHANGE, bot.clock.now + skew)
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    published(bot, B, OTHER, bot.clock.now + skew)
    given(bot, "carol", "APPROVED", A, bot.clock.now + skew + 30 * SECOND)
    bot.clock.now += MINUTE
    bot.forge.push(7, A)
    bot.deliver("pull_request", gw.pr_event("synchronize", A, "alice"))
    bot.ledger.record_shown(KEY, 7, A, bot.clock.now, bot.clock.now + skew)  # A held
    bot.clock.now += MINUTE
    assert not _budget_approved(bot)
    given(bot, "carol", "APPROVED", A, bot.clock.now + skew)
    assert _budget_approved(bot)


def _click_naming(bot: Bot, user: str, head: str, plan: str) -> None:
    """``user`` clicks "Approve this plan" on Sluice's run on ``head``, its identifier
    naming ``plan`` (GitHub's button, or the web UI's form: the same event)."""

    def deliver(event: str, payload: dict[str, Any]) -> None:
        bot.deliver(event, payload)

    run = sluices_run(deliver, bot.forge, head)
    made = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head, "check_run.id": run,
        "requested_action.identifier": f"approve:{plan}", "sender.login": user,
    })  # fmt: skip
    made["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    bot.deliver("check_run", made)


def test_a_click_counts_only_for_the_plan_id_its_button_names(bot: Bot) -> None:
    # Defended (efb4c2d: the click's plan must be the current plan's first 12 characters):
    # a crafted id of one character, a prefix of the current plan (and of many), counts for
    # nothing; the button's own id counts.
    gw.plan(bot, A, CHANGE)
    _click_naming(bot, "bob", A, CHANGE.fingerprint[:1])
    assert bot.approval(A).conclusion == "failure", bot.approval(A).summary
    _click_naming(bot, "bob", A, CHANGE.fingerprint[:11])
    assert bot.approval(A).conclusion == "failure", bot.approval(A).summary
    _click_naming(bot, "bob", A, CHANGE.fingerprint[:12])
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


# == 3. Sluice's comment edited by someone else ===========================================


def test_an_approval_of_sluices_comment_as_rewritten_by_the_author_does_not_count(
    bot: Bot,
) -> None:
    job = Job.start(bot.deps, bot.forge)
    try:
        marker = job.deps.sticky.marker
        shown = f"{marker}\n### Sluice\nPlan: `s.other` changed (backfills 3 years)\n"
        at = job.publish(7, body=shown)  # A's plan as pr_build publishes it, then records it
    finally:
        job.close()
    published(bot, A, OTHER, at if at is not None else bot.clock.now)
    # alice (write access) edits Sluice's comment: GitHub lets her. It now reads a plan
    # that changes one small model; GitHub sends issue_comment edited.
    forged = shown.replace("`s.other` changed (backfills 3 years)", "`s.change` changed")
    mine = next(c for c in bot.forge.comments[7] if marker in c.body)
    mine.body = forged
    hook = realcase("github/issue_comment/edited.payload.json", OWNER, action="edited", **{
        "issue.number": 7, "comment.id": mine.id, "comment.body": forged,
        "comment.user.login": bot.forge.bot_user, "sender.login": "alice",
    })  # fmt: skip
    hook["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{OWNER}/pulls/7"}
    bot.deliver("issue_comment", hook)
    bot.clock.now += MINUTE
    # carol approves what she read.
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook("carol", "approved", A, 99, bot.clock.now))
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol approved the plan alice wrote into Sluice's comment: {check.summary}"
    )
    # Sluice put its own text back, and says so.
    [now] = [c.body for c in bot.forge.comments[7] if c.id == mine.id]
    assert "backfills 3 years" in now and "Edited by someone else" in now
    assert [r for r in bot.ledger.plans_shown(KEY, 7) if r[1] == ":edited"]


def test_sluices_own_edit_of_its_comment_is_no_rewrite(bot: Bot) -> None:
    """GitHub sends ``issue_comment`` ``edited`` for Sluice's own edits too (each section
    it writes). Defended: the comment read back reads what Sluice wrote, so nothing is
    kept and an approval given after it counts."""
    job = Job.start(bot.deps, bot.forge)
    try:
        marker = job.deps.sticky.marker
        at = job.publish(7, body=f"{marker}\n### Sluice\nPlan: `s.change` changed\n")
    finally:
        job.close()
    published(bot, A, CHANGE, at if at is not None else bot.clock.now)
    mine = next(c for c in bot.forge.comments[7] if marker in c.body)
    hook = realcase("github/issue_comment/edited.payload.json", OWNER, action="edited", **{
        "issue.number": 7, "comment.id": mine.id, "comment.body": mine.body,
        "comment.user.login": bot.forge.bot_user, "sender.login": bot.forge.bot_user,
    })  # fmt: skip
    hook["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{OWNER}/pulls/7"}
    shown = bot.ledger.plans_shown(KEY, 7)
    bot.deliver("issue_comment", hook)
    assert bot.ledger.plans_shown(KEY, 7) == shown
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook("carol", "approved", A, 98, bot.clock.now))
    assert bot.approval(A).conclusion == "success"


# == 4. a publication that failed ========================================================


def _publish(bot: Bot, text: str) -> int | None:
    """Sluice's comment on PR 7 made to read ``text`` (a build's report, as
    ``pr_build._Poster.comment`` publishes it); GitHub's time of it."""
    job = Job.start(bot.deps, bot.forge)
    try:
        return job.publish(7, body=f"{job.deps.sticky.marker}\n### Sluice\n{text}\n")
    finally:
        job.close()


def test_an_approval_of_a_plan_whose_post_lost_its_answer_does_not_count_for_the_old_plan(
    bot: Bot,
) -> None:
    """Closed: the failed post of a new body keeps a publication of no plan just after the
    last one (``Job.publish``), so carol's approval counts for nothing until a plan's
    publication is recorded again."""
    at = _publish(bot, "Plan: `s.change` changed")  # A's first plan, shown and recorded
    published(bot, A, CHANGE, at if at is not None else bot.clock.now)
    # Prod moved; alice comments `/sluice plan`: A's plan is now OTHER. GitHub applies the
    # edit, but its answer is lost (a 502): pr_build records nothing.
    real = bot.forge.upsert_comment

    def lost(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        real(number, marker, body, comment_id)
        raise ForgeError("GitHub answered 502")

    bot.forge.upsert_comment = lost  # type: ignore[method-assign]
    with pytest.raises(ForgeError):
        _publish(bot, "Plan: `s.other` changed (backfills 3 years)")
    bot.forge.upsert_comment = real  # type: ignore[method-assign]
    assert bot.ledger.plans(KEY, 7)[A] == CHANGE.fingerprint
    shown = bot.forge.bot_comments(7)[-1]
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)  # she approves what she reads
    bot.clock.now += MINUTE
    # Every attempt of the job fails alike; the queue gives up (its failure body
    # published, dispatch.give_up), then carol's review (held behind it) is handled.
    _publish(bot, "the job failed after every retry")
    bot.deliver("pull_request_review", review_hook("carol", "approved", A, 99, bot.clock.now))
    check = bot.approval(A)
    assert "s.other" not in shown or check.conclusion != "success", (
        f"carol read a plan the gate never recorded ({shown!r}); her approval counts for "
        f"A's recorded plan: {check.summary}"
    )


def test_a_failed_edit_of_sections_alone_keeps_an_approval_of_the_plan_shown(bot: Bot) -> None:
    """The fix does not reach too far: a section's edit (the gate's, a promotion's) that
    fails leaves the body, and the plan in it, as it was; carol's approval of it counts."""
    at = _publish(bot, "Plan: `s.change` changed")
    published(bot, A, CHANGE, at if at is not None else bot.clock.now)
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.clock.now += MINUTE
    real = bot.forge.upsert_comment

    def lost(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        real(number, marker, body, comment_id)
        raise ForgeError("GitHub answered 502")

    bot.forge.upsert_comment = lost  # type: ignore[method-assign]
    job = Job.start(bot.deps, bot.forge)
    try:
        with pytest.raises(ForgeError):
            job.publish(7, section=("promotion", "**Promotion:** queued"))
    finally:
        job.close()
        bot.forge.upsert_comment = real  # type: ignore[method-assign]
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)] == [A]
    bot.deliver("pull_request_review", review_hook("carol", "approved", A, 97, bot.clock.now))
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_after_a_lost_answer_the_plan_posted_again_is_approved_as_usual(bot: Bot) -> None:
    """The job's retry posts the new plan and records it: an approval given after that
    counts for it."""
    at = _publish(bot, "Plan: `s.change` changed")
    published(bot, A, CHANGE, at if at is not None else bot.clock.now)
    real = bot.forge.upsert_comment

    def lost(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        real(number, marker, body, comment_id)
        raise ForgeError("GitHub answered 502")

    bot.forge.upsert_comment = lost  # type: ignore[method-assign]
    with pytest.raises(ForgeError):
        _publish(bot, "Plan: `s.other` changed")
    bot.forge.upsert_comment = real  # type: ignore[method-assign]
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)] == [A, ":unanswered"]
    bot.clock.now += MINUTE
    at = _publish(bot, "Plan: `s.other` changed")  # the retry, answered
    published(bot, A, OTHER, at if at is not None else bot.clock.now)
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook("carol", "approved", A, 96, bot.clock.now))
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


# == GitHub's answer: when the comment came to read its body ============================


def test_githubs_time_of_a_publication_is_never_before_the_comment_read_so() -> None:
    # Defended (GitHubForge.upsert_comment, at the wire): a new comment is GitHub's
    # created time; the body unchanged returns the comment's last updated_at, never older
    # than when it came to read so (an edit of its sections by another job only moves it
    # later: an approval in between is refused, never counted); an edit returns the edit's
    # time as GitHub answered it.
    github = FakeGitHub(repo=GITHUB_REPO)
    github.add_pull(7, A)
    marker = "<!-- sluice:pr-comment -->"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        forge = github_forge()
        first = forge.upsert_comment(7, marker, f"{marker}\nA's plan").at
        (made,) = github.comments.values()
        assert first == _epoch(made["updated_at"])
        assert forge.upsert_comment(7, marker, f"{marker}\nA's plan").at == first
        # Another job's section (the gate's) edits it: GitHub moves updated_at.
        moved = forge.upsert_comment(7, marker, f"{marker}\nA's plan\n\napproved").at
        assert moved is not None and first is not None and moved > first
        again = forge.upsert_comment(7, marker, f"{marker}\nA's plan\n\napproved").at
        assert again == moved == _epoch(made["updated_at"])
        edited = forge.upsert_comment(7, marker, f"{marker}\nB's plan").at
        assert edited is not None and edited > moved
        assert edited == _epoch(made["updated_at"])


def _epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


# == GitLab's clock behind the service's (whole service) ===================================


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    env = mr_world(tmp_path)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serving(world) as running:
        yield running


def test_an_approval_before_the_plan_does_not_count_when_gitlabs_clock_runs_behind(
    world: GitLabWorld, service: GitLabService
) -> None:
    """GitLab's clock runs two minutes behind the service's. alice opens MR !8 at S8;
    carol reads its plan. alice pushes S9 with no hook yet and carol approves at once:
    she saw S8's plan. Defended (e4556ba): S9's publication is kept by GitLab's clock
    (the note's updated_at, after her approved_at), never by the service's (two minutes
    later, which a forge behind would never reach). Once S9's plan is shown and she
    approves again, it counts: the clock behind refuses nothing it should not."""
    gitlab = world.gitlab
    clock(gitlab, ahead_ms=-120_000)
    commit_heads(world)
    open_mr8(world, service, S8)
    move_head(gitlab, S9)
    gitlab.approve(8, "carol")
    deliver_update(world, service, S9, S8)
    approval_hook(world, service, S9)
    after = approval_state(gitlab, S9)
    assert after["state"] == "failed", after
    gitlab.unapprove(8, "carol")
    gitlab.approve(8, "carol")
    approval_hook(world, service, S9, updated_at=moment(5))
    assert approval_state(gitlab, S9)["state"] == "success", approval_state(gitlab, S9)
