"""Two services on one state (SQLite and a real PostgreSQL): exactly one runs the
scheduler, says so on /healthz and in its metrics, and when it stops the other takes over
at once (the lease let go, not left to expire). The lease itself:
tests/bot/queue/test_lease.py."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.queue.lease import SCHEDULER
from sluice.bot.queue.store import JobQueue


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    found: str = request.getfixturevalue("fresh_postgres_url")
    return found


def _until(found: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not found():
        assert time.monotonic() < deadline, f"still waiting for {what} after 60 s"
        time.sleep(0.1)


def _runs_scheduler(client: TestClient) -> bool:
    flag = client.get("/healthz").json()["scheduler"]
    assert isinstance(flag, bool)
    return flag


def _gauge(client: TestClient) -> float:
    text = client.get("/metrics").text
    found = re.search(r"^sluice_scheduler_lease_held (\S+)$", text, re.MULTILINE)
    assert found is not None, text[:2000]
    return float(found.group(1))


def test_one_of_two_services_runs_the_scheduler_and_hands_it_over_on_stop(
    url: str, tmp_path: Path
) -> None:
    def app(name: str) -> TestClient:
        settings = ServiceSettings(
            webhook_secret="lease-test-secret", github_token="ghp_leaseTestToken",
            workdir=tmp_path / name, database_url=url, spark_mode="submit",
            scheduler_lease_seconds=6,  # tried every 2 s
        )  # fmt: skip
        return TestClient(create_app(settings))

    clients = {name: app(name) for name in ("a", "b")}
    running = dict(clients)
    for client in clients.values():
        client.__enter__()
    try:
        _until(lambda: any(_runs_scheduler(c) for c in clients.values()), "a holder")
        holders = [name for name, c in clients.items() if _runs_scheduler(c)]
        assert len(holders) == 1, holders
        holder, other = holders[0], next(n for n in clients if n != holders[0])
        assert (_gauge(clients[holder]), _gauge(clients[other])) == (1.0, 0.0)
        queue = JobQueue(url)
        try:
            held = queue.lease_holder(SCHEDULER, time.time())
            assert held is not None
            # The holder stops: it lets go of the lease (6 s long, renewed every 2 s), so
            # it is nobody's, or already the other's, at once; not left to expire.
            running.pop(holder).__exit__(None, None, None)
            after = queue.lease_holder(SCHEDULER, time.time())
            assert after is None or after[0] != held[0]
        finally:
            queue.close()
        _until(lambda: _runs_scheduler(clients[other]), "the other service to take over")
        assert _gauge(clients[other]) == 1.0
    finally:
        for client in running.values():
            client.__exit__(None, None, None)
