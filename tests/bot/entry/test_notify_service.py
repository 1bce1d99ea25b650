"""Chat notifications through the running service (issue 46, point 3): ``SLUICE_NOTIFY``
read from its settings, a merge delivered over HTTP promotes prod and the repository's
Slack webhook hears of it once, at the wire (``responses``, as GitHub's REST API is),
counted in ``/metrics``; the webhook's URL is in no log line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from tests.helpers.cases import realcase
from tests.helpers.github_service import SECRET, TOKEN, Service
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = "Codertocat/Hello-World"
SLACK = "https://hooks.slack.com/services/T0/B0/s3cretServiceSlack"
MERGE = "f" * 40
CONFIG = "sluice:\n  project: demo\n"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Service, responses.RequestsMock]]:
    notify = {"codertocat/*": [{"kind": "slack", "url": SLACK, "events": ["promotion"]}]}
    settings = ServiceSettings(
        webhook_secret=SECRET, github_token=TOKEN, workdir=tmp_path / "work",
        database_url=f"sqlite:///{tmp_path / 'state.db'}", job_lease_seconds=30,
        github_request_interval=0, github_write_interval=0, prod_branch="master",
        notify=json.dumps(notify),
    )  # type: ignore[arg-type]  # fmt: skip
    github = FakeGitHub(repo=REPO)
    github.files[("master", "config.yaml")] = CONFIG
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    (src / "config.yaml").write_text(CONFIG)
    github.trees[MERGE] = tarball(src, f"repo-{MERGE[:7]}")
    github.refs["master"] = MERGE
    github.publish(MERGE, src)
    github.publish("master", src)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        mock.post(SLACK, body="ok")
        with TestClient(create_app(settings)) as client:
            yield Service(client, github, settings), mock


def test_a_merge_s_promotion_is_told_in_slack_once(
    running: tuple[Service, responses.RequestsMock], caplog: pytest.LogCaptureFixture
) -> None:
    service, mock = running
    payload = realcase("github/pull_request/woodpecker__HookPullRequestMerged.json", REPO, **{
        "pull_request.merge_commit_sha": MERGE, "pull_request.base.ref": "master",
    })  # fmt: skip
    with caplog.at_level(logging.INFO):
        for _ in range(2):  # the same merge again, under a new delivery id
            assert service.deliver("pull_request", payload).status_code == 202
            service.idle()
    told = [c for c in mock.calls if c.request.url == SLACK]
    assert len(told) == 1, [c.request.url for c in mock.calls][-20:]
    text = json.loads(told[0].request.body or b"{}")["blocks"][0]["text"]["text"]
    assert text.startswith("*Prod promotion*\nRepository: `Codertocat/Hello-World`")
    metrics = service.client.get("/metrics").text
    assert 'sluice_notifications_total{event="promotion",outcome="sent"} 1.0' in metrics
    assert "s3cretServiceSlack" not in caplog.text
