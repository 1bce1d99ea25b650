"""The read-back of Sluice's comment (``comment_guard``): what the ledger keeps of
Sluice's writes (ledger migration 16), what counts as someone else's change, and the gate
evaluated on a comment changed without any hook (the in-memory forge, its clock the
flow's; the red team's rounds 7 and 8 hold the attacks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow.comment_guard import changed
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import GONE, CommentWrites, Ledger, _digest
from sluice.bot.forge.base import PostedComment
from sluice.bot.forge.memory import Comment
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import (
    GATED,
    KEY,
    MINUTE,
    OTHER,
    A,
    Bot,
    given,
    published,
    review_hook,
)

NONE: frozenset[str] = frozenset()
GONE_TEXT = "the text of a comment found gone"  # any text: only GONE itself is "gone"


def _posted(body: str, at: int | None) -> PostedComment:
    return PostedComment("sluice[bot]", 1, body, at, own=True)


def _writes(written: int | None, last: str | None, *under_way: str) -> CommentWrites:
    return CommentWrites(written, None if last is None else _digest(last),
                         frozenset(_digest(t) for t in under_way))  # fmt: skip


def test_what_counts_as_changed_by_someone_else() -> None:
    mine = _writes(1_000, "mine")
    assert changed(_posted("mine", 1_000), mine) is None  # as Sluice last wrote it
    assert changed(_posted("mine", 999), mine) is None
    assert changed(_posted("mine  \r\n", None), mine) is None  # however the forge spaces it
    assert changed(_posted("theirs", 1_000), mine) == "edited"  # its text tells
    assert changed(_posted("theirs", None), mine) == "edited"  # on a forge saying no time
    assert changed(_posted("mine", 1_001), mine) == "edited"  # written since: put back
    assert changed(None, mine) == "deleted"
    assert changed(None, _writes(1_000, GONE_TEXT)) == "deleted"
    assert changed(None, CommentWrites(1_000, GONE, NONE)) is None  # found gone before: kept
    # Nothing to compare with: no answered post kept (none yet, or state from before).
    assert changed(None, _writes(None, None)) is None
    assert changed(_posted("theirs", 5), _writes(None, None, "under way")) is None
    # Another job's post under way: its text is Sluice's, its time later.
    busy = _writes(1_000, "mine", "under way")
    assert changed(_posted("under way", 2_000), busy) is None
    assert changed(_posted("mine", 900), busy) is None  # before that post lands
    assert changed(_posted("under way, then rewritten", 2_000), busy) == "edited"


def test_the_ledger_keeps_the_newest_answer_and_the_texts_under_way(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        assert ledger.comment_writes("r", 7) == CommentWrites(None, None, NONE)
        ledger.save_comment("r", 7, "b1", {}, posting="text 1")
        ledger.save_comment("r", 7, "b2", {"s": "x"}, posting="text 2")
        writes = ledger.comment_writes("r", 7)
        assert writes.last is None and writes.is_under_way("text 1")
        assert writes.is_under_way("text 2")
        ledger.comment_written_later("r", 7, 5_000, "text 2")
        # Written with this thread's next write (a job's close: write_deferred), not before.
        assert ledger.comment_writes("r", 7).written is None
        ledger.write_deferred()
        writes = ledger.comment_writes("r", 7)
        assert writes.written == 5_000 and writes.reads("text 2")
        # ... and text 1, saved before it, is over (the comment reads a newer text since).
        assert not writes.is_under_way("text 2") and not writes.is_under_way("text 1")
        # An answer that came late (an earlier post's) moves neither the time nor the text.
        ledger.comment_written_later("r", 7, 4_000, "text 1")
        ledger.save_comment("r", 7, "b3", {}, posting="text 3")  # carries it
        writes = ledger.comment_writes("r", 7)
        assert writes.written == 5_000 and writes.reads("text 2") and not writes.reads("text 1")
        assert writes.is_under_way("text 3") and ledger.comment("r", 7) == ("b3", {})
        # A post that failed may have been applied (its answer lost): its text stays
        # under way until a post saved after it is answered.
        ledger.comment_written_later("r", 7, None, "text 3", failed=True)
        ledger.write_deferred()
        writes = ledger.comment_writes("r", 7)
        assert writes.written == 5_000 and writes.reads("text 2") and writes.is_under_way("text 3")
        # A forge that says no time: the text is the newest answer's, the time kept.
        ledger.save_comment("r", 7, "b4", {}, posting="text 4")
        ledger.comment_written_later("r", 7, None, "text 4")
        ledger.write_deferred()
        assert ledger.comment_writes("r", 7) == CommentWrites(5_000, _digest("text 4"), NONE)
        # Someone else's change, kept: what the comment read then is known, once.
        ledger.comment_seen("r", 7, "theirs", 6_000)
        assert ledger.comment_writes("r", 7) == CommentWrites(6_000, _digest("theirs"), NONE)
        ledger.comment_seen("r", 7, None, None)
        assert ledger.comment_writes("r", 7).last == GONE
        for n in range(20):  # posts never ended (their jobs died): the newest 8 kept
            ledger.save_comment("r", 7, "b", {}, posting=f"lost {n}")
        kept = ledger.comment_writes("r", 7)
        assert len(kept.under_way) == 8 and kept.is_under_way("lost 19")
        assert not kept.is_under_way("lost 11")
    finally:
        ledger.close()


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


def _show(bot: Bot) -> None:
    """A's plan published and recorded, as ``pr_build`` does."""
    job = Job.start(bot.deps, bot.forge)
    try:
        at = job.publish(7, body=f"{job.deps.sticky.marker}\n### Sluice\nA's plan\n")
    finally:
        job.close()
    published(bot, A, OTHER, at if at is not None else bot.clock.now)


def _sluices(bot: Bot) -> Comment:
    marker = bot.deps.sticky.marker
    return next(
        c for c in bot.forge.comments[7] if c.author == bot.forge.bot_user and marker in c.body
    )


def _approve(bot: Bot, review_id: int) -> str | None:
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    bot.deliver(
        "pull_request_review", review_hook("carol", "approved", A, review_id, bot.clock.now)
    )
    return bot.approval(A).conclusion


def test_an_edit_without_a_hook_is_kept_and_put_back(bot: Bot) -> None:
    _show(bot)
    mine = _sluices(bot)
    shown = mine.body
    bot.clock.now += MINUTE
    mine.body, mine.updated = shown.replace("A's plan", "nothing to see"), bot.clock.now
    bot.clock.now += MINUTE
    assert _approve(bot, 91) != "success"  # no hook: the gate's read-back found the edit
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)] == [A, ":edited"]
    assert "A's plan" in mine.body and "Edited by someone else" in mine.body
    audit = [e for e in bot.ledger.entries(repo=KEY) if e.outcome == "comment rewritten"]
    assert len(audit) == 1 and "edited" in audit[0].detail
    # The put-back is Sluice's own write: read back again, nothing more is kept.
    bot.clock.now += MINUTE
    _approve(bot, 92)
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)] == [A, ":edited"]


def test_a_deleted_comment_is_kept_and_posted_again(bot: Bot) -> None:
    _show(bot)
    bot.forge.comments[7].remove(_sluices(bot))
    bot.clock.now += MINUTE
    assert _approve(bot, 93) != "success"
    assert "Deleted by someone else" in _sluices(bot).body and "A's plan" in _sluices(bot).body


def test_sluices_own_writes_and_one_under_way_are_no_change(bot: Bot) -> None:
    _show(bot)
    bot.clock.now += MINUTE
    # Another job (prod's queue) saved its section and posted it; its answer is not kept yet.
    bot.deps.ledger.save_comment(KEY, 7, *bot.ledger.comment(KEY, 7), posting="x")
    mine = _sluices(bot)
    text = bot.deps.sticky.shown(KEY, 7)
    assert text is not None
    bot.deps.ledger.save_comment(KEY, 7, *bot.ledger.comment(KEY, 7), posting=text + "\n\npromo")
    mine.body, mine.updated = text + "\n\npromo", bot.clock.now
    bot.clock.now += MINUTE
    assert _approve(bot, 94) == "success", bot.approval(A).summary
    assert [sha for _, sha in bot.ledger.plans_shown(KEY, 7)] == [A]
