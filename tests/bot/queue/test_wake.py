"""An idle worker starts a job its own process queued at once, not at its next poll; a job
queued by another process (another queue object on the same database) waits for the poll;
a stopping worker wakes at once too."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from sluice.bot.events.neutral import JanitorEvent, pr_key
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker

POLL = 3600.0  # longer than any wait below: only a wake-up can start the jobs


def janitor_job(repo: str) -> NewJob:
    event = JanitorEvent(forge="github", repo=repo, installation_id=None)
    return NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())


def test_a_job_queued_in_the_same_process_starts_without_waiting_for_the_poll(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    queue, other = JobQueue(url), JobQueue(url)
    handled: list[Any] = []
    seen = threading.Event()

    def handle(event: Any) -> None:
        handled.append(event.repo)
        seen.set()

    worker = Worker(queue, handle=handle, abandon=lambda e, m: None, poll_seconds=POLL)
    try:
        worker.start()
        time.sleep(0.2)  # the worker found nothing and waits for its poll
        other.accept("d0", "github", "janitor", janitor_job("octo/other"), time.time())
        assert not seen.wait(1.0), "another process's job cannot wake this worker"
        queue.accept("d1", "github", "janitor", janitor_job("octo/warehouse"), time.time())
        assert seen.wait(30), "the job queued here did not wake the idle worker"
        deadline = time.monotonic() + 30
        while len(handled) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        # Woken, the worker takes everything queued, the other process's job included.
        assert sorted(handled) == ["octo/other", "octo/warehouse"]
        assert worker.stop(timeout=30), "the stopping worker went on waiting for its poll"
        queue.accept("d2", "github", "janitor", janitor_job("octo/third"), time.time())
        assert len(handled) == 2  # a stopped worker is no longer listening
    finally:
        worker.stop(timeout=30)
        queue.close()
        other.close()


def test_a_duplicate_delivery_wakes_nobody(tmp_path: Path) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}")
    calls: list[int] = []
    forget = queue.on_work(lambda: calls.append(1))
    try:
        assert queue.accept("d1", "github", "janitor", janitor_job("octo/w"), time.time())
        assert not queue.accept("d1", "github", "janitor", janitor_job("octo/w"), time.time())
        assert calls == [1]
        forget()
        assert queue.accept("d2", "github", "janitor", janitor_job("octo/w"), time.time())
        assert calls == [1]
    finally:
        queue.close()
