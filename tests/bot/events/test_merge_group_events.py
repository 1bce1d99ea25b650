"""GitHub's ``merge_group`` webhook -> :class:`MergeGroupEvent`, on GitHub's documented
example (``tests/fixtures/webhooks/github/merge_group``, from octokit/webhooks) and on
that body damaged field by field (missing, null, wrong types, values no database stores,
refs and commit ids that are not what GitHub sends)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluice.bot.events.github import PayloadError, parse_github
from sluice.bot.events.neutral import MergeGroupEvent, event_from_json, pr_key, supersedes
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case

CASE = "github/merge_group/checks_requested.payload.json"
HEAD = "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d"
BASE = "380387fbc80638b734a49e1be1c4dfec1c01b33c"


def _body(**changes: Any) -> dict[str, Any]:
    payload = load_case(CASE)
    for path, value in changes.items():
        node = payload
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value
    return payload


_DROP = object()


def _parse(payload: dict[str, Any]) -> MergeGroupEvent:
    event = parse_github("merge_group", payload)
    assert isinstance(event, MergeGroupEvent), event
    return event


def test_github_s_documented_checks_requested() -> None:
    event = _parse(load_case(CASE))
    assert event == MergeGroupEvent(
        forge="github",
        repo="octo-org/octo-repo",
        installation_id=1,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="checks_requested",
        head_sha=HEAD,  # not head_commit.id, which differs in GitHub's example
        head_ref="gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64",
        base_ref="main",  # refs/heads/ removed: compared with the prod branch's name
        base_sha=BASE,
        number=104,
        reason=None,
        sender="Codertocat",
    )
    assert event_from_json(event.to_json()) == event
    # Every delivery of checks_requested runs (its checks are set again); one group's jobs
    # queue under its head, never under prod's key, and supersede nothing.
    assert event.content_key() is None
    assert pr_key(event) == f"github:octo-org/octo-repo@{HEAD}"
    assert not supersedes(event)


@pytest.mark.parametrize("reason", ["merged", "dequeued", "invalidated", None])
def test_destroyed_names_its_reason_and_is_handled_once(reason: str | None) -> None:
    payload = _body(action="destroyed", reason=reason)
    if reason is None:
        del payload["reason"]  # GitHub's schema makes it optional
    event = _parse(payload)
    assert event.action == "destroyed" and event.reason == reason
    assert event.content_key() == f"merge_group:destroyed:{HEAD}"
    assert event_from_json(event.to_json()) == event


@pytest.mark.parametrize("action", ["requested", "completed", "made-up", ""])
def test_other_actions_are_no_work(action: str) -> None:
    assert parse_github("merge_group", _body(action=action)) is None


def test_ids_and_refs_are_read_as_github_writes_them() -> None:
    upper = _parse(_body(**{"merge_group.head_sha": HEAD.upper()}))
    assert upper.head_sha == HEAD  # one spelling names the environment and the checks
    sha256 = "ab" * 32
    assert _parse(_body(**{"merge_group.head_sha": sha256})).head_sha == sha256
    bare = _parse(_body(**{"merge_group.base_ref": "main", "merge_group.head_ref": "topic"}))
    assert bare.base_ref == "main" and bare.head_ref == "topic"
    assert bare.number is None  # not a queue branch: no PR named


@pytest.mark.parametrize(
    "head_ref",
    [
        "refs/heads/gh-readonly-queue/main/pr-0-929f8209d40f77f4abc622a499c93a83babdbe64",
        "refs/heads/gh-readonly-queue/main/pr-104-notasha",
        "refs/heads/gh-readonly-queue/main/pr--5-929f8209d40f77f4abc622a499c93a83babdbe64",
        "refs/heads/gh-readonly-queue/main/pr-"
        + "9" * 40
        + "-929f8209d40f77f4abc622a499c93a83babdbe64",
        "refs/heads/feature/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64",
        "refs/heads/gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64\n",
    ],
)
def test_a_head_ref_that_is_no_queue_branch_names_no_pr(head_ref: str) -> None:
    """The PR number is read only from GitHub's queue branch form, bounded (a PR number of
    40 digits would overflow the ledger's columns); anything else names none."""
    assert _parse(_body(**{"merge_group.head_ref": head_ref})).number is None


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("merge_group", _DROP, "merge_group.head_ref is missing"),
        ("merge_group", None, "merge_group.head_ref is missing"),
        ("merge_group", "x", "merge_group should be an object, not a string"),
        ("merge_group", [], "merge_group should be an object, not an array"),
        ("merge_group.head_sha", _DROP, "merge_group.head_sha is missing"),
        ("merge_group.head_sha", None, "merge_group.head_sha is null"),
        ("merge_group.head_sha", 7, "merge_group.head_sha should be a string, not an integer"),
        ("merge_group.head_sha", "HEAD", "merge_group.head_sha is not a commit id"),
        ("merge_group.head_sha", "../../etc", "merge_group.head_sha is not a commit id"),
        ("merge_group.head_sha", HEAD[:39], "merge_group.head_sha is not a commit id"),
        ("merge_group.head_sha", HEAD + "\x00", "merge_group.head_sha holds a NUL"),
        ("merge_group.head_ref", _DROP, "merge_group.head_ref is missing"),
        ("merge_group.head_ref", True, "merge_group.head_ref should be a string, not true"),
        ("merge_group.head_ref", "refs/heads/", "merge_group.head_ref names no branch"),
        ("merge_group.base_ref", _DROP, "merge_group.base_ref is missing"),
        ("merge_group.base_ref", {}, "merge_group.base_ref should be a string, not an object"),
        ("merge_group.base_ref", "", "merge_group.base_ref names no branch"),
        ("merge_group.base_ref", "main\ud800", "merge_group.base_ref is not valid Unicode"),
        ("merge_group.base_sha", _DROP, "merge_group.base_sha is missing"),
        ("merge_group.base_sha", 1.5, "merge_group.base_sha should be a string, not float"),
        ("merge_group.base_sha", "zz" * 20, "merge_group.base_sha is not a commit id"),
        ("repository", _DROP, "repository.full_name is missing"),
        ("repository.full_name", 3, "repository.full_name should be a string, not an integer"),
        ("installation.id", "1", "installation.id should be an integer, not a string"),
        ("installation.id", 2**64, "installation.id is out of range"),
        ("sender.login", [], "sender.login should be a string, not an array"),
        ("action", None, "action is null"),
    ],
)
def test_damaged_fields_are_payload_errors_naming_the_field(
    path: str, value: Any, message: str
) -> None:
    with pytest.raises(PayloadError) as caught:
        parse_github("merge_group", _body(**{path: value}))
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (7, "reason should be a string, not an integer"),
        ([], "reason should be a string, not an array"),
        ("Merged; DROP TABLE", "reason is not a reason GitHub gives"),
        ("x" * 41, "reason is not a reason GitHub gives"),
        ("", "reason is not a reason GitHub gives"),
    ],
)
def test_a_destroyed_reason_is_a_lower_case_word(reason: Any, message: str) -> None:
    with pytest.raises(PayloadError) as caught:
        parse_github("merge_group", _body(action="destroyed", reason=reason))
    assert message in caught.value.message


def test_fields_sluice_does_not_read_may_be_anything() -> None:
    """head_commit (message, author, tree) and organization are not read: damaged, the
    event is the same."""
    pristine = _parse(load_case(CASE))
    for value in (None, "x", 7, [], {}):
        payload = _body(**{"merge_group.head_commit": value, "organization": value})
        assert _parse(payload) == pristine
    assert _parse(_body(sender=_DROP)).sender == ""
    assert _parse(_body(installation=_DROP)).installation_id is None


def test_the_destroyed_reason_is_read_only_when_destroyed() -> None:
    event = _parse(_body(reason="Something Else"))  # checks_requested has no reason
    assert event.reason is None


def test_every_damaged_field_gives_the_event_or_a_payload_error() -> None:
    """Each field of the body, and of its destroyed form, replaced in turn: never another
    exception, never an event whose commit ids are not commit ids."""
    for action in ("checks_requested", "destroyed"):
        payload = _body(action=action)
        payload["reason"] = "dequeued"
        pristine = copy.deepcopy(payload)
        slots = [
            (payload, "action"),
            (payload, "reason"),
            (payload, "sender"),
            (payload, "repository"),
            (payload["repository"], "full_name"),
            (payload, "merge_group"),
        ] + [(payload["merge_group"], key) for key in list(payload["merge_group"])]
        for container, key in slots:
            original = container[key]
            for replacement in (_DROP, None, "x", 7, True, [], {}, "A" * 40, "\x00"):
                if replacement is _DROP:
                    del container[key]
                else:
                    container[key] = replacement
                try:
                    event = parse_github("merge_group", payload)
                except PayloadError:
                    pass
                else:
                    if event is not None:
                        assert isinstance(event, MergeGroupEvent)
                        assert len(event.head_sha) in (40, 64) and event.head_sha.islower()
                        assert len(event.base_sha) in (40, 64) and event.base_sha.islower()
                finally:
                    container[key] = original
        assert payload == pristine
