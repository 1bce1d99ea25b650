"""The sticky comment: one comment per PR and project, kept true.

Its main body is written by whoever last built or planned the PR; its sections (approval,
promotion, settings) by later events. Both are kept in the ledger, so an event that
updates one part keeps the other as it was, even while another job updates another part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Forge, repo_key
from sluice.bot.present import comment


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
    ) -> int | None:
        """Update PR ``number``'s comment: its main ``body`` and/or extra ``section``s
        (``(name, None)`` removes one; facts for the verdict are sections too, never shown
        as they are); the other parts are kept as they were, all in one edit.

        The ledger's record is read, merged and written in one transaction, so sections
        another job wrote meanwhile (a promotion's, under the repository's prod key, while
        a build runs under the PR's) are kept; the forge's comment is then edited to it.
        Returns when the forge says the comment came to read so (its clock; None: it
        says no time: :meth:`~sluice.bot.forge.base.Forge.upsert_comment`), which the
        ledger keeps as the comment's last write (:meth:`Ledger.comment_writes`)."""
        repo = repo or repo_key(forge)  # the job's key (a renamed repository's first name)
        with self.ledger.together("publish the sticky comment"):
            old, kept = self.ledger.comment(repo, number)
            body = body if body is not None else old
            for name, text in [*([section] if section is not None else []), *sections]:
                if text:
                    kept[name] = text
                else:
                    kept.pop(name, None)
            if body is None:
                body = f"{self.marker}\n### Sluice\n"
            text = comment.with_sections(body, kept)
            self.ledger.save_comment(repo, number, body, kept, posting=text)
        forge_at = forge.upsert_comment(number, self.marker, text)
        # Until this is written (with the job's next write), a read back of the comment
        # finds its text among those under way (sluice.bot.flow.comment_guard).
        self.ledger.comment_written_later(repo, number, forge_at, text)
        return forge_at
