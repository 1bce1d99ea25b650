"""A job's last attempt fails: the PR is told (``abandon``) while the job still reads
running, so whoever sees it failed (a waiting test, ``sluice jobs``, a replica's janitor)
sees a PR already told. A worker that lost its job's lease neither retries it nor tells
the PR: the worker that took it over does."""

from __future__ import annotations

from pathlib import Path

from sluice.bot.events.neutral import Event, JanitorEvent, pr_key
from sluice.bot.queue.schema import JobStatus
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker


def _queue(tmp_path: Path, attempts: int) -> tuple[JobQueue, NewJob]:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}", max_attempts=attempts,
                     retry_seconds=0)  # fmt: skip
    event = JanitorEvent(forge="github", repo="octo/r", installation_id=None)
    job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
    assert queue.accept("d-1", "github", "janitor", job, 1.0)
    return queue, job


def test_the_pr_is_told_before_the_job_reads_failed(tmp_path: Path) -> None:
    queue, _ = _queue(tmp_path, attempts=2)
    seen: list[tuple[str, str]] = []

    def fails(_: Event) -> None:
        raise RuntimeError("the forge is down")

    def told(_: Event, why: str) -> None:
        [record] = queue.jobs()
        seen.append((str(record.status), why))

    worker = Worker(queue, handle=fails, abandon=told)
    try:
        assert worker.run_once() and seen == []  # the first attempt: queued again
        assert worker.run_once()
        assert seen == [(str(JobStatus.RUNNING), "the forge is down")]
        [record] = queue.jobs()
        assert record.status == JobStatus.FAILED
    finally:
        queue.close()


def test_a_worker_that_lost_the_lease_neither_retries_nor_tells(tmp_path: Path) -> None:
    queue, _ = _queue(tmp_path, attempts=3)
    told: list[str] = []
    released: list[bool] = []

    def loses_it(_: Event) -> None:
        # Another replica took the job over (its lease ran out here): this worker's hold is gone.
        [record] = queue.jobs()
        released.append(queue.release(record.job.id, record.worker or "", "taken over"))
        raise RuntimeError("the forge is down")

    worker = Worker(queue, handle=loses_it, abandon=lambda _e, why: told.append(why))
    try:
        assert worker.run_once()
        [record] = queue.jobs()
        assert released == [True]
        assert told == [] and record.status == JobStatus.QUEUED
    finally:
        queue.close()
