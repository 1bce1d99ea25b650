"""The service's janitor schedule: one janitor job per repository and period, however many
workers (of however many processes) ask, queued under the repository's prod key."""

from __future__ import annotations

from pathlib import Path

from sluice.bot.events.neutral import JanitorEvent, event_from_json
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.queue.store import JobQueue
from sluice.bot.queue.worker import Worker


def _worker(url: str, tmp_path: Path, queue: JobQueue, seconds: float) -> tuple[Worker, Deps]:
    def no_forge(event: object) -> object:
        raise AssertionError("scheduling needs no forge")

    deps = make_deps(project_python="on", forge_for=no_forge, workdir=tmp_path, state_url=url)  # type: ignore[arg-type]
    return Worker(queue, **dispatch.bound(deps), janitor_seconds=seconds), deps


def test_each_repository_gets_one_janitor_job_per_period(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    queue = JobQueue(url)
    (first, first_deps), (second, second_deps) = (
        _worker(url, tmp_path, queue, 3600) for _ in range(2)
    )
    first_deps.ledger.seen("github:octo/a", 11, 1)
    first_deps.ledger.seen("github:octo/b", None, 1)
    try:
        assert first.schedule(7200.0) == 2
        assert second.schedule(7300.0) == 0  # the same hour: already queued
        assert first.schedule(10900.0) == 2  # the next hour
        jobs = []
        while (job := queue.claim("w", 11000.0)) is not None:
            jobs.append(job)
            queue.finish(job.id, "w", now=11000.0)
        assert (
            sorted(j.key for j in jobs) == ["github:octo/a:prod"] * 2 + ["github:octo/b:prod"] * 2
        )
        event = event_from_json(jobs[0].payload)
        assert isinstance(event, JanitorEvent) and event.repo in ("octo/a", "octo/b")
        off, off_deps = _worker(url, tmp_path, queue, 0)
        assert off.schedule(20000.0) == 0  # turned off
        off_deps.close()
    finally:
        for deps in (first_deps, second_deps):
            deps.close()
        queue.close()
