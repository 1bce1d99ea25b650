"""Benchmark: how many writers at once SQLite state takes before a write fails "database is
locked" (issue 45, point 3).

Usage: python bench/sqlite_writers.py [--threads 4,8,16,32,64] [--hold-ms 0,20]
                                      [--seconds 8] [--code DIR]

One state file, the real ``JobQueue`` and ``Ledger`` on it (one engine each, as the service
opens them), and ``--threads`` threads writing at once for ``--seconds``: each in turn
accepts a delivery and its job, claims a ready job and finishes it (the queue), records a
PR head, a repository and a comment (the ledger), and runs one write transaction of the
queue that holds SQLite's write lock ``--hold-ms`` (``together``: the time a writer keeps
the lock while its thread is not running; on a loaded machine, a transaction's holder
descheduled). Each cell of ``--threads`` x ``--hold-ms`` prints the writes done, the
longest wait of one write, and the writes that failed with "database is locked" (a
``StateError`` a user would see).

``--code DIR``: import ``sluice`` from ``DIR`` instead (a checkout of another commit, e.g.
``git archive <commit> sluice | tar -x -C DIR``), to measure the code before a change.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def cell(threads: int, hold_ms: float, seconds: float, work: Path) -> dict[str, Any]:
    """Run one cell on a new state file; its figures."""
    from sluice.bot.flow.ledger import Ledger
    from sluice.bot.queue.store import JobQueue, NewJob
    from sluice.core.errors import StateError

    url = f"sqlite:///{work / f'state-{threads}-{hold_ms:g}.db'}"
    queue = JobQueue(url)
    ledger = Ledger(url)
    waits: list[float] = []
    locked: list[str] = []
    other: list[str] = []
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    start = threading.Barrier(threads)

    def write(action: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        got = None
        try:
            got = action(*args, **kwargs)
        except StateError as exc:
            (locked if "database is locked" in str(exc) else other).append(str(exc)[:300])
        with lock:
            waits.append(time.monotonic() - began)
            done[0] += 1
        return got

    def held() -> None:
        with queue.together("hold the write lock"):
            queue.depth()  # a read inside the writer's transaction
            time.sleep(hold_ms / 1000)

    def worker(t: int) -> None:
        start.wait()
        i = 0
        while time.monotonic() < deadline:
            i += 1
            job = NewJob(key=f"github:o/r#{t}", kind="pull_request", payload={"i": i})
            write(queue.accept, f"t{t}-{i}", "github", "pull_request", job, time.time())
            claimed = write(queue.claim, f"w{t}", time.time())
            if claimed is not None:
                write(queue.finish, claimed.id, f"w{t}", now=time.time())
            write(ledger.record_pr_head, "github:o/r", t, f"{i:040x}", i, i)
            write(ledger.seen, "github:o/r", 42, i, sha=f"s{t}")
            write(ledger.save_comment, "github:o/r", t, f"body {i}", {})
            if hold_ms:
                write(held)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    began = time.monotonic()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.monotonic() - began
    queue.close()
    ledger.close()
    return {
        "threads": threads,
        "hold_ms": hold_ms,
        "writes": done[0],
        "per_s": done[0] / elapsed,
        "p50": statistics.median(waits) if waits else 0.0,
        "p99": sorted(waits)[int(len(waits) * 0.99)] if waits else 0.0,
        "max": max(waits, default=0.0),
        "locked": len(locked),
        "other": other[:2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="4,8,16,32,64")
    parser.add_argument("--hold-ms", default="0,20")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--code", type=Path, default=ROOT)
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    import sluice

    print(f"sluice from {Path(sluice.__file__).parent}; {args.seconds:g} s a cell")
    print(
        f"  {'threads':>7} {'hold ms':>7} {'writes':>7} {'writes/s':>8} {'wait p50':>9} "
        f"{'wait p99':>9} {'wait max':>9} {'locked':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="sluice-sqlite-writers-") as tmp:
        for hold in (float(h) for h in args.hold_ms.split(",")):
            for threads in (int(n) for n in args.threads.split(",")):
                got = cell(threads, hold, args.seconds, Path(tmp))
                print(
                    f"  {got['threads']:>7} {got['hold_ms']:>7g} {got['writes']:>7} "
                    f"{got['per_s']:>8.0f} {got['p50'] * 1000:>7.0f}ms {got['p99'] * 1000:>7.0f}ms "
                    f"{got['max'] * 1000:>7.0f}ms {got['locked']:>7}",
                    flush=True,
                )
                for message in got["other"]:
                    print(f"    other error: {message.splitlines()[0][:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
