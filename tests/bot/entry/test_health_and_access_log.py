"""`GET /healthz` says the version and Spark's health, cheaply (no JVM per poll, one look
per few seconds); monitors' polls are not logged at INFO, other requests are. No Spark:
Spark's tools and ports are stand-ins or real sockets here."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sluice import __version__
from sluice.bot.entry import health
from sluice.bot.entry.app import create_app
from sluice.bot.entry.health import CACHE_SECONDS, SparkHealth
from sluice.bot.entry.settings import ServiceSettings
from sluice.core.config import SparkSettings
from sluice.core.spark import connect
from tests.helpers.github_service import SECRET, sign

ACCESS = "sluice.bot.entry.app.access"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _health(tmp_path: Path, *, tools: str | None = None, **spark: Any) -> SparkHealth:
    return SparkHealth(SparkSettings(**spark), tmp_path / "spark", tools=lambda: tools)


def test_submit_mode_is_healthy_when_spark_submit_and_java_are_found(tmp_path: Path) -> None:
    assert _health(tmp_path, mode="submit").check() == {
        "mode": "submit",
        "ok": True,
        "detail": "spark-submit and Java found",
    }
    broken = _health(tmp_path, mode="submit", tools="Java not found: Spark needs a Java 17 runtime")
    assert broken.check()["ok"] is False
    assert "no job can start: Java not found" in broken.check()["detail"]


def test_the_real_tool_check_finds_what_this_machine_has(monkeypatch: pytest.MonkeyPatch) -> None:
    # No JVM starts: a file test and a PATH lookup.
    monkeypatch.setenv("JAVA_HOME", "/nonexistent/java")
    said = health._tools() or ""
    # Unauthenticated callers read it: what is missing, never where (red team).
    assert "Java not found" in said and "/nonexistent" not in said


def test_an_answer_is_reused_for_a_few_seconds(tmp_path: Path) -> None:
    clock = Clock()
    looked: list[int] = []

    def tools() -> str | None:
        looked.append(1)
        return None

    spark = SparkHealth(SparkSettings(mode="submit"), tmp_path, tools=tools, clock=clock)
    for _ in range(10):
        spark.check()
    assert spark.checks == len(looked) == 1
    clock.now += CACHE_SECONDS + 0.1
    spark.check()
    assert spark.checks == 2


def test_a_remote_connect_endpoint_is_healthy_when_it_takes_a_connection(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        up = _health(tmp_path, mode="connect", remote=f"sc://127.0.0.1:{port}/;token=x")
        assert up.check()["ok"] is True
    down = _health(tmp_path, mode="connect", remote=f"sc://127.0.0.1:{port}")
    assert down.check() == {
        "mode": "connect",
        "ok": False,
        "detail": "the Spark Connect endpoint (SLUICE_SPARK_REMOTE) does not answer",
    }


class _Server:
    """A stand-in for the service's own ConnectServer (what the health check reads)."""

    def __init__(self, pid: int | None, running: bool) -> None:
        self.pid, self._running = pid, running
        self.port = 15002 if running else None

    def running(self) -> bool:
        return self._running

    def gone(self, pid: int) -> str | None:
        return None if self._running else f"died (pid {pid}: exit code 1)"


def test_the_services_own_connect_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark = _health(tmp_path, mode="connect")
    # No job started it yet: healthy when it could start.
    assert spark.check()["ok"] is True
    assert "not running yet" in spark.check()["detail"]
    assert connect._SERVERS.get((tmp_path / "spark").resolve()) is None  # not made by a poll
    cannot = _health(tmp_path, mode="connect", tools="Java not found")
    assert cannot.check()["ok"] is False and "cannot start" in cannot.check()["detail"]
    root = (tmp_path / "spark").resolve()
    monkeypatch.setitem(connect._SERVERS, root, _Server(4242, running=True))  # type: ignore[arg-type]
    assert _health(tmp_path, mode="connect").check()["detail"] == (
        "the service's Spark Connect server answers"
    )
    monkeypatch.setitem(connect._SERVERS, root, _Server(4242, running=False))  # type: ignore[arg-type]
    died = _health(tmp_path, mode="connect").check()
    assert died["ok"] is False and "does not answer" in died["detail"]


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setattr(health, "_tools", lambda: None)
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "work", spark_mode="submit",
                               database_url=f"sqlite:///{tmp_path / 'state.db'}")  # type: ignore[arg-type]  # fmt: skip
    with TestClient(create_app(settings, start_workers=False)) as test_client:
        yield test_client


def test_healthz_reports_the_version_spark_and_the_state_database(client: TestClient) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "ok",
        "version": __version__,
        "queue_depth": 0,
        "workers": 0,
        "scheduler": False,  # no workers, no scheduler: its lease is not even tried
        "spark": {"mode": "submit", "ok": True, "detail": "spark-submit and Java found"},
    }


def test_healthz_is_degraded_when_spark_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "_tools", lambda: "Java not found: Spark needs a Java 17 runtime")
    settings = ServiceSettings(webhook_secret=SECRET, workdir=tmp_path / "work", spark_mode="submit",
                               database_url=f"sqlite:///{tmp_path / 'state.db'}")  # type: ignore[arg-type]  # fmt: skip
    with TestClient(create_app(settings, start_workers=False)) as test_client:
        answer = test_client.get("/healthz")
    # 200: the service still stores deliveries, and restarting it brings no Java back.
    assert answer.status_code == 200
    assert answer.json()["status"] == "degraded"
    assert answer.json()["spark"]["ok"] is False


def _access(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ACCESS and r.levelno >= level]


def test_polls_are_not_logged_at_info_and_other_requests_are(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for _ in range(3):
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200
    assert _access(caplog) == []
    body = json.dumps({"zen": "Keep it simple.", "hook_id": 1}).encode()
    headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-1",
               "X-Hub-Signature-256": sign(body)}  # fmt: skip
    for number in range(20):  # verified deliveries: every one logged
        headers["X-GitHub-Delivery"] = f"d-{number}"
        assert client.post("/webhooks/github", content=body, headers=headers).status_code == 200
    for _ in range(20):  # anyone's requests: a few a minute per client
        assert client.get("/openapi.json").status_code == 200
    lines = _access(caplog)
    assert sum('"POST /webhooks/github" 200' in line for line in lines) == 20, lines
    assert 1 <= sum('"GET /openapi.json" 200' in line for line in lines) <= 5, lines
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    client.get("/healthz")
    client.get("/metrics")
    debug = [r for r in caplog.records if r.name == ACCESS]
    assert [r.levelno for r in debug] == [logging.DEBUG, logging.DEBUG]
    assert '"GET /healthz" 200' in debug[0].getMessage()


def test_refused_and_unknown_requests_are_logged_a_few_at_a_time_and_escaped(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    forged = client.get("/nothing%0A2026-01-01 INFO forged line")
    assert forged.status_code == 404
    [line] = _access(caplog)
    assert "\n" not in line and "/nothing\\n2026-01-01 INFO forged line" in line and " 404 " in line
    for number in range(50):
        client.post("/webhooks/github", content=b"{}", headers={"X-GitHub-Event": "ping",
                    "X-GitHub-Delivery": f"d{number}", "X-Hub-Signature-256": "sha256=0"})  # fmt: skip
    refused = [m for m in _access(caplog) if '"POST /webhooks/github" 401' in m]
    assert 1 <= len(refused) <= 5, refused  # the per-client limit, not one line each
