"""Red team, round 9: attacks on the read-back of Sluice's comment (``comment_guard``).

As the code stood with ``comment_guard`` new: each evaluation of the gate
(``approval.refresh``) reads Sluice's comment back (``Forge.own_comment``) and, gone, or
last written by the forge's clock after the last write the forge answered Sluice
(``Ledger.comment_writes``: ``written``) while reading none of the texts posted whose
answer is not recorded yet (``CommentWrites.unconfirmed``, at most 8), keeps a
publication of no plan (``Ledger.record_unshown``, kind ``edited``) just after the last
one, audits, and puts Sluice's text back. ``StickyComment.publish`` saves its text as
unconfirmed before posting and confirms it (``Ledger.comment_written_later``, deferred to
the thread's next ledger write) with the forge's answer.

The attacker is the pull request's author: write access on GitHub (edits and deletes
anyone's comment; an edit's hook may be lost), Maintainer on GitLab (edits another's note;
turns the project's webhook off and on, so no hook of hers need ever come). The required
approver (carol) is honest and approves what Sluice's comment shows her then. An outsider
may read the pull request and react to its comments. Each test asserts what a sound
service does: an attack that works against the code as it is is ``xfail(strict=True)``
naming the code path and the fix proposed; the others are attacks tried and defended.
Driven as rounds 7 and 8: the ledger on SQLite, real webhook bodies, the in-memory forge
(``tests/helpers/gate_world.py``: its ``own_comment`` answers the comment's ``updated``,
which the test sets as the forge stamps an edit), and GitLab through the whole service
(``tests/helpers/gitlab_gate.py``). "No hook" below is GitLab's webhook turned off by the
Maintainer (or a GitHub delivery lost): the read-back is then the only defence.

Findings (xfail unless closed):

1. A write of Sluice's made before the gate's read-back erases an edit no hook reported:
   ``StickyComment.publish`` posts without reading the comment back, and the forge's
   answer moves ``written`` past the edit, so the next read-back finds the comment as
   Sluice wrote it. alice rewrites the plan with the webhook off, carol approves what she
   reads, and any job that writes the comment before a gate evaluation (a re-plan of the
   same head: ``/sluice plan``, a check re-run, a reopen; a policy override's section;
   ``dispatch`` and ``give_up`` bodies) wipes the evidence: carol's approval counts for
   the plan she never saw. High. Fix: read back inside ``StickyComment.publish`` before
   every post (the same ``comment_guard.changed`` test, under the ledger's lock of the
   comment row), or have ``upsert_comment`` compare the comment's ``updated_at`` with
   ``written`` before editing (a compare-and-swap), keeping the change first.
2. An unchanged write "confirms" someone else's time: ``upsert_comment`` answers a text the
   comment already reads with the comment's last ``updated_at`` (GitHub, GitLab, memory),
   and ``comment_written_later`` takes it as Sluice's write. alice rewrites, carol
   approves, alice puts Sluice's text back to the byte; a write of the same text (a
   section written again unchanged) records alice's restore time as Sluice's: the read-
   back finds nothing. Medium (needs a no-hook edit and a write before the gate's
   read-back). Fix: an upsert that wrote nothing confirms no time (``forge_at`` None to
   ``comment_written_later``), or finding 1's read-back before every post.
3. A text whose post failed stays "under way" for ever: ``save_comment(posting=)`` adds
   its digest, and only ``comment_written_later`` (called after a post that returned)
   removes it; the list drops an entry only past 8 texts at once, which never happens
   while each write is confirmed. After one failed post (a 502, a rate limit) showing
   head A's small plan, alice pushes B (a three-year backfill), and with the webhook off
   rewrites the comment to that old text: the read-back takes it for Sluice's write under
   way, and carol's approval of what she read (A's small plan) counts for B's. Medium.
   Fix: drop the digest when the post raises (``StickyComment.publish``: ``finally``),
   and let an entry live only while its job can still be running (stamp each with the
   service's time and drop those older than a job's lease).
4. The read-back's snapshot is older than the comment it judges: ``approval.refresh``
   reads ``comment_writes`` in its first transaction and the forge afterwards; a job on
   the prod key that saves, posts and confirms its section in between (a promotion's
   word on the PR) is read as someone else's edit. carol's approval is refused, the
   comment says "Edited by someone else", the audit blames an edit nobody made, and the
   PR needs ``/sluice plan`` and approvals again. Nobody need act: Sluice's own race
   (round 8's finding 4, again). Medium (a denial of service any busy repository hits).
   Fix: read the forge first, then ``comment_writes`` (a text the forge shows was saved
   as unconfirmed before it was posted: either it is still listed, or its confirmation
   moved ``written`` to its time).
5. GitLab moves a note's ``updated_at`` when anyone awards it an emoji
   (``AwardEmoji#expire_cache`` calls ``awardable.bump_updated_at``; a Note is an
   awardable): any user who can read the merge request (a Guest; on a public project
   anyone signed in) reacts to Sluice's note and the read-back keeps it as an edit: every
   approval given is refused until someone comments ``/sluice plan`` and the approvers
   approve again, and one more reaction undoes that. High for availability: the cheapest
   denial of approvals there is, by people who cannot push. Fix: on GitLab, tell an edit
   by the note's text (its digest against the last confirmed text and the texts under
   way), not by ``updated_at`` alone; or by ``last_edited_at`` (set only by an edit).
6. GitHub's whole seconds: an edit in the second of Sluice's last answered write has the
   same ``updated_at`` as ``written`` (``changed``: ``<=``) and is never seen without its
   hook. alice's script edits the moment Sluice's approval section lands; a lost hook
   later, carol approves the rewrite and it counts. Low (needs a lost GitHub delivery).
   Fix: keep the digest of the last confirmed text and, at ``updated_ms == written``,
   take a text that is neither it nor under way as edited.
7. A rewrite that drops the marker leaves a comment of Sluice's account saying what alice
   wrote: ``own_comment`` no longer finds it ("deleted"), the put-back posts a new
   comment, and the old one, authored by Sluice's bot, keeps alice's fake plan on the PR
   for good (``on_edit`` ignores its hook: the marker is gone). carol, reading the first
   comment of Sluice's, approves it once the real plan is shown again further down.
   Medium. Fix: keep the comment's id in the ledger; read it back and put it back by id
   (restoring the old comment's text, marker included).
8. The backfill budget's approval is counted with no read-back at all:
   ``approval.budget_approved`` (``pr_build._held``, ``pr_build.on_approved``) reads
   ``plans_shown(holds=True)`` and the reviews, never the comment; and ``refresh``
   returns before its read-back while the head has no plan (a held head never has one).
   With the webhook off alice rewrites the hold ("backfills 2 days") and carol, the
   budget's approver, approves it: her approval releases the build of the three-year
   backfill in the PR's environment. High (Sluice runs what its approver never saw).
   Fix: ``comment_guard.read_back`` at the top of ``budget_approved`` (and in
   ``refresh`` before its ``review is None`` return).

Closed since (their tests pass): all but round 8's finding 6 below. Every publication reads the comment back
before its edit (``Job.publish``'s guard, in ``StickyComment.publish``: the forge first,
then the ledger in the publication's own transaction: 1, 2, 4), and so do the gate's
evaluations (``approval.refresh`` before anything, a held head included, and
``budget_approved``: 8). A change is told by the comment's text first: neither the text
of Sluice's newest answered post nor one under way (6); by its time only on a forge that
moves it when the text is written (GitHub; GitLab's ``own_comment`` says no time: 5). A
failed post's text stays under way, marked, only until a post saved after it is answered
(3). Sluice's comment is the one its newest answered post wrote, by its id (ledger
migration 18): read back and put back by it (7). Open: on GitLab, a rewrite put back by
hand to Sluice's very text before any read-back leaves nothing to tell by (round 8's
finding 6, its restored variant).

Defended (their tests pass): a GitHub reaction on Sluice's comment is no edit (GitHub
leaves ``updated_at``; so does the in-memory forge); an edit with no hook is kept before a
click is counted (the click path evaluates through ``refresh``); another project's
comment rewritten with no hook leaves this project's approvals alone (its marker is not
this project's); an outsider's comment copying the marker, older than Sluice's, is not
what ``own_comment`` reads back; failed posts past the 8 kept leave a live write's text
under way (the newest is kept); the failure of a new body keeps a publication of no plan
(``unanswered``) that an approval given after it does not pass; and on GitLab a rewrite
with the webhook off, read back at the next hook, refuses carol's approval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import approval
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.memory import Comment
from sluice.bot.present import comment as present
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import (
    CHANGE,
    GATED,
    KEY,
    MINUTE,
    OTHER,
    SECOND,
    A,
    B,
    Bot,
    given,
    published,
    review_hook,
)
from tests.helpers.gitlab_gate import (
    S8,
    approval_hook,
    approval_state,
    clock,
    commit_heads,
    mr_world,
    open_mr8,
    serving,
)
from tests.helpers.gitlab_service import GitLabService
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld

REAL = "Plan: `s.other` changed (backfills 3 years)"
"""What the head's plan really does, as Sluice's comment shows it."""

FORGED = "Plan: `s.change` changed"
"""What alice rewrites it to read (or what an earlier head's harmless plan read)."""


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


def _sluices(bot: Bot, number: int = 7) -> Comment:
    marker = bot.deps.sticky.marker
    return next(
        c for c in bot.forge.comments[number] if c.author == bot.forge.bot_user and marker in c.body
    )


def _show(bot: Bot, text: str = REAL, made: object = OTHER, head: str = A) -> Comment:
    """``head``'s plan ``text`` published on PR 7 and recorded, as ``pr_build`` does."""
    job = Job.start(bot.deps, bot.forge)
    try:
        at = job.publish(7, body=f"{job.deps.sticky.marker}\n### Sluice\n{text}\n")
    finally:
        job.close()
    published(bot, head, made, at if at is not None else bot.clock.now)  # type: ignore[arg-type]
    return _sluices(bot)


def _section(bot: Bot, name: str, text: str | None) -> None:
    """A job (another queue's, or one that writes before the gate) writes a section."""
    job = Job.start(bot.deps, bot.forge)
    try:
        job.publish(7, section=(name, text))
    finally:
        job.close()


def _rewrite(bot: Bot, mine: Comment, body: str) -> None:
    """alice edits Sluice's comment; the forge stamps it now; no hook comes."""
    mine.body, mine.updated = body, bot.clock.now


def _approve(bot: Bot, user: str, head: str, review_id: int) -> None:
    """``user`` approves ``head`` now, and the review's hook is handled."""
    given(bot, user, "APPROVED", head, bot.clock.now)
    bot.deliver(
        "pull_request_review", review_hook(user, "approved", head, review_id, bot.clock.now)
    )


def _edited_rows(bot: Bot) -> list[tuple[int, str]]:
    return [r for r in bot.ledger.plans_shown(KEY, 7) if r[1] == ":edited"]


# == 1. a write of Sluice's before the read-back erases the edit ==========================


@pytest.mark.parametrize("write", ["replan", "section"])
def test_a_write_before_the_gates_read_back_erases_an_unhooked_rewrite(
    bot: Bot, write: str
) -> None:
    mine = _show(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, mine.body.replace(REAL, FORGED))  # the webhook off
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)  # carol approves what she reads
    bot.clock.now += MINUTE
    if write == "replan":  # alice comments /sluice plan: the build shows A's plan again
        _show(bot)
    else:  # alice's /sluice override of a policy: its section, before the gate's refresh
        _section(bot, "policy", "**Policies:** overridden by alice")
    assert FORGED not in _sluices(bot).body  # Sluice's write overwrote the rewrite
    bot.clock.now += MINUTE
    gw.refresh(bot)  # the webhook on again: the next hook's evaluation reads back
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol approved {FORGED!r}, written by alice with no hook; a write of Sluice's "
        f"({write}) before the read-back erased it and her approval counts: {check.summary}"
    )


# == 2. an unchanged write takes someone else's time as Sluice's ==========================


def test_an_unchanged_write_does_not_confirm_the_attackers_restore(bot: Bot) -> None:
    mine = _show(bot)
    shown = mine.body
    bot.clock.now += MINUTE
    _rewrite(bot, mine, shown.replace(REAL, FORGED))
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, shown)  # put back to the byte, still no hook
    bot.clock.now += MINUTE
    _section(bot, "policy", None)  # a write of the text the comment reads already
    assert bot.ledger.comment_writes(KEY, 7).written == mine.updated  # alice's time
    bot.clock.now += MINUTE
    gw.refresh(bot)
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"alice's rewrite and restore were confirmed as Sluice's write: {check.summary}"
    )


# == 3. a failed post's text stays under way for ever =====================================


def test_a_failed_posts_old_text_put_back_later_is_still_an_edit(bot: Bot) -> None:
    _show(bot, FORGED, CHANGE)  # A's harmless plan shown
    bot.clock.now += MINUTE
    real = bot.forge.upsert_comment

    def failing(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        raise ForgeError("github: 502 Bad Gateway")

    bot.forge.upsert_comment = failing  # type: ignore[method-assign]
    with pytest.raises(ForgeError):  # its approval section's post fails
        _section(bot, "approval", "**Approval:** waiting for bob or carol")
    bot.forge.upsert_comment = real  # type: ignore[method-assign]
    stale = bot.deps.sticky.shown(KEY, 7)
    assert stale is not None and FORGED in stale
    bot.clock.now += MINUTE
    # alice pushes B: a three-year backfill. Its build shows it.
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "alice"))
    mine = _show(bot, REAL, OTHER, head=B)
    assert REAL in mine.body
    bot.clock.now += MINUTE
    _rewrite(bot, mine, stale)  # the webhook off: the comment shows A's old harmless plan
    bot.clock.now += MINUTE
    _approve(bot, "carol", B, 95)  # carol approves what she reads
    check = bot.approval(B)
    assert check.conclusion != "success", (
        f"carol approved A's old plan put back by alice; it counts for B's: {check.summary}"
    )


# == 4. the read-back's snapshot older than the comment ===================================


def test_another_queues_write_during_the_read_back_is_no_edit(bot: Bot) -> None:
    _show(bot)
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 91)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    real = bot.forge.own_comments
    raced: list[bool] = []

    def promotion() -> None:  # the prod key's job: its word on the PR
        _section(bot, "promotion", "**Promotion:** queued behind another PR")

    def reading(number: int) -> object:
        if not raced:
            raced.append(True)
            other = threading.Thread(target=promotion)
            other.start()
            other.join()
        return real(number)

    bot.forge.own_comments = reading  # type: ignore[method-assign]
    bot.clock.now += MINUTE
    try:
        gw.refresh(bot)  # e.g. bob's comment review: the gate evaluated again
    finally:
        bot.forge.own_comments = real  # type: ignore[method-assign]
    assert raced
    assert not _edited_rows(bot), "Sluice's own write was kept as someone else's edit"
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


# == 6. GitHub's whole seconds ==========================================================


def test_an_edit_in_the_second_of_sluices_last_write_is_seen(bot: Bot) -> None:
    mine = _show(bot)
    written = bot.ledger.comment_writes(KEY, 7).written
    assert written is not None and written % 1000 == 0
    # alice's script edits 400 ms after Sluice's write; GitHub stamps the second. Its
    # hook is lost.
    mine.body, mine.updated = mine.body.replace(REAL, FORGED), (written + 400) // 1000 * 1000
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 96)
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"an edit in the second of Sluice's write was never seen: {check.summary}"
    )


# == 7. a rewrite without the marker =====================================================


def test_a_rewrite_without_the_marker_leaves_no_fake_plan_under_sluices_name(bot: Bot) -> None:
    mine = _show(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, f"### Sluice\n{FORGED}\n")  # the marker line dropped
    bot.clock.now += MINUTE
    gw.refresh(bot)  # the next evaluation: kept as "deleted", Sluice's text posted again
    assert _edited_rows(bot), "the gate refuses approvals until the plan is shown again"
    fakes = [
        c for c in bot.forge.comments[7] if c.author == bot.forge.bot_user and FORGED in c.body
    ]
    assert not fakes, f"a comment of Sluice's account still shows alice's plan: {fakes}"


# == 8. the backfill budget's approval: no read-back ======================================


def _budget_approved(bot: Bot) -> bool:
    """``approval.budget_approved`` of PR 7 at its head, carol the approver (what
    ``pr_build._held`` and ``pr_build.on_approved`` ask before building over the budget)."""
    job = Job.start(bot.deps, bot.forge)
    try:
        return approval.budget_approved(job, bot.forge.pull_request(7), "carol")
    finally:
        job.close()


def test_a_rewritten_hold_does_not_release_the_build(bot: Bot) -> None:
    marker = bot.deps.sticky.marker
    job = Job.start(bot.deps, bot.forge)
    try:  # A's build held over the budget, as pr_build._build publishes and records it
        at = job.publish(7, body=f"{marker}\n### Sluice\n⏸ Held: {REAL}; waits for carol\n")
    finally:
        job.close()
    bot.ledger.record_shown(KEY, 7, A, bot.clock.now, at)
    mine = _sluices(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, mine.body.replace(REAL, "backfills 2 days"))  # the webhook off
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)  # carol approves the hold she reads
    bot.clock.now += MINUTE
    gw.refresh(bot)  # any evaluation of the gate meanwhile: a held head has no plan
    assert not _budget_approved(bot), (
        "carol approved a hold alice rewrote to 'backfills 2 days': it releases the build "
        "of the three-year backfill"
    )


# == defended ===========================================================================


def test_a_github_reaction_on_sluices_comment_is_no_edit(bot: Bot) -> None:
    """mallory (read access) reacts to Sluice's comment, many times. Defended: GitHub
    does not move a comment's ``updated_at`` for a reaction (nor does the in-memory
    forge): the read-back keeps nothing and carol's approval counts."""
    mine = _show(bot)
    for reaction in ("+1", "-1", "laugh", "confused", "heart", "rocket", "eyes"):
        assert bot.forge.react(7, mine.id, reaction)
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 97)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot)


def test_a_click_after_an_unhooked_rewrite_is_refused(bot: Bot) -> None:
    """alice rewrites with no hook; carol clicks "Approve this plan". Defended: the click
    is evaluated by ``approval.refresh``, which reads the comment back first."""
    mine = _show(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, mine.body.replace(REAL, FORGED))
    bot.clock.now += MINUTE
    gw.click(bot, "carol", A)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary
    assert _edited_rows(bot) and FORGED not in _sluices(bot).body


def test_another_projects_comment_rewritten_without_a_hook_is_not_this_projects(
    bot: Bot,
) -> None:
    """A monorepo: another project's comment of Sluice's on PR 7, older than this one's,
    rewritten with no hook. Defended: ``own_comment`` reads this project's marker back,
    whole; carol's approval counts and nothing is kept."""
    other = present.marker("warehouse/finance")
    bot.forge.upsert_comment(7, other, f"{other}\n### Sluice\nfinance's plan\n")
    theirs = next(c for c in bot.forge.comments[7] if other in c.body)
    _show(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, theirs, theirs.body + "\nrewritten")
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 98)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot)


def test_an_outsiders_older_comment_with_the_marker_is_not_read_back(bot: Bot) -> None:
    """mallory posts a comment copying the marker before Sluice's first (on an opened
    PR), then edits it at will. Defended: ``own_comment`` takes only Sluice's account's."""
    marker = bot.deps.sticky.marker
    bot.forge._ids += 1
    theirs = Comment(bot.forge._ids, "mallory", f"{marker}\n### Sluice\n{FORGED}\n")
    bot.forge.comments.setdefault(7, []).insert(0, theirs)
    mine = _show(bot)
    assert mine.id != theirs.id
    for n in range(3):
        bot.clock.now += SECOND
        theirs.body, theirs.updated = theirs.body + f"\nedit {n}", bot.clock.now
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 99)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot)


def test_many_failed_posts_leave_a_live_writes_text_under_way(bot: Bot) -> None:
    """Ten posts fail (their digests kept); a job's write is between its post and its
    confirmation when the gate reads back. Defended: the newest 8 are kept, the live
    one among them: no edit kept, carol's approval counts."""
    _show(bot)
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 100)
    real = bot.forge.upsert_comment

    def failing(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        raise ForgeError("github: 502 Bad Gateway")

    bot.forge.upsert_comment = failing  # type: ignore[method-assign]
    for n in range(10):
        with pytest.raises(ForgeError):
            _section(bot, "promotion", f"**Promotion:** try {n}")
    bot.forge.upsert_comment = real  # type: ignore[method-assign]
    bot.clock.now += MINUTE
    text = bot.deps.sticky.shown(KEY, 7)
    assert text is not None
    live = text.replace("try 9", "queued")
    bot.deps.ledger.save_comment(KEY, 7, *bot.ledger.comment(KEY, 7), posting=live)
    mine = _sluices(bot)
    mine.body, mine.updated = live, bot.clock.now  # posted; its answer not recorded yet
    bot.clock.now += MINUTE
    gw.refresh(bot)
    assert not _edited_rows(bot)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_a_new_bodys_failed_post_refuses_an_approval_after_it(bot: Bot) -> None:
    """alice makes Sluice's post of a new body fail after GitHub applied it (its answer
    lost). Defended: ``Job.publish`` keeps a publication of no plan (``unanswered``) just
    after the last one: an approval given while that text shows does not count."""
    _show(bot, FORGED, CHANGE)
    bot.clock.now += MINUTE
    real = bot.forge.upsert_comment

    def applied_then_lost(
        number: int, marker: str, body: str, comment_id: int | None = None
    ) -> object:
        real(number, marker, body, comment_id)
        raise ForgeError("github: the connection was reset")

    bot.forge.upsert_comment = applied_then_lost  # type: ignore[method-assign]
    job = Job.start(bot.deps, bot.forge)
    try:
        with pytest.raises(ForgeError):
            job.publish(7, body=f"{job.deps.sticky.marker}\n### Sluice\n{REAL}\n")
    finally:
        job.close()
        bot.forge.upsert_comment = real  # type: ignore[method-assign]
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)][-1] == ":unanswered"
    bot.clock.now += MINUTE
    _approve(bot, "carol", A, 101)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary


# == GitLab, through the whole service ==================================================


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    env = mr_world(tmp_path)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serving(world) as running:
        yield running


def _award(gitlab: FakeGitLab, note: dict[str, object]) -> None:
    """dave (a Guest: he reads the merge request) awards Sluice's note a thumbs-up.
    GitLab's ``AwardEmoji#expire_cache`` bumps the note's ``updated_at``; its text is as
    it was, and no note hook is sent (an emoji hook at most, which Sluice does not read)."""
    with gitlab.lock:
        note["updated_at"] = gitlab._now()


def test_gitlab_an_emoji_on_sluices_note_refuses_no_approval(
    world: GitLabWorld, service: GitLabService
) -> None:
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    time.sleep(0.01)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] == "success", approval_state(gitlab, S8)
    [note] = gitlab.bot_notes(8)
    shown = note["body"]
    time.sleep(0.01)
    _award(gitlab, note)
    time.sleep(0.01)
    approval_hook(world, service, S8)  # any later hook: the gate evaluated again
    state = approval_state(gitlab, S8)
    assert state["state"] == "success", (
        f"a Guest's thumbs-up on Sluice's note refused carol's approval: {state}"
    )
    assert "Edited by someone else" not in note["body"] and note["body"] == shown


def test_gitlab_a_rewrite_with_the_webhook_off_is_read_back_at_the_next_hook(
    world: GitLabWorld, service: GitLabService
) -> None:
    """alice turns the webhook off, rewrites Sluice's note, turns it back on after carol
    approved. Defended (``comment_guard.read_back`` in ``approval.refresh``): the next
    hook's evaluation reads the note back, keeps the rewrite and refuses the approval."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    [note] = gitlab.bot_notes(8)
    with gitlab.lock:
        note["body"] = note["body"].split("\n")[0] + "\n### Sluice\nNo change to prod.\n"
        note["updated_at"] = gitlab._now()
    time.sleep(0.01)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] != "success", approval_state(gitlab, S8)
    assert "No change to prod" not in note["body"]
