"""``POST /webhooks/gitlab`` through the running service, with python-gitlab at the wire.

Every real GitLab delivery in tests/fixtures/webhooks/gitlab is replayed with the token
header, and what the service posts to ``FakeGitLab`` (or that it posts nothing) is
asserted. No Spark: the merge requests change no model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from tests.helpers.cases import case_paths, load_case
from tests.helpers.gitlab_service import API_TOKEN, TOKEN, GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab


def serve(root: Path, gitlab: FakeGitLab, **more: Any) -> Callable[[], Iterator[GitLabService]]:
    def run() -> Iterator[GitLabService]:
        settings = gitlab_settings(root, **more)
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            gitlab.install(mock)
            with TestClient(create_app(settings)) as client:
                yield GitLabService(client, gitlab, settings)

    return run


@pytest.fixture
def service(tmp_path: Path) -> Iterator[GitLabService]:
    yield from serve(tmp_path, FakeGitLab(adopt_project=True))()


def _empty_project(root: Path) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("sluice:\n  project: demo\n")
    return root


# -- authenticity and dedupe -----------------------------------------------------------------


def test_a_missing_or_wrong_token_gets_401_before_the_body_is_read(
    service: GitLabService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    body = b'{"object_kind": "merge_request", "BODY-TEXT-NOT-FOR-LOGS": 1'  # not even JSON
    for token in (None, "", "wrong", TOKEN + "x", TOKEN[:-1], "glwt-s3cr3t-webhook-tok\\xe9n"):
        response = service.deliver("Merge Request Hook", body, token=token)
        assert response.status_code == 401, (token, response.text)
        said = response.json()["error"]
        assert said.startswith("missing or wrong X-Gitlab-Token: ") and TOKEN not in said
        assert "`sluice gitlab-webhook-token <project id>`" in said
    assert "BODY-TEXT-NOT-FOR-LOGS" not in caplog.text
    assert TOKEN not in caplog.text
    assert service.counts() == {} and service.gitlab.requests == []


def test_gitlab_deliveries_are_refused_when_no_gitlab_secret_is_set(tmp_path: Path) -> None:
    run = serve(tmp_path, FakeGitLab(), gitlab_webhook_secret=None, webhook_secret="gh")
    for running in run():
        payload = load_case("gitlab/merge_request_open.json")
        assert running.deliver("Merge Request Hook", payload, token="").status_code == 401
        assert running.deliver("Merge Request Hook", payload, token="gh").status_code == 401


def test_the_same_delivery_is_stored_once_by_idempotency_key_then_event_uuid_then_body(
    service: GitLabService,
) -> None:
    tag = load_case("gitlab/tag_push.json")
    first = service.deliver("Tag Push Hook", tag, key="k-1")
    assert first.status_code == 202 and first.json()["delivery"] == "gitlab:k-1"
    again = service.deliver("Tag Push Hook", tag, key="k-1")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    by_uuid = service.deliver("Tag Push Hook", tag, key=None, event_uuid="e-1")
    assert by_uuid.status_code == 202 and by_uuid.json()["delivery"] == "gitlab:e-1"
    assert service.deliver("Tag Push Hook", tag, key=None, event_uuid="e-1").status_code == 200
    bare = service.deliver("Tag Push Hook", tag, key=None)
    assert bare.status_code == 202 and bare.json()["delivery"].startswith("gitlab:sha256:")
    assert service.deliver("Tag Push Hook", tag, key=None).status_code == 200
    service.idle()
    assert service.counts() == {"done": 3}


def test_malformed_bodies_get_400_and_unknown_kinds_204(service: GitLabService) -> None:
    # A body naming no project.id has no project whose token it could carry: 401.
    assert service.deliver("Merge Request Hook", b"{not json").status_code == 401
    assert service.deliver("Merge Request Hook", b"[1, 2]").status_code == 401
    deep = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    assert service.deliver("Merge Request Hook", deep).status_code == 401
    assert service.deliver("Merge Request Hook", b'{"object_kind": "\xff"}').status_code == 401
    big = b" " * (service.settings.max_body_bytes + 1)
    assert service.deliver("Merge Request Hook", big).status_code == 413
    missing = service.deliver("Merge Request Hook", {"object_kind": "merge_request",
                                                     "project": {"id": 9},
                                                     "object_attributes": {"action": "open"}})  # fmt: skip
    assert missing.status_code == 400
    assert missing.json() == {"error": "object_attributes.iid is missing"}
    for kind in ("wiki_page", "feature_flag", "emoji", "deployment"):
        assert (
            service.deliver("Some Hook", {"object_kind": kind, "project": {"id": 9}}).status_code
            == 204
        )
    assert service.counts() == {}


# -- every real delivery -----------------------------------------------------------------------

# What each real delivery gets, and what the service then does on GitLab: "mr" = the
# sticky note and four statuses on the head; "fork" = a note saying why nothing is built;
# "gate" = sluice/approval waits for a plan; "quiet" = nothing posted (a close with no
# environment, a merge into a branch that is not prod); "promote" = sluice/deploy and a
# deployment record; "tag" = nothing posted (the config does not promote on tags);
# "none" = no request at all.
REPLAY: dict[str, tuple[str, int, str]] = {
    "merge_request_approved.json": ("Merge Request Hook", 202, "gate"),
    "merge_request_close.json": ("Merge Request Hook", 202, "quiet"),
    "merge_request_merge.docs-minimal.json": ("Merge Request Hook", 401, "none"),  # no project.id
    "merge_request_merge.drone-go-scm.json": ("Merge Request Hook", 202, "quiet"),  # into master
    "merge_request_merge.json": ("Merge Request Hook", 202, "promote"),
    "merge_request_open.docs.json": ("Merge Request Hook", 202, "mr"),
    "merge_request_open.json": ("Merge Request Hook", 202, "mr"),
    "merge_request_open_fork.json": ("Merge Request Hook", 202, "fork"),
    "merge_request_update.go-gitlab.json": ("Merge Request Hook", 202, "mr"),
    "merge_request_update.json": ("Merge Request Hook", 202, "mr"),
    "merge_request_update_labels.json": ("Merge Request Hook", 204, "none"),
    "merge_request_update_title_description.json": ("Merge Request Hook", 204, "none"),
    "note_merge_request.docs.json": ("Note Hook", 202, "none"),  # not a command
    "note_merge_request.json": ("Note Hook", 202, "none"),  # "atlantis plan"
    "note_merge_request_diffnote.json": ("Note Hook", 202, "none"),
    "pipeline.docs.json": ("Pipeline Hook", 204, "none"),
    "push.docs.json": ("Push Hook", 202, "none"),  # who pushed: a ledger row, no GitLab call
    "push.json": ("Push Hook", 202, "none"),  # who pushed: a ledger row, no GitLab call
    "push_after_merge.drone-go-scm.json": (
        "Push Hook",
        202,
        "none",
    ),  # who pushed: a ledger row, no GitLab call
    "push_branch_delete.drone-go-scm.json": ("Push Hook", 204, "none"),
    "release.docs.json": ("Release Hook", 204, "none"),
    "release.json": ("Release Hook", 204, "none"),
    "tag_push.docs.json": ("Tag Push Hook", 202, "tag"),
    "tag_push.json": ("Tag Push Hook", 202, "tag"),
    "tag_push_delete.drone-go-scm.json": ("Tag Push Hook", 204, "none"),
}


def test_every_real_gitlab_delivery_is_listed() -> None:
    names = {path.name for path in case_paths("gitlab/*.json")}
    assert names == set(REPLAY)


@pytest.mark.parametrize("name", sorted(REPLAY))
def test_real_gitlab_delivery(service: GitLabService, tmp_path: Path, name: str) -> None:
    event, status, effect = REPLAY[name]
    payload = load_case(f"gitlab/{name}")
    gitlab = service.gitlab
    attrs = payload.get("object_attributes") or {}
    head = (attrs.get("last_commit") or {}).get("id")
    iid = attrs.get("iid")
    if isinstance(iid, int) and head:
        gitlab.add_mr(iid, sha=head, source_branch=attrs["source_branch"],
                      target_branch=attrs["target_branch"], author="someone",
                      fork="fork" in name)  # fmt: skip
        gitlab.add_tree(head, _empty_project(tmp_path / "src"))
        if attrs.get("merge_commit_sha"):
            gitlab.add_tree(attrs["merge_commit_sha"], tmp_path / "src")

    response = service.deliver(event, payload)
    assert response.status_code == status, response.text
    service.idle(timeout=600)  # a first promotion runs one spark-submit to record prod
    counts = service.counts()
    assert counts.get("failed", 0) == 0, counts
    if effect == "none":  # GitLab asked who the project is (the delivery's id), no more
        assert set(gitlab.requests) <= {("GET", f"/projects/{gitlab.project_id}")}
        return
    if effect == "tag":
        # Without `deploy.on: tag` in the tagged commit's config, a tag promotes nothing.
        assert gitlab.statuses == [] and gitlab.deployments == [] and gitlab.notes == {}
        return
    assert isinstance(iid, int) and head
    if effect == "mr":
        statuses = gitlab.statuses_on(head)
        assert {n: s["state"] for n, s in statuses.items()} == {
            "sluice/tests": "success", "sluice/pr-environment": "success",
            "sluice/prod-plan": "success", "sluice/approval": "success",
        }  # fmt: skip
        assert statuses["sluice/pr-environment"]["description"] == "This PR changes no model"
        [note] = gitlab.bot_notes(iid)
        assert "no model changed" in note["body"] and note["body"].startswith("<!-- sluice:")
        assert statuses["sluice/tests"]["target_url"].endswith(f"#note_{note['id']}")
    elif effect == "fork":
        [note] = gitlab.bot_notes(iid)
        assert "comes from a fork" in note["body"]
        assert gitlab.statuses_on(head) == {}
    elif effect == "gate":  # no plan recorded for this head yet
        assert gitlab.statuses_on(head)["sluice/approval"]["state"] == "running"
    elif effect == "quiet":
        assert gitlab.notes == {} and gitlab.statuses == [] and gitlab.deployments == []
    elif effect == "promote":
        merge = attrs["merge_commit_sha"]
        deploy = gitlab.statuses_on(merge)["sluice/deploy"]
        assert deploy["state"] == "success", deploy["description"]
        [deployment] = gitlab.deployments
        assert (deployment["sha"], deployment["environment"]) == (merge, "prod")
        assert deployment["status"] == "success"
    assert API_TOKEN not in json.dumps([gitlab.notes, gitlab.statuses])


def test_health_and_metrics_count_gitlab_deliveries(service: GitLabService) -> None:
    service.deliver("Push Hook", load_case("gitlab/push_branch_delete.drone-go-scm.json"))
    service.deliver("Push Hook", b"{}", token="wrong")
    text = service.client.get("/metrics").text
    assert 'sluice_deliveries_total{event="Push Hook",outcome="ignored"} 1' in text
    assert 'sluice_deliveries_total{event="Push Hook",outcome="unauthorized"} 1' in text
