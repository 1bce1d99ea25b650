"""The scheduler: queues each repository's janitor and scheduled run of prod once a
period, and forgets old finished jobs (the janitor's purge of the queue).

In the service one replica at a time runs it, the holder of the scheduler's lease
(:class:`~sluice.bot.queue.lease.Leader`). The delivery id still names the period, so a
second caller in the same period (a holder paused past its lease while another took over,
or a :class:`~sluice.bot.queue.worker.Worker` given the periods itself, as tests and
benchmarks do) queues nothing more: the queue keeps the first and refuses the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sluice.bot.events.neutral import DriftCheckEvent, JanitorEvent, ScheduledRunEvent, pr_key
from sluice.bot.queue.store import JobQueue, NewJob

KEEP_FINISHED_SECONDS = 30 * 86400.0
"""Finished jobs and their deliveries are forgotten after this (GitHub redelivers only
for a few days)."""


class Scheduler:
    """Queues the periodic jobs of the repositories seen.

    Args:
        queue: Where the jobs go.
        repositories: The repositories seen: (``forge:owner/name``, installation id).
        serves: (forge, repository) -> whether the service serves it (others are skipped).
        janitor_seconds: Each repository's janitor, every this many seconds (0: never; the
            purge of old finished jobs goes with it).
        run_seconds: Each repository's scheduled run of prod, every this many seconds (0:
            never).
        drift_seconds: Each repository's drift check of prod, every this many seconds (0:
            never).
    """

    def __init__(
        self,
        queue: JobQueue,
        *,
        repositories: Callable[[], Iterable[tuple[str, int | None]]],
        serves: Callable[[str, str], bool] = lambda forge, repo: True,
        janitor_seconds: float = 0.0,
        run_seconds: float = 0.0,
        drift_seconds: float = 0.0,
    ) -> None:
        self.queue, self.repositories, self.serves = queue, repositories, serves
        self.every: dict[type[JanitorEvent | ScheduledRunEvent | DriftCheckEvent], float] = {
            JanitorEvent: janitor_seconds,
            ScheduledRunEvent: run_seconds,
            DriftCheckEvent: drift_seconds,
        }
        self._purged: int | None = None

    @property
    def active(self) -> bool:
        """Whether it has anything to do (a period set)."""
        return any(seconds > 0 for seconds in self.every.values())

    def schedule(self, now: float) -> int:
        """Queue each repository's janitor and scheduled run of prod, once per period of
        their settings, and purge once a janitor period; returns how many jobs were new.

        A service that was down for several periods queues one job on its return, not one
        per missed period (a run processes every interval due since the last one).
        """
        queued = 0
        for kind, seconds in self.every.items():
            if seconds <= 0:
                continue
            period = int(now // seconds)
            if kind is JanitorEvent and period != self._purged:  # once a period
                self._purged = period
                self.queue.purge(now, KEEP_FINISHED_SECONDS)
            for repo, installation in self.repositories():
                forge, _, name = repo.partition(":")
                if not self.serves(forge, name):
                    continue
                event = kind(forge=forge, repo=name, installation_id=installation)
                job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
                delivery = f"{event.kind}:{repo}:{period}"
                if self.queue.accept(delivery, forge, event.kind, job, now):
                    queued += 1
        return queued
