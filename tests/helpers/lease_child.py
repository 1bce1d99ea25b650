"""A replica's scheduler for the lease tests: the real queue, scheduler and lease holder
(:class:`~sluice.bot.queue.lease.Leader`) wired as ``create_app`` wires them, in a process
of its own so that a test can kill it.

Run as ``python -m tests.helpers.lease_child CONFIG_JSON``; CONFIG_JSON is an object:
``url`` (the state database), ``name`` (the holder's name), ``seconds`` (the lease),
``run_seconds`` (the scheduled runs' period), ``repos`` (``forge:owner/name`` strings),
``record`` (a JSON-lines file). Each duty call appends ``{"t": "duty", "holder", "now",
"queued"}`` (fsync'd); ``{"t": "up"}`` once the first try is over; SIGTERM stops the
holder, which lets go of the lease, then ``{"t": "exit"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from sluice.bot.queue.lease import Leader
from sluice.bot.queue.scheduler import Scheduler
from sluice.bot.queue.store import JobQueue


def main(config: dict[str, Any]) -> None:
    record = Path(config["record"])
    name = str(config["name"])

    def write(**row: Any) -> None:
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"holder": name, "pid": os.getpid(), **row}) + "\n")
            out.flush()
            os.fsync(out.fileno())

    queue = JobQueue(str(config["url"]))
    repos = [(str(r), None) for r in config["repos"]]
    scheduler = Scheduler(
        queue, repositories=lambda: repos, run_seconds=float(config["run_seconds"])
    )

    def duty(now: float) -> None:
        write(t="duty", now=now, queued=scheduler.schedule(now))

    leader = Leader(queue, duty=duty, seconds=float(config["seconds"]), holder=name)
    stopped = threading.Event()

    def on_term(signum: int, _frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, on_term)
    leader.step()
    write(t="up", at=time.time())
    while not stopped.wait(leader.every):
        leader.step()
    leader.stop()
    queue.close()
    write(t="exit")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
