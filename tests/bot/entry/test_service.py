"""The webhook service over HTTP: verification, the queue, and what it posts on GitHub.

The app runs for real (FastAPI's TestClient with its lifespan, so the worker thread runs);
GitHub's REST API is the stateful fake in ``github_wire.py`` at the wire, so PyGithub
really runs. Projects here have no models, so no Spark is needed; the end-to-end test
with Spark is ``tests/bot/flow/test_lifecycle.py``.
"""

from __future__ import annotations

import io
import json
import logging
import sqlite3
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from sluice import __version__
from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.queue.store import JobQueue
from sluice.core.errors import ConfigError
from tests.helpers.cases import case_paths, load_case
from tests.helpers.github_service import SECRET, TOKEN, Service, serve, service_settings, sign
from tests.helpers.github_wire import FakeGitHub, tarball


def _project(root: Path, config: str = "sluice:\n  project: demo\n") -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(config)
    return root


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    github = FakeGitHub(repo="Codertocat/Hello-World")
    # The prod branch (the payloads' repository's default, master) names the project.
    github.files[("master", "config.yaml")] = "sluice:\n  project: demo\n"
    with serve(service_settings(tmp_path, prod_branch="master"), github) as made:
        yield made


def _pr_payload(case: str, sha: str) -> dict[str, Any]:
    payload = load_case(case)
    payload["pull_request"]["head"]["sha"] = sha
    return payload


SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # the head sha of octokit's PR payloads


def test_signature_vector_published_by_github(service: Service) -> None:
    # GitHub's documented vector: this secret and body give this signature.
    vector = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    settings = ServiceSettings(webhook_secret="It's a Secret to Everybody", workdir=service.settings.workdir,
                               database_url=service.settings.database_url)  # type: ignore[arg-type]  # fmt: skip
    with TestClient(create_app(settings, start_workers=False)) as client:
        headers = {
            "X-GitHub-Event": "ping",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": vector,
        }
        assert (
            client.post("/webhooks/github", content=b"Hello, World!", headers=headers).status_code
            == 200
        )
        headers["X-Hub-Signature-256"] = vector[:-1] + "0"
        assert (
            client.post("/webhooks/github", content=b"Hello, World!", headers=headers).status_code
            == 401
        )


def test_unsigned_or_forged_deliveries_get_401_and_the_body_is_not_logged(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    payload["marker"] = "BODY-TEXT-NOT-FOR-LOGS"
    caplog.set_level(logging.DEBUG)
    assert service.deliver("pull_request", payload, signature="").status_code == 401
    assert service.deliver("pull_request", payload, signature=sign(b"other")).status_code == 401
    assert (
        service.deliver(
            "pull_request", payload, signature=sign(json.dumps(payload).encode(), "wrong")
        ).status_code
        == 401
    )
    assert "BODY-TEXT-NOT-FOR-LOGS" not in caplog.text
    assert "missing or wrong signature" in caplog.text
    queue = service.queue()
    assert queue.counts().get("queued", 0) == 0 and service.github.requests == []
    queue.close()


def test_refuses_to_start_without_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICE_WEBHOOK_SECRET", raising=False)
    monkeypatch.delenv("SLUICE_GITLAB_WEBHOOK_SECRET", raising=False)
    with pytest.raises(ConfigError, match="SLUICE_GITLAB_WEBHOOK_SECRET is set"):
        ServiceSettings(workdir=tmp_path)
    assert ServiceSettings(workdir=tmp_path, gitlab_webhook_secret="t").webhook_secret is None
    assert ServiceSettings(workdir=tmp_path, insecure_no_signature=True).insecure_no_signature


def test_settings_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "abc")
    monkeypatch.setenv("SLUICE_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("SLUICE_GITHUB_API_URL", "https://ghe.example/api/v3")
    monkeypatch.setenv("SLUICE_DATABASE_URL", "postgresql+psycopg://sluice:pw-in-url@db/sluice")
    monkeypatch.setenv("SLUICE_WORKDIR", str(tmp_path))
    settings = ServiceSettings()
    assert settings.github_api_url == "https://ghe.example/api/v3"
    assert settings.state_url().endswith("@db/sluice") and settings.workdir == tmp_path
    assert TOKEN not in repr(settings) and "abc" not in repr(settings)
    assert set(settings.secrets()) == {TOKEN, "abc", "pw-in-url"}


def test_job_timeout_seconds_defaults_to_two_hours_and_must_be_positive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "abc")
    assert ServiceSettings(workdir=tmp_path).job_timeout_seconds == 7200.0
    monkeypatch.setenv("SLUICE_JOB_TIMEOUT_SECONDS", "90.5")
    assert ServiceSettings(workdir=tmp_path).job_timeout_seconds == 90.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("SLUICE_JOB_TIMEOUT_SECONDS", bad)
        with pytest.raises(ValueError, match="job_timeout_seconds"):
            ServiceSettings(workdir=tmp_path)


def test_malformed_json_and_payloads_get_400(service: Service) -> None:
    assert service.deliver("pull_request", b"{not json").status_code == 400
    assert service.deliver("pull_request", b"[1, 2]").status_code == 400
    response = service.deliver("pull_request", {"action": "opened", "pull_request": {}})
    assert response.status_code == 400 and "is missing" in response.json()["error"]
    deep = b"[" * 100_000 + b"]" * 100_000
    assert service.deliver("pull_request", deep).status_code == 400
    deep_object = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    assert service.deliver("pull_request", deep_object).status_code == 400
    invalid_utf8 = b'{"action": "opened", "x": "\xff\xfe"}'
    assert service.deliver("pull_request", invalid_utf8).status_code == 400


def test_irrelevant_events_get_204_and_nothing_is_queued(service: Service) -> None:
    assert (
        service.deliver(
            "pull_request", load_case("github/pull_request/labeled.payload.json")
        ).status_code
        == 204
    )
    assert (
        service.deliver(
            "issue_comment", load_case("github/issue_comment/created.payload.json")
        ).status_code
        == 204
    )
    assert (
        service.deliver(
            "installation", load_case("github/installation/created.payload.json")
        ).status_code
        == 204
    )
    assert (
        service.deliver("push", load_case("github/push/payload.json")).status_code == 204
    )  # a tag deletion
    queue = service.queue()
    assert sum(queue.counts().values()) == 0
    queue.close()


def test_odd_headers_get_400_not_500(service: Service) -> None:
    body = json.dumps(load_case("github/pull_request/opened.payload.json")).encode()
    headers = {"X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": sign(body)}
    missing_event = service.client.post("/webhooks/github", content=body, headers=headers)
    assert missing_event.status_code == 400
    assert missing_event.json() == {"error": "X-GitHub-Event header is missing"}
    long_id = service.deliver("pull_request", body, delivery="x" * 201)
    assert long_id.status_code == 400 and "over 200 characters" in long_id.json()["error"]
    odd_length = {**headers, "X-GitHub-Event": "ping", "Content-Length": "²".encode("latin-1")}
    assert (
        service.client.post("/webhooks/github", content=body, headers=odd_length).status_code < 500
    )
    assert sum(service.queue().counts().values()) == 0


def test_oversized_bodies_are_refused_before_parsing(service: Service) -> None:
    big = b" " * (service.settings.max_body_bytes + 1)
    assert service.deliver("pull_request", big).status_code == 413


@pytest.mark.parametrize(
    "case",
    [
        "github/pull_request/opened.payload.json",
        "github/pull_request/opened.with-null-body.json",
        "github/pull_request/reopened.payload.json",
        "github/pull_request/ready_for_review.payload.json",  # no `installation` key
        "github/pull_request/ready_for_review.with-organization.payload.json",
    ],
)
def test_real_pull_request_payloads_get_a_comment_and_four_checks(
    service: Service, tmp_path: Path, case: str
) -> None:
    payload = _pr_payload(case, SHA)
    service.github.trees[SHA] = tarball(_project(tmp_path / "src"), f"repo-{SHA[:7]}")
    response = service.deliver("pull_request", payload)
    assert response.status_code == 202, response.text
    service.idle()
    checks = service.github.checks_on(SHA)
    assert set(checks) == {
        "sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"
    }  # fmt: skip
    assert {c["status"] for c in checks.values()} == {"completed"}
    # The base branch has no config.yaml, so no approval is required.
    assert checks["sluice/approval"]["output"]["title"] == "No approval required"
    assert {c["conclusion"] for c in checks.values()} == {"success"}, checks["sluice/tests"][
        "output"
    ]
    assert checks["sluice/pr-environment"]["output"]["title"] == "This PR changes no model"
    assert checks["sluice/pr-environment"]["history"][:2] == ["queued", "in_progress"]
    number = payload["pull_request"]["number"]
    comments = service.github.comments_on(number)
    assert len(comments) == 1, "one sticky comment, edited in place"
    body = comments[0]["body"]
    assert body.startswith("<!-- sluice:pr-comment -->\n### ✅ Sluice · `demo`: no model changed")
    assert "no model changed" in body and "This PR changes no model." in body
    assert comments[0]["edits"] >= 1


def test_the_same_delivery_twice_is_processed_once(service: Service, tmp_path: Path) -> None:
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    service.github.trees[SHA] = tarball(_project(tmp_path / "src"), "top")
    first = service.deliver("pull_request", payload, delivery="dup-1")
    second = service.deliver("pull_request", payload, delivery="dup-1")
    assert (first.status_code, second.status_code) == (202, 200)
    assert second.json()["status"] == "duplicate"
    service.idle()
    queue = service.queue()
    assert {k: v for k, v in queue.counts().items() if v} == {"done": 1}
    queue.close()
    tarballs = [u for m, u in service.github.requests if "/tarball/" in u]
    assert len(tarballs) == 1


def _quiet_service(tmp_path: Path) -> tuple[ServiceSettings, TestClient]:
    """The service without workers (nothing runs the jobs), on a SQLite state."""
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "work",
                               database_url=f"sqlite:///{tmp_path / 'state.db'}")  # type: ignore[arg-type]  # fmt: skip
    return settings, TestClient(create_app(settings, start_workers=False))


def _post(client: TestClient, payload: dict[str, Any], delivery: str) -> Any:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": delivery,
               "X-Hub-Signature-256": sign(body)}  # fmt: skip
    return client.post("/webhooks/github", content=body, headers=headers)


def test_concurrent_deliveries_are_stored_together_and_each_answered(tmp_path: Path) -> None:
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    settings, app_client = _quiet_service(tmp_path)
    names = [f"c-{i % 40}" for i in range(80)]  # every delivery twice
    with app_client as client, ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda name: (name, _post(client, payload, name)), names))
    by_name: dict[str, list[int]] = {}
    for name, response in answers:
        by_name.setdefault(name, []).append(response.status_code)
    assert all(sorted(codes) == [200, 202] for codes in by_name.values()), by_name
    queue = JobQueue(settings.state_url())
    try:
        assert all(queue.delivery_job(name) is not None for name in by_name)
        counts = queue.counts()  # one PR, one head: nothing superseded
        assert counts["queued"] == 40
    finally:
        queue.close()


def test_a_delivery_the_database_refuses_gets_503_and_the_service_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    settings, app_client = _quiet_service(tmp_path)
    with app_client as client:
        db = sqlite3.connect(tmp_path / "state.db")
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON sluice_deliveries "
            "WHEN NEW.delivery_id = 'poison' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        db.commit()
        db.close()
        with caplog.at_level(logging.ERROR):
            refused = _post(client, payload, "poison")
        assert refused.status_code == 503
        assert refused.json() == {
            "error": "the state database could not store the delivery: deliver it again later"
        }
        assert "refused" in caplog.text
        assert _post(client, payload, "fine").status_code == 202
        assert _post(client, payload, "fine").status_code == 200
    queue = JobQueue(settings.state_url())
    try:
        assert queue.delivery_job("poison") is None
        assert queue.delivery_job("fine") is not None
    finally:
        queue.close()


def test_fork_pull_requests_are_not_built(service: Service) -> None:
    payload = load_case("github/pull_request/nodejs-github-bot__pull-request-opened-v8.json")
    assert service.deliver("pull_request", payload).status_code == 202
    service.idle()
    comments = service.github.comments_on(payload["pull_request"]["number"])
    assert len(comments) == 1 and "comes from a fork" in comments[0]["body"]
    assert "/sluice plan" in comments[0]["body"]
    assert not any("/tarball/" in u for _, u in service.github.requests)
    assert service.github.check_runs == {}


def test_a_writer_admits_a_fork_pull_request_with_sluice_plan(
    service: Service, tmp_path: Path
) -> None:
    payload = load_case("github/pull_request/nodejs-github-bot__pull-request-opened-v8.json")
    pr = payload["pull_request"]
    number, head = pr["number"], pr["head"]["sha"]
    github = service.github
    github.add_pull(number, head, author=pr["user"]["login"], base="master", fork=True)
    github.trees[head] = tarball(_project(tmp_path / "src"), f"node-{head[:7]}")
    github.permissions.update({"maintainer": "maintain", "cristiancavalli": "read"})
    assert service.deliver("pull_request", payload).status_code == 202
    service.idle()
    assert github.check_runs == {}

    comment = load_case("github/issue_comment/drone-go-scm__comment.json")
    comment["repository"]["full_name"] = "nodejs/node"
    comment["issue"]["number"] = number
    # Each comment is GitHub's own (the service reads it back by its id before it runs).
    first = github.add_comment(number, "/sluice plan", user="cristiancavalli")
    comment["comment"].update(
        user={"login": "cristiancavalli", "id": 5}, body="/sluice plan", id=first
    )
    assert service.deliver("issue_comment", comment).status_code == 202
    service.idle()
    assert github.check_runs == {}, "the fork's author may not admit their own PR"
    assert "only users with write permission" in github.comments_on(number)[-1]["body"]

    second = github.add_comment(number, "/sluice plan", user="maintainer")
    comment["comment"].update(user={"login": "maintainer", "id": 6}, id=second)
    assert service.deliver("issue_comment", comment).status_code == 202
    service.idle()
    checks = github.checks_on(head)
    assert checks["sluice/pr-environment"]["output"]["title"] == "This PR changes no model"
    assert {c["conclusion"] for c in checks.values()} == {"success"}
    assert {"comment": second, "content": "+1"} in github.reactions


def test_a_project_that_does_not_load_fails_the_checks_and_the_service_stays_up(
    service: Service, tmp_path: Path
) -> None:
    src = _project(tmp_path / "src")
    (src / "models" / "broken.sql").write_text(
        "MODEL (name demo.broken, kind FULL);\nSELECT FROM WHERE\n"
    )
    service.github.trees[SHA] = tarball(src, "top")
    assert (
        service.deliver(
            "pull_request", _pr_payload("github/pull_request/opened.payload.json", SHA)
        ).status_code
        == 202
    )
    service.idle()
    checks = service.github.checks_on(SHA)
    assert {c["conclusion"] for c in checks.values()} == {"failure"}
    summary = checks["sluice/tests"]["output"]["summary"]
    assert "models/broken.sql:2" in summary, summary
    assert str(tmp_path) not in summary, "paths are shown relative to the repository"
    body = service.github.comments_on(2)[0]["body"] if service.github.comments_on(2) else ""
    comment = next(iter(service.github.comments.values()))["body"]
    assert "The project does not load" in comment and "models/broken.sql:2" in comment
    assert body == comment
    assert service.client.get("/healthz").json()["status"] == "ok"


def test_rerequested_check_runs_run_again(service: Service, tmp_path: Path) -> None:
    service.github.trees[SHA] = tarball(_project(tmp_path / "src"), "top")
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    service.deliver("pull_request", payload)
    service.idle()
    number = payload["pull_request"]["number"]
    service.github.add_pull(number, SHA)
    rerun = load_case("github/check_run/rerequested.payload.json")
    rerun["repository"] = payload["repository"]
    rerun["check_run"].update(
        {"name": "sluice/tests", "head_sha": SHA, "pull_requests": [{"number": number}]}
    )
    assert service.deliver("check_run", rerun).status_code == 202
    service.idle()
    history = service.github.checks_on(SHA)["sluice/tests"]["history"]
    assert history.count("completed") == 2, history


def test_health_and_metrics(service: Service, tmp_path: Path) -> None:
    service.github.trees[SHA] = tarball(_project(tmp_path / "src"), "top")
    service.deliver("pull_request", _pr_payload("github/pull_request/opened.payload.json", SHA))
    service.deliver("pull_request", b"{", signature="sha256=" + "0" * 64)
    service.idle()
    health = service.client.get("/healthz").json()
    assert (health["queue_depth"], health["workers"], health["version"]) == (0, 1, __version__)
    assert health["spark"]["mode"] == "connect"  # its checks: test_health_and_access_log.py
    assert health["status"] == ("ok" if health["spark"]["ok"] else "degraded")
    response = service.client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    pr = ("event", "pull_request")
    assert samples[("sluice_deliveries_total", (pr, ("outcome", "queued")))] == 1
    assert samples[("sluice_deliveries_total", (pr, ("outcome", "unauthorized")))] == 1
    assert samples[("sluice_queue_depth", ())] == 0
    assert samples[("sluice_queue_oldest_wait_seconds", ())] == 0  # nothing waits
    done = (("kind", "pull_request"), ("outcome", "done"))
    assert samples[("sluice_job_duration_seconds_count", done)] == 1
    # The client's process and Python metrics come along.
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert any(name == "python_gc_collections_total" for name, _ in samples)


def test_secrets_never_reach_github_or_the_logs(
    service: Service, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    src = _project(tmp_path / "src", f"sluice:\n  project: demo\n  nonsense: {TOKEN}\n")
    service.github.trees[SHA] = tarball(src, "top")
    service.deliver("pull_request", _pr_payload("github/pull_request/opened.payload.json", SHA))
    service.idle()
    posted = json.dumps([service.github.comments, service.github.check_runs])
    assert "failure" in posted  # the bad config was reported ...
    for secret in (TOKEN, SECRET):
        assert secret not in posted, "... without the secret it contained"
        assert secret not in caplog.text


def test_every_real_github_payload_gets_an_answer_and_never_a_500(service: Service) -> None:
    for path in case_paths("github/*/*.json"):
        event = path.parent.name
        response = service.deliver(event, path.read_bytes())
        assert response.status_code in (200, 202, 204, 400), (path.name, response.status_code)


def test_draft_pull_requests_wait_until_ready(service: Service, tmp_path: Path) -> None:
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    payload["pull_request"]["draft"] = True
    assert service.deliver("pull_request", payload).status_code == 202
    service.idle()
    [comment] = service.github.comments_on(payload["pull_request"]["number"])
    assert "is a draft" in comment["body"] and service.github.check_runs == {}
    service.github.trees[SHA] = tarball(_project(tmp_path / "src"), "top")
    ready = _pr_payload("github/pull_request/ready_for_review.payload.json", SHA)
    ready["pull_request"]["number"] = payload["pull_request"]["number"]
    assert service.deliver("pull_request", ready).status_code == 202
    service.idle()
    assert len(service.github.comments_on(payload["pull_request"]["number"])) == 1
    assert {c["conclusion"] for c in service.github.checks_on(SHA).values()} == {"success"}


def test_a_job_that_keeps_failing_is_reported_on_the_pr_after_the_last_attempt(
    service: Service,
) -> None:
    # No tree for this commit: fetching it fails on every attempt.
    assert (
        service.deliver(
            "pull_request", _pr_payload("github/pull_request/opened.payload.json", SHA)
        ).status_code
        == 202
    )
    service.idle()
    queue = service.queue()
    assert queue.counts()["failed"] == 1
    queue.close()
    # The job is failed before the worker reports it on the PR: wait for the report.
    service.wait(lambda: any("the job failed after every retry" in c["body"]
                             for c in service.github.comments_on(2)))  # fmt: skip
    tarballs = [u for m, u in service.github.requests if "/tarball/" in u]
    assert len(tarballs) == service.settings.max_attempts == 3
    checks = service.github.checks_on(SHA)
    assert {c["conclusion"] for c in checks.values()} == {"failure"}
    assert checks["sluice/tests"]["output"]["title"] == "Sluice gave up on this commit"
    assert "archive" in checks["sluice/tests"]["output"]["summary"]
    [comment] = service.github.comments_on(2)
    assert "the job failed after every retry" in comment["body"]
    # Each failed attempt but the last was a retry, counted by the job's kind.
    retries = 'sluice_job_retries_total{kind="pull_request"} 2.0'
    assert retries in service.client.get("/metrics").text


def test_an_unsafe_archive_is_refused_and_reported_at_once(service: Service) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo(f"repo-{SHA[:7]}/config.yaml")
        link.type, link.linkname = tarfile.SYMTYPE, "../../../etc/passwd"
        tar.addfile(link)
    service.github.trees[SHA] = buffer.getvalue()
    payload = _pr_payload("github/pull_request/opened.payload.json", SHA)
    assert service.deliver("pull_request", payload).status_code == 202
    service.idle()
    tarballs = [u for m, u in service.github.requests if "/tarball/" in u]
    assert len(tarballs) == 1, "a refusal is final: no retry"
    checks = service.github.checks_on(SHA)
    assert checks["sluice/pr-environment"]["conclusion"] == "failure"
    assert (
        checks["sluice/pr-environment"]["output"]["title"] == "The repository's files were refused"
    )
    assert "points outside the tree" in checks["sluice/pr-environment"]["output"]["summary"]
    [comment] = service.github.comments_on(payload["pull_request"]["number"])
    assert "The repository's files were refused" in comment["body"]


def test_webhook_paths_answer_other_methods_405_and_a_crashed_endpoint_500(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    # The webhook endpoints are called straight from the app's ASGI entry point; what
    # FastAPI's stack did for them still holds.
    assert service.client.get("/webhooks/github").status_code == 405
    app = service.client.app
    assert isinstance(app, FastAPI) and set(app.direct) == {"/webhooks/github", "/webhooks/gitlab"}

    async def broken(request: Request) -> Response:
        raise RuntimeError("the endpoint broke")

    app.direct["/webhooks/github"] = broken
    response = service.client.post("/webhooks/github", content=b"{}")
    assert response.status_code == 500 and response.json() == {"error": "internal error"}
    assert "the endpoint broke" in caplog.text
    assert service.client.get("/healthz").status_code == 200
