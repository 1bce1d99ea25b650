"""Forge events in a neutral shape: what the flow acts on (pure values).

A parser per forge (``github_events.py``, ``gitlab_events.py``) turns a webhook payload
into one of these, or into None when the event needs no work. Each event serialises to
JSON (``to_json`` / :func:`event_from_json`) so the durable queue can store it and a
restarted worker can act on it. Fields added later have defaults, so a job queued by an
older version still reads back.

Content keys: the same event is handled once
--------------------------------------------
The queue refuses a delivery id it has stored, but a signed body sent again under a new
delivery id is a new delivery. Every event that changes state therefore names what makes
it *the same event* (:meth:`~_Base.content_key`); the flow skips an event whose key
(with its repository) the ledger has recorded, with an INFO line saying so and nothing
posted on the PR (:func:`sluice.bot.flow.dispatch.handle`).

======================  ======================================================  ====================
Event                   Key (the ledger adds the repository)                    Run again, it would
======================  ======================================================  ====================
PR merged               ``merge:<number>:<merge sha>``                          re-promote prod
PR closed, not merged   ``close:<number>:<head sha>:<updated_at>``              drop a reopened env
``/sluice`` comment     ``comment:<number>:<comment id>:<author>``              deploy, plan, reply
review (GitHub)         ``review:<number>:<id>:<user>:<action>:<STATE>``        re-run the gate
approval (GitLab)       ``approval:<number>:<user>:<STATE>:<head>:<time>``      re-bind its head
"Approve this plan"     ``click:<check run id>:<button>:<user>:<head sha>``     record the click
tag pushed              ``tag:<tag>:<sha>``                                     re-promote a commit
release published       ``release:<tag>:<release id>``                          re-promote a commit
merge group destroyed   ``merge_group:destroyed:<head sha>``                    record it again
merge train pipeline    ``merge_train:<pipeline id>:<head sha>``                set its statuses again
======================  ======================================================  ====================

GitLab sends a pipeline's hook at each change of its status, and Sluice's own statuses in
a merge train's pipeline change it: the first hook of a train pipeline sets its statuses,
the others find its key recorded (without it, each would set them again, and the statuses
move the pipeline's status, which sends another hook).

An id names one comment or review, so one PR and one author; they are in the key all the
same, so that an id alone never stands for another PR's or user's event (the local
forge numbers comments per PR). GitLab's approval webhook
carries no approval id: its identity is who, what (approved or
taken back), on which head, and the MR's ``updated_at`` (which an approval moves), so
approving, taking it back and approving again are three events. Events that lack a field
of their key (a job queued by an older version, the local CLI's reviews) have no key and
run as before.

No key, by design (each delivery runs): a PR opened, pushed to, reopened or marked ready
(a new head is a new build; the same head built again is harmless, and the flow
skips a PR event older than the newest head it recorded for the PR), a re-requested check
(a re-run asked for on purpose), GitHub's merge group's ``checks_requested`` (its checks
are set on its head commit again, from the same approvals), an edited or deleted comment and a comment without a
command (they run nothing), and the janitor and the scheduled run (idempotent; one per
period by its delivery id).

Where the key is recorded, and why there: in the ledger (``sluice_handled_events``), by
the flow when the event's job is done, and by the worker when the job failed for
good; not in the queue's deduplication at intake. So a job cut short (a crash, a lost
Spark driver) and run again still runs: its key was not recorded yet. Two deliveries of
one event cannot run at once: events with the same key have the same queue key
(:func:`pr_key`), and a key's jobs run one at a time, so the second sees the first's
record. The ledger keeps the record for good (the queue forgets deliveries after 30
days), so a merge replayed a year later does not promote either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from sluice.bot.events.commands import CommandError, parse_command

FORGE = "forge"
WEB = "web"
"""Where a command or an approval click came from (``origin``): the forge (a comment, the
check's button), or the service's web UI (:mod:`sluice.bot.web.actions`), which makes the
same event, the signed-in forge user as its author or requester, and queues it as a
delivery is: every check the flow makes of a comment or a click runs unchanged. Only what
the flow does with the comment itself differs: a web action has none to react to (nor to
delete to withdraw it). No forge parser sets it (their events are ``FORGE``)."""


@dataclass(frozen=True)
class _Base:
    kind: ClassVar[str] = ""
    forge: str  # "github", "gitlab", "local"
    repo: str  # "owner/name" (GitLab: the project's path with namespace)
    installation_id: int | None  # GitHub App installation, when the payload names one
    # The forge's id of the repository (GitHub ``repository.id``, GitLab ``project.id``),
    # which a rename or transfer keeps and a new repository under an old name does not
    # get: the name is bound to it when first seen (dispatch). None where nothing says it
    # (the Action, the local forge, the CLI, the web UI's actions): the name alone, as before.
    repo_id: int | None = field(default=None, kw_only=True)
    # When the service accepted the delivery (epoch ms, its own clock; set by the intake,
    # never read from a payload): a click is ordered among its clicker's reviews by it, not
    # by when its job ran behind others (red team round 10). None: not through the intake.
    received_ms: int | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        # Every field is a plain value or a tuple of them, so the instance's own dict is
        # the document (asdict's deep copy was 5% of the service's time per webhook).
        return {"kind": self.kind, **vars(self)}

    def content_key(self) -> str | None:
        """What makes this event the same event (see the module docstring's table); None
        for events that run on every delivery."""
        return None


PUSHED = frozenset({"opened", "reopened", "synchronize"})
"""The pull-request actions whose maker pushed the head (:attr:`PullRequestEvent.pusher`)."""


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
    updated_ms: int | None = None  # the PR's updated_at in the payload (epoch ms)
    # Who made the event: on opened, reopened or synchronize, who pushed the head (whose
    # approval then does not count, as the author's does not).
    pusher: str | None = None
    # A fork PR's head repository's namespace (its owner's login, or a group's path): its
    # pushes are told to the fork alone, so the owner counts as having pushed.
    head_owner: str | None = None
    # The forge's account ids of the pusher (the event's sender) and of the author: a login
    # is renamed and given up at will, an id never (see sluice.bot.flow.gate_rules).
    pusher_id: int | None = None
    author_id: int | None = None
    # The account id of the fork's owner (``head_owner``): GitHub's head repository's
    # ``owner.id``; None when the payload does not say (GitLab's hook names the source
    # project's namespace by path alone): the login then decides.
    head_owner_id: int | None = None

    def content_key(self) -> str | None:
        if self.action != "closed":
            return None
        if self.merged:
            return f"merge:{self.number}:{self.merge_sha or self.head_sha}"
        if self.updated_ms is None:
            return None  # a close, reopen and close again differ only by their time
        return f"close:{self.number}:{self.head_sha}:{self.updated_ms}"


@dataclass(frozen=True)
class CommentEvent(_Base):
    """A comment on a pull request (comments on plain issues are not events)."""

    kind: ClassVar[str] = "comment"
    action: str  # created, edited, deleted
    number: int
    comment_id: int
    author: str
    body: str
    created_ms: int | None = None  # when the comment was written (epoch ms)
    origin: str = FORGE  # FORGE: a comment on the forge; WEB: the web UI's form, no comment
    author_id: int | None = None  # the forge's account id of its author
    # Who edited or deleted it (the hook's sender: GitHub ``sender``, GitLab ``user``);
    # None for a creation, or where the hook does not say.
    editor: str | None = None
    editor_id: int | None = None

    def content_key(self) -> str | None:
        if self.action != "created" or not _addresses_sluice(self.body):
            return None
        return f"comment:{self.number}:{self.comment_id}:{self.author.casefold()}"


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
    review_id: int | None = None  # GitHub's review id; GitLab's approvals have none
    submitted_ms: int | None = None  # GitHub: submitted_at; GitLab: the MR's updated_at
    reviewer_id: int | None = None  # the forge's account id of the reviewer

    def content_key(self) -> str | None:
        """GitHub's review by its id. A GitLab approval hook has none: it only makes the
        gate ask GitLab again (the approvals are GitLab's list, never the hook's word), so
        running it twice costs reads and nothing else, while a key would skip real ones:
        its ``updated_at`` is the merge request's from before the approval (GitLab's own
        issue 414759), so every approval or withdrawal of one person at one head looked
        alike, and a forged or earlier one swallowed a real withdrawal (red team, approval
        round 5)."""
        if self.review_id is None:
            return None
        who = self.reviewer.casefold()
        return f"review:{self.number}:{self.review_id}:{who}:{self.action}:{self.state}"


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
    check_run_id: int | None = None
    origin: str = FORGE  # FORGE: the check's button; WEB: the web UI's "Approve this plan"
    requester_id: int | None = None  # the forge's account id of who clicked (sender.id)
    # The App that made the check run clicked (GitHub ``check_run.app.id``): Sluice's own
    # runs only are its checks (sluice.bot.flow.own_checks); None where the forge does not say.
    app_id: int | None = None
    # WEB only: the reason the web UI's "Override policies" form of a drift repair gave (a
    # button carries none; no forge parser sets it): the audit row's reason, as written.
    reason: str = ""

    def content_key(self) -> str | None:
        if self.action != "requested_action" or self.check_run_id is None:
            return None  # a re-requested check is a re-run asked for on purpose
        return f"click:{self.check_run_id}:{self.identifier}:{self.requester}:{self.head_sha}"


@dataclass(frozen=True)
class TagEvent(_Base):
    """A tag was pushed or a release published (deleted tags are not events)."""

    kind: ClassVar[str] = "tag"
    tag: str
    sha: str | None  # None when the payload does not say (a release names a tag only)
    source: str  # "push" or "release"
    actor: str = ""
    release_id: int | None = None
    actor_id: int | None = None  # the actor's account id (None: the forge did not say)

    def content_key(self) -> str | None:
        if self.source == "release":
            return None if self.release_id is None else f"release:{self.tag}:{self.release_id}"
        return None if self.sha is None else f"tag:{self.tag}:{self.sha}"


@dataclass(frozen=True)
class BranchPushEvent(_Base):
    """Commits were pushed to a branch: who pushed them, so that they do not approve a pull
    request holding them (its pushers, :mod:`sluice.bot.flow.gate_rules`), whoever opens it
    and whatever its own events say (a push made before the pull request was opened, or
    whose ``synchronize`` a newer push superseded in the queue). A deleted branch is none."""

    kind: ClassVar[str] = "branch_push"
    branch: str
    sha: str  # the branch's head after the push
    pusher: str
    # The commits the push brought, as its payload lists them (GitHub up to 2,048, GitLab
    # 20): each is the pusher's, even where a later push drops the head above it.
    shas: tuple[str, ...] = ()
    pusher_id: int | None = None  # the forge's account id of the pusher


@dataclass(frozen=True)
class MergeGroupEvent(_Base):
    """A merge queue's entry: GitHub's merge queue made a merge group, or GitLab a merge
    train's pipeline (``checks_requested``: Sluice's checks are wanted on ``head_sha``, the
    commit of the prod branch with the entries ahead and ``number`` merged in), or the
    entry ended (``destroyed``, with ``reason``: GitHub's merged, dequeued or invalidated;
    for GitLab the pipeline's end, passed, failed, canceled or skipped)."""

    kind: ClassVar[str] = "merge_group"
    action: str  # checks_requested, destroyed
    head_sha: str  # lower-case hex
    # GitHub: gh-readonly-queue/<base>/pr-<number>-<base sha>, refs/heads/ removed;
    # GitLab: refs/merge-requests/<iid>/train
    head_ref: str
    base_ref: str  # the branch the entry merges into, refs/heads/ removed
    base_sha: str  # "" for GitLab (its pipeline hook does not say)
    number: int | None  # the queue entry's PR, read from head_ref; None: it did not say
    reason: str | None = None  # destroyed: merged, dequeued, invalidated
    sender: str = ""
    pipeline_id: int | None = None  # GitLab: the merge train's pipeline, its statuses' home

    def content_key(self) -> str | None:
        if self.action == "destroyed":
            return f"merge_group:destroyed:{self.head_sha}"
        if self.pipeline_id is not None:  # once per pipeline (the module docstring)
            return f"merge_train:{self.pipeline_id}:{self.head_sha}"
        return None  # checks wanted again: set them again


@dataclass(frozen=True)
class JanitorEvent(_Base):
    """Time to drop a repository's expired environments and unreferenced tables (the
    service's schedule makes these; no forge sends them)."""

    kind: ClassVar[str] = "janitor"


@dataclass(frozen=True)
class ScheduledRunEvent(_Base):
    """Time to process prod's due intervals (``sluice run prod``) of a repository (the
    service's schedule makes these; no forge sends them)."""

    kind: ClassVar[str] = "run"


@dataclass(frozen=True)
class DriftCheckEvent(_Base):
    """Time to check a repository's prod for drift (``sluice drift prod``: reads only;
    the service's schedule makes these; no forge sends them)."""

    kind: ClassVar[str] = "drift"


Event = (
    PullRequestEvent
    | CommentEvent
    | ReviewEvent
    | CheckRunEvent
    | TagEvent
    | BranchPushEvent
    | MergeGroupEvent
    | JanitorEvent
    | ScheduledRunEvent
    | DriftCheckEvent
)
_KINDS: dict[str, type[_Base]] = {
    c.kind: c
    for c in (
        PullRequestEvent,
        CommentEvent,
        ReviewEvent,
        CheckRunEvent,
        TagEvent,
        BranchPushEvent,
        MergeGroupEvent,
        JanitorEvent,
        ScheduledRunEvent,
        DriftCheckEvent,
    )
}


def event_from_json(data: Mapping[str, Any]) -> Event:
    """The event ``to_json`` produced (tuples come back from JSON lists)."""
    cls = _KINDS[data["kind"]]
    values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
    for name in ("numbers", "shas"):
        if name in values:
            values[name] = tuple(values[name])
    event: Event = cls(**values)  # type: ignore[assignment]
    return event


KEY_MARKS = ("#", ":", "@", "^")
"""What follows the repository (``forge:owner/name``) in every key :func:`pr_key` makes:
a repository's keys are those starting with it and then one of these (a name never holds
them), never those of a repository whose name merely starts the same."""


def pr_key(event: Event) -> str:
    """The queue key that serialises work: one pull request, or a repository's prod.

    Everything that may change prod (a tag, a merge, ``/sluice deploy``, the janitor, a
    scheduled run) runs under the repository's prod key, so two of them never run at once.
    """
    prod = f"{event.forge}:{event.repo}:prod"
    if isinstance(event, TagEvent | JanitorEvent | ScheduledRunEvent | DriftCheckEvent):
        return prod
    if isinstance(event, PullRequestEvent) and event.action == "closed" and event.merged:
        return prod
    if isinstance(event, CommentEvent) and event.action == "created" and _changes_prod(event.body):
        return prod  # a command; an edit runs none, it is its PR's (red team round 8)
    if isinstance(event, CheckRunEvent) and event.check_name == "sluice/drift":
        return prod  # a drift repair's request or approval: it may apply a plan to prod
    if isinstance(event, CheckRunEvent):
        suffix = f"#{event.numbers[0]}" if event.numbers else f"@{event.head_sha}"
        return f"{event.forge}:{event.repo}{suffix}"
    if isinstance(event, BranchPushEvent):  # a record only: beside the branch's PR's work
        return f"{event.forge}:{event.repo}^{event.branch}"
    if isinstance(event, MergeGroupEvent):
        # One merge group's jobs in order (its checks, then its end); groups side by side,
        # as PR builds are: each builds its own environment.
        return f"{event.forge}:{event.repo}@{event.head_sha}"
    return f"{event.forge}:{event.repo}#{event.number}"


def supersedes(event: Event) -> bool:
    """Whether ``event`` makes queued work of its key for an older head commit moot: a new
    head to build does; a merge or close never does (each promotion must run).

    A fork PR's events never do: they build nothing (a writer's ``/sluice plan`` does), and
    each one must run, in order, to record the PR's head, since a ``/sluice plan`` queued
    between two of them builds the head recorded when its turn comes. Were the first
    superseded by the second, the command would find an older head than the one its
    writer saw.
    """
    return isinstance(event, PullRequestEvent) and event.action != "closed" and not event.fork


def _changes_prod(body: str) -> bool:
    """Whether a comment's command changes prod (``deploy``, ``rollback``)."""
    try:
        command = parse_command(body)
    except CommandError:
        return False
    return command is not None and command.name in ("deploy", "rollback")


def _addresses_sluice(body: str) -> bool:
    """Whether a comment holds a ``/sluice`` line: a command, or one Sluice answers with
    its usage."""
    try:
        return parse_command(body) is not None
    except CommandError:
        return True
