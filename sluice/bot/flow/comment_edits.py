"""Sluice's comment rewritten by someone else.

GitHub lets anyone with write access to a repository edit another's comment, and GitLab a
project's maintainer: a pull request's author could rewrite the plan Sluice's comment shows
(a three-year backfill made to read "one small model changed"), and the approver approve
what they read. The gate counts an approval only for the plan shown when it was given
(``gate_rules.shown_at``), so an edit is a publication too, of no head's plan.

Each edit of a comment (GitHub's ``issue_comment`` ``edited``, GitLab's note hook
``update``) makes Sluice read that comment from the forge with its own token, never the
hook's word: when it is Sluice's own, holds this project's marker, and no longer reads
what Sluice last wrote, the edit is kept as a publication of no plan at the forge's time
of it (``Ledger.record_shown``, kind ``edited``), and Sluice's text is put back with a
word saying so. An approval given after the edit counts once Sluice shows the plan again
(``/sluice plan``, or a push). Sluice's own edits read what it wrote, and pass.

>>> from sluice.bot.present.comment import edited_section
>>> edited_section()[0]
'edited'
"""

from __future__ import annotations

import logging

from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import audit
from sluice.bot.flow.job import Job
from sluice.bot.present.comment import edited_section

log = logging.getLogger(__name__)


def on_edit(job: Job, event: CommentEvent) -> None:
    """``event``'s comment edited: when it is Sluice's, rewritten by someone else, keep
    the edit as a publication of no plan and put Sluice's text back."""
    found = job.forge.comment(event.number, event.comment_id)
    sticky = job.deps.sticky
    if found is None or not found.own or sticky.marker not in found.body:
        return  # someone's own comment, another project's, or gone
    if found.body == sticky.shown(job.repo, event.number):
        return  # Sluice's own edit (or put back already)
    job.ledger.record_shown(
        job.repo, event.number, "", job.deps.clock(), found.updated_ms, kind="edited"
    )
    log.warning("#%s: Sluice's comment was rewritten by someone else: put back", event.number)
    audit.record(
        job,
        audit.REFUSAL,
        "comment rewritten",
        ref=f"#{event.number}",
        detail="Sluice's comment was edited by another account; its text was put back, "
        "and approvals given since count for no plan until the plan is shown again",
    )
    job.publish(event.number, section=edited_section())
