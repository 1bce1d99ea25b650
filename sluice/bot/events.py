"""Forge events in a neutral shape: what the controller acts on (pure values).

A parser per forge (``github_events.py``, later ``gitlab_events.py``) turns a webhook
payload into one of these, or into None when the event needs no work. Each event
serialises to JSON (``to_json`` / :func:`event_from_json`) so the durable queue can store
it and a restarted worker can act on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from sluice.bot.commands import CommandError, parse_command


@dataclass(frozen=True)
class _Base:
    kind: ClassVar[str] = ""
    forge: str  # "github", "gitlab", "local"
    repo: str  # "owner/name" (GitLab: the project's path with namespace)
    installation_id: int | None  # GitHub App installation, when the payload names one

    def to_json(self) -> dict[str, Any]:
        # Every field is a plain value or a tuple of them, so the instance's own dict is
        # the document (asdict's deep copy was 5% of the service's time per webhook).
        return {"kind": self.kind, **vars(self)}


@dataclass(frozen=True)
class PullRequestEvent(_Base):
    """A pull request was opened, got commits, reopened, became ready, or closed."""

    kind: ClassVar[str] = "pull_request"
    action: str  # opened, synchronize, reopened, ready_for_review, closed
    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    author: str
    draft: bool
    fork: bool  # head repository differs from the base repository
    merged: bool
    merge_sha: str | None
    title: str = ""


@dataclass(frozen=True)
class CommentEvent(_Base):
    """A comment on a pull request (comments on plain issues are not events)."""

    kind: ClassVar[str] = "comment"
    action: str  # created, edited, deleted
    number: int
    comment_id: int
    author: str
    body: str


@dataclass(frozen=True)
class ReviewEvent(_Base):
    """A review was submitted, edited or dismissed; ``state`` upper-case (APPROVED ...)."""

    kind: ClassVar[str] = "review"
    action: str
    number: int
    reviewer: str
    state: str
    commit_sha: str | None
    head_sha: str


@dataclass(frozen=True)
class CheckRunEvent(_Base):
    """A check run was re-requested, or one of its actions was clicked."""

    kind: ClassVar[str] = "check_run"
    action: str  # rerequested, requested_action
    check_name: str
    head_sha: str
    numbers: tuple[int, ...]  # pull requests the check belongs to (may be empty)
    requester: str
    identifier: str | None = None  # requested_action.identifier


@dataclass(frozen=True)
class TagEvent(_Base):
    """A tag was pushed or a release published (deleted tags are not events)."""

    kind: ClassVar[str] = "tag"
    tag: str
    sha: str | None  # None when the payload does not say (a release names a tag only)
    source: str  # "push" or "release"
    actor: str = ""


@dataclass(frozen=True)
class JanitorEvent(_Base):
    """Time to drop a repository's expired environments and unreferenced tables (the
    service's schedule makes these; no forge sends them)."""

    kind: ClassVar[str] = "janitor"


Event = PullRequestEvent | CommentEvent | ReviewEvent | CheckRunEvent | TagEvent | JanitorEvent
_KINDS: dict[str, type[_Base]] = {
    c.kind: c
    for c in (PullRequestEvent, CommentEvent, ReviewEvent, CheckRunEvent, TagEvent, JanitorEvent)
}


def event_from_json(data: Mapping[str, Any]) -> Event:
    """The event ``to_json`` produced (tuples come back from JSON lists)."""
    cls = _KINDS[data["kind"]]
    values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
    if "numbers" in values:
        values["numbers"] = tuple(values["numbers"])
    event: Event = cls(**values)  # type: ignore[assignment]
    return event


def pr_key(event: Event) -> str:
    """The queue key that serialises work: one pull request, or a repository's prod.

    Everything that may change prod (a tag, a merge, ``/sluice deploy``, the janitor) runs
    under the repository's prod key, so two of them never run at once.
    """
    prod = f"{event.forge}:{event.repo}:prod"
    if isinstance(event, TagEvent | JanitorEvent):
        return prod
    if isinstance(event, PullRequestEvent) and event.action == "closed" and event.merged:
        return prod
    if isinstance(event, CommentEvent) and _deploys(event.body):
        return prod
    if isinstance(event, CheckRunEvent):
        suffix = f"#{event.numbers[0]}" if event.numbers else f"@{event.head_sha}"
        return f"{event.forge}:{event.repo}{suffix}"
    return f"{event.forge}:{event.repo}#{event.number}"


def supersedes(event: Event) -> bool:
    """Whether ``event`` makes queued work of its key for an older head commit moot: a new
    head to build does; a merge or close never does (each promotion must run)."""
    return isinstance(event, PullRequestEvent) and event.action != "closed"


def _deploys(body: str) -> bool:
    try:
        command = parse_command(body)
    except CommandError:
        return False
    return command is not None and command.name == "deploy"
