"""Benchmark: deliveries per second and jobs per minute with one and with two service
replicas on one PostgreSQL state (issue 46, point 4). Loopback only.

Usage: python bench/replicas_bench.py [--deliveries 1500] [--senders 32] [--workers 2]
                                      [--handle-ms 5:15] [--rounds 2] [--poll 0.5]
                                      [--database-url URL] [--durable]

Starts a throwaway PostgreSQL (``tests/pgcluster.py``; fsync off unless --durable) or uses
the server of --database-url (a database is created on it per measurement, then dropped).
Each service process is ``bench/concurrency_child.py``: the real app (``create_app``, its
signature check and group-commit intake) on uvicorn, real ``Worker`` threads on the real
``JobQueue``, and the scheduler lease's holder, as the service wires them; the workers'
flow notes the repository in the ledger, sleeps --handle-ms and records the run (fsync'd)
instead of running Spark and calling a forge.

For each shape (1 replica, 2 replicas, and 1 replica with twice --workers: as many
workers as the two; with --rounds 2 again in the reverse order, and the two rounds
averaged, so that a machine growing busier does not favour one):

1. **Deliveries per second.** The replicas start without workers; --deliveries signed
   ``pull_request opened`` deliveries (GitHub's real payload, one pull request each, over
   four repositories) are sent by --senders concurrent senders (raw HTTP/1.1 on keep-alive
   connections, requests signed beforehand), each delivery to the replicas in turn. Deliveries per second: all of them / from the first sent to the last
   answered. Every answer must be 202 and every delivery stored with one job.
2. **Jobs per minute.** Those replicas stop; the same number start again with --workers
   workers each, on the queue the deliveries filled, and run it empty. Jobs per minute:
   the jobs / from the first job's start to the last one's end (the queue's own times).

Prints each measurement and the ratios two replicas / one (and / one with as many
workers as two). The run records are flushed, not fsync'd (``fsync: false``): one lock
per process serialises them, which would pace a process's workers by the disk. The sender runs on the same
machine (its CPU counts against the replicas'): the figures are for this machine, and the
ratio is what says whether a second replica adds throughput. Each replica is started in a
session of its own, as a service manager starts processes; where the kernel groups CPU
time by session (``/proc/sys/kernel/sched_autogroup_enabled``) a busy machine then gives
two replicas two shares of its CPU against its other work. ``--one-session`` starts them in
the bench's session instead: one share for all, so the ratio is the software's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository, for tests/ and bench/
from bench.concurrency import CHILD, HOOK, SECRET, Child, stop  # noqa: E402
from bench.concurrency import _load as load_payload  # noqa: E402
from bench.concurrency import _pr_payload as pr_payload  # noqa: E402
from bench.concurrency import _wait_healthy as wait_healthy  # noqa: E402
from bench.webhook_bench import exchange  # noqa: E402
from tests.pgcluster import ClusterError, free_port, normalise, throwaway_postgres  # noqa: E402

REPOS = [f"sluice-bench/repo-{n}" for n in range(4)]


@dataclass(frozen=True)
class Options:
    deliveries: int = 1500
    senders: int = 32
    workers: int = 2
    handle_ms: tuple[float, float] = (5.0, 15.0)
    poll: float = 0.5
    rounds: int = 2
    one_session: bool = False


@dataclass
class Measure:
    replicas: int
    workers: int  # a replica's, in the jobs phase
    deliveries_per_second: float
    send_seconds: float
    jobs_per_minute: float
    jobs: int
    run_seconds: float
    by_process: dict[str, int]


@contextmanager
def database(server: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped afterwards."""
    name = f"sluice_replicas_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        # The tables, as a first start makes them: the replicas start on them.
        from sluice.bot.flow.ledger import Ledger
        from sluice.bot.queue.store import JobQueue

        JobQueue(url).close()
        Ledger(url).close()
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def replicas(
    url: str, count: int, workers: int, options: Options, tmp: Path
) -> Iterator[list[Child]]:
    """``count`` service processes on ``url``, each with ``workers`` workers; yields once
    they answer /healthz; stops them (SIGTERM, as a service manager does)."""
    children: list[Child] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for n in range(count):
            name = f"replica-{n}-{uuid.uuid4().hex[:6]}"
            port = free_port()
            config = {
                "port": port, "workdir": str(tmp / name), "url": url, "name": name,
                "workers": workers, "record": str(tmp / f"{name}.jsonl"), "secret": SECRET,
                "handle_ms": list(options.handle_ms), "poll": options.poll, "lease": 30.0,
                "janitor": 0.0, "ledger": True, "max_attempts": 3, "fsync": False,
            }  # fmt: skip
            with (tmp / f"{name}.stderr").open("wb") as stderr:
                proc = subprocess.Popen([sys.executable, str(CHILD), json.dumps(config)],
                                        env=env, cwd=ROOT,
                                        start_new_session=not options.one_session,
                                        stderr=stderr)  # fmt: skip
            children.append(Child(name, port, tmp / f"{name}.jsonl", proc))
        for child in children:
            wait_healthy(child, tmp)
        yield children
    finally:
        stop(children)


def bodies(count: int, run_id: str) -> list[tuple[str, bytes]]:
    """(delivery id, body) of ``count`` pull requests opened, one per PR."""
    template = load_payload("pull_request/opened.payload.json")
    out = []
    for n in range(1, count + 1):
        head = hashlib.sha1(f"{run_id}/{n}".encode()).hexdigest()
        body = pr_payload(template, REPOS[n % len(REPOS)], n, head)
        out.append((f"{run_id}-{n}", json.dumps(body).encode()))
    return out


def requests(deliveries: list[tuple[str, bytes]], ports: list[int]) -> list[tuple[int, bytes]]:
    """Each delivery as a raw signed HTTP/1.1 request to the replicas in turn (made before
    the clock starts: the sender's own work is kept out of the figure)."""
    out = []
    for n, (delivery, body) in enumerate(deliveries):
        port = ports[n % len(ports)]
        signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        head = (
            f"POST {HOOK} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "User-Agent: GitHub-Hookshot/sluice-bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-GitHub-Event: pull_request\r\n"
            f"X-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: sha256={signature}\r\n\r\n"
        )
        out.append((port, head.encode() + body))
    return out


async def send_all(prepared: list[tuple[int, bytes]], senders: int) -> tuple[float, Counter[int]]:
    """Send every request, ``senders`` at a time (each on keep-alive connections of its
    own, written on asyncio streams: httpx's client measured itself, see
    bench/webhook_bench.py); the seconds from the first sent to the last answered, and the
    answers' statuses."""
    answers: Counter[int] = Counter()
    pending = iter(prepared)

    async def sender() -> None:
        conns: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        try:
            for port, request in pending:
                try:
                    if port not in conns:
                        conns[port] = await asyncio.open_connection("127.0.0.1", port)
                    status, close, _ = await asyncio.wait_for(exchange(*conns[port], request), 60)
                except (OSError, EOFError, TimeoutError, ValueError, IndexError):
                    status, close = 0, True
                answers[status] += 1
                if close and port in conns:
                    conns.pop(port)[1].close()
        finally:
            for _, writer in conns.values():
                writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    return time.perf_counter() - began, answers


def _one(conn_url: str, sql: str) -> tuple[object, ...]:
    engine = create_engine(conn_url)
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(text(sql)).one())
    finally:
        engine.dispose()


def measure(server: str, count: int, workers: int, options: Options) -> Measure:
    run_id = uuid.uuid4().hex[:10]
    with database(server) as url, tempfile.TemporaryDirectory(prefix="sluice-replicas-") as tmp:
        deliveries = bodies(options.deliveries, run_id)
        with replicas(url, count, 0, options, Path(tmp) / "intake") as children:
            prepared = requests(deliveries, [c.port for c in children])
            seconds, answers = asyncio.run(send_all(prepared, options.senders))
        if answers != Counter({202: len(deliveries)}):
            raise SystemExit(f"{count} replica(s): answers {dict(answers)}, not all 202")
        (stored,) = _one(url, "SELECT count(*) FROM sluice_jobs WHERE status = 'queued'")
        if stored != len(deliveries):
            raise SystemExit(f"{count} replica(s): {stored} jobs queued for {len(deliveries)}")
        with replicas(url, count, workers, options, Path(tmp) / "jobs") as children:
            deadline = time.monotonic() + 600
            while _one(url, "SELECT count(*) FROM sluice_jobs WHERE status <> 'done'")[0]:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{count} replica(s): the queue did not drain in 600 s")
                time.sleep(0.2)
        done, first, last = _one(
            url, "SELECT count(*), min(started_ts), max(finished_ts) FROM sluice_jobs"
        )
        by_process: Counter[str] = Counter()
        for child in children:
            for line in child.record.read_text().splitlines():
                row = json.loads(line)
                if row.get("t") == "run":
                    by_process[child.name.rsplit("-", 1)[0]] += 1
                elif row.get("t") == "log" and row.get("level") in ("WARNING", "ERROR"):
                    raise SystemExit(f"{child.name} logged: {row['message'][:500]}")
    run_seconds = (int(str(last)) - int(str(first))) / 1000
    jobs = int(str(done))
    return Measure(count, workers, len(deliveries) / seconds, seconds, jobs * 60 / run_seconds, jobs,
                   run_seconds, dict(by_process))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Options()
    parser.add_argument("--deliveries", type=int, default=d.deliveries)
    parser.add_argument("--senders", type=int, default=d.senders, help="concurrent clients")
    parser.add_argument("--workers", type=int, default=d.workers, help="per replica")
    parser.add_argument("--handle-ms", default="5:15", help="a job's duration, low:high")
    parser.add_argument("--poll", type=float, default=d.poll, help="idle worker's poll, s")
    parser.add_argument("--rounds", type=int, default=d.rounds, choices=(1, 2))
    parser.add_argument("--one-session", action="store_true",
                        help="the replicas in this process's session: one CPU share for all")  # fmt: skip
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server to use")
    parser.add_argument("--durable", action="store_true",
                        help="throwaway cluster with fsync and synchronous_commit on")  # fmt: skip
    args = parser.parse_args()
    low, _, high = args.handle_ms.partition(":")
    options = Options(deliveries=args.deliveries, senders=args.senders, workers=args.workers,
                      handle_ms=(float(low), float(high or low)), poll=args.poll,
                      rounds=args.rounds, one_session=args.one_session)  # fmt: skip
    with ExitStack() as stack:
        if args.database_url:
            server, where = normalise(args.database_url), "given by --database-url"
        else:
            try:
                server = stack.enter_context(
                    throwaway_postgres(durable=args.durable, prefix="sluice-replicas-pg-")
                )
            except ClusterError as exc:
                sys.exit(f"{exc} (or pass --database-url)")
            where = "throwaway cluster" + ("" if args.durable else " (fsync off)")
        print(f"replicas benchmark: {options.deliveries} deliveries from {options.senders} "
              f"clients; {options.workers} workers a replica, jobs take "
              f"{options.handle_ms[0]:g}-{options.handle_ms[1]:g} ms; PostgreSQL: {where}; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")  # fmt: skip
        w = options.workers
        # One replica, two replicas, and one replica with the workers of two (as many
        # workers in all as two replicas: what a second process adds beyond its workers).
        shapes = [(1, w), (2, w), (1, 2 * w)]
        order = shapes if options.rounds == 1 else shapes + shapes[::-1]
        results: dict[tuple[int, int], list[Measure]] = {shape: [] for shape in shapes}
        for count, workers in order:
            m = measure(server, count, workers, options)
            results[(count, workers)].append(m)
            print(f"  {count} replica(s) x {workers} workers: {m.deliveries_per_second:6.1f} "
                  f"deliveries/s ({options.deliveries} in {m.send_seconds:.2f} s); "
                  f"{m.jobs_per_minute:6.0f} jobs/min ({m.jobs} in {m.run_seconds:.2f} s; "
                  f"by replica {sorted(m.by_process.values(), reverse=True)})")  # fmt: skip
    mean = {shape: (statistics.mean(m.deliveries_per_second for m in ms),
                    statistics.mean(m.jobs_per_minute for m in ms)) for shape, ms in results.items()}  # fmt: skip
    for (count, workers), (dps, jpm) in mean.items():
        print(f"  mean, {count} replica(s) x {workers} workers: {dps:.1f} deliveries/s, "
              f"{jpm:.0f} jobs/min")  # fmt: skip
    one, two, wide = (mean[shape] for shape in shapes)
    print(f"  two / one: deliveries/s x{two[0] / one[0]:.2f}, jobs/min x{two[1] / one[1]:.2f} "
          f"(against one replica with {2 * w} workers: jobs/min x{two[1] / wide[1]:.2f}); "
          f"load average {os.getloadavg()[0]:.1f} at the end")  # fmt: skip


if __name__ == "__main__":
    main()
