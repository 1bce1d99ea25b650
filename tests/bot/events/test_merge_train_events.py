"""GitLab's merge train pipelines -> :class:`MergeGroupEvent`, on GitLab's documented
Pipeline Hook example (``tests/fixtures/webhooks/gitlab/pipeline.docs.json``) moved to a
train's ref, and on that body damaged field by field. Every other pipeline is no work."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import MergeGroupEvent, event_from_json, pr_key, supersedes
from sluice.bot.events.payload import PayloadError
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case
from tests.helpers.merge_train import train_pipeline

HOOK = "Pipeline Hook"
PROJECT = "data/warehouse"
SHA = "9a1f0e3b7c5d2a4f6e8b0c1d3e5f7a9b2c4d6e8f"


def _parse(payload: dict[str, Any]) -> MergeGroupEvent:
    event = parse_gitlab(HOOK, payload)
    assert isinstance(event, MergeGroupEvent), event
    return event


def test_a_running_train_pipeline_wants_the_checks_on_its_commit() -> None:
    event = _parse(train_pipeline(PROJECT, 7, SHA.upper(), 4242))
    assert event == MergeGroupEvent(
        forge="gitlab",
        repo=PROJECT,
        installation_id=None,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="checks_requested",
        head_sha=SHA,  # lower-cased: it names the environment and the statuses
        head_ref="refs/merge-requests/7/train",
        base_ref="main",
        base_sha="",
        number=7,
        reason=None,
        sender="carol",
        pipeline_id=4242,
    )
    assert event_from_json(event.to_json()) == event
    assert pr_key(event) == f"gitlab:{PROJECT}@{SHA}"
    assert not supersedes(event)


@pytest.mark.parametrize(
    "status", ["created", "waiting_for_resource", "preparing", "pending", "running", "manual",
               "scheduled"],
)  # fmt: skip
def test_every_status_of_a_pipeline_still_running_wants_the_checks(status: str) -> None:
    assert _parse(train_pipeline(PROJECT, 7, SHA, 4242, status=status)).action == (
        "checks_requested"
    )


@pytest.mark.parametrize(
    ("status", "reason"),
    [("success", "passed"), ("failed", "failed"), ("canceled", "canceled"),
     ("skipped", "skipped")],
)  # fmt: skip
def test_a_pipeline_that_ended_ends_the_entry(status: str, reason: str) -> None:
    event = _parse(train_pipeline(PROJECT, 7, SHA, 4242, status=status))
    assert (event.action, event.reason) == ("destroyed", reason)
    assert event.content_key() == f"merge_group:destroyed:{SHA}"


def test_a_pipeline_being_canceled_waits_for_its_canceled_hook() -> None:
    assert parse_gitlab(HOOK, train_pipeline(PROJECT, 7, SHA, 4242, status="canceling")) is None


def test_the_hooks_of_one_pipeline_share_a_key_and_another_pipeline_has_its_own() -> None:
    """GitLab sends a hook at every change of the pipeline's status (Sluice's own statuses
    change it): the first sets the statuses, the others are the same event."""
    keys = {_parse(train_pipeline(PROJECT, 7, SHA, 4242, status=s)).content_key()
            for s in ("created", "pending", "running")}  # fmt: skip
    assert keys == {f"merge_train:4242:{SHA}"}
    assert _parse(train_pipeline(PROJECT, 7, SHA, 4243)).content_key() == f"merge_train:4243:{SHA}"


def test_gitlab_s_documented_example_is_a_branch_pipeline_and_no_work() -> None:
    assert parse_gitlab(HOOK, load_case("gitlab/pipeline.docs.json")) is None


@pytest.mark.parametrize(
    "ref",
    ["main", "refs/merge-requests/7/head", "refs/merge-requests/7/merge",
     "refs/merge-requests/7/train/x", "refs/merge-requests/07/train", "refs/merge-requests/0/train",
     "xrefs/merge-requests/7/train", "refs/merge-requests//train", "refs/tags/v1"],
)  # fmt: skip
def test_other_pipelines_are_no_work(ref: str) -> None:
    payload = train_pipeline(PROJECT, 7, SHA, 4242)
    payload["object_attributes"]["ref"] = ref
    assert parse_gitlab(HOOK, payload) is None


@pytest.mark.parametrize("source", ["push", "web", "api", "trigger", "schedule", None])
def test_a_train_ref_from_another_source_is_no_work(source: str | None) -> None:
    """A branch named ``refs/merge-requests/7/train`` pushed runs a ``push`` pipeline on
    that ref: it is not GitLab's train."""
    payload = train_pipeline(PROJECT, 7, SHA, 4242)
    payload["object_attributes"]["source"] = source
    assert parse_gitlab(HOOK, payload) is None


def _damaged(path: str, value: Any) -> dict[str, Any]:
    payload = train_pipeline(PROJECT, 7, SHA, 4242)
    *parents, last = path.split(".")
    node = payload
    for part in parents:
        node = node[part]
    if value is _DROP:
        del node[last]
    else:
        node[last] = value
    return payload


_DROP = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("object_attributes.ref", None, "object_attributes.ref is null"),
        ("object_attributes.ref", 7, "object_attributes.ref should be a string, not an integer"),
        ("object_attributes.sha", _DROP, "object_attributes.sha is missing"),
        ("object_attributes.sha", "HEAD", "object_attributes.sha is not a commit id"),
        ("object_attributes.sha", "a" * 39, "object_attributes.sha is not a commit id"),
        ("object_attributes.id", _DROP, "object_attributes.id is missing"),
        ("object_attributes.id", "4242", "object_attributes.id should be an integer"),
        ("object_attributes.status", _DROP, "object_attributes.status is missing"),
        ("object_attributes.status", "running; drop", "object_attributes.status is not a status"),
        ("merge_request", None, "merge_request.iid is missing"),
        ("merge_request.iid", 8, "merge_request.iid is not 7, the merge request of refs/merge-re"),
        ("merge_request.target_branch", _DROP, "merge_request.target_branch is missing"),
        ("merge_request.target_branch", "", "merge_request.target_branch names no branch"),
        ("project.path_with_namespace", _DROP, "project.path_with_namespace is missing"),
        ("object_attributes.ref", "refs/merge-requests/7/train\x00",
         "object_attributes.ref holds a NUL character"),
    ],
)  # fmt: skip
def test_a_damaged_train_pipeline_is_refused_naming_the_field(
    path: str, value: Any, message: str
) -> None:
    with pytest.raises(PayloadError) as raised:
        parse_gitlab(HOOK, _damaged(path, value))
    assert str(raised.value).startswith(message), raised.value


def test_a_hostile_target_branch_is_carried_as_text() -> None:
    """The target branch is compared with the prod branch's name, never run or rendered
    bare (the flow shows it in a code span)."""
    name = "rel`<img src=x onerror=alert(1)>`@all"
    assert _parse(_damaged("merge_request.target_branch", name)).base_ref == name
