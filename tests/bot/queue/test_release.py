"""A running job put back by a stopping service (the drain ran out): queued again at once,
in its place, its attempt not counted; and a worker whose job was put back neither retries
it nor gives up on it when the job then fails."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sluice.bot.events.neutral import JanitorEvent, pr_key
from sluice.bot.queue.store import JobQueue, JobStatus, NewJob
from sluice.bot.queue.worker import Worker

NOW = 1_800_000_000.0


def janitor_job() -> NewJob:
    event = JanitorEvent(forge="github", repo="octo/warehouse", installation_id=None)
    return NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())


def test_a_released_job_is_queued_again_at_once_without_counting_the_attempt(
    tmp_path: Path,
) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}", max_attempts=1, lease_seconds=600)
    try:
        queue.accept("d1", "github", "janitor", janitor_job(), NOW)
        job = queue.claim("w1", NOW)
        assert job is not None and job.attempts == 1
        assert not queue.release(job.id, "w2", "stopping")  # not w2's
        assert queue.release(job.id, "w1", "stopping")
        record = queue.job(job.id)
        assert record is not None and record.status == JobStatus.QUEUED
        assert record.job.attempts == 0 and record.lease_until is None and record.worker is None
        assert record.error == "stopping"
        assert not queue.finish(job.id, "w1", now=NOW)  # no longer w1's
        # Claimable at once, long before its lease would have run out; with max_attempts=1
        # it still has its one attempt.
        again = queue.claim("w2", NOW + 1)
        assert again is not None and again.id == job.id and again.attempts == 1
        assert queue.finish(job.id, "w2", now=NOW + 2)
    finally:
        queue.close()


def test_a_worker_does_not_give_up_on_a_job_it_put_back(tmp_path: Path) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}", max_attempts=1, lease_seconds=600)
    inside, let_go = threading.Event(), threading.Event()
    abandoned: list[Any] = []

    def handle(_event: Any) -> None:
        inside.set()
        let_go.wait(30)
        raise RuntimeError("the Spark server went away as the service stopped")

    worker = Worker(
        queue, handle=handle, abandon=lambda e, m: abandoned.append(m), poll_seconds=0.05
    )
    try:
        queue.accept("d1", "github", "janitor", janitor_job(), NOW)
        worker.start()
        assert inside.wait(30)
        assert worker.running is not None
        assert not worker.stop(timeout=0.2)  # still running: the drain ran out
        released = worker.release("stopping")
        assert released is not None
        let_go.set()
        assert worker.stop(timeout=30)
        assert abandoned == []  # with max_attempts=1, a failure would have given up
        record = queue.job(released.id)
        assert record is not None and record.status == JobStatus.QUEUED
        assert record.job.attempts == 0
        assert worker.running is None and worker.release("stopping") is None
    finally:
        let_go.set()
        worker.stop(timeout=30)
        queue.close()
