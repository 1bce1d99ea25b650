"""The worker: takes jobs from the durable queue and hands their events to the flow.

Runs as a thread in the service (several with ``SLUICE_WORKERS``, and in several service
processes sharing a PostgreSQL state database). A job holds a lease that a heartbeat
renews while it runs; when a worker dies, its job's lease runs out and :meth:`recover`
puts the job back, up to the queue's attempt limit, after which the PR is told, and the
event's content key is recorded as handled (failed): a replay of it does not run either
(see :mod:`sluice.bot.events.neutral`). Jobs of a repository the service does not serve
(``SLUICE_REPOSITORIES``, set after they were queued) fail without running.

A running build that a newer head supersedes is stopped (supersede-cancel): while a job
whose event supersedes (:func:`~sluice.bot.events.neutral.supersedes`: a PR's new head)
runs, the worker looks for a queued job of its key and kind for another head whose event
supersedes too, at once when this process queues work and every ``cancel_poll_seconds``
(another process's delivery); found, it stops the job (:mod:`sluice.core.spark.cancel`:
its Spark work killed or interrupted, the flow tells the PR) and ends it superseded,
neither retried nor given up, so the newer head's build starts.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from sluice.bot.events.neutral import Event, event_from_json, supersedes
from sluice.bot.present.metrics import Registry
from sluice.bot.queue import fairness
from sluice.bot.queue.scheduler import Scheduler
from sluice.bot.queue.store import Job, JobQueue
from sluice.core.errors import StateError
from sluice.core.spark import cancel

log = logging.getLogger(__name__)


class Worker:
    """One thread processing jobs one at a time."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        handle: Callable[[Event], None],
        abandon: Callable[[Event, str], None],
        repositories: Callable[[], Iterable[tuple[str, int | None]]] = lambda: (),
        metrics: Registry | None = None,
        poll_seconds: float = 0.5,
        heartbeat_seconds: float = 10.0,
        janitor_seconds: float = 0.0,
        run_seconds: float = 0.0,
        drift_seconds: float = 0.0,
        scrub: Callable[[str], str] = lambda text: text,
        serves: Callable[[str, str], bool] = lambda forge, repo: True,
        cancel_poll_seconds: float = 1.0,
    ) -> None:
        self.queue, self.metrics = queue, metrics
        # The flow, as callables: run an event; give up on one for good (tell the PR and
        # record it as handled); the repositories seen (the schedules' repositories).
        self.handle, self.abandon, self.repositories = handle, abandon, repositories
        self.serves = serves  # (forge, repository) -> whether the service serves it
        self.poll, self.beat, self.scrub = poll_seconds, heartbeat_seconds, scrub
        # How often a running build looks for a newer head (this process's deliveries
        # wake it at once).
        self.cancel_poll = cancel_poll_seconds
        # Each repository's janitor and prod run, every this many seconds (0: never). The
        # service gives them to its scheduler's lease holder instead (lease.Leader), not to
        # each worker.
        self.scheduler = Scheduler(
            queue,
            repositories=repositories,
            serves=serves,
            janitor_seconds=janitor_seconds,
            run_seconds=run_seconds,
            drift_seconds=drift_seconds,
        )
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._nudge = threading.Event()  # set when this process queued work, or on stop
        self._thread: threading.Thread | None = None
        self._current: Job | None = None  # the job this worker is running, if any
        self._let_go: int | None = None  # the job put back by release(): not to retry

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.run, name=f"sluice-worker-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Take no more jobs, and wait up to ``timeout`` seconds for the running one to
        end; whether the worker's thread ended (False: a job is still running)."""
        self.stopping()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stopping(self) -> None:
        """Take no more jobs (the running one goes on)."""
        self._stop.set()
        self._nudge.set()

    @property
    def running(self) -> Job | None:
        """The job this worker is running now, if any."""
        return self._current

    def release(self, reason: str) -> Job | None:
        """Put the job still running back in the queue, as it was before this attempt
        (its service stops before it could finish: see :meth:`JobQueue.release`); the job
        put back, or None when there was none (or it had just ended)."""
        job = self._current
        if job is None:
            return None
        self._let_go = job.id  # its attempt, if it now fails, is neither retried nor given up
        if not self.queue.release(job.id, self.name, reason):
            return None
        return job

    def run(self) -> None:
        """Process jobs until stopped; recover abandoned jobs now and then. Idle, it looks
        again every ``poll_seconds``, and at once when this process queues a job."""
        last_recover = 0.0
        forget = self.queue.on_work(self._nudge.set)
        try:
            while not self._stop.is_set():
                try:
                    if time.monotonic() - last_recover > self.beat:
                        self.recover()
                        self.schedule(time.time())
                        last_recover = time.monotonic()
                    self._nudge.clear()  # before looking: a job queued from now on wakes it
                    if not self.run_once():
                        self._nudge.wait(self.poll)
                except Exception:  # the loop must survive a database hiccup
                    log.exception("worker loop error; retrying")
                    self._stop.wait(self.poll)
        finally:
            forget()

    def recover(self) -> None:
        """Put back jobs whose worker died; report the ones out of attempts."""
        for job in self.queue.recover(time.time()):
            log.error(
                "job %s (%s) failed for good: its worker died on the last attempt", job.id, job.key
            )
            self._give_up(job, "the Sluice worker stopped while running this job, on every attempt")

    def schedule(self, now: float) -> int:
        """Queue the periodic jobs this worker was given the periods of (none in the
        service: see :mod:`sluice.bot.queue.scheduler`); how many were new."""
        return self.scheduler.schedule(now) if self.scheduler.active else 0

    def run_once(self) -> bool:
        """Process one job if there is one; False when the queue had none ready."""
        job = self.queue.claim(self.name, time.time())
        if job is None:
            return False
        event = event_from_json(job.payload)
        if not self.serves(event.forge, event.repo):
            log.warning(
                "job %s (%s) not run: %s:%s is not in SLUICE_REPOSITORIES",
                job.id,
                job.key,
                event.forge,
                event.repo,
            )
            self.queue.finish(
                job.id,
                self.name,
                now=time.time(),
                error=(
                    f"not run: the repository {event.repo} is not in the service's "
                    "SLUICE_REPOSITORIES"
                ),
            )
            return True
        if self.metrics is not None and job.attempts == 1:
            cls = fairness.job_class(job.key, job.kind).label
            wait = max(0.0, time.time() - job.created_ts)
            self.metrics.observe("sluice_queue_wait_seconds", wait, **{"class": cls})
        began = time.monotonic()
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, done), daemon=True)
        beat.start()
        stop = cancel.Cancel()
        wake = threading.Event()  # the watch's: work queued in this process, or the end
        watch = None
        if supersedes(event):
            watch = threading.Thread(target=self._watch, args=(job, stop, done, wake), daemon=True)
            watch.start()
        self._current = job
        try:
            with cancel.scope(stop):
                self.handle(event)
        except Exception as exc:
            message = self.scrub(str(exc) or exc.__class__.__name__)
            if self._let_go == job.id:  # put back by release(): its next run is its attempt
                log.info("job %s (%s) stopped after it was put back: %s", job.id, job.key, message)
                outcome = "released"
            elif stop.reason is not None:  # stopped for a newer head: it takes its place
                log.info("job %s (%s) stopped: %s", job.id, job.key, stop.reason)
                self.queue.finish(
                    job.id, self.name, error=stop.reason, now=time.time(), superseded=True
                )
                outcome = "superseded"
            else:
                outcome = self._failed(job, message)
        else:
            self.queue.finish(job.id, self.name, now=time.time())
            outcome = "done"
        finally:
            self._current = None
            done.set()
            wake.set()
            beat.join()
            if watch is not None:
                watch.join()
        if self.metrics is not None:
            self.metrics.observe(
                "sluice_job_duration_seconds",
                time.monotonic() - began,
                kind=job.kind,
                outcome=outcome,
            )
        return True

    def _failed(self, job: Job, message: str) -> str:
        """After a failed attempt: retry the job or give up on it."""
        log.warning("job %s (%s) attempt %s failed: %s", job.id, job.key, job.attempts, message)
        last = job.attempts >= self.queue.max_attempts
        if last:  # the PR is told while the job still runs: once it reads failed, it is told
            self._give_up(job, message)
        if self.queue.retry(job.id, self.name, message, time.time()):
            if self.metrics is not None:
                self.metrics.inc("sluice_job_retries_total", kind=job.kind)
        elif not last:  # its lease lost: another worker runs it now, and tells the PR
            log.warning("job %s (%s): no longer this worker's, not retried here", job.id, job.key)
        return "error"

    def _watch(
        self, job: Job, stop: cancel.Cancel, done: threading.Event, wake: threading.Event
    ) -> None:
        """Stop ``job`` once a newer head supersedes it (see the module docstring)."""
        forget = self.queue.on_work(wake.set)
        try:
            while not done.is_set():
                wake.clear()
                try:
                    newer = self.queue.newer_heads(job)
                except StateError:
                    log.warning("job %s: could not look for a newer head", job.id, exc_info=True)
                    newer = []
                for new_id, head, payload in newer:
                    if supersedes(event_from_json(payload)):
                        stop.cancel(f"superseded by job {new_id} (head {head})")
                        return
                wake.wait(self.cancel_poll)
        finally:
            forget()

    def _heartbeat(self, job: Job, done: threading.Event) -> None:
        while not done.wait(self.beat):
            if not self.queue.heartbeat(job.id, self.name, time.time()):
                log.warning("job %s: lease lost to another worker", job.id)
                return

    def _give_up(self, job: Job, message: str) -> None:
        event = event_from_json(job.payload)  # a document the queue stored: it parsed before
        try:
            self.abandon(event, message)
        except Exception:
            log.exception("could not record the failure of job %s", job.id)
