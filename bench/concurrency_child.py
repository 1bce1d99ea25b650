"""One service process of the concurrency benchmark (``bench/concurrency.py``).

Usage: python bench/concurrency_child.py CONFIG_JSON

The real service app (``create_app``, verifying signatures and storing deliveries through
its group-commit intake) on uvicorn, plus real :class:`sluice.bot.queue.worker.Worker` threads on
a :class:`sluice.bot.queue.store.JobQueue` of the same database, and the scheduler on the
holder of the scheduler lease (:class:`sluice.bot.queue.lease.Leader`), wired as
``create_app`` wires them; the workers' flow is a
:class:`Recorder`: instead of Spark and a forge it notes the repository in the ledger (as
the real flow does first), sleeps a few milliseconds, and appends what it ran
(process, thread, worker, job id, key, delivery, the event's own token, attempt, accepted,
start, end, and whether the attempt failed) as a JSON line to this process's record file,
flushed and fsync'd. Warnings, errors and the queue's "transient conflict" retries are
appended there too, as ``log`` lines, so the parent can count them.

CONFIG_JSON is an object: port, workdir, url (PostgreSQL), name (of this process), workers,
record (file), secret, handle_ms ([low, high]), poll, lease, janitor (seconds; 0: off),
ledger (bool), max_attempts, and optionally scheduler_lease (seconds, 30 by default) and
fsync (false: the record is flushed, not fsync'd; one lock per process serialises its
writes, which would otherwise pace a process's workers by the disk).

SIGTERM stops the server (requests in flight are answered, the intake stores what it has),
then the lease thread (letting go of the lease), then the workers (each finishes its job), then closes the record file; exit code 0.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any

import uvicorn

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import Event, PullRequestEvent, TagEvent
from sluice.bot.flow.ledger import Ledger
from sluice.bot.queue.lease import Leader
from sluice.bot.queue.scheduler import Scheduler
from sluice.bot.queue.store import Job, JobQueue
from sluice.bot.queue.worker import Worker


class RecordFile:
    """An append-only JSON-lines file; every line flushed and fsync'd before returning
    (unless ``fsync`` is false: flushed only)."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] | None = path.open("a", encoding="utf-8")
        self._fsync = fsync

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is None:
                return
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class RecordingQueue(JobQueue):
    """The real queue; a claim also remembers, per thread, the job it handed out, so the
    flow the worker then calls knows which job it is running."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        self._local = threading.local()

    def claim(self, worker: str, now: float) -> Job | None:
        job = super().claim(worker, now)
        self._local.job = job
        return job

    def current(self) -> Job | None:
        job: Job | None = getattr(self._local, "job", None)
        return job


class Recorder:
    """A flow that records what it is asked to run instead of running it."""

    def __init__(
        self,
        url: str,
        *,
        queue: RecordingQueue,
        out: RecordFile,
        process: str,
        handle_ms: tuple[float, float],
        ledger: bool,
    ) -> None:
        self.ledger = Ledger(url)  # each worker its own, as create_app's flows
        self.queue, self.out, self.process = queue, out, process
        self.handle_ms, self.use_ledger = handle_ms, ledger
        self.worker = ""
        self._random = random.Random()

    def handle(self, event: Event) -> None:
        job = self.queue.current()
        start = time.time()
        error = None
        try:
            if self.use_ledger:  # the real flow's first write, on the same database
                self.ledger.seen(f"{event.forge}:{event.repo}", event.installation_id,
                                 int(start * 1000))  # fmt: skip
            time.sleep(self._random.uniform(*self.handle_ms) / 1000)
        except Exception as exc:
            error = str(exc).splitlines()[0][:300] or type(exc).__name__
            raise  # the worker retries the job, as after a failure of the real flow
        finally:
            token = None
            if isinstance(event, PullRequestEvent):
                token = event.title
            elif isinstance(event, TagEvent):
                token = event.tag
            self.out.write({
                "t": "run", "ok": error is None, "error": error, "proc": self.process,
                "pid": os.getpid(), "thread": threading.current_thread().name,
                "worker": self.worker, "job": None if job is None else job.id,
                "delivery": None if job is None else job.delivery_id,
                "key": None if job is None else job.key, "kind": event.kind,
                "action": getattr(event, "action", None), "token": token,
                "attempt": None if job is None else job.attempts,
                "accepted": None if job is None else job.created_ts, "start": start,
                "end": time.time(),
            })  # fmt: skip

    def give_up(self, event: Event, error: str) -> None:
        job = self.queue.current()
        self.out.write({"t": "give_up", "proc": self.process, "kind": event.kind,
                        "job": None if job is None else job.id, "error": error})  # fmt: skip


class _LogToRecord(logging.Handler):
    """Warnings and errors, and the queue's transient-conflict retries, as ``log`` lines."""

    def __init__(self, out: RecordFile, process: str) -> None:
        super().__init__(logging.INFO)
        self.out, self.process = out, process

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno < logging.WARNING and "transient conflict" not in message:
            return
        if record.exc_info and record.exc_info[1] is not None:
            message += f" [{record.exc_info[0].__name__ if record.exc_info[0] else ''}: "
            message += f"{record.exc_info[1]}]"
        self.out.write({"t": "log", "proc": self.process, "level": record.levelname,
                        "logger": record.name, "message": message[:2000]})  # fmt: skip


def main(config: dict[str, Any]) -> None:
    process = str(config["name"])
    out = RecordFile(Path(config["record"]), fsync=bool(config.get("fsync", True)))
    root = logging.getLogger()
    root.addHandler(_LogToRecord(out, process))  # stderr then holds only the unexpected
    root.setLevel(logging.WARNING)
    logging.getLogger("sluice").setLevel(logging.INFO)  # for "transient conflict"

    lease = float(config["lease"])
    settings = ServiceSettings(
        webhook_secret=config["secret"], github_token="ghp_benchDummyTokenNeverUsed",
        workdir=Path(config["workdir"]), database_url=config["url"],
        job_lease_seconds=lease, max_attempts=int(config["max_attempts"]),
        janitor_interval_seconds=float(config["janitor"]),
        repositories=("sluice-bench/*",),  # the bench's repositories: repo-0, repo-1, ...
    )  # fmt: skip
    app = create_app(settings, start_workers=False)
    queue = RecordingQueue(settings.state_url(), max_attempts=settings.max_attempts,
                           lease_seconds=lease)  # fmt: skip
    low, high = (float(x) for x in config["handle_ms"])
    workers: list[Worker] = []
    recorders: list[Recorder] = []
    for _ in range(int(config["workers"])):
        recorder = Recorder(settings.state_url(), queue=queue, out=out, process=process,
                            handle_ms=(low, high), ledger=bool(config["ledger"]))  # fmt: skip
        # As create_app builds its workers: heartbeat a quarter of the lease; the janitor
        # is the scheduler's, below.
        worker = Worker(queue, handle=recorder.handle, abandon=recorder.give_up,
                        repositories=recorder.ledger.repositories,
                        poll_seconds=float(config["poll"]),
                        heartbeat_seconds=lease / 4)  # fmt: skip
        recorder.worker = worker.name
        workers.append(worker)
        recorders.append(recorder)

    # uvicorn handles SIGTERM, then restores this handler and raises the signal again: it
    # must not kill the process before the workers are stopped below.
    def stopping(signum: int, _frame: FrameType | None) -> None:
        out.write({"t": "signal", "proc": process, "signal": signum})

    signal.signal(signal.SIGTERM, stopping)
    for worker in workers:
        worker.start()
    # As create_app: the scheduler (the janitor's jobs) runs on the lease's holder only.
    ledger = Ledger(settings.state_url())
    scheduler = Scheduler(queue, repositories=ledger.repositories, serves=settings.serves,
                          janitor_seconds=float(config["janitor"]))  # fmt: skip
    leader = Leader(queue, duty=scheduler.schedule,
                    seconds=float(config.get("scheduler_lease", 30.0)))  # fmt: skip
    leader.start()
    try:
        uvicorn.run(app, host="127.0.0.1", port=int(config["port"]), log_level="warning")
    finally:
        leader.stop(timeout=10)
        ledger.close()
        for worker in workers:
            worker.stop(timeout=30)
        for recorder in recorders:
            recorder.ledger.close()
        queue.close()
        out.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
