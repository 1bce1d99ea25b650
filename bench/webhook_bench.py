"""Benchmark: webhook acknowledgement latency of the service with PostgreSQL state.

Usage: python bench/webhook_bench.py [--seconds 20] [--rounds 5] [--senders 50] [--rate 0]
                                     [--prs 200] [--warmup 1] [--database-url URL] [--durable]
                                     [--sqlite]

Starts a throwaway PostgreSQL from the local server binaries (initdb + pg_ctl on a free
port, as the postgres user when root; fsync, synchronous_commit and full_page_writes off
unless --durable), or uses --database-url (a scratch database no service works on; the
run's rows are deleted afterwards), or with --sqlite a SQLite state file in a temporary
directory (WAL, the service's own settings). Then two targets, each a uvicorn server in its
own process on 127.0.0.1 with the same settings, both started before the first round:

- bare: a FastAPI app whose one ``POST /webhooks/github`` reads the body and answers 202;
- sluice: the service (``create_app``, workers off, so no GitHub calls), which verifies
  the signature, parses the event, hands the delivery to its intake (a task on the event
  loop), which stores it and its job with the other deliveries waiting at that moment in
  one transaction of the state (group commit), and answers 202 after that commit.

Each target gets --senders concurrent senders, each on its own keep-alive connection,
sending signed ``pull_request`` deliveries (the real GitHub payload from
tests/fixtures/webhooks when present, else a small built-in one), each with a unique
X-GitHub-Delivery and head commit, spread over --prs pull requests. The targets take turns
in --rounds rounds (bare first in odd rounds, sluice first in even ones), so both see the
machine in the same states: a 2-core machine shared with other work drifts by more than
the difference being measured. In each round the first --warmup seconds are not counted,
then --seconds / --rounds are. Senders send back to back (closed loop)
unless --rate gives the total deliveries per second: then every delivery has a due time
and its latency counts from that time, so a server that falls behind is not hidden.

Afterwards every delivery the service answered 202 must be in ``sluice_deliveries`` with
its job ("lost" counts the ones that are not: must be 0). Prints, per target, deliveries
sent, throughput, p50/p90/p99/max acknowledgement latency, errors (non-202 answers and
failed requests) and lost, over all rounds; each round's p99s and their ratio; the
service's own ``sluice_ack_seconds`` for the measured windows; one thread's
``JobQueue.accept`` alone on the same database; and the targets, over all rounds: sluice
p99 under 50 ms and at most 3x the bare endpoint's p99.

The load generator speaks HTTP/1.1 over asyncio streams itself: on the 2-core machine
httpx.AsyncClient with 50 connections managed under 200 requests/s and would have
measured itself rather than the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import itertools
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/
from tests.pgcluster import (
    ClusterError,
    free_port,
    normalise,
    throwaway_postgres,
)

REALCASE = (
    Path(__file__).resolve().parents[1]
    / "tests/fixtures/webhooks/github/pull_request/opened.payload.json"
)
SECRET = "bench-webhook-secret"
TOKEN = "ghp_benchDummyTokenNeverUsedWorkersAreOff"
HOOK = "/webhooks/github"
P99_TARGET_MS = 50.0
TARGETS = ("bare", "sluice")
RATIO_TARGET = 3.0
# Stand-ins in the JSON template, replaced per delivery (bytes.replace is cheap).
NUMBER_MARK = 987654321
SHA_MARK = "0123456789abcdef0123456789abcdef0badf00d"

# One uvicorn server: argv is the target ("bare" or "sluice") and the port. The service
# reads its settings from the SLUICE_* environment the parent sets.
SERVER = """
import sys
import uvicorn

target, port = sys.argv[1], int(sys.argv[2])
if target == "sluice":
    from sluice.bot.entry.app import create_app
    from sluice.bot.entry.settings import ServiceSettings

    app = create_app(ServiceSettings(), start_workers=False)
else:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI()

    @app.post("/webhooks/github", status_code=202)
    async def hook(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse({"status": "queued", "bytes": len(body)}, status_code=202)

uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
"""

BUILTIN_PAYLOAD: dict[str, Any] = {
    "action": "opened",
    "number": 1,
    "pull_request": {
        "number": 1,
        "title": "Change a model",
        "draft": False,
        "merged": False,
        "user": {"login": "octocat"},
        "head": {
            "ref": "feature",
            "sha": "0" * 40,
            "repo": {"id": 1296269, "full_name": "octocat/Hello-World"},
        },
        "base": {
            "ref": "main",
            "sha": "1" * 40,
            "repo": {"id": 1296269, "full_name": "octocat/Hello-World"},
        },
    },
    "repository": {"id": 1296269, "full_name": "octocat/Hello-World"},
    "installation": {"id": 1},
    "sender": {"login": "octocat"},
}


# -- PostgreSQL ---------------------------------------------------------------------------


def pg_settings(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = ("server_version", "fsync", "synchronous_commit", "full_page_writes")
            values = [conn.execute(text(f"SHOW {name}")).scalar_one() for name in names]
    finally:
        engine.dispose()
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


# -- servers ------------------------------------------------------------------------------


@contextmanager
def server(target: str, env: dict[str, str]) -> Iterator[int]:
    """A uvicorn server for ``target`` in its own process; yields its port once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, target, str(port)], env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the {target} server exited with code {proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break  # uvicorn listens only once the app's lifespan has started
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {target} server did not start in 60 s") from None
                time.sleep(0.1)
        yield port
    finally:
        if proc.poll() is None:
            proc.terminate()  # uvicorn shuts down gracefully (the service closes its queue)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- deliveries and the HTTP client -------------------------------------------------------


class Deliveries:
    """Signed ``pull_request`` deliveries: a unique delivery id and head commit each."""

    def __init__(self, payload: dict[str, Any], prs: int, prefix: str, port: int) -> None:
        payload = json.loads(json.dumps(payload))
        payload["number"] = payload["pull_request"]["number"] = NUMBER_MARK
        payload["pull_request"]["head"]["sha"] = SHA_MARK
        self.template = json.dumps(payload).encode()
        if self.template.count(str(NUMBER_MARK).encode()) != 2:
            raise ValueError("the payload template holds the PR-number stand-in elsewhere")
        self.prs, self.prefix, self.port = prs, prefix, port
        self.secret = SECRET.encode()

    def request(self, seq: int) -> tuple[str, bytes]:
        """The delivery id and the raw HTTP request of delivery number ``seq``."""
        number = str(seq % self.prs + 1).encode()
        sha = hashlib.sha1(f"{self.prefix}/{seq}".encode()).hexdigest().encode()
        body = self.template.replace(str(NUMBER_MARK).encode(), number)
        body = body.replace(SHA_MARK.encode(), sha)
        delivery = f"{self.prefix}-{seq:08d}"
        signature = hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        head = (
            f"POST {HOOK} HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{self.port}\r\n"
            "User-Agent: GitHub-Hookshot/sluice-bench\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "X-GitHub-Event: pull_request\r\n"
            f"X-GitHub-Delivery: {delivery}\r\n"
            f"X-Hub-Signature-256: sha256={signature}\r\n"
            "\r\n"
        )
        return delivery, head.encode() + body


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bool, bytes]:
    """Send one request, read its response: status, whether the server closes, body."""
    writer.write(request)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ", 2)[1])
    length, chunked, close = 0, False, False
    for line in head[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value
        elif name == "connection":
            close = value == "close"
    if not chunked:
        return status, close, await reader.readexactly(length)
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        body += (await reader.readexactly(size + 2))[:-2]
        if size == 0:
            return status, close, body


@dataclass
class Load:
    """One target's run: what was sent and what came back."""

    deliveries: Deliveries
    senders: int
    warmup: float
    seconds: float
    rate: float
    timeout: float
    start: float = 0.0
    counter: Iterator[int] = field(default_factory=itertools.count)
    # (delivery id, began, latency s, status); status 0 is a failed request.
    records: list[tuple[str, float, float, int]] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    metrics: list[str] = field(default_factory=list)

    @property
    def measured_from(self) -> float:
        return self.start + self.warmup

    @property
    def deadline(self) -> float:
        return self.start + self.warmup + self.seconds

    async def sender(self) -> None:
        port = self.deliveries.port
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                seq = next(self.counter)
                due = self.start + seq / self.rate if self.rate else None
                if (due if due is not None else time.perf_counter()) >= self.deadline:
                    return
                delivery, request = self.deliveries.request(seq)
                if due is not None:
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                began = due if due is not None else time.perf_counter()
                try:
                    if conn is None:
                        conn = await asyncio.open_connection("127.0.0.1", port)
                    status, close, _ = await asyncio.wait_for(
                        exchange(*conn, request), self.timeout
                    )
                except (OSError, EOFError, TimeoutError, ValueError, IndexError) as exc:
                    self.failures[type(exc).__name__] += 1
                    status, close = 0, True
                self.records.append((delivery, began, time.perf_counter() - began, status))
                if close and conn is not None:
                    conn[1].close()
                    conn = None
        finally:
            if conn is not None:
                conn[1].close()

    async def scrape(self, at: float | None) -> None:
        """GET /metrics at ``at`` (or now) on a connection of its own; keeps the text."""
        if at is not None:
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
        port = self.deliveries.port
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            request = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            self.metrics.append((await exchange(reader, writer, request))[2].decode())
        finally:
            writer.close()

    async def run(self, scrape: bool) -> None:
        self.start = time.perf_counter()
        tasks = [self.sender() for _ in range(self.senders)]
        if scrape:
            tasks.append(self.scrape(self.measured_from))
        await asyncio.gather(*tasks)
        if scrape:
            await self.scrape(None)


# -- figures ------------------------------------------------------------------------------


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]


@dataclass
class Figures:
    name: str
    sent: int
    throughput: float
    p50: float
    p90: float
    p99: float
    max: float
    errors: int
    lost: int | None
    statuses: Counter[int]


def figures(name: str, loads: list[Load], lost: int | None) -> Figures:
    """A target's figures over the measured windows of all its rounds."""
    measured = [r for load in loads for r in load.records if r[1] >= load.measured_from]
    ordered = sorted(r[2] * 1000 for r in measured)
    statuses = Counter(r[3] for r in measured)
    if not ordered:
        raise RuntimeError(f"{name}: no delivery was sent in the measured window")
    return Figures(
        name=name,
        sent=len(measured),
        throughput=len(measured) / sum(load.seconds for load in loads),
        p50=percentile(ordered, 0.50),
        p90=percentile(ordered, 0.90),
        p99=percentile(ordered, 0.99),
        max=ordered[-1],
        errors=sum(n for status, n in statuses.items() if status != 202),
        lost=lost,
        statuses=statuses,
    )


def ack_histogram(text_: str) -> tuple[float, float, dict[float, float]]:
    """``sluice_ack_seconds``: count, sum and cumulative buckets."""
    count = total = 0.0
    buckets: dict[float, float] = {}
    for line in text_.splitlines():
        if line.startswith("sluice_ack_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith("sluice_ack_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("sluice_ack_seconds_bucket"):
            bound = re.search(r'le="([^"]+)"', line)
            if bound:
                buckets[float(bound.group(1))] = float(line.rsplit(" ", 1)[1])
    return count, total, buckets


def server_side(loads: list[Load]) -> str:
    """The service's own acknowledgement time over the measured windows."""
    count = total = 0.0
    under = dict.fromkeys((0.005, 0.01, 0.025, 0.05), 0.0)
    for load in loads:
        if len(load.metrics) != 2:
            return "service metrics: not scraped"
        (c0, s0, b0), (c1, s1, b1) = (ack_histogram(m) for m in load.metrics)
        count, total = count + c1 - c0, total + s1 - s0
        for le in under:
            under[le] += b1.get(le, 0) - b0.get(le, 0)
    if count <= 0:
        return "service metrics: no acknowledgement in the window"
    shares = ", ".join(f"{n / count:.0%} <= {le * 1000:g} ms" for le, n in under.items())
    return (
        f"service's own sluice_ack_seconds (handler start to response, measured windows): "
        f"mean {total / count * 1000:.1f} ms over {count:.0f}; {shares}"
    )


def check_stored(url: str, loads: list[Load], prefix: str) -> tuple[int, int, int]:
    """Deliveries answered 202 but not stored with a job; stored ones never answered 202;
    all stored (every delivery id of ``loads`` starts with ``prefix``)."""
    accepted = {r[0] for load in loads for r in load.records if r[3] == 202}
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT delivery_id, job_id FROM sluice_deliveries "
                    "WHERE delivery_id LIKE :prefix"
                ),
                {"prefix": prefix + "%"},
            ).all()
    finally:
        engine.dispose()
    with_job = {delivery for delivery, job_id in rows if job_id is not None}
    stored = {delivery for delivery, _ in rows}
    return len(accepted - with_job), len(stored - accepted), len(stored)


def remove_rows(url: str, run_id: str) -> None:
    """Delete this run's deliveries and jobs from a database given by --database-url."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            like = {"prefix": run_id + "-%"}
            conn.execute(text("DELETE FROM sluice_jobs WHERE delivery_id LIKE :prefix"), like)
            conn.execute(text("DELETE FROM sluice_deliveries WHERE delivery_id LIKE :prefix"), like)
            # A key row without jobs is the same as no row (accept creates it when needed).
            conn.execute(text(
                "DELETE FROM sluice_job_keys k WHERE k.running_job_id IS NULL "
                "AND NOT EXISTS (SELECT 1 FROM sluice_jobs j WHERE j.key = k.key)"
            ))  # fmt: skip
    finally:
        engine.dispose()


def accept_alone(url: str, payload: dict[str, Any], prs: int, calls: int, prefix: str) -> str:
    """One thread calling ``JobQueue.accept`` as the handler does, without HTTP."""
    from sluice.bot.events.github import parse_github
    from sluice.bot.events.neutral import PullRequestEvent, pr_key
    from sluice.bot.queue.store import JobQueue, NewJob

    deliveries = Deliveries(payload, prs, f"{prefix}-accept", 0)
    queue = JobQueue(url)
    took: list[float] = []
    try:
        for seq in range(calls):
            body = deliveries.template.replace(
                str(NUMBER_MARK).encode(), str(seq % prs + 1).encode()
            )
            body = body.replace(
                SHA_MARK.encode(), hashlib.sha1(str(seq).encode()).hexdigest().encode()
            )
            event = parse_github("pull_request", json.loads(body))
            assert isinstance(event, PullRequestEvent)
            job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json(),
                         head_sha=event.head_sha, supersede=True)  # fmt: skip
            began = time.perf_counter()
            queue.accept(
                f"{deliveries.prefix}-{seq:08d}", "github", "pull_request", job, time.time()
            )
            took.append((time.perf_counter() - began) * 1000)
    finally:
        queue.close()
    took.sort()
    return (
        f"JobQueue.accept alone (one thread, {calls} calls, no HTTP): "
        f"p50 {percentile(took, 0.5):.1f} ms, p99 {percentile(took, 0.99):.1f} ms, "
        f"mean {statistics.fmean(took):.1f} ms"
    )


def show(rows: list[Figures]) -> None:
    header = f"  {'target':<8} {'sent':>7} {'req/s':>7} {'p50 ms':>7} {'p90 ms':>7} "
    print(header + f"{'p99 ms':>7} {'max ms':>7} {'errors':>6} {'lost':>5}")
    for f in rows:
        lost = "-" if f.lost is None else str(f.lost)
        print(
            f"  {f.name:<8} {f.sent:>7} {f.throughput:>7.0f} {f.p50:>7.1f} {f.p90:>7.1f} "
            f"{f.p99:>7.1f} {f.max:>7.1f} {f.errors:>6} {lost:>5}"
        )


# -- main ---------------------------------------------------------------------------------


def run(args: argparse.Namespace, stack: ExitStack) -> bool:
    if REALCASE.exists():
        payload, source = json.loads(REALCASE.read_text()), str(REALCASE)
    else:
        payload, source = BUILTIN_PAYLOAD, "built-in payload"
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sluice-bench-")))
    if args.sqlite:
        url, where = f"sqlite:///{workdir / 'state.db'}", "SQLite file in a temporary directory"
    elif args.database_url:
        url, where = normalise(args.database_url), "given by --database-url"
    else:
        try:
            url = stack.enter_context(
                throwaway_postgres(durable=args.durable, prefix="sluice-bench-pg-")
            )
        except ClusterError as exc:
            sys.exit(f"{exc} (or pass --database-url)")
        where = "throwaway cluster" + ("" if args.durable else " (fsync off: not durable)")
    env = dict(os.environ)
    env.update(
        SLUICE_DATABASE_URL=url,
        SLUICE_WEBHOOK_SECRET=SECRET,
        SLUICE_GITHUB_TOKEN=TOKEN,
        SLUICE_WORKDIR=str(workdir),
    )
    mode = f"paced at {args.rate:g} deliveries/s" if args.rate else "back to back (closed loop)"
    print(f"webhook benchmark: {args.senders} senders, {mode}, {args.rounds} alternating "
          f"rounds of {args.warmup:g} s warm-up + {args.seconds / args.rounds:g} s per target, "
          f"over {args.prs} PRs; payload: {source} "
          f"({len(json.dumps(payload))} bytes)")  # fmt: skip
    if args.sqlite:
        print(f"  state: {where}")
    else:
        print(f"  PostgreSQL: {where}; {pg_settings(url)}")
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")

    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    if args.database_url:
        stack.callback(remove_rows, url, run_id)
    ports = {target: stack.enter_context(server(target, env)) for target in TARGETS}
    loads: dict[str, list[Load]] = {target: [] for target in TARGETS}
    ratios = []
    for round_ in range(args.rounds):
        # Alternate which target goes first, so neither always follows the other.
        order = TARGETS if round_ % 2 == 0 else TARGETS[::-1]
        for target in order:
            deliveries = Deliveries(payload, args.prs, f"{run_id}-{target}-{round_}", ports[target])
            load = Load(deliveries, args.senders, args.warmup, args.seconds / args.rounds,
                        args.rate, args.timeout)  # fmt: skip
            asyncio.run(load.run(scrape=target == "sluice"))
            loads[target].append(load)
        bare_p99, sluice_p99 = (figures(t, [loads[t][-1]], None).p99 for t in TARGETS)
        ratios.append(sluice_p99 / bare_p99)
        print(f"  round {round_ + 1}: p99 bare {bare_p99:.1f} ms, sluice {sluice_p99:.1f} ms "
              f"({ratios[-1]:.2f}x)")  # fmt: skip
    print(f"  load average {os.getloadavg()[0]:.1f} at the end")
    lost, unanswered, stored = check_stored(url, loads["sluice"], f"{run_id}-sluice-")
    rows = [figures(t, loads[t], lost if t == "sluice" else None) for t in TARGETS]
    for row, target in zip(rows, TARGETS, strict=True):
        if row.errors:
            failures = sum((load.failures for load in loads[target]), Counter())
            print(f"  {target}: answers {dict(row.statuses)}; failures {dict(failures)}")
    show(rows)
    print(f"  sluice: {stored} deliveries stored (warm-ups included), {lost} answered 202 but "
          f"not stored with their job, {unanswered} stored without a 202")  # fmt: skip
    print(f"  {server_side(loads['sluice'])}")
    print(f"  {accept_alone(url, payload, args.prs, args.accept_calls, run_id)}")

    bare, sluice = rows
    ratio = sluice.p99 / bare.p99
    fast = sluice.p99 < P99_TARGET_MS
    close = ratio <= RATIO_TARGET
    clean = sluice.lost == 0 and sluice.errors == 0 and bare.errors == 0
    print(
        f"  sluice p99 / bare p99 = {ratio:.2f} over all rounds; median of the rounds' "
        f"ratios {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
    )
    print(f"  target p99 < {P99_TARGET_MS:g} ms: {'met' if fast else 'MISSED'} "
          f"({sluice.p99:.1f} ms)")  # fmt: skip
    print(f"  target p99 <= {RATIO_TARGET:g}x bare: {'met' if close else 'MISSED'} "
          f"({ratio:.2f}x)")  # fmt: skip
    print(f"  no delivery lost, no error: {'met' if clean else 'MISSED'}")
    return clean


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="measured per target, over all rounds")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating rounds of each target")  # fmt: skip
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="not counted, per target and round")  # fmt: skip
    parser.add_argument("--senders", type=int, default=50)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="total deliveries/s (default: back to back)")  # fmt: skip
    parser.add_argument("--prs", type=int, default=200, help="pull requests to spread over")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--accept-calls", type=int, default=300)
    parser.add_argument("--database-url", default=None,
                        help="an existing PostgreSQL that no service works on (its workers "
                        "would take the queued jobs); this run's rows are deleted after")  # fmt: skip
    parser.add_argument("--durable", action="store_true",
                        help="throwaway cluster with fsync and synchronous_commit on")  # fmt: skip
    parser.add_argument("--sqlite", action="store_true",
                        help="a SQLite state file instead of PostgreSQL")  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.sqlite and (args.database_url or args.durable):
        parser.error("--sqlite goes with neither --database-url nor --durable")

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    with ExitStack() as stack:  # servers, then PostgreSQL and the work directory
        try:
            clean = run(args, stack)
        except KeyboardInterrupt:
            print("interrupted: stopping the servers and PostgreSQL", file=sys.stderr)
            sys.exit(130)
    sys.exit(0 if clean else 1)  # a missed latency target is a figure, not a failure


if __name__ == "__main__":
    main()
