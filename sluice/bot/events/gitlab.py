"""GitLab webhook payloads -> neutral events (pure: no I/O, no clock, no settings).

:func:`parse_gitlab` takes the ``X-Gitlab-Event`` header and the parsed JSON body and
returns one event of :mod:`sluice.bot.events.neutral`, or None when the delivery needs no work. It
dispatches on the body's ``object_kind`` (a ``Service Hook`` or ``System Hook`` carries the
same bodies under another header). A delivery Sluice acts on that lacks a field raises
:class:`~sluice.bot.events.payload.PayloadError` naming the field; the service answers 400.

What the real payloads teach (see the tests):

- A merge request ``update`` is a new push only when ``object_attributes.oldrev`` is
  there; a title, label or description edit carries only ``changes`` and needs no plan. A
  draft marked ready (``changes.draft`` true -> false) is built like GitHub's
  ``ready_for_review``.
- ``approval``/``approved`` (``unapproval``/``unapproved``) are reviews. The approval
  binds to ``last_commit.id``, the head the approver saw; GitLab's approvals API does not
  say which commit an approval was given on, so the flow records it from here.
- The event's ``user`` is whoever acted, not always the author: the author is taken from
  it only when ``user.id`` equals ``author_id``, else left empty for the flow to
  read from the API.
- A fork MR is told by its source and target projects (ids, or paths when a payload
  repeats the id).
- A tag push with an all-zero ``after`` deletes the tag; an annotated tag's ``after`` is
  the tag object, ``checkout_sha`` the commit.
- A merge train runs a pipeline for each merge request on the train, on the ref
  ``refs/merge-requests/<iid>/train`` whose commit is the target branch with the merge
  requests ahead and this one merged (the ``merged results`` of a merge request pipeline,
  ``source`` ``merge_request_event``). Its Pipeline Hook becomes the
  :class:`~sluice.bot.events.neutral.MergeGroupEvent` GitHub's ``merge_group`` does:
  ``checks_requested`` while the pipeline runs, ``destroyed`` when it ends. GitLab sends
  a hook at every change of the pipeline's status; the event's content key (the pipeline)
  makes the first one do the work. Every other pipeline (a branch's, a tag's, a merge
  request's own ``head`` or ``merge`` ref) needs no work.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from sluice.bot.events.neutral import (
    PUSHED,
    BranchPushEvent,
    CommentEvent,
    Event,
    MergeGroupEvent,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
)
from sluice.bot.events.payload import (
    PayloadError,
    account_id,
    commit_id,
    json_name,
    moment,
    optional,
    pushed_commits,
    repository_id,
    required,
)

__all__ = ["parse_gitlab"]

FORGE: Final = "gitlab"
_OPENED: Final = {"open": "opened", "reopen": "reopened"}
_APPROVED: Final = frozenset({"approved", "approval"})
_UNAPPROVED: Final = frozenset({"unapproved", "unapproval"})
_NOTE_ACTIONS: Final = {"create": "created", "update": "edited"}
_TAG_PREFIX: Final = "refs/tags/"
_BRANCH_PREFIX: Final = "refs/heads/"
_TRAIN_REF: Final = re.compile(r"refs/merge-requests/([1-9][0-9]{0,17})/train")
# A train pipeline's end, as the reason its entry ended; "canceling" is on its way to
# "canceled", whose hook follows. Every other status (created, pending, running, manual,
# ...) is a pipeline still waiting for its jobs, Sluice's statuses among them.
_ENDED: Final = {"success": "passed", "failed": "failed", "canceled": "canceled",
                 "skipped": "skipped"}  # fmt: skip
_STATUS: Final = re.compile(r"[a-z_]{1,40}")


def _repo(payload: Mapping[str, Any]) -> str:
    return required(payload, "project.path_with_namespace", str)


def _is_fork(attrs: Mapping[str, Any]) -> bool:
    source = optional(attrs, "source_project_id", int)
    target = optional(attrs, "target_project_id", int)
    if source is not None and target is not None and source != target:
        return True
    source_path = optional(attrs, "source.path_with_namespace", str)
    target_path = optional(attrs, "target.path_with_namespace", str)
    return source_path is not None and target_path is not None and source_path != target_path


def _author(payload: Mapping[str, Any]) -> str:
    """The MR's author when the acting user is the author; empty when the payload does not
    say (the flow then asks the API)."""
    user_id = optional(payload, "user.id", int)
    if user_id is not None and user_id == optional(payload, "object_attributes.author_id", int):
        return required(payload, "user.username", str)
    return ""


def _became_ready(payload: Mapping[str, Any]) -> bool:
    for key in ("draft", "work_in_progress"):
        if optional(payload, f"changes.{key}.previous", bool) is True and (
            optional(payload, f"changes.{key}.current", bool) is False
        ):
            return True
    return False


def _merge_request(payload: Mapping[str, Any]) -> Event | None:
    action = optional(payload, "object_attributes.action", str)
    if action is None:
        return None  # a system hook's MR body, with no action: nothing happened to act on
    attrs = required(payload, "object_attributes", dict)
    number = required(payload, "object_attributes.iid", int)
    head_sha = required(payload, "object_attributes.last_commit.id", str)
    if action in _APPROVED | _UNAPPROVED:
        approved = action in _APPROVED
        return ReviewEvent(
            forge=FORGE,
            repo=_repo(payload),
            installation_id=None,
            action="submitted" if approved else "dismissed",
            number=number,
            reviewer=required(payload, "user.username", str),
            state="APPROVED" if approved else "DISMISSED",
            commit_sha=head_sha,
            head_sha=head_sha,
            # No approval id in the payload: an approval moves the MR's updated_at, which
            # tells approving, taking it back and approving again apart (content_key).
            submitted_ms=moment(payload, "object_attributes.updated_at"),
            reviewer_id=account_id(payload, "user.id"),
        )
    if action in _OPENED:
        kind = _OPENED[action]
    elif action == "update":
        if optional(payload, "object_attributes.oldrev", str):
            kind = "synchronize"
        elif _became_ready(payload):
            kind = "ready_for_review"
        else:
            return None  # title, description, labels, assignees: the plan is the same
    elif action in {"merge", "close"}:
        kind = "closed"
    else:
        return None
    merged = action == "merge"
    draft = optional(payload, "object_attributes.draft", bool)
    if draft is None:  # GitLab before 14.x named it work_in_progress
        draft = optional(payload, "object_attributes.work_in_progress", bool) or False
    merge_sha = None
    if merged:  # a fast-forward merge makes no merge commit: the head is what landed
        merge_sha = optional(payload, "object_attributes.merge_commit_sha", str) or head_sha
    return PullRequestEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=None,
        action=kind,
        number=number,
        head_sha=head_sha,
        head_ref=required(payload, "object_attributes.source_branch", str),
        base_ref=required(payload, "object_attributes.target_branch", str),
        base_sha="",  # not in the payload; nothing downstream needs it
        author=_author(payload),
        draft=draft,
        fork=_is_fork(attrs),
        merged=merged,
        merge_sha=merge_sha,
        title=optional(payload, "object_attributes.title", str) or "",
        updated_ms=moment(payload, "object_attributes.updated_at"),
        pusher=optional(payload, "user.username", str) if kind in PUSHED else None,
        head_owner=_source_namespace(attrs) if _is_fork(attrs) else None,
        pusher_id=account_id(payload, "user.id") if kind in PUSHED else None,
        author_id=account_id(payload, "object_attributes.author_id"),
    )


def _source_namespace(attrs: Mapping[str, Any]) -> str | None:
    """A fork MR's source project's namespace (a user's username, or a group's path)."""
    path = optional(attrs, "source.path_with_namespace", str)
    return path.rsplit("/", 1)[0] or None if path and "/" in path else None


def _note(payload: Mapping[str, Any]) -> CommentEvent | None:
    if optional(payload, "object_attributes.noteable_type", str) != "MergeRequest":
        return None  # a note on an issue, a commit or a snippet
    if optional(payload, "object_attributes.system", bool):
        return None  # GitLab's own "added 1 commit" notes
    # Older GitLab sends no action; those deliveries are creations.
    action = optional(payload, "object_attributes.action", str) or "create"
    if action not in _NOTE_ACTIONS:
        return None
    return CommentEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=None,
        action=_NOTE_ACTIONS[action],
        number=required(payload, "merge_request.iid", int),
        comment_id=required(payload, "object_attributes.id", int),
        author=required(payload, "user.username", str),
        body=optional(payload, "object_attributes.note", str) or "",
        created_ms=moment(payload, "object_attributes.created_at"),
        author_id=account_id(payload, "user.id"),
        # An update's ``user`` is who made it (the note's author is the forge's to say).
        editor=optional(payload, "user.username", str) if action == "update" else None,
        editor_id=account_id(payload, "user.id") if action == "update" else None,
    )


def _tag_push(payload: Mapping[str, Any]) -> TagEvent | None:
    ref = required(payload, "ref", str)
    if not ref.startswith(_TAG_PREFIX):
        return None
    after = required(payload, "after", str)
    if not after.strip("0"):
        return None  # the tag was deleted
    tag = ref.removeprefix(_TAG_PREFIX)
    if not tag:
        raise PayloadError(f"ref {ref!r} names no tag")
    return TagEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=None,
        tag=tag,
        # An annotated tag's "after" is the tag object; checkout_sha is its commit.
        sha=optional(payload, "checkout_sha", str) or after,
        source="push",
        actor=optional(payload, "user_username", str) or "",
        actor_id=account_id(payload, "user_id"),
    )


def _push(payload: Mapping[str, Any]) -> BranchPushEvent | None:
    """Who pushed to a branch (a merge request's pushes also come as its ``update``)."""
    ref = required(payload, "ref", str)
    after = required(payload, "after", str)
    if not ref.startswith(_BRANCH_PREFIX) or not after.strip("0"):
        return None  # the branch was deleted
    branch = ref.removeprefix(_BRANCH_PREFIX)
    if not branch:
        raise PayloadError(f"ref {ref!r} names no branch")
    return BranchPushEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=None,
        branch=branch,
        sha=commit_id(payload, "after"),
        pusher=required(payload, "user_username", str),
        shas=pushed_commits(payload),
        pusher_id=account_id(payload, "user_id"),
    )


def _pipeline(payload: Mapping[str, Any]) -> MergeGroupEvent | None:
    """A merge train's pipeline (see the module docstring); None for any other."""
    ref = required(payload, "object_attributes.ref", str)
    train = _TRAIN_REF.fullmatch(ref)
    if train is None:
        return None
    if optional(payload, "object_attributes.source", str) != "merge_request_event":
        return None  # a branch literally named so, pushed: not a merge request's pipeline
    number = int(train.group(1))
    if required(payload, "merge_request.iid", int) != number:
        raise PayloadError(f"merge_request.iid is not {number}, the merge request of {ref}")
    status = required(payload, "object_attributes.status", str)
    if not _STATUS.fullmatch(status):
        raise PayloadError("object_attributes.status is not a status GitLab gives")
    if status == "canceling":
        return None
    base = required(payload, "merge_request.target_branch", str)
    if not base:
        raise PayloadError("merge_request.target_branch names no branch")
    return MergeGroupEvent(
        forge=FORGE,
        repo=_repo(payload),
        installation_id=None,
        action="destroyed" if status in _ENDED else "checks_requested",
        head_sha=commit_id(payload, "object_attributes.sha"),
        head_ref=ref,
        base_ref=base,
        base_sha="",  # not in the payload; nothing downstream needs it
        number=number,
        reason=_ENDED.get(status),
        sender=optional(payload, "user.username", str) or "",
        pipeline_id=required(payload, "object_attributes.id", int),
    )


_PARSERS: Final[dict[str, Callable[[Mapping[str, Any]], Event | None]]] = {
    "merge_request": _merge_request,
    "note": _note,
    "tag_push": _tag_push,
    "push": _push,  # who pushed to a branch (MRs arrive as merge_request events)
    "pipeline": _pipeline,  # a merge train's only
    # Not "release" (creating a release's tag also sends a tag_push), "build", ...
}


def parse_gitlab(event: str, payload: Mapping[str, Any]) -> Event | None:
    """The neutral event one GitLab delivery means, or None when it needs no work.

    Args:
        event: The ``X-Gitlab-Event`` header (``Merge Request Hook``, ...); the body's
            ``object_kind`` decides, so ``Service Hook`` and ``System Hook`` work too.
        payload: The request body, parsed from JSON.

    Returns:
        A ``PullRequestEvent`` (open, reopen, a push to the MR, ready, merge, close), a
        ``ReviewEvent`` (approval given or taken back), a ``CommentEvent`` (a note on a
        merge request), a ``TagEvent``, a ``BranchPushEvent`` or a ``MergeGroupEvent`` (a
        merge train's pipeline); None for everything else (other pipelines, title-only
        updates, notes on issues, deleted tags, unknown kinds).

    Raises:
        PayloadError: The delivery is one Sluice acts on, but a field it needs is missing,
            null, or of the wrong JSON type; the message names the field.
    """
    if not isinstance(payload, Mapping):
        raise PayloadError(
            f"the {event or 'GitLab'} payload should be an object, not {json_name(payload)}"
        )
    kind = payload.get("object_kind")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    parsed = parser(payload) if parser is not None else None
    if parsed is None:
        return None
    return dataclasses.replace(parsed, repo_id=repository_id(payload, "project.id"))
