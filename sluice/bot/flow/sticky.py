"""The sticky comment: one comment per PR and project, kept true.

Its main body is written by whoever last built or planned the PR; its sections (approval,
promotion, settings) by later events. Both are kept in the ledger, so an event that
updates one part keeps the other as it was, even while another job updates another part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sluice.bot.flow.ledger import CommentWrites, Ledger
from sluice.bot.forge.base import Forge, PostedComment, repo_key
from sluice.bot.present import comment


class Guarded(NamedTuple):
    """What a read back of the comment asks of a publication: a ``section`` to publish
    with it (None: none), and the ``copies`` (their ids) to rewrite once it is posted."""

    section: tuple[str, str] | None
    copies: list[int]


Guard = Callable[[list[PostedComment], CommentWrites], Guarded]
"""Handed the bot's comments on the PR as read back and what Sluice wrote to its comment
(:func:`sluice.bot.flow.comment_guard.check`)."""


@dataclass(frozen=True)
class StickyComment:
    """The sticky comments of one project (``project_path``) on a repository's PRs."""

    ledger: Ledger
    project_path: str = "."

    @property
    def marker(self) -> str:
        """The hidden line that finds this project's comment on a PR."""
        return comment.marker(self.project_path)

    def shown(self, repo: str, number: int) -> str | None:
        """What Sluice last wrote to PR ``number``'s comment (its body and sections, as
        :meth:`publish` posts them); None before its first."""
        body, kept = self.ledger.comment(repo, number)
        return None if body is None else comment.with_sections(body, kept)

    def publish(
        self,
        forge: Forge,
        number: int,
        *,
        body: str | None = None,
        section: tuple[str, str | None] | None = None,
        sections: Sequence[tuple[str, str | None]] = (),
        repo: str | None = None,
        guard: Guard | None = None,
    ) -> int | None:
        """Update PR ``number``'s comment: its main ``body`` and/or extra ``section``s
        (``(name, None)`` removes one; facts for the verdict are sections too, never shown
        as they are); the other parts are kept as they were, all in one edit.

        The ledger's record is read, merged and written in one transaction, so sections
        another job wrote meanwhile (a promotion's, under the repository's prod key, while
        a build runs under the PR's) are kept; the forge's comment is then edited to it.
        ``guard``: the comment is read back first (the forge, then the ledger: a write
        another job ends in between is in the ledger by then) and handed to it with what
        Sluice wrote, in that transaction; a section it returns goes with this edit
        (:mod:`sluice.bot.flow.comment_guard`: someone else's change is kept before this
        edit overwrites it). Returns when the forge says the comment came to read so (its
        clock; None: it says no time: :meth:`~sluice.bot.forge.base.Forge.upsert_comment`),
        which the ledger keeps (:meth:`Ledger.comment_writes`)."""
        repo = repo or repo_key(forge)  # the job's key (a renamed repository's first name)
        found = forge.own_comments(number) if guard is not None else []
        with self.ledger.together("publish the sticky comment"):
            writes = self.ledger.comment_writes(repo, number)
            guarded = guard(found, writes) if guard else Guarded(None, [])
            extra = guarded.section
            old, kept = self.ledger.comment(repo, number)
            body = body if body is not None else old
            changes = [*([section] if section is not None else []), *sections]
            for name, text in [*changes, *([extra] if extra is not None else [])]:
                if text:
                    kept[name] = text
                else:
                    kept.pop(name, None)
            if body is None:
                body = f"{self.marker}\n### Sluice\n"
            text = comment.with_sections(body, kept)
            self.ledger.save_comment(repo, number, body, kept, posting=text)
        try:  # Sluice's comment by its id: a rewrite that dropped the marker is put back
            posted = forge.upsert_comment(number, self.marker, text, writes.comment_id)
        except BaseException:
            self.ledger.comment_written_later(repo, number, None, text, failed=True)
            raise
        # Until this is written (with the job's next write), a read back of the comment
        # finds its text among those under way.
        self.ledger.comment_written_later(
            repo, number, posted.at, text, comment_id=posted.comment_id
        )
        self.rewrite_copies(forge, number, [c for c in guarded.copies if c != posted.comment_id])
        return posted.at

    def rewrite_copies(self, forge: Forge, number: int, copies: Sequence[int]) -> None:
        """Rewrite the copies ``copies`` (their ids) of PR ``number``'s comment to the stub
        (:func:`~sluice.bot.present.comment.copy_stub`), each by its id only (one deleted
        meanwhile is left gone): one comment of Sluice's shows a plan
        (:func:`sluice.bot.flow.comment_guard.sort`)."""
        for copy in copies:
            forge.edit_comment(number, copy, comment.copy_stub(self.marker))
