"""GitLab payloads -> neutral events, on real deliveries captured by other projects.

Every file under ``tests/fixtures/webhooks/gitlab/`` is parsed; HEADERS.md there says where the
header names and the payload traps come from.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import (
    CommentEvent,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
    event_from_json,
    pr_key,
)
from sluice.bot.events.payload import PayloadError
from tests.helpers.cases import CASE_REPOSITORY_ID, case_paths, load_case

MR, NOTE, TAG = "Merge Request Hook", "Note Hook", "Tag Push Hook"

# Each real payload: the X-Gitlab-Event it arrives with, and the event kind it must become
# (None: no work).
EXPECTED: dict[str, tuple[str, str | None]] = {
    "merge_request_approved.json": (MR, "review"),
    "merge_request_close.json": (MR, "pull_request"),
    "merge_request_merge.drone-go-scm.json": (MR, "pull_request"),
    "merge_request_merge.json": (MR, "pull_request"),
    "merge_request_open.docs.json": (MR, "pull_request"),
    "merge_request_open.json": (MR, "pull_request"),
    "merge_request_open_fork.json": (MR, "pull_request"),
    "merge_request_update.go-gitlab.json": (MR, "pull_request"),
    "merge_request_update.json": (MR, "pull_request"),
    "merge_request_update_labels.json": (MR, None),
    "merge_request_update_title_description.json": (MR, None),
    "note_merge_request.docs.json": (NOTE, "comment"),
    "note_merge_request.json": (NOTE, "comment"),
    "note_merge_request_diffnote.json": (NOTE, "comment"),
    "pipeline.docs.json": ("Pipeline Hook", None),
    "push.docs.json": ("Push Hook", "branch_push"),
    "push.json": ("Push Hook", "branch_push"),
    "push_after_merge.drone-go-scm.json": ("Push Hook", "branch_push"),
    "push_branch_delete.drone-go-scm.json": ("Push Hook", None),
    "release.docs.json": ("Release Hook", None),
    "release.json": ("Release Hook", None),
    "tag_push.docs.json": (TAG, "tag"),
    "tag_push.json": (TAG, "tag"),
    "tag_push_delete.drone-go-scm.json": (TAG, None),
}
# GitLab's docs example has keys with trailing spaces ("iid "): refused, naming the field.
BROKEN = {"merge_request_merge.docs-minimal.json": "object_attributes.iid is missing"}


def test_every_real_payload_is_listed() -> None:
    names = {path.name for path in case_paths("gitlab/*.json")}
    assert names == set(EXPECTED) | set(BROKEN)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_payload_kind_and_round_trip(name: str) -> None:
    header, kind = EXPECTED[name]
    event = parse_gitlab(header, load_case(f"gitlab/{name}"))
    assert (event.kind if event else None) == kind
    if event is not None:
        assert event.forge == "gitlab"
        assert event_from_json(event.to_json()) == event


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_real_payload_names_the_field(name: str) -> None:
    with pytest.raises(PayloadError, match=BROKEN[name]):
        parse_gitlab(MR, load_case(f"gitlab/{name}"))


def test_open_carries_the_mr() -> None:
    event = parse_gitlab(MR, load_case("gitlab/merge_request_open.json"))
    assert isinstance(event, PullRequestEvent)
    assert event == PullRequestEvent(
        forge="gitlab", repo="demoaccount2-commits-group/test_ci_tmp", installation_id=None, repo_id=CASE_REPOSITORY_ID,
        action="opened", number=3, head_sha="2f7670508b771e7e77839402be8b34b13787aba8",
        head_ref=event.head_ref, base_ref=event.base_ref, base_sha="", author="real6543",
        draft=False, fork=False, merged=False, merge_sha=None, title=event.title,
        updated_ms=1754430507000,  # object_attributes.updated_at 2025-08-05 21:48:27 UTC
        pusher="real6543",  # user.username: who opened it pushed its head
        pusher_id=4575606, author_id=4575606,  # user.id, object_attributes.author_id
    )  # fmt: skip
    assert (event.head_ref, event.base_ref) == ("real6543-main-patch-42541", "main")
    assert pr_key(event) == "gitlab:demoaccount2-commits-group/test_ci_tmp#3"


def test_push_to_the_mr_is_a_synchronize_and_the_author_is_not_guessed() -> None:
    event = parse_gitlab(MR, load_case("gitlab/merge_request_update.json"))
    assert isinstance(event, PullRequestEvent)
    assert (event.action, event.number) == ("synchronize", 3)
    assert event.head_sha == "c136499ec574e1034b24c5d306de9acda3005367"
    payload = load_case("gitlab/merge_request_update.json")
    payload["user"]["id"] = payload["object_attributes"]["author_id"] + 1  # someone else pushed
    other = parse_gitlab(MR, payload)
    assert isinstance(other, PullRequestEvent) and other.author == ""


def test_fork_is_told_by_the_source_project() -> None:
    event = parse_gitlab(MR, load_case("gitlab/merge_request_open_fork.json"))
    assert isinstance(event, PullRequestEvent) and event.fork  # same id, other path
    assert event.head_owner == "sourceorg"  # the fork's namespace pushed to it
    same = parse_gitlab(MR, load_case("gitlab/merge_request_open.json"))
    assert isinstance(same, PullRequestEvent) and not same.fork
    assert same.head_owner is None
    payload = load_case("gitlab/merge_request_open.json")
    payload["object_attributes"]["source_project_id"] += 1
    moved = parse_gitlab(MR, payload)
    assert isinstance(moved, PullRequestEvent) and moved.fork


def test_merge_and_close() -> None:
    merged = parse_gitlab(MR, load_case("gitlab/merge_request_merge.json"))
    assert isinstance(merged, PullRequestEvent)
    assert (merged.action, merged.merged) == ("closed", True)
    assert merged.merge_sha == "43411b53d670203e887c4985c4e58e8e6b7c109e"
    assert pr_key(merged) == "gitlab:anbraten/woodpecker-test:prod"
    closed = parse_gitlab(MR, load_case("gitlab/merge_request_close.json"))
    assert isinstance(closed, PullRequestEvent)
    assert (closed.action, closed.merged, closed.merge_sha) == ("closed", False, None)
    payload = load_case("gitlab/merge_request_merge.json")
    payload["object_attributes"]["merge_commit_sha"] = None  # a fast-forward merge
    ff = parse_gitlab(MR, payload)
    assert isinstance(ff, PullRequestEvent) and ff.merge_sha == ff.head_sha


def test_approval_binds_to_the_head_it_was_given_on() -> None:
    event = parse_gitlab(MR, load_case("gitlab/merge_request_approved.json"))
    assert event == ReviewEvent(
        forge="gitlab", repo="anbraten/woodpecker", installation_id=None, repo_id=CASE_REPOSITORY_ID, action="submitted",
        number=3, reviewer="anbraten", state="APPROVED",
        commit_sha="c136499ec574e1034b24c5d306de9acda3005367",
        head_sha="c136499ec574e1034b24c5d306de9acda3005367",
        # No approval id: the MR's updated_at (moved by the approval) tells approvals apart.
        submitted_ms=1642434459000,  # 2022-01-17 15:47:39 UTC
        reviewer_id=2251488,  # user.id: the approver's account, whatever their username
    )  # fmt: skip
    for action, state in (("approval", "APPROVED"), ("unapproved", "DISMISSED"),
                          ("unapproval", "DISMISSED")):  # fmt: skip
        payload = load_case("gitlab/merge_request_approved.json")
        payload["object_attributes"]["action"] = action
        review = parse_gitlab(MR, payload)
        assert isinstance(review, ReviewEvent) and review.state == state


def test_draft_marked_ready_is_built() -> None:
    payload = load_case("gitlab/merge_request_update_title_description.json")
    payload["changes"] = {"draft": {"previous": True, "current": False}}
    event = parse_gitlab(MR, payload)
    assert isinstance(event, PullRequestEvent) and event.action == "ready_for_review"
    payload["changes"] = {"draft": {"previous": False, "current": True}}
    assert parse_gitlab(MR, payload) is None  # back to draft: nothing to build


def test_notes() -> None:
    event = parse_gitlab(NOTE, load_case("gitlab/note_merge_request.docs.json"))
    assert event == CommentEvent(
        forge="gitlab", repo="gitlab-org/gitlab-test", installation_id=None, repo_id=CASE_REPOSITORY_ID, action="created",
        number=1, comment_id=1244, author="root", body="This MR needs work.",
        created_ms=1431886896000,  # object_attributes.created_at 2015-05-17 18:21:36 UTC
        author_id=1,  # user.id
    )  # fmt: skip
    legacy = parse_gitlab(NOTE, load_case("gitlab/note_merge_request.json"))  # no action
    assert isinstance(legacy, CommentEvent) and legacy.action == "created"
    assert legacy.body == "atlantis plan"
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["object_attributes"]["action"] = "update"
    edited = parse_gitlab(NOTE, payload)
    assert isinstance(edited, CommentEvent) and edited.action == "edited"
    # An update's user is who made it; a creation has no editor.
    assert (edited.editor, edited.editor_id) == ("root", 1)
    assert event.editor is None and legacy.editor is None


@pytest.mark.parametrize("noteable", ["Issue", "Commit", "Snippet"])
def test_notes_elsewhere_are_ignored(noteable: str) -> None:
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["object_attributes"]["noteable_type"] = noteable
    assert parse_gitlab(NOTE, payload) is None


def test_system_notes_are_ignored() -> None:
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["object_attributes"]["system"] = True
    assert parse_gitlab(NOTE, payload) is None


def test_tags() -> None:
    annotated = parse_gitlab(TAG, load_case("gitlab/tag_push.json"))
    assert isinstance(annotated, TagEvent)
    assert (annotated.tag, annotated.source) == ("v22", "push")
    assert annotated.sha == "16862e368d8ab812e48833b741dad720d6e2cb7f"  # the commit, not the tag
    assert pr_key(annotated) == "gitlab:test/woodpecker:prod"
    docs = parse_gitlab(TAG, load_case("gitlab/tag_push.docs.json"))
    assert isinstance(docs, TagEvent) and docs.tag == "v1.0.0"


def test_service_hook_is_read_by_object_kind() -> None:
    event = parse_gitlab("Service Hook", load_case("gitlab/merge_request_open.json"))
    assert isinstance(event, PullRequestEvent) and event.action == "opened"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"object_attributes.iid": "3"}, "object_attributes.iid should be an integer"),
        ({"object_attributes.last_commit": None}, "object_attributes.last_commit.id is missing"),
        ({"project": []}, "project should be an object"),
        ({"object_attributes.target_branch": 7}, "target_branch should be a string"),
    ],
)
def test_bad_fields_are_named(change: dict[str, Any], message: str) -> None:
    payload = load_case("gitlab/merge_request_open.json")
    for path, value in change.items():
        node = payload
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    with pytest.raises(PayloadError, match=message):
        parse_gitlab(MR, payload)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Found by tests/fuzz: text and numbers JSON carries but the state database refuses.
        ({"project.path_with_namespace": "g/\ud83d"}, "path_with_namespace is not valid Unicode"),
        ({"object_attributes.last_commit.id": "\x00"}, "last_commit.id holds a NUL"),
        ({"object_attributes.iid": 2**64}, "object_attributes.iid is out of range"),
    ],
)
def test_values_no_database_stores_are_refused(change: dict[str, Any], message: str) -> None:
    test_bad_fields_are_named(change, message)


@pytest.mark.parametrize("body", [[], "x", 3, None])
def test_non_objects_are_refused(body: Any) -> None:
    with pytest.raises(PayloadError, match="should be an object"):
        parse_gitlab(MR, body)


def test_unknown_kinds_need_no_work() -> None:
    payload = copy.deepcopy(load_case("gitlab/merge_request_open.json"))
    for kind in ("wiki_page", "deployment", "", None, 7):
        payload["object_kind"] = kind
        assert parse_gitlab("Wiki Page Hook", payload) is None


def test_both_time_forms_gitlab_sends_are_read() -> None:
    docs = parse_gitlab(MR, load_case("gitlab/merge_request_open.docs.json"))  # ISO 8601
    real = parse_gitlab(MR, load_case("gitlab/merge_request_open.json"))  # "... UTC"
    assert isinstance(docs, PullRequestEvent) and docs.updated_ms == 1386091414000
    assert isinstance(real, PullRequestEvent) and real.updated_ms == 1754430507000
    payload = load_case("gitlab/merge_request_open.json")
    del payload["object_attributes"]["updated_at"]  # older GitLab: no time, no refusal
    timeless = parse_gitlab(MR, payload)
    assert isinstance(timeless, PullRequestEvent) and timeless.updated_ms is None
