"""Drain: on SIGTERM the service takes no new job, lets the running one finish (up to
``SLUICE_DRAIN_SECONDS``) and puts back what it could not finish; the next start runs the
rest. And a rolling restart of two replicas on one PostgreSQL loses nothing.

The real service in its own process (``tests/helpers/drain_child.py``: the app on uvicorn,
its intake, queue, workers and flow, GitHub in memory, Spark scripted and slow), signed
pull request deliveries over HTTP, SIGTERM as a service manager sends it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sluice.bot.queue.store import JobQueue, JobRecord, JobStatus
from tests.helpers.cases import realcase
from tests.helpers.drain_child import OWNER, SECRET, head_of
from tests.helpers.github_service import sign
from tests.pgcluster import free_port

ROOT = Path(__file__).resolve().parents[3]

# Service processes started and stopped several times each: 20-40 s a test.
pytestmark = pytest.mark.slow


@dataclass
class Replica:
    """One service process (started again by :meth:`start` after it stopped)."""

    name: str
    tmp: Path
    url: str
    record: Path
    prs: list[int]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def start(self, *, job_seconds: float, drain_seconds: float) -> None:
        config = {
            "port": self.port, "workdir": str(self.tmp / self.name), "url": self.url,
            "name": self.name, "record": str(self.record), "job_seconds": job_seconds,
            "drain_seconds": drain_seconds, "prs": self.prs,
        }  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.drain_child", json.dumps(config)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, f"{self.name} exited ({self.proc.returncode})"
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{self.name} did not answer"
            time.sleep(0.1)

    def deliver(self, number: int) -> None:
        body = json.dumps(realcase("github/pull_request/opened.payload.json", OWNER, **{
            "number": number, "pull_request.number": number,
            "pull_request.head.sha": head_of(number), "pull_request.base.ref": "main",
            "pull_request.user.login": "alice", "pull_request.draft": False,
            "pull_request.head.repo.full_name": OWNER,
        })).encode()  # fmt: skip
        headers = {
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": f"delivery-{number}",
            "X-Hub-Signature-256": sign(body, SECRET),
            "Content-Type": "application/json",
        }
        answer = httpx.post(
            f"http://127.0.0.1:{self.port}/webhooks/github", content=body, headers=headers
        )
        assert answer.status_code == 202, answer.text

    def terminate(self, timeout: float = 90) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_for(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def started(path: Path, env: str) -> bool:
    return any(r["t"] == "start" and r["env"] == env for r in records(path))


def jobs(url: str) -> dict[str, JobRecord]:
    """Every job by its delivery."""
    queue = JobQueue(url)
    try:
        return {r.job.delivery_id: r for r in queue.jobs(limit=1000)}
    finally:
        queue.close()


def all_done(url: str, deliveries: int) -> bool:
    found = jobs(url)
    return len(found) == deliveries and all(r.status == JobStatus.DONE for r in found.values())


def runs(path: Path) -> Counter[str]:
    """Spark jobs run to their end, per environment."""
    return Counter(r["env"] for r in records(path) if r["t"] == "end")


@pytest.fixture
def replicas() -> Any:
    made: list[Replica] = []
    yield made
    for replica in made:
        replica.kill()


def test_sigterm_lets_the_running_job_finish_and_the_next_start_runs_the_rest(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    url, record = f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "record.jsonl"
    service = Replica("svc", tmp_path, url, record, prs=[1, 2, 3])
    replicas.append(service)
    service.start(job_seconds=6, drain_seconds=60)  # longer than the 5 s it used to get
    for number in (1, 2, 3):
        service.deliver(number)
    wait_for(lambda: started(record, "pr_1"), "PR 1's build to start")
    assert service.terminate() == 0

    said = records(record)
    signalled = next(i for i, r in enumerate(said) if r["t"] == "signal")
    # The running build went on past the signal to its end; nothing new started after it.
    assert [r["t"] for r in said[signalled:]] == ["signal", "end", "exit"]
    assert said[signalled + 1]["env"] == "pr_1"
    stopped = jobs(url)
    assert stopped["delivery-1"].status == JobStatus.DONE
    for delivery in ("delivery-2", "delivery-3"):  # waiting, untouched, for the next start
        assert stopped[delivery].status == JobStatus.QUEUED
        assert stopped[delivery].job.attempts == 0

    service.start(job_seconds=0.2, drain_seconds=60)
    wait_for(lambda: all_done(url, 3), "every job to be done")
    assert service.terminate() == 0
    assert runs(record) == {"pr_1": 1, "pr_2": 1, "pr_3": 1}
    assert {r.job.attempts for r in jobs(url).values()} == {1}


def test_a_job_still_running_past_the_drain_is_put_back_and_runs_on_the_next_start(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    url, record = f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "record.jsonl"
    service = Replica("svc", tmp_path, url, record, prs=[1, 2])
    replicas.append(service)
    service.start(job_seconds=30, drain_seconds=1)
    service.deliver(1)
    service.deliver(2)
    wait_for(lambda: started(record, "pr_1"), "PR 1's build to start")
    assert service.terminate() == 0

    said = records(record)
    signalled = next(i for i, r in enumerate(said) if r["t"] == "signal")
    assert [r["t"] for r in said[signalled:]] == ["signal", "exit"]  # PR 1's never ended
    stopped = jobs(url)
    first = stopped["delivery-1"]
    # Back in the queue at once (not after its lease), its attempt not counted.
    assert first.status == JobStatus.QUEUED and first.job.attempts == 0
    assert first.error is not None and "SLUICE_DRAIN_SECONDS" in first.error
    assert first.lease_until is None and first.worker is None
    assert stopped["delivery-2"].status == JobStatus.QUEUED

    service.start(job_seconds=0.2, drain_seconds=60)
    wait_for(lambda: all_done(url, 2), "every job to be done")
    assert service.terminate() == 0
    assert runs(record) == {"pr_1": 1, "pr_2": 1}


def running_in(path: Path, name: str) -> bool:
    """Whether process ``name`` has a Spark job started and not ended."""
    open_runs: Counter[str] = Counter()
    for r in records(path):
        if r["proc"] == name and r["t"] in ("start", "end"):
            open_runs[r["env"]] += 1 if r["t"] == "start" else -1
    return any(open_runs.values())


@pytest.mark.postgres
def test_a_rolling_restart_of_two_replicas_on_postgres_loses_nothing(
    fresh_postgres_url: str, tmp_path: Path, replicas: list[Replica]
) -> None:
    url, record = fresh_postgres_url, tmp_path / "record.jsonl"
    known = list(range(1, 17))  # the PRs the replicas' forge knows
    a = Replica("svc-a", tmp_path, url, record, prs=known)
    b = Replica("svc-b", tmp_path, url, record, prs=known)
    replicas.extend([a, b])
    for replica in (a, b):
        replica.start(job_seconds=1.2, drain_seconds=60)
    prs = known[:8]
    for number in prs:  # spread over both
        (a if number % 2 else b).deliver(number)
    reserve = iter(known[8:])

    def building(replica: Replica) -> bool:
        """Whether ``replica`` is building; while it is not and the queue has run dry
        (the other replica, or this one before a slow start, took every job), one more
        PR is delivered to it, so that it is stopped mid-build, as the test means."""
        if running_in(record, replica.name):
            return True
        if all_done(url, len(prs)):
            prs.append(next(reserve))
            replica.deliver(prs[-1])
        return False

    # A stops while it builds, and starts again; then B, the same.
    for stopping in (a, b):
        name = stopping.name
        wait_for(lambda stopping=stopping: building(stopping), f"{name} to be building")
        assert stopping.terminate() == 0
        assert not running_in(record, name), "a build left unfinished"
        assert [r["t"] for r in records(record) if r["proc"] == name][-1] == "exit"
        stopping.start(job_seconds=1.2, drain_seconds=60)

    wait_for(lambda: all_done(url, len(prs)), "every job to be done")
    for replica in (a, b):
        assert replica.terminate() == 0
    final = jobs(url)
    assert set(final) == {f"delivery-{n}" for n in prs}
    assert {r.status for r in final.values()} == {JobStatus.DONE}
    assert {r.job.attempts for r in final.values()} == {1}  # each ran once
    assert runs(record) == {f"pr_{n}": 1 for n in prs}  # each PR built once
    # Both processes worked, and each of them stopped with a build running.
    by_process = Counter(r["proc"] for r in records(record) if r["t"] == "end")
    assert set(by_process) == {"svc-a", "svc-b"}
    signals = [r["proc"] for r in records(record) if r["t"] == "signal"]
    assert signals[:2] == ["svc-a", "svc-b"]
