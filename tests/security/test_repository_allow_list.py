"""SLUICE_REPOSITORIES: the service serves the repositories it is for, and refuses the rest.

Without a list, any repository that can sign a delivery with the webhook secret (every
repository an App is installed on, every project given the GitLab token) is accepted, and
the state belongs to the first one worked for (``test_one_repository.py``). With ``SLUICE_REPOSITORIES`` set, a delivery from
another repository gets 403 (a JSON body naming the repository and the setting) before
anything is stored, and is logged; unset, the service says so at start-up. Real payloads
from tests/fixtures/webhooks, signed as the forges sign them.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import JanitorEvent, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.errors import ConfigError
from tests.helpers.cases import load_case, realcase
from tests.helpers.github_service import SECRET, sign
from tests.helpers.gitlab_service import TOKEN as GITLAB_TOKEN
from tests.helpers.gitlab_service import project_token

OPENED = "github/pull_request/opened.payload.json"
SERVED = "acme/warehouse"


def _settings(tmp_path: Path, repositories: str | None, **more: Any) -> ServiceSettings:
    values: dict[str, Any] = dict(
        webhook_secret=SECRET, gitlab_webhook_secret=GITLAB_TOKEN, workdir=tmp_path / "work",
        database_url=f"sqlite:///{tmp_path / 'state.db'}",
    )  # fmt: skip
    if repositories is not None:
        values["repositories"] = repositories
    values.update(more)
    return ServiceSettings(**values)


def _github(client: TestClient, payload: dict[str, Any], event: str = "pull_request") -> Any:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(body)}  # fmt: skip
    return client.post("/webhooks/github", content=body, headers=headers)


def _gitlab(client: TestClient, payload: dict[str, Any], hook: str) -> Any:
    token = project_token(payload["project"]["id"])  # what the project's webhook holds
    headers = {"X-Gitlab-Event": hook, "X-Gitlab-Token": token,
               "Idempotency-Key": str(uuid.uuid4())}  # fmt: skip
    return client.post("/webhooks/gitlab", content=json.dumps(payload).encode(), headers=headers)


def _stored(settings: ServiceSettings) -> int:
    queue = JobQueue(settings.state_url())
    try:
        return sum(queue.counts().values())
    finally:
        queue.close()


# -- the setting -----------------------------------------------------------------------------


def test_the_setting_reads_commas_spaces_prefixes_and_globs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "abc")
    monkeypatch.setenv(
        "SLUICE_REPOSITORIES", " acme/warehouse,github:Octo/*  gitlab:data/platform/*,\n"
    )
    settings = ServiceSettings(workdir=tmp_path)
    assert settings.repositories == ("acme/warehouse", "github:Octo/*", "gitlab:data/platform/*")
    assert settings.serves("github", "acme/warehouse")
    assert settings.serves("gitlab", "acme/warehouse"), "no prefix: either forge"
    assert settings.serves("github", "ACME/Warehouse"), "the forges name repositories in any case"
    assert settings.serves("github", "octo/anything")
    assert settings.serves("gitlab", "data/platform/team/warehouse"), "* crosses subgroups"
    assert not settings.serves("gitlab", "octo/anything"), "github: serves GitHub only"
    assert not settings.serves("github", "data/platform/x"), "gitlab: serves GitLab only"
    assert not settings.serves("github", "acme/warehouse-evil")
    assert not settings.serves("github", "acme-evil/warehouse")
    assert not settings.serves("github", "evil/acme/warehouse")
    assert not settings.serves("github", "acme/warehouse/extra")
    unset = ServiceSettings(workdir=tmp_path, repositories="")
    assert unset.repositories == () and unset.serves("github", "any/thing")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("acme", "'acme' is not owner/name"),
        ("*", "'*' is not owner/name"),
        ("acme/", "'acme/' is not owner/name"),
        ("/warehouse", "'/warehouse' is not owner/name"),
        ("acme//warehouse", "is not owner/name"),
        ("https://github.com/acme/warehouse", "does not name a repository"),
        ("bitbucket:acme/warehouse", "does not name a repository"),
        ("github:data/platform/warehouse", "a GitHub repository is owner/name"),
    ],
)
def test_entries_that_name_no_repository_stop_the_service(
    tmp_path: Path, entry: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as raised:
        ServiceSettings(webhook_secret="abc", workdir=tmp_path, repositories=entry)
    assert "SLUICE_REPOSITORIES" in str(raised.value)


# -- the endpoint ----------------------------------------------------------------------------


def test_a_delivery_from_another_repository_is_refused_before_it_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path, f"{SERVED} gitlab:data/*")
    with TestClient(create_app(settings, start_workers=False)) as client:
        refused = _github(client, realcase(OPENED, "mallory/warehouse"))
        assert refused.status_code == 403
        assert refused.json() == {
            "error": "this Sluice service does not serve the repository mallory/warehouse: it "
            "is not in the service's SLUICE_REPOSITORIES; add it there to serve it",
            "repository": "mallory/warehouse",
            "setting": "SLUICE_REPOSITORIES",
        }
        assert _stored(settings) == 0
        served = _github(client, realcase(OPENED, SERVED))
        assert served.status_code == 202
        assert _stored(settings) == 1
    assert "repository 'mallory/warehouse' is not in SLUICE_REPOSITORIES" in caplog.text


@pytest.mark.parametrize(
    ("event", "case"),
    [
        ("issue_comment", "github/issue_comment/drone-go-scm__comment.json"),
        ("push", "github/push/woodpecker__HookTag.json"),
        ("release", "github/release/published.payload.json"),
        ("pull_request", "github/pull_request/woodpecker__HookPullRequestMerged.json"),
        ("pull_request_review", "github/pull_request_review/submitted.payload.json"),
        ("check_run", "github/check_run/requested_action.payload.json"),
    ],
)
def test_every_event_kind_from_another_repository_is_refused(
    tmp_path: Path, event: str, case: str
) -> None:
    settings = _settings(tmp_path, SERVED)
    with TestClient(create_app(settings, start_workers=False)) as client:
        # A repository whose name only starts like the one served.
        response = _github(client, realcase(case, "acme/warehouse-fork"), event)
        assert response.status_code == 403, response.text
        assert response.json()["repository"] == "acme/warehouse-fork"
    assert _stored(settings) == 0


def test_the_same_name_on_the_other_forge_is_refused(tmp_path: Path) -> None:
    settings = _settings(tmp_path, f"github:{SERVED}")
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"]["path_with_namespace"] = SERVED
    with TestClient(create_app(settings, start_workers=False)) as client:
        refused = _gitlab(client, payload, "Merge Request Hook")
        assert refused.status_code == 403 and refused.json()["repository"] == SERVED
        assert _github(client, realcase(OPENED, SERVED)).status_code == 202
    assert _stored(settings) == 1


def test_gitlab_subgroups_are_served_by_their_group_glob(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "gitlab:data/*")
    note = load_case("gitlab/note_merge_request.json")  # a subgroup project
    with TestClient(create_app(settings, start_workers=False)) as client:
        note["project"]["path_with_namespace"] = "data/platform/warehouse"
        assert _gitlab(client, note, "Note Hook").status_code == 202
        note["project"]["path_with_namespace"] = "database/warehouse"
        assert _gitlab(client, note, "Note Hook").status_code == 403


def test_without_the_setting_the_service_warns_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with TestClient(create_app(_settings(tmp_path, None), start_workers=False)) as client:
        assert _github(client, realcase(OPENED, "any/repository")).status_code == 202
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "SLUICE_REPOSITORIES is not set: this service accepts deliveries of any repository "
        "that can sign them" in r.getMessage()
        for r in warnings
    ), caplog.text
    caplog.clear()
    with TestClient(create_app(_settings(tmp_path, SERVED), start_workers=False)):
        pass
    assert not [r for r in caplog.records if "SLUICE_REPOSITORIES is not set" in r.getMessage()]


# -- jobs queued before the list was set -----------------------------------------------------


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[Worker, JobQueue, MemoryForge, Deps]]:
    settings = _settings(tmp_path, SERVED, github_token="ghp_listToken",
                         github_request_interval=0, github_write_interval=0,
                         janitor_interval_seconds=60)  # fmt: skip
    github = MemoryForge("mallory/warehouse", name="github")  # the forge of every job
    queue = JobQueue(settings.state_url())
    deps = make_deps(project_python="on", forge_for=lambda _event: github, workdir=tmp_path / "work",
                     state_url=settings.state_url())  # fmt: skip
    made = Worker(queue, **dispatch.bound(deps), janitor_seconds=60, serves=settings.serves)
    yield made, queue, github, deps
    deps.close()
    queue.close()


def test_a_job_queued_before_the_list_was_set_does_not_run(
    worker: tuple[Worker, JobQueue, MemoryForge, Deps],
) -> None:
    run, queue, github, _ = worker
    event = JanitorEvent(forge="github", repo="mallory/warehouse", installation_id=None)
    job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
    assert queue.accept("old-1", "github", "janitor", job, time.time())
    assert run.run_once()
    job_id = queue.delivery_job("old-1")
    assert job_id is not None
    record = queue.job(job_id)
    assert record is not None and record.status == "failed"
    assert "not in the service's SLUICE_REPOSITORIES" in (record.error or "")
    assert github.calls == []  # nothing was asked of the forge


def test_the_janitor_visits_only_repositories_served(
    worker: tuple[Worker, JobQueue, MemoryForge, Deps],
) -> None:
    run, queue, _, deps = worker
    ledger = deps.ledger
    ledger.seen("github:mallory/warehouse", None, 1)
    ledger.seen(f"github:{SERVED}", None, 1)
    assert run.schedule(time.time()) == 1
    assert queue.counts()["queued"] == 1
