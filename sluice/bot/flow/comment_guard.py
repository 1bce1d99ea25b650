"""Sluice's comment changed by someone else: kept as a publication of no plan.

The gate counts an approval only for the plan Sluice's comment showed when it was given
(``gate_rules.shown_at``). GitHub lets anyone with write access edit or delete another's
comment, GitLab a project's maintainer: the text an approver read may not be Sluice's.
Two ways find out:

- the forge's hook of an edit (:mod:`sluice.bot.flow.comment_edits`), and
- each evaluation of the gate reading the comment back (:func:`read_back`): gone, or
  last written by the forge's clock after the last write the forge answered Sluice (and
  reading none of the texts Sluice posted whose answer has not come: another job's write
  under way), it was changed by someone else, whether or not the hook came (a GitLab
  maintainer can turn the project's webhook off) and whatever it reads now (the text put
  back by hand after an approval).

Either way the change is kept (:func:`keep`) as a publication of no plan just after the
last publication (when it came is not known, only that it came after), with an audit
row, and Sluice's text is put back with a word saying so.

>>> from sluice.bot.flow.ledger import CommentWrites
>>> changed(None, CommentWrites(written=1_000, unconfirmed=frozenset()))
'deleted'
"""

from __future__ import annotations

import logging

from sluice.bot.flow import audit
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import CommentWrites
from sluice.bot.forge.base import PostedComment
from sluice.bot.present.comment import edited_section

log = logging.getLogger(__name__)


def changed(found: PostedComment | None, writes: CommentWrites) -> str | None:
    """How Sluice's comment, read back as ``found``, was changed by someone else since
    Sluice's writes ``writes``: ``deleted``, ``edited``, or None (as Sluice wrote it, or
    nothing to tell by: no write with the forge's time kept)."""
    if writes.written is None:
        return None  # no answered write with a time: nothing to compare with
    if found is None:
        return "deleted"
    if found.updated_ms is None or found.updated_ms <= writes.written:
        return None
    return None if writes.under_way(found.body) else "edited"


def read_back(job: Job, number: int, writes: CommentWrites) -> tuple[str, str] | None:
    """Read PR ``number``'s comment back and, when someone else changed it since
    ``writes``, keep that (:func:`keep`); the comment's section that says so, to publish
    with the caller's (None: unchanged)."""
    if writes.written is None:
        return None
    found = job.forge.own_comment(number, job.deps.sticky.marker)
    how = changed(found, writes)
    if how is None:
        return None
    keep(job, number, how, editor=None, editor_id=None)
    return edited_section(deleted=how == "deleted")


def keep(
    job: Job,
    number: int,
    how: str,
    *,
    editor: str | None,
    editor_id: int | None,
    fallback: int | None = None,
) -> None:
    """Keep PR ``number``'s comment changed by someone else (``how``: ``edited`` or
    ``deleted``; ``editor`` when the forge's hook named them) as a publication of no plan
    (:meth:`~sluice.bot.flow.ledger.Ledger.record_unshown`; ``fallback``: when, with no
    publication yet), and audit it."""
    job.ledger.record_unshown(job.repo, number, job.deps.clock(), kind="edited", fallback=fallback)
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
