"""The scheduler's lease: one replica at a time runs the scheduler and the janitor's purge,
on SQLite and on a real PostgreSQL. Takers race (threads, each with its own connections),
leases expire and are handed over, a holder that is killed is replaced by another process
once its lease has expired, and with two replicas each period's run is queued once, by
the holder alone."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.queue.lease import Leader
from sluice.bot.queue.store import JobQueue, JobStatus

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    found: str = request.getfixturevalue("fresh_postgres_url")
    return found


@pytest.fixture
def open_queue(url: str) -> Iterator[Callable[[], JobQueue]]:
    opened: list[JobQueue] = []

    def open_() -> JobQueue:
        opened.append(JobQueue(url))
        return opened[-1]

    yield open_
    for queue in opened:
        queue.close()


def _race(queues: list[JobQueue], holders: list[str], now: float) -> dict[str, bool]:
    """Every queue takes the lease for its holder at once (a barrier); who got it."""
    start = threading.Barrier(len(queues))
    got: dict[str, bool] = {}

    def take(queue: JobQueue, holder: str) -> None:
        start.wait()
        got[holder] = queue.take_lease("scheduler", holder, now, 30.0)

    threads = [threading.Thread(target=take, args=p) for p in zip(queues, holders, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return got


def test_of_many_racing_takers_exactly_one_holds_the_lease(
    open_queue: Callable[[], JobQueue],
) -> None:
    queues = [open_queue() for _ in range(8)]  # each its own engine and connections
    holders = [f"replica-{n}" for n in range(len(queues))]
    winners: list[str] = []
    for round_ in range(12):
        now = 1000.0 + round_ * 100  # past the last round's lease (30 s): free again
        got = _race(queues, holders, now)
        won = [holder for holder, taken in got.items() if taken]
        assert len(got) == len(queues) and len(won) == 1, got
        assert queues[0].lease_holder("scheduler", now) == (won[0], now + 30.0)
        winners.append(won[0])
    # A loser renewing in the same round is still refused: the winner's lease stands.
    last = winners[-1]
    other = next(h for h in holders if h != last)
    assert not queues[1].take_lease("scheduler", other, 1000.0 + 11 * 100 + 1, 30.0)


def test_renewal_expiry_and_letting_go(open_queue: Callable[[], JobQueue]) -> None:
    queue, other = open_queue(), open_queue()
    assert queue.lease_holder("scheduler", 0.0) is None
    assert queue.take_lease("scheduler", "a", 0.0, 30.0)
    assert not other.take_lease("scheduler", "b", 10.0, 30.0)  # a's until 30
    assert queue.take_lease("scheduler", "a", 20.0, 30.0)  # renewed: until 50
    assert not other.take_lease("scheduler", "b", 40.0, 30.0)
    assert other.lease_holder("scheduler", 49.0) == ("a", 50.0)
    assert other.lease_holder("scheduler", 50.5) is None  # expired: nobody holds it
    assert other.take_lease("scheduler", "b", 50.5, 30.0)  # a stopped renewing: b's now
    assert not queue.take_lease("scheduler", "a", 51.0, 30.0)  # a is back: too late
    assert queue.lease_holder("scheduler", 51.0) == ("b", 80.5)
    assert queue.take_lease("janitor-test", "a", 51.0, 30.0)  # another name, another lease
    assert not queue.drop_lease("scheduler", "a")  # not a's to let go
    assert other.drop_lease("scheduler", "b")
    assert queue.lease_holder("scheduler", 52.0) is None
    assert queue.take_lease("scheduler", "a", 52.0, 30.0)  # at once, before b's expiry


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_duty_runs_only_on_the_holder_and_hands_over(
    open_queue: Callable[[], JobQueue], caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(1000.0)
    calls: list[tuple[str, float]] = []

    def leader(who: str) -> Leader:
        def duty(now: float) -> None:
            calls.append((who, now))

        return Leader(open_queue(), duty=duty, seconds=30.0, holder=who, clock=clock)

    leaders = [leader("a"), leader("b")]
    a, b = leaders
    caplog.set_level(logging.INFO, logger="sluice.bot.queue.lease")
    assert a.step() and a.held
    assert not b.step() and not b.held
    clock.now += a.every
    assert a.step() and not b.step()
    assert calls == [("a", 1000.0), ("a", 1010.0)]
    assert [r.getMessage() for r in caplog.records] == ["scheduler lease taken by this replica (a)"]
    clock.now += 30.5  # a stops renewing (it hangs): its lease runs out
    assert not a.held
    assert b.step() and b.held
    assert not a.step() and not a.held
    assert calls[2:] == [("b", 1040.5)]
    assert [r.getMessage() for r in caplog.records][1:] == [
        "scheduler lease taken by this replica (b)",
        "scheduler lease lost by this replica (a) to b",
    ]
    b.stop()  # lets go: a takes it at its next try, before b's lease would expire
    assert a.step()
    assert calls[3:] == [("a", 1040.5)]
    assert "scheduler lease let go by this replica (b)" in caplog.messages


def test_a_failing_duty_keeps_the_lease(open_queue: Callable[[], JobQueue]) -> None:
    tries: list[float] = []

    def duty(now: float) -> None:
        tries.append(now)
        raise RuntimeError("the database hiccuped")

    clock = Clock(500.0)
    leader = Leader(open_queue(), duty=duty, seconds=30.0, holder="a", clock=clock)
    assert leader.step()
    clock.now += 10
    assert leader.step() and tries == [500.0, 510.0]


def test_the_scheduler_lease_is_migration_four(open_queue: Callable[[], JobQueue]) -> None:
    from sluice.bot.queue.schema import MIGRATIONS, leases

    assert [m.number for m in MIGRATIONS][-1] == 4 and leases.name == "sluice_leases"
    queue = open_queue()
    assert queue.take_lease("scheduler", "a", 0.0, 1.0)


# -- replicas in processes of their own ---------------------------------------------------


def _start(url: str, name: str, record: Path, seconds: float) -> subprocess.Popen[bytes]:
    config = {
        "url": url, "name": name, "seconds": seconds, "run_seconds": 1.0, "record": str(record),
        "repos": ["github:octo/a", "github:octo/b"],
    }  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.lease_child", json.dumps(config)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _rows(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def _until(found: Callable[[], bool], what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 90
    while not found():
        for proc in procs:
            assert proc.poll() is None, f"a replica exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"still waiting for {what} after 90 s"
        time.sleep(0.1)


def _duties(record: Path, holder: str) -> list[dict[str, Any]]:
    return [r for r in _rows(record) if r["t"] == "duty" and r["holder"] == holder]


@pytest.mark.slow  # two processes and a 6 s lease waited out: 12-16 s, nearly all waiting
def test_two_replicas_one_scheduler_and_a_killed_holder_replaced(url: str, tmp_path: Path) -> None:
    JobQueue(url).close()  # the tables, as a first start makes them
    record = tmp_path / "record.jsonl"
    seconds = 6.0  # renewed every 2 s: the holder keeps it through a 4 s stall
    first = _start(url, "first", record, seconds)
    procs = [first]
    try:
        _until(lambda: len(_duties(record, "first")) >= 1, "the first replica's duty", procs)
        second = _start(url, "second", record, seconds)
        procs.append(second)
        _until(lambda: any(r["t"] == "up" for r in _rows(record) if r["holder"] == "second"),
               "the second replica's first try", procs)  # fmt: skip
        up = next(r["at"] for r in _rows(record) if r["t"] == "up" and r["holder"] == "second")
        # Three renewals of the first while the second tries too: the second never runs.
        _until(lambda: sum(r["now"] > up for r in _duties(record, "first")) >= 3,
               "three duties of the first after the second started", procs)  # fmt: skip
        assert _duties(record, "second") == []
        first.send_signal(signal.SIGKILL)
        first.wait()
        procs.remove(first)
        queue = JobQueue(url)
        try:
            held = queue.lease_holder("scheduler", time.time())
            assert held is not None and held[0] == "first"  # still the dead one's
            expires = held[1]
            _until(lambda: len(_duties(record, "second")) >= 2, "the second's duty", procs)
            took = _duties(record, "second")[0]["now"]
            assert took >= expires  # taken once the dead one's lease ran out, not before
            assert [r["holder"] for r in _duties(record, "first")] and all(
                r["now"] < expires for r in _duties(record, "first")
            )
            second.send_signal(signal.SIGTERM)
            assert second.wait(60) == 0
            procs.remove(second)
            assert queue.lease_holder("scheduler", time.time()) is None  # let go on stop
            # Each period's run queued once, by the holder of the time: every job the
            # duties say they queued is in the queue, and no period twice.
            jobs = queue.jobs(status=JobStatus.QUEUED, limit=10_000)
            periods = [r.job.delivery_id for r in jobs]
            assert len(periods) == len(set(periods))
            queued = sum(r["queued"] for r in _rows(record) if r["t"] == "duty")
            assert queued == len(jobs) > 0
            assert {r.job.kind for r in jobs} == {"run"}
        finally:
            queue.close()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
