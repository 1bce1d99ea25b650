"""A GitLab merge train's Pipeline Hook through the running service, python-gitlab at the
wire (``FakeGitLab``): a hook without the webhook's token, or with another, is refused
before anything is queued, as every GitLab hook is; a signed one gets Sluice's statuses
into the train's pipeline (its ref and id), once per pipeline however many hooks GitLab
sends for it. No Spark: the project changes no model (the flow's cases, with models,
are ``tests/bot/flow/test_merge_train_flow.py``'s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.flow.ledger import Ledger
from tests.helpers.gitlab_service import TOKEN, GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.merge_train import train_pipeline

PROJECT = "data/warehouse"
TRAIN = "5d7c2a9e31f04b6a8c2e7d1f9b3a5c7e0f2d4b6a"
REF = "refs/merge-requests/7/train"
HOOK = "Pipeline Hook"
CHECKS = {"sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[GitLabService]:
    gitlab = FakeGitLab(project=PROJECT)
    src = tmp_path / "train"
    (src / "models").mkdir(parents=True)
    (src / "config.yaml").write_text("sluice:\n  project: demo\n")
    gitlab.add_tree(TRAIN, src)
    settings = gitlab_settings(tmp_path)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        gitlab.install(mock)
        with TestClient(create_app(settings)) as client:
            yield GitLabService(client, gitlab, settings)


@pytest.mark.parametrize("token", [None, "", "glwt-guessed", TOKEN + " "])
def test_a_train_pipeline_hook_without_the_webhook_s_token_is_refused(
    service: GitLabService, token: str | None
) -> None:
    """Whoever can reach the service could otherwise say which commit a train holds:
    refused with 401 before the body is read, nothing queued, nothing asked of GitLab."""
    response = service.deliver(HOOK, train_pipeline(PROJECT, 7, TRAIN, 4242), token=token)
    assert response.status_code == 401
    assert service.counts() == {} and service.gitlab.requests == []


def test_a_signed_train_pipeline_gets_the_statuses_into_its_pipeline_once(
    service: GitLabService,
) -> None:
    gitlab = service.gitlab
    for status in ("created", "pending", "running"):  # a hook at every status change
        response = service.deliver(HOOK, train_pipeline(PROJECT, 7, TRAIN, 4242, status=status))
        assert response.status_code == 202, response.text
    service.idle()
    assert service.counts() == {"done": 3}
    latest = gitlab.statuses_on(TRAIN)
    assert {name: s["state"] for name, s in latest.items()} == dict.fromkeys(CHECKS, "success")
    # Every status went into the train's pipeline, on its ref, and was set once: queued,
    # then its outcome (the build's running in between), whichever hook came first.
    posted = [s for s in gitlab.statuses if s["sha"] == TRAIN]
    assert {(s["ref"], s["pipeline_id"]) for s in posted} == {(REF, 4242)}
    assert len([s for s in posted if s["state"] == "pending"]) == len(CHECKS)

    response = service.deliver(HOOK, train_pipeline(PROJECT, 7, TRAIN, 4242, status="success"))
    assert response.status_code == 202
    service.idle()
    ledger = Ledger(service.settings.state_url())
    try:
        rows = [r for r in ledger.entries(repo=f"gitlab:{PROJECT}") if r.kind == "merge queue"]
    finally:
        ledger.close()
    assert [(r.outcome, r.ref, r.actor) for r in rows] == [("group passed", "#7", "carol")]
