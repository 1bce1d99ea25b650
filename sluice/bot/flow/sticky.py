"""The sticky comment: one comment per PR and project, kept true.

Its main body is written by whoever last built or planned the PR; its sections (approval,
promotion, settings) by later events. Both are kept in the ledger, so an event that
updates one part keeps the other as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.base import Forge, repo_key
from sluice.bot.present import comment


@dataclass(frozen=True)
class Published:
    """A sticky comment as last published: its main body and its sections by name."""

    body: str | None
    sections: dict[str, str]


@dataclass(frozen=True)
class StickyComment:
    """The sticky comments of one project (``project_path``) on a repository's PRs."""

    ledger: Ledger
    project_path: str = "."

    @property
    def marker(self) -> str:
        """The hidden line that finds this project's comment on a PR."""
        return comment.marker(self.project_path)

    def publish(
        self,
        forge: Forge,
        number: int,
        *,
        body: str | None = None,
        section: tuple[str, str | None] | None = None,
        sections: Sequence[tuple[str, str | None]] = (),
        known: dict[int, Published] | None = None,
    ) -> None:
        """Update PR ``number``'s comment: its main ``body`` and/or extra ``section``s
        (``(name, None)`` removes one; facts for the verdict are sections too, never shown
        as they are); the other parts are kept as they were, all in one edit.

        ``known``: the comments as this caller last published them (by PR), used instead of
        reading the ledger's record, and updated (a job's own: :class:`~sluice.bot.flow.
        job.Job`)."""
        repo = repo_key(forge)
        if known is not None and number in known:
            old, kept = known[number].body, dict(known[number].sections)
        else:
            old, kept = self.ledger.comment(repo, number)
        body = body if body is not None else old
        for name, text in [*([section] if section is not None else []), *sections]:
            if text:
                kept[name] = text
            else:
                kept.pop(name, None)
        if body is None:
            body = f"{self.marker}\n### Sluice\n"
        forge.upsert_comment(number, self.marker, comment.with_sections(body, kept))
        self.ledger.save_comment(repo, number, body, kept)
        if known is not None:
            known[number] = Published(body, dict(kept))
