"""Sluice's comment changed by someone else: kept as a publication of no plan.

The gate counts an approval only for the plan Sluice's comment showed when it was given
(``gate_rules.shown_at``). GitHub lets anyone with write access edit or delete another's
comment, GitLab a project's maintainer: the text an approver read may not be Sluice's.
Three ways find out:

- the forge's hook of an edit (:mod:`sluice.bot.flow.comment_edits`);
- each evaluation of the gate (the approval check, the backfill budget's approval) reads
  the comment back before it counts anything (:func:`read_back`);
- each publication reads it back before its edit overwrites what someone else wrote
  (:meth:`~sluice.bot.flow.job.Job.publish`).

A comment read back was changed by someone else (:func:`changed`) when it is gone, when it
reads neither the text of Sluice's newest answered post nor one posted whose post has not
ended (another job's write, under way), or, where the forge moves a comment's time only
when its text is written (GitHub's ``updated_at``; not GitLab's, which an emoji moves), when
it was written after Sluice's newest answered post while reading none under way: the text
put back by hand after an approval. The change is kept (:func:`keep`) as a publication of
no plan just after the last publication (when it came is not known, only that it came
after), with an audit row; what the comment read is then known (kept once), and Sluice's
text is put back with a word saying so.

>>> from sluice.bot.flow.ledger import CommentWrites
>>> changed(None, CommentWrites(written=1_000, last="0" * 64, under_way=frozenset()))
'deleted'
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sluice.bot.flow import audit
from sluice.bot.flow.ledger import GONE, CommentWrites, same_text
from sluice.bot.flow.sticky import Guarded
from sluice.bot.forge.base import PostedComment, opens_with
from sluice.bot.present.comment import copy_stub, edited_section

if TYPE_CHECKING:
    from sluice.bot.flow.job import Job

log = logging.getLogger(__name__)


def changed(found: PostedComment | None, writes: CommentWrites) -> str | None:
    """How Sluice's comment, read back as ``found`` (None: none), was changed by someone
    else since Sluice's writes ``writes``: ``deleted``, ``edited``, or None (as Sluice wrote
    it, as last found, or nothing to tell by: nothing Sluice wrote is kept yet)."""
    if writes.last is None:
        return None  # no answered post kept (none yet, or before ledger migration 16)
    if found is None:
        return None if writes.last == GONE else "deleted"
    if not writes.reads(found.body):
        return "edited"
    later = (
        found.updated_ms is not None
        and writes.written is not None
        and found.updated_ms > writes.written
    )
    return "edited" if later and not writes.is_under_way(found.body) else None


def sort(
    found: list[PostedComment], writes: CommentWrites, marker: str
) -> tuple[PostedComment | None, list[PostedComment]]:
    """This project's comment among the bot's comments ``found`` on a PR, and its copies.

    The comment: the one Sluice's newest answered post wrote, by its id, whatever it reads
    (a rewrite that dropped the marker is Sluice's all the same: red team round 9); else
    the oldest opening with ``marker`` (as :meth:`~sluice.bot.forge.base.Forge.upsert_comment`
    finds it). Its copies: the others opening with ``marker`` (two posts that raced each
    made one: red team round 11), each read back as the comment is.

    >>> from sluice.bot.flow.ledger import CommentWrites
    >>> mine = [PostedComment("bot", 1, "<!-- m -->\\nA", comment_id=c) for c in (5, 9)]
    >>> sort(mine, CommentWrites(None, None, frozenset(), comment_id=9), "<!-- m -->")[0].comment_id
    9
    """
    by_id = [
        c for c in found if writes.comment_id is not None and c.comment_id == writes.comment_id
    ]
    marked = [c for c in found if opens_with(c.body, marker)]
    mine = by_id[0] if by_id else marked[0] if marked else None
    return mine, [c for c in marked if c is not mine]


def read_back(job: Job, number: int) -> tuple[str, str] | None:
    """Read PR ``number``'s comment back (the forge, then the ledger) and :func:`check` it,
    its stale copies rewritten (``StickyComment.rewrite_copies``); the section to publish when
    someone else changed it (None: unchanged)."""
    found = job.forge.own_comments(number)
    guarded = check(job, number, found, job.ledger.comment_writes(job.repo, number))
    job.deps.sticky.rewrite_copies(job.forge, number, guarded.copies)
    return guarded.section


def check(job: Job, number: int, found: list[PostedComment], writes: CommentWrites) -> Guarded:
    """When someone else changed PR ``number``'s comment or a copy of it (:func:`sort`;
    the bot's comments read back as ``found``) since Sluice's ``writes``: keep it
    (:func:`keep`) and say so in a section. The copies that do not read the stub yet are
    returned to be rewritten to it (``StickyComment.rewrite_copies``, once this
    transaction ends)."""
    marker = job.deps.sticky.marker
    mine, copies = sort(found, writes, marker)
    # A copy with no id (the local forge's files) can be neither told apart nor rewritten:
    # not read back (that forge's store is the single user's own).
    stale = [
        c for c in copies if c.comment_id is not None and not same_text(c.body, copy_stub(marker))
    ]
    how = changed(mine, writes)
    if how is None and any(not writes.reads(c.body) for c in stale):
        how = "edited"  # a copy rewritten: an approver may have read it
    if how is not None:
        keep(job, number, how, mine, editor=None, editor_id=None)
    section = edited_section(deleted=mine is None) if how is not None else None
    return Guarded(section, [c.comment_id for c in stale if c.comment_id is not None])


def keep(
    job: Job,
    number: int,
    how: str,
    found: PostedComment | None,
    *,
    editor: str | None,
    editor_id: int | None,
) -> None:
    """Keep PR ``number``'s comment, found as ``found``, changed by someone else (``how``:
    ``edited`` or ``deleted``; ``editor`` when the forge's hook named them) as a publication
    of no plan (:meth:`~sluice.bot.flow.ledger.Ledger.record_unshown`; with no
    publication yet, from the comment's time), the comment as found known from then on
    (:meth:`~sluice.bot.flow.ledger.Ledger.comment_seen`: kept once), and audit it."""
    at = found.updated_ms if found is not None else None
    job.ledger.record_unshown(job.repo, number, job.deps.clock(), kind="edited", fallback=at)
    job.ledger.comment_seen(job.repo, number, found.body if found is not None else None, at)
    log.warning("#%s: Sluice's comment was %s by someone else: put back", number, how)
    audit.record(
        job,
        audit.REFUSAL,
        "comment rewritten",
        actor=editor or audit.SERVICE,
        actor_id=editor_id,
        ref=f"#{number}",
        detail=f"Sluice's comment was {how} by another account; its text was put back, "
        "and approvals given since its plan was shown count for no plan until it is "
        "shown again",
    )
