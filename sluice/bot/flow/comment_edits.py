"""Sluice's comment rewritten by someone else.

GitHub lets anyone with write access to a repository edit another's comment, and GitLab a
project's maintainer: a pull request's author could rewrite the plan Sluice's comment shows
(a three-year backfill made to read "one small model changed"), and the approver approve
what they read. The gate counts an approval only for the plan shown when it was given
(``gate_rules.shown_at``), so an edit is a publication too, of no head's plan.

Each edit of a comment (GitHub's ``issue_comment`` ``edited``, GitLab's note hook
``update``) makes Sluice read that comment back from the forge with its own token: when it
is Sluice's own and holds this project's marker, and the hook says someone other than its
author edited it (GitHub's ``sender``, GitLab's ``user``: a signed hook's word; GitLab's
maintainer, who holds the project's token, could claim one falsely, which only refuses
approvals until the plan is shown again, as a push would), or it no longer reads what
Sluice last wrote, the edit is kept as a publication of no plan (``Ledger.record_shown``,
kind ``edited``) a millisecond after the last publication of a plan, by the forge's
clock: the edit came after it, but when is not known (a second edit moves the comment's
time on, red team round 8). Sluice's text is put back with a word saying so, and the gate
is asked again: an approval given since the plan's publication counts once it is shown
again (``/sluice plan``, or a push). An edit undone before its hook is handled is kept
all the same (the hook says who edited); Sluice's own edits (the hook's editor is the
comment's author) keep nothing, even while another job's write is under way.

>>> from sluice.bot.present.comment import edited_section
>>> edited_section()[0]
'edited'
"""

from __future__ import annotations

from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import approval, comment_guard
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import opens_with
from sluice.bot.present.comment import edited_section


def on_edit(job: Job, event: CommentEvent) -> None:
    """``event``'s comment edited: when it is Sluice's, rewritten by someone else, keep
    the edit as a publication of no plan, put Sluice's text back and ask the gate again."""
    found = job.forge.comment(event.number, event.comment_id)
    sticky = job.deps.sticky
    if found is None or not found.own:
        return  # someone's own comment, or gone
    # Without this project's marker: another project's, or this one's with it dropped (the
    # comment Sluice's newest post wrote, by its id).
    if not opens_with(found.body, sticky.marker) and (
        event.comment_id != job.ledger.comment_writes(job.repo, event.number).comment_id
    ):
        return
    if event.editor is not None:
        by_author = (
            event.editor_id == found.author_id
            if event.editor_id is not None and found.author_id is not None
            else event.editor.casefold() == found.author.casefold()
        )
        if by_author:
            return  # Sluice's own edit (its text may be another job's, being written)
    elif found.body == sticky.shown(job.repo, event.number):
        return  # no word of who edited it, and it reads what Sluice wrote
    comment_guard.keep(
        job, event.number, "edited", found, editor=event.editor, editor_id=event.editor_id
    )
    job.publish(event.number, section=edited_section())
    approval.refresh(job, job.forge.pull_request(event.number))
