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
from sluice.bot.flow.ledger import GONE, CommentWrites
from sluice.bot.forge.base import PostedComment
from sluice.bot.present.comment import edited_section

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


def read_back(job: Job, number: int) -> tuple[str, str] | None:
    """Read PR ``number``'s comment back (the forge, then the ledger) and :func:`check` it;
    the section to publish when someone else changed it (None: unchanged)."""
    found = job.forge.own_comment(number, job.deps.sticky.marker)
    return check(job, number, found, job.ledger.comment_writes(job.repo, number))


def check(
    job: Job, number: int, found: PostedComment | None, writes: CommentWrites
) -> tuple[str, str] | None:
    """When someone else changed PR ``number``'s comment, read back as ``found``, since
    Sluice's ``writes``: keep it (:func:`keep`) and return the section saying so."""
    if writes.comment_id is not None and (found is None or found.comment_id != writes.comment_id):
        # Not found by its marker as Sluice's newest post left it: read it by its id (a
        # rewrite that dropped the marker is Sluice's comment all the same, red team
        # round 9); the forge's finder, so its time means what it does there.
        found = job.forge.own_comment(number, job.deps.sticky.marker, writes.comment_id)
    how = changed(found, writes)
    if how is None:
        return None
    keep(job, number, how, found, editor=None, editor_id=None)
    return edited_section(deleted=found is None)


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
