"""GitHub webhook payloads -> neutral events (pure: no I/O, no clock, no settings).

:func:`parse_github` takes the ``X-GitHub-Event`` name and the parsed JSON body and
returns one event of :mod:`sluice.bot.events.neutral`, or None when the delivery needs no work
(an event or action Sluice does not act on). A delivery Sluice does act on but that lacks
a field raises :class:`PayloadError` naming the field; the service answers 400 with it.

Traps the real payloads hold (see the tests): ``merge_commit_sha`` is set on PRs that
were closed without merging (a test-merge commit), so only ``merged`` says merged;
``head.repo.fork`` is true for any PR whose repository is itself a fork, so fork PRs are
found by comparing the head and base repositories; ``installation`` is often absent;
review states arrive in lower case; a merge group's refs are full refs
(``refs/heads/main``) where a pull request's are branch names (``main``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from sluice.bot.events.neutral import (
    PUSHED,
    BranchPushEvent,
    CheckRunEvent,
    CommentEvent,
    Event,
    MergeGroupEvent,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
)
from sluice.bot.events.payload import (
    ABSENT,
    PayloadError,
    account_id,
    check,
    commit_id,
    json_name,
    lookup,
    moment,
    optional,
    present,
    pushed_commits,
    repository_id,
    required,
)

__all__ = ["PayloadError", "parse_github"]

FORGE: Final = "github"
_PR_ACTIONS: Final = frozenset({"opened", "synchronize", "reopened", "ready_for_review", "closed"})
_COMMENT_ACTIONS: Final = frozenset({"created", "edited", "deleted"})
_REVIEW_ACTIONS: Final = frozenset({"submitted", "edited", "dismissed"})
_CHECK_RUN_ACTIONS: Final = frozenset({"rerequested", "requested_action"})
_TAG_PREFIX: Final = "refs/tags/"
_BRANCH_PREFIX: Final = "refs/heads/"
_MERGE_GROUP_ACTIONS: Final = frozenset({"checks_requested", "destroyed"})
# GitHub names a merge group's branch gh-readonly-queue/<base branch>/pr-<number>-<base sha>.
_QUEUE_REF: Final = re.compile(r"gh-readonly-queue/.+/pr-([1-9][0-9]{0,17})-[0-9a-f]{40,64}")
_REASON: Final = re.compile(r"[a-z_]{1,40}")


def _pr_numbers(payload: Mapping[str, Any], path: str) -> tuple[int, ...]:
    """The ``number`` of each pull request in the array at ``path``."""
    numbers: list[int] = []
    for index, item in enumerate(required(payload, path, list)):
        where = f"{path}[{index}]"
        entry = check(where, item, dict)
        numbers.append(present(entry.get("number", ABSENT), f"{where}.number", int))
    return tuple(numbers)


def _repo(payload: Mapping[str, Any]) -> str:
    return required(payload, "repository.full_name", str)


def _installation(payload: Mapping[str, Any]) -> int | None:
    # Absent in many deliveries (repository webhooks, and several App events).
    return optional(payload, "installation.id", int)


# --- one parser per X-GitHub-Event --------------------------------------------------------


def _is_fork(payload: Mapping[str, Any]) -> bool:
    """Whether the PR's head lives in another repository than its base.

    Not ``head.repo.fork``: that is true whenever the head repository is itself a fork,
    even when head and base are the same repository.
    """
    head_repo = lookup(payload, "pull_request.head.repo")
    if head_repo is None:
        return True  # the fork was deleted; GitHub sends "repo": null
    if head_repo is ABSENT:
        raise PayloadError("pull_request.head.repo is missing")
    head_id = optional(payload, "pull_request.head.repo.id", int)
    base_id = optional(payload, "pull_request.base.repo.id", int)
    if head_id is not None and base_id is not None:
        return head_id != base_id  # ids survive renames and transfers
    head_name = required(payload, "pull_request.head.repo.full_name", str)
    return head_name != required(payload, "pull_request.base.repo.full_name", str)


def _pull_request(payload: Mapping[str, Any]) -> PullRequestEvent | None:
    action = required(payload, "action", str)
    if action not in _PR_ACTIONS:
        return None  # labeled, edited, assigned, converted_to_draft, ...
    # merge_commit_sha is also set for a PR closed unmerged (GitHub's test merge).
    merged = lookup(payload, "pull_request.merged") is True
    return PullRequestEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        number=required(payload, "pull_request.number", int),
        head_sha=required(payload, "pull_request.head.sha", str),
        head_ref=required(payload, "pull_request.head.ref", str),
        base_ref=required(payload, "pull_request.base.ref", str),
        base_sha=required(payload, "pull_request.base.sha", str),
        author=required(payload, "pull_request.user.login", str),
        # Absent in payloads from before draft PRs existed.
        draft=optional(payload, "pull_request.draft", bool) or False,
        fork=_is_fork(payload),
        merged=merged,
        merge_sha=optional(payload, "pull_request.merge_commit_sha", str) if merged else None,
        title=optional(payload, "pull_request.title", str) or "",
        updated_ms=moment(payload, "pull_request.updated_at"),
        pusher=optional(payload, "sender.login", str) if action in PUSHED else None,
        head_owner=_head_owner(payload),
        pusher_id=account_id(payload, "sender.id") if action in PUSHED else None,
        author_id=account_id(payload, "pull_request.user.id"),
        head_owner_id=_head_owner_id(payload),
    )


def _head_owner(payload: Mapping[str, Any]) -> str | None:
    """The owner of a fork PR's head repository (``owner/name``'s owner); None for a PR
    from the base repository, or from a deleted fork."""
    if not _is_fork(payload):
        return None
    name = optional(payload, "pull_request.head.repo.full_name", str)
    return name.split("/", 1)[0] or None if name else None


def _head_owner_id(payload: Mapping[str, Any]) -> int | None:
    """The account id of :func:`_head_owner` (``pull_request.head.repo.owner.id``, which a
    rename of the owner does not change); None for a PR that is no fork's, or when the
    payload's ``owner.login`` is not the owner its ``full_name`` names (an id is never
    paired with another account's login: the login alone then decides, as before)."""
    owner = _head_owner(payload)
    if owner is None:
        return None
    uid = account_id(payload, "pull_request.head.repo.owner.id")
    login = optional(payload, "pull_request.head.repo.owner.login", str)
    if login is None or login.casefold() != owner.casefold():
        return None
    return uid


def _issue_comment(payload: Mapping[str, Any]) -> CommentEvent | None:
    action = required(payload, "action", str)
    if action not in _COMMENT_ACTIONS:
        return None
    if optional(payload, "issue.pull_request", dict) is None:
        return None  # a comment on a plain issue
    return CommentEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        number=required(payload, "issue.number", int),
        comment_id=required(payload, "comment.id", int),
        author=required(payload, "comment.user.login", str),
        body=optional(payload, "comment.body", str) or "",
        created_ms=moment(payload, "comment.created_at"),
        author_id=account_id(payload, "comment.user.id"),
        editor=optional(payload, "sender.login", str) if action != "created" else None,
        editor_id=account_id(payload, "sender.id") if action != "created" else None,
    )


def _pull_request_review(payload: Mapping[str, Any]) -> ReviewEvent | None:
    action = required(payload, "action", str)
    if action not in _REVIEW_ACTIONS:
        return None
    return ReviewEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        number=required(payload, "pull_request.number", int),
        reviewer=required(payload, "review.user.login", str),
        # Webhooks send "approved"; the REST API and the gate use "APPROVED".
        state=required(payload, "review.state", str).upper(),
        commit_sha=optional(payload, "review.commit_id", str),
        head_sha=required(payload, "pull_request.head.sha", str),
        review_id=optional(payload, "review.id", int),
        submitted_ms=moment(payload, "review.submitted_at"),
        reviewer_id=account_id(payload, "review.user.id"),
    )


def _check_run(payload: Mapping[str, Any]) -> CheckRunEvent | None:
    action = required(payload, "action", str)
    if action not in _CHECK_RUN_ACTIONS:
        return None  # created / completed: our own runs echoing back
    identifier = None
    if action == "requested_action":
        identifier = required(payload, "requested_action.identifier", str)
    return CheckRunEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        check_name=required(payload, "check_run.name", str),
        head_sha=required(payload, "check_run.head_sha", str),
        # Empty for a PR from a fork: the flow falls back to head_sha.
        numbers=_pr_numbers(payload, "check_run.pull_requests"),
        requester=required(payload, "sender.login", str),
        identifier=identifier,
        check_run_id=optional(payload, "check_run.id", int),
        requester_id=account_id(payload, "sender.id"),
        # Which App made the run: a click is Sluice's only on a run Sluice made.
        app_id=optional(payload, "check_run.app.id", int),
    )


def _check_suite(payload: Mapping[str, Any]) -> CheckRunEvent | None:
    action = required(payload, "action", str)
    if action != "rerequested":
        return None  # requested / completed
    return CheckRunEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        check_name="",  # "Re-run all checks": every check of the suite
        head_sha=required(payload, "check_suite.head_sha", str),
        numbers=_pr_numbers(payload, "check_suite.pull_requests"),
        requester=required(payload, "sender.login", str),
        requester_id=account_id(payload, "sender.id"),
    )


def _push(payload: Mapping[str, Any]) -> TagEvent | BranchPushEvent | None:
    ref = required(payload, "ref", str)
    if not ref.startswith((_BRANCH_PREFIX, _TAG_PREFIX)):
        return None  # another kind of ref (notes, ...)
    sha = required(payload, "after", str)
    # A deletion has deleted: true and an all-zero "after"; either one is enough.
    if optional(payload, "deleted", bool) or not sha.strip("0"):
        return None
    if ref.startswith(_BRANCH_PREFIX):
        # Who pushed (PRs and merges themselves arrive as pull_request events): the
        # sender, whose account GitHub authenticated (``pusher`` is git's name for them).
        return BranchPushEvent(
            forge=FORGE,
            repo=_repo(payload),
            installation_id=_installation(payload),
            branch=_branch(payload, "ref"),
            sha=commit_id(payload, "after"),
            pusher=required(payload, "sender.login", str),
            shas=pushed_commits(payload),
            pusher_id=account_id(payload, "sender.id"),
        )
    tag = ref.removeprefix(_TAG_PREFIX)
    if not tag:
        raise PayloadError(f"ref {ref!r} names no tag")
    sender = optional(payload, "sender.login", str)
    actor = sender or optional(payload, "pusher.name", str)
    return TagEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        tag=tag,
        sha=sha,
        source="push",
        actor=actor or "",
        actor_id=account_id(payload, "sender.id") if sender else None,
    )


def _release(payload: Mapping[str, Any]) -> TagEvent | None:
    action = required(payload, "action", str)
    # "created" fires for a draft saved and for a release published directly (which
    # also fires "published"); only the non-draft one names a tag that exists.
    if action == "created":
        if required(payload, "release.draft", bool):
            return None
    elif action != "published":
        return None
    return TagEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        tag=required(payload, "release.tag_name", str),
        sha=None,  # a release names its tag only; the worker resolves it
        source="release",
        actor=optional(payload, "sender.login", str) or "",
        # "created" and "published" of one release share it: it promotes once.
        release_id=optional(payload, "release.id", int),
        actor_id=account_id(payload, "sender.id"),
    )


def _branch(payload: Mapping[str, Any], path: str) -> str:
    ref = required(payload, path, str).removeprefix(_BRANCH_PREFIX)
    if not ref:
        raise PayloadError(f"{path} names no branch")
    return ref


def _merge_group(payload: Mapping[str, Any]) -> MergeGroupEvent | None:
    """The merge queue's ``checks_requested`` (Sluice's checks wanted on the group's head)
    and ``destroyed`` (the group merged, dequeued or invalidated)."""
    action = required(payload, "action", str)
    if action not in _MERGE_GROUP_ACTIONS:
        return None
    head_ref = _branch(payload, "merge_group.head_ref")
    queued = _QUEUE_REF.fullmatch(head_ref)
    reason = None
    if action == "destroyed":
        reason = optional(payload, "reason", str)
        if reason is not None and not _REASON.fullmatch(reason):
            raise PayloadError("reason is not a reason GitHub gives (lower-case words)")
    return MergeGroupEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=_installation(payload),
        action=action,
        head_sha=commit_id(payload, "merge_group.head_sha"),
        head_ref=head_ref,
        base_ref=_branch(payload, "merge_group.base_ref"),
        base_sha=commit_id(payload, "merge_group.base_sha"),
        number=int(queued.group(1)) if queued else None,
        reason=reason,
        sender=optional(payload, "sender.login", str) or "",
    )


_PARSERS: Final[dict[str, Callable[[Mapping[str, Any]], Event | None]]] = {
    "pull_request": _pull_request,
    "issue_comment": _issue_comment,
    "pull_request_review": _pull_request_review,
    "check_run": _check_run,
    "check_suite": _check_suite,
    "push": _push,
    "release": _release,
    "merge_group": _merge_group,
    # Not "create": a tag created on GitHub also sends a push event with its sha, which
    # _push turns into the TagEvent; "create" names the tag without a sha.
}


def parse_github(event: str, payload: Mapping[str, Any]) -> Event | None:
    """The neutral event one GitHub delivery means, or None when it needs no work.

    Args:
        event: The ``X-GitHub-Event`` header (``pull_request``, ``push``, ...).
        payload: The request body, parsed from JSON.

    Returns:
        A :class:`~sluice.bot.events.neutral.PullRequestEvent`, ``CommentEvent``,
        ``ReviewEvent``, ``CheckRunEvent``, ``TagEvent`` or ``MergeGroupEvent``; None
        for events and actions Sluice does not act on (``ping``, ``installation``, a
        labelled PR, a comment on an issue, a tag deletion, a branch push, ...).

    Raises:
        PayloadError: The delivery is one Sluice acts on, but a field it needs is
            missing, null, or of the wrong JSON type; the message names the field.
    """
    parser = _PARSERS.get(event)
    if parser is None:
        return None
    if not isinstance(payload, Mapping):
        raise PayloadError(f"the {event} payload should be an object, not {json_name(payload)}")
    parsed = parser(payload)
    if parsed is None:
        return None
    return dataclasses.replace(parsed, repo_id=repository_id(payload, "repository.id"))
