"""Benchmark: concurrency of two webhook service processes sharing one PostgreSQL state.

Usage: python bench/concurrency.py [--prs 50] [--commits 4] [--workers 2] [--seconds 20]
                                   [--repos 2] [--tags 12] [--merge 0.5] [--burst 0.3]
                                   [--dup 0.25] [--redeliver 0.1] [--handle-ms 5:15]
                                   [--poll 0.5] [--lease 8] [--janitor 4] [--max-attempts 3]
                                   [--no-ledger] [--cold-start] [--seed 1]
                                   [--database-url URL] [--durable]

Starts a throwaway PostgreSQL (``tests/pgcluster.py``; fsync off unless --durable) or uses
--database-url (an empty scratch database: the checks read every job in it), creates the
queue's and the ledger's tables (as a first start would; --cold-start leaves that to the two
processes, at once), then starts two service processes (``bench/concurrency_child.py``):
each the real app (``create_app``) on uvicorn with --workers real ``Worker`` threads on the
real ``JobQueue``, whose flow, instead of running Spark and talking to a forge, notes
the repository in the ledger as the real one does first (not with --no-ledger), sleeps
--handle-ms, and records the attempt (process, thread, job, key, delivery, start, end,
outcome) in a per-process fsync'd file.

Then, over --seconds, every pull request's life is delivered in order (each delivery sent
once the previous one was answered, as the forge does): ``opened``, ``synchronize`` for
each further head commit (--commits heads in all), then ``closed`` (merged for the --merge
fraction: a promotion, under the repository's prod key); the heads of a --burst fraction
of PRs come back to back, so that older ones get superseded. Meanwhile --tags tag pushes
(promotions too) arrive at random times: many PRs at once, over --repos repositories, each
delivery to either process at random. The payloads are the real GitHub ones from
tests/fixtures/webhooks/github (number, head commit, repository and title edited; the title
and the tag carry the delivery id, so a run can be traced to its delivery). A --dup
fraction of deliveries is sent to both processes at once, and afterwards a --redeliver
fraction is sent again (GitHub's redelivery keeps the id). The holder of the scheduler
lease (one process at a time) also schedules the janitor (a prod-key job per repository
every --janitor seconds), as the service does.

Once the queue is drained the processes are stopped and the records checked against the
queue's tables:

- every delivery stored once, with one job, and answered 202 exactly once (copies and
  redeliveries 200 "duplicate");
- no job run twice (``duplicates run``), every done job run once, no superseded job run,
  and every run handed its own job's event;
- order: per key, attempts in job-id order (the order accepted), and each PR's deliveries
  got job ids in the order they were sent (across the two processes);
- no two attempts of one key overlap in time (``overlaps``), prod keys shown apart;
- each PR's last head commit was built and every promotion ran (supersede skips only
  older heads);
- no deadlock: the queue drained in time, PostgreSQL's ``deadlocks`` counter did not move,
  and no worker loop error, give-up, failed job or other warning was logged
  (transient-conflict retries are counted and shown).

An attempt the flow fails (the ledger's write can lose a race to another worker's:
``Ledger.seen`` deletes and inserts the repository's row) is retried by the queue, as in
the service; such attempts are counted and shown apart, and checked like the others.

Prints deliveries sent, jobs run, the zeros above, queue wait (accepted -> first start:
max, p50, p99) and wall time. Exit code 1 when a check fails.
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
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, create_engine, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository, for tests/
from tests.pgcluster import ClusterError, free_port, normalise, throwaway_postgres  # noqa: E402

CHILD = Path(__file__).resolve().with_name("concurrency_child.py")
REALCASES = ROOT / "tests/fixtures/webhooks/github"
SECRET = "bench-concurrency-secret"
HOOK = "/webhooks/github"


@dataclass(frozen=True)
class Options:
    """One run's shape (see the module docstring for each)."""

    prs: int = 50
    commits: int = 4
    repos: int = 2
    tags: int = 12
    merge: float = 0.5
    burst: float = 0.3
    dup: float = 0.25
    redeliver: float = 0.1
    workers: int = 2
    seconds: float = 20.0
    handle_ms: tuple[float, float] = (5.0, 15.0)
    poll: float = 0.5
    lease: float = 8.0
    janitor: float = 4.0
    ledger: bool = True
    seed: int = 1
    drain_timeout: float = 90.0
    max_attempts: int = 3
    cold_start: bool = False


# -- deliveries ---------------------------------------------------------------------------


@dataclass
class Planned:
    """One delivery: what it is, and what came back for each copy sent."""

    delivery_id: str
    event: str  # X-GitHub-Event
    what: str  # opened, synchronize, closed, merged, tag
    key: str  # the queue key the service should give it
    body: bytes
    copies: int  # 1, or 2 when sent to both processes at once
    target: int  # the process a single copy goes to
    statuses: list[int] = field(default_factory=list)  # every answer, redeliveries included
    redelivered: bool = False


def _load(relative: str) -> dict[str, Any]:
    path = REALCASES / relative
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the benchmark replays the real payloads")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


class Plan:
    """Every delivery of the run, per pull request (in order) and per tag."""

    def __init__(self, options: Options, run_id: str) -> None:
        rng = random.Random(options.seed)
        self.rng = rng
        opened = _load("pull_request/opened.payload.json")
        synchronize = _load("pull_request/synchronize.payload.json")
        closed = _load("pull_request/closed.payload.json")
        merged = _load("pull_request/woodpecker__HookPullRequestMerged.json")
        tag = _load("push/drone-go-scm__push_tag.json")
        repos = [f"sluice-bench/repo-{r}" for r in range(options.repos)]
        self.repos = repos
        self.scripts: list[list[Planned]] = []
        self.tags: list[Planned] = []

        def planned(event: str, what: str, key: str, body: dict[str, Any], n: str) -> Planned:
            dup = rng.random() < options.dup
            return Planned(f"{run_id}-{n}", event, what, key, json.dumps(body).encode(),
                           2 if dup else 1, rng.randrange(2))  # fmt: skip

        for pr in range(1, options.prs + 1):
            repo = repos[pr % len(repos)]
            script: list[Planned] = []
            heads = [_sha(run_id, repo, pr, c) for c in range(options.commits)]
            for c, head in enumerate(heads):
                action = "opened" if c == 0 else "synchronize"
                body = _pr_payload(opened if c == 0 else synchronize, repo, pr, head)
                n = f"pr{pr}-{c}"
                body["pull_request"]["title"] = f"{run_id}-{n}"
                script.append(planned("pull_request", action, f"github:{repo}#{pr}", body, n))
            if rng.random() < options.merge:
                body = _pr_payload(merged, repo, pr, heads[-1])
                body["pull_request"]["merge_commit_sha"] = _sha(run_id, repo, pr, "merge")
                what, key = "merged", f"github:{repo}:prod"
            else:
                body = _pr_payload(closed, repo, pr, heads[-1])
                what, key = "closed", f"github:{repo}#{pr}"
            body["pull_request"]["title"] = f"{run_id}-pr{pr}-close"
            script.append(planned("pull_request", what, key, body, f"pr{pr}-close"))
            self.scripts.append(script)
        for t in range(options.tags):
            repo = repos[t % len(repos)]
            body = json.loads(json.dumps(tag))
            _set_repo(body, repo)
            body["ref"] = f"refs/tags/{run_id}-tag{t}"
            body["after"] = _sha(run_id, repo, "tag", t)
            self.tags.append(planned("push", "tag", f"github:{repo}:prod", body, f"tag{t}"))

    def all(self) -> list[Planned]:
        return [d for script in self.scripts for d in script] + self.tags


def _set_repo(body: dict[str, Any], repo: str) -> None:
    body["repository"]["full_name"] = repo
    body["repository"]["name"] = repo.split("/")[1]


def _pr_payload(template: dict[str, Any], repo: str, number: int, head: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(template))
    _set_repo(body, repo)
    body["number"] = number
    pull = body["pull_request"]
    pull["number"] = number
    pull["head"]["sha"] = head
    pull["head"]["ref"] = f"feature-{number}"
    for side in ("head", "base"):  # same repository: not a fork
        pull[side]["repo"]["full_name"] = repo
        pull[side]["repo"]["id"] = 4242
    return body


def _headers(delivery: Planned) -> dict[str, str]:
    signature = hmac.new(SECRET.encode(), delivery.body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/sluice-bench",
        "X-GitHub-Event": delivery.event,
        "X-GitHub-Delivery": delivery.delivery_id,
        "X-Hub-Signature-256": f"sha256={signature}",
    }


# -- the service processes ----------------------------------------------------------------


@dataclass
class Child:
    name: str
    port: int
    record: Path
    proc: subprocess.Popen[bytes]


@contextmanager
def services(url: str, options: Options, workdir: Path) -> Iterator[list[Child]]:
    """Two service processes on ``url``; yields once both answer /healthz; stops them."""
    children: list[Child] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        for name in ("svc-a", "svc-b"):
            port = free_port()
            record = workdir / f"{name}.jsonl"
            config = {
                "port": port, "workdir": str(workdir / name), "url": url, "name": name,
                "workers": options.workers, "record": str(record), "secret": SECRET,
                "handle_ms": list(options.handle_ms), "poll": options.poll,
                "lease": options.lease, "janitor": options.janitor, "ledger": options.ledger,
                "max_attempts": options.max_attempts,
                "scheduler_lease": options.lease,  # tried every third: the janitor's pace
            }  # fmt: skip
            with (workdir / f"{name}.stderr").open("wb") as stderr:
                proc = subprocess.Popen(
                    [sys.executable, str(CHILD), json.dumps(config)],
                    env=env,
                    cwd=ROOT,
                    start_new_session=True,
                    stderr=stderr,
                )
            children.append(Child(name, port, record, proc))
        for child in children:
            _wait_healthy(child, workdir)
        yield children
    finally:
        stop(children)


def _wait_healthy(child: Child, workdir: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if child.proc.poll() is not None:
            log = (workdir / f"{child.name}.stderr").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{child.name} exited with code {child.proc.returncode}:\n{log}")
        try:
            with socket.create_connection(("127.0.0.1", child.port), timeout=1):
                pass
            if httpx.get(f"http://127.0.0.1:{child.port}/healthz", timeout=5).status_code == 200:
                return
        except (OSError, httpx.HTTPError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name} did not answer in 60 s")
        time.sleep(0.1)


def stop(children: list[Child]) -> None:
    """SIGTERM, then wait (the child stops the server, then its workers)."""
    for child in children:
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.proc.wait(45)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()


# -- sending ------------------------------------------------------------------------------


class Sender:
    """Sends the plan to the two processes with asyncio."""

    def __init__(self, plan: Plan, children: list[Child], options: Options) -> None:
        self.plan, self.options = plan, options
        self.urls = [f"http://127.0.0.1:{c.port}{HOOK}" for c in children]
        self.requests = 0
        self.failures: Counter[str] = Counter()

    async def send(self, client: httpx.AsyncClient, delivery: Planned, target: int) -> None:
        self.requests += 1
        try:
            response = await client.post(
                self.urls[target], content=delivery.body, headers=_headers(delivery)
            )
            delivery.statuses.append(response.status_code)
        except httpx.HTTPError as exc:
            self.failures[type(exc).__name__] += 1
            delivery.statuses.append(0)

    async def deliver(self, client: httpx.AsyncClient, delivery: Planned) -> None:
        targets = [0, 1] if delivery.copies == 2 else [delivery.target]
        await asyncio.gather(*(self.send(client, delivery, t) for t in targets))

    async def script(self, client: httpx.AsyncClient, script: list[Planned]) -> None:
        rng = random.Random(script[0].delivery_id)
        window = self.options.seconds
        await asyncio.sleep(rng.uniform(0, window * 0.5))
        # A --burst fraction of PRs get their heads pushed back to back (a series of force
        # pushes): older heads still queued are superseded.
        burst = rng.random() < self.options.burst
        gap = window * 0.5 / max(1, len(script))
        for n, delivery in enumerate(script):
            await self.deliver(client, delivery)  # answered before the next is sent
            if not burst or n == len(script) - 2:  # the close comes later, though
                await asyncio.sleep(rng.uniform(0, 2 * gap))

    async def tag(self, client: httpx.AsyncClient, delivery: Planned) -> None:
        await asyncio.sleep(random.Random(delivery.delivery_id).uniform(0, self.options.seconds))
        await self.deliver(client, delivery)

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            await asyncio.gather(
                *(self.script(client, s) for s in self.plan.scripts),
                *(self.tag(client, t) for t in self.plan.tags),
            )
            # GitHub's redelivery of some of them, to the other process, all at once.
            rng = self.plan.rng
            again = [d for d in self.plan.all() if rng.random() < self.options.redeliver]
            for d in again:
                d.redelivered = True
            await asyncio.gather(*(self.send(client, d, 1 - d.target) for d in again))


# -- checks -------------------------------------------------------------------------------


@dataclass
class Report:
    deliveries: int = 0
    requests: int = 0
    dup_copies: int = 0
    redeliveries: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    http_errors: int = 0
    answered_wrong: int = 0  # not exactly one 202 per delivery
    stored_twice: int = 0
    lost: int = 0
    jobs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    jobs_run: int = 0
    failed_attempts: int = 0  # the flow raised: the queue retries the job
    failures: Counter[str] = field(default_factory=Counter)
    runs_by_kind: Counter[str] = field(default_factory=Counter)
    runs_by_process: Counter[str] = field(default_factory=Counter)
    duplicates_run: int = 0
    wrong_event: int = 0  # the event handed to the flow is not the job's
    state_mismatch: int = 0  # done but not run, run but not done, superseded but run
    order_violations: int = 0
    accept_order_violations: int = 0
    overlaps: int = 0
    prod_overlaps: int = 0
    keys: int = 0
    prod_keys: int = 0
    prod_runs: int = 0
    max_concurrent: int = 0
    latest_not_built: int = 0
    promotions_missing: int = 0
    waits: list[float] = field(default_factory=list)
    drained: bool = False
    left: int = 0
    deadlocks: int = 0
    transient: int = 0
    log_errors: list[str] = field(default_factory=list)
    give_ups: int = 0
    exit_codes: list[int | None] = field(default_factory=list)
    send_seconds: float = 0.0
    wall_seconds: float = 0.0

    def wait(self, q: float) -> float:
        if not self.waits:
            return 0.0
        ordered = sorted(self.waits)
        return ordered[max(0, min(len(ordered), math.ceil(q * len(ordered))) - 1)]

    def problems(self) -> list[str]:
        """Every check that failed, in words (empty: all passed)."""
        checks = {
            "HTTP errors": self.http_errors,
            "deliveries not answered 202 exactly once": self.answered_wrong,
            "deliveries stored twice": self.stored_twice,
            "deliveries lost": self.lost,
            "duplicates run": self.duplicates_run,
            "runs of another event than their job's": self.wrong_event,
            "runs not matching the job's final status": self.state_mismatch,
            "order violations": self.order_violations + self.accept_order_violations,
            "overlaps": self.overlaps,
            "PRs whose last head was not built": self.latest_not_built,
            "closes and promotions not run": self.promotions_missing,
            "jobs left queued or running": self.left,
            "deadlocks": self.deadlocks,
            "errors logged": len(self.log_errors),
            "give-ups": self.give_ups,
            "jobs failed": self.statuses.get("failed", 0),
            "processes exiting non-zero": sum(1 for c in self.exit_codes if c != 0),
        }
        found = [f"{name}: {count}" for name, count in checks.items() if count]
        if not self.drained:
            found.append("the queue did not drain in time")
        return found


def _records(children: list[Child]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    runs: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for child in children:
        if not child.record.exists():
            continue
        for line in child.record.read_text().splitlines():
            row = json.loads(line)
            (runs if row["t"] == "run" else other).append(row)
    return runs, other


def check(
    report: Report, plan: Plan, url: str, children: list[Child], deadlocks_before: int
) -> None:
    """Fill ``report`` from the plan's answers, the queue's tables and the records."""
    planned = plan.all()
    report.deliveries = len(planned)
    report.dup_copies = sum(d.copies - 1 for d in planned)
    report.redeliveries = sum(1 for d in planned if d.redelivered)
    for d in planned:
        report.answers.update(d.statuses)
        report.http_errors += sum(1 for s in d.statuses if s not in (200, 202))
        if d.statuses.count(202) != 1:
            report.answered_wrong += 1

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            jobs = [dict(r) for r in conn.execute(text(
                'SELECT id, delivery_id, "key", kind, head_sha, status, attempts, created_ts '
                "FROM sluice_jobs ORDER BY id"
            )).mappings()]  # fmt: skip
            stored: dict[str, int | None] = {
                str(delivery_id): job_id
                for delivery_id, job_id in conn.execute(
                    text("SELECT delivery_id, job_id FROM sluice_deliveries")
                )
            }
            report.deadlocks = _deadlocks(conn) - deadlocks_before
    finally:
        engine.dispose()
    attempts, other = _records(children)
    analyse(report, plan, jobs, stored, attempts, other)
    report.exit_codes = [c.proc.returncode for c in children]


def analyse(
    report: Report,
    plan: Plan,
    jobs: list[dict[str, Any]],
    stored: dict[str, int | None],
    attempts: list[dict[str, Any]],
    other: list[dict[str, Any]],
) -> None:
    """The checks on the queue's jobs, its deliveries (id -> job id), and the records: the
    attempts the recorders made (``run`` rows) and their other rows (give-ups, logs)."""
    planned = plan.all()
    by_id = {d.delivery_id: d for d in planned}
    job_of: dict[int, dict[str, Any]] = {j["id"]: j for j in jobs}
    per_delivery = Counter(j["delivery_id"] for j in jobs)
    report.jobs = len(jobs)
    report.statuses = Counter(j["status"] for j in jobs)
    report.stored_twice = sum(1 for n in per_delivery.values() if n > 1)
    report.lost = sum(1 for d in planned if stored.get(d.delivery_id) is None)
    report.left = sum(1 for j in jobs if j["status"] in ("queued", "running")
                      and not j["delivery_id"].startswith("janitor:"))  # fmt: skip
    for j in jobs:
        sent = by_id.get(j["delivery_id"])
        if sent is not None and sent.key != j["key"]:
            report.state_mismatch += 1  # the service gave it another key than pr_key's

    runs = [r for r in attempts if r["ok"]]
    report.runs = len(runs)
    report.failed_attempts = len(attempts) - len(runs)
    report.failures = Counter(r["error"] for r in attempts if not r["ok"])
    ran = Counter(r["job"] for r in runs)
    report.jobs_run = len(ran)
    report.duplicates_run = sum(n - 1 for n in ran.values())
    # And no delivery ran under two jobs (the token in the event names its delivery).
    jobs_of_token: dict[str, set[int]] = defaultdict(set)
    for r in runs:
        if r["token"] is not None:
            jobs_of_token[r["token"]].add(r["job"])
    report.duplicates_run += sum(len(ids) - 1 for ids in jobs_of_token.values())
    report.runs_by_kind = Counter(r["kind"] for r in runs)
    report.runs_by_process = Counter(r["proc"] for r in runs)
    for r in attempts:
        job = job_of.get(r["job"]) if r["job"] is not None else None
        if job is None or job["key"] != r["key"]:
            report.wrong_event += 1
            continue
        if r["token"] is not None and r["token"] != job["delivery_id"]:
            report.wrong_event += 1
        if r["ok"] and job["status"] != "done":
            report.state_mismatch += 1
        if r["attempt"] == 1:
            report.waits.append(r["start"] - job["created_ts"] / 1000)
    report.state_mismatch += sum(1 for j in jobs if j["status"] == "done" and j["id"] not in ran)

    # Per key: one attempt at a time, in job-id order (a retried job runs again at once).
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in attempts:
        by_key[r["key"]].append(r)
    report.keys = len(by_key)
    for key, key_runs in by_key.items():
        key_runs.sort(key=lambda r: (r["start"], r["end"]))
        prod = key.endswith(":prod")
        report.prod_keys += prod
        report.prod_runs += sum(1 for r in key_runs if r["ok"]) if prod else 0
        latest_end = -math.inf
        for before, after in itertools.pairwise(key_runs):
            if after["job"] < before["job"]:
                report.order_violations += 1
        for r in key_runs:
            if r["start"] < latest_end:
                report.overlaps += 1
                report.prod_overlaps += prod
            latest_end = max(latest_end, r["end"])
    # How many ran at once overall (the workers' parallelism, for the record).
    edges = sorted([(r["start"], 1) for r in attempts] + [(r["end"], -1) for r in attempts])
    level = 0
    for _, step in edges:
        level += step
        report.max_concurrent = max(report.max_concurrent, level)

    # Each PR's deliveries were sent one after the other: job ids must follow.
    for script in plan.scripts:
        ids = [stored.get(d.delivery_id) for d in script]
        known = [i for i in ids if i is not None]
        report.accept_order_violations += sum(1 for a, b in itertools.pairwise(known) if b <= a)
        last_head = stored.get(script[-2].delivery_id)
        if last_head is None or job_of.get(last_head, {}).get("status") != "done":
            report.latest_not_built += 1
        close = stored.get(script[-1].delivery_id)
        if close is None or job_of.get(close, {}).get("status") != "done":
            report.promotions_missing += 1
    for t in plan.tags:
        job_id = stored.get(t.delivery_id)
        if job_id is None or job_of.get(job_id, {}).get("status") != "done":
            report.promotions_missing += 1

    for row in other:
        if row["t"] == "give_up":
            report.give_ups += 1
        elif row["t"] == "log":
            if "transient conflict" in row["message"]:
                report.transient += 1
            elif not _ATTEMPT_FAILED.match(row["message"]):  # those are counted above
                report.log_errors.append(f"{row['proc']} {row['level']} {row['logger']}: "
                                         f"{row['message'][:300]}")  # fmt: skip


# The worker's warning for a failed attempt (the recorder noted it as a failed run).
_ATTEMPT_FAILED = re.compile(r"job \d+ \(.*\) attempt \d+ failed: ")


def _deadlocks(conn: Connection) -> int:
    conn.execute(text("SELECT pg_stat_clear_snapshot()"))
    value = conn.execute(
        text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
    ).scalar_one()
    return int(value or 0)


def _unfinished(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(
                "SELECT count(*) FROM sluice_jobs WHERE status IN ('queued', 'running')"
            )).scalar_one())  # fmt: skip
    finally:
        engine.dispose()


def run(url: str, options: Options) -> Report:
    """One run on the (empty) PostgreSQL database at ``url``; the checks' figures."""
    report = Report()
    run_id = uuid.uuid4().hex[:10]
    plan = Plan(options, run_id)
    if not options.cold_start:
        # As a deployment whose first start made the tables: the two processes then start
        # on them. (With cold_start both make them at once: Ledger.__init__ creates the
        # bot's tables without the lock the queue and the migrations take, and one of the
        # two processes may log "relation ... already exists" for it.)
        from sluice.bot.flow.ledger import Ledger
        from sluice.bot.queue.store import JobQueue

        JobQueue(url).close()
        Ledger(url).close()
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            deadlocks_before = _deadlocks(conn)
    finally:
        engine.dispose()
    with tempfile.TemporaryDirectory(prefix="sluice-conc-") as tmp:
        workdir = Path(tmp)
        children: list[Child] = []
        try:
            with services(url, options, workdir) as started:
                children = started
                began = time.perf_counter()
                sender = Sender(plan, children, options)
                asyncio.run(sender.run())
                report.send_seconds = time.perf_counter() - began
                report.requests = sender.requests
                deadline = time.monotonic() + options.drain_timeout
                while time.monotonic() < deadline:
                    if _unfinished(url) == 0:
                        report.drained = True
                        break
                    time.sleep(0.1)
                report.wall_seconds = time.perf_counter() - began
        finally:
            for child in children:  # uvicorn is at warning level: normally nothing
                err = workdir / f"{child.name}.stderr"
                if err.exists() and err.stat().st_size:
                    tail = err.read_text(errors="replace")[-1500:]
                    report.log_errors.append(f"{child.name} stderr: ...{tail}")
        check(report, plan, url, children, deadlocks_before)
    return report


def show(report: Report, options: Options) -> None:
    ms = 1000.0
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.runs_by_kind.items()))
    procs = ", ".join(f"{k} {n}" for k, n in sorted(report.runs_by_process.items()))
    statuses = ", ".join(f"{k} {n}" for k, n in sorted(report.statuses.items()) if n)
    print(
        f"  deliveries sent:        {report.deliveries} ({report.requests} requests: "
        f"{report.dup_copies} copies to both processes, {report.redeliveries} redeliveries)"
    )
    print(
        f"  answers:                {dict(sorted(report.answers.items()))}; HTTP errors "
        f"{report.http_errors}; not answered 202 exactly once {report.answered_wrong}"
    )
    print(
        f"  stored:                 {report.jobs} jobs ({statuses}); deliveries stored twice "
        f"{report.stored_twice}; lost {report.lost}"
    )
    print(
        f"  jobs run:               {report.jobs_run} ({report.runs} runs: {kinds}; by "
        f"process: {procs}; at most {report.max_concurrent} at once)"
    )
    print(f"  duplicates run:         {report.duplicates_run}")
    print(f"  wrong event / status:   {report.wrong_event} / {report.state_mismatch}")
    print(
        f"  order violations:       {report.order_violations + report.accept_order_violations}"
        f" (runs vs accepted order per key {report.order_violations}; accepted vs sent order"
        f" per PR {report.accept_order_violations})"
    )
    print(
        f"  overlaps:               {report.overlaps} over {report.keys} keys; prod keys "
        f"{report.prod_overlaps} over {report.prod_keys} keys ({report.prod_runs} promotions "
        "and janitor runs)"
    )
    print(
        f"  supersede:              last head not built {report.latest_not_built}; "
        f"closes and promotions not run {report.promotions_missing}"
    )
    print(
        f"  queue wait:             max {report.wait(1.0) * ms:.0f} ms, p50 "
        f"{report.wait(0.5) * ms:.0f} ms, p99 {report.wait(0.99) * ms:.0f} ms "
        f"(accepted -> started; idle workers poll every {options.poll:g} s)"
    )
    print(
        f"  deadlocks / errors:     {report.deadlocks} / {len(report.log_errors)} (give-ups "
        f"{report.give_ups}, failed jobs {report.statuses.get('failed', 0)}, left "
        f"{report.left}, drained {'yes' if report.drained else 'NO'}, exit codes "
        f"{report.exit_codes}; transient conflicts retried {report.transient})"
    )
    print(
        f"  wall time:              {report.wall_seconds:.1f} s (sending "
        f"{report.send_seconds:.1f} s, then draining)"
    )
    if report.failed_attempts:
        print(
            f"  failed attempts:        {report.failed_attempts} (the flow raised; the "
            "queue ran the job again, and it is checked above like any other):"
        )
        for message, count in report.failures.most_common(5):
            print(f"    {count} x {message}")
    for line in report.log_errors[:20]:
        print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Options()
    parser.add_argument("--prs", type=int, default=d.prs)
    parser.add_argument("--commits", type=int, default=d.commits, help="head commits per PR")
    parser.add_argument("--repos", type=int, default=d.repos)
    parser.add_argument("--tags", type=int, default=d.tags, help="tag pushes in all")
    parser.add_argument("--merge", type=float, default=d.merge, help="fraction of PRs merged")
    parser.add_argument("--burst", type=float, default=d.burst,
                        help="fraction of PRs whose heads are pushed back to back")  # fmt: skip
    parser.add_argument("--dup", type=float, default=d.dup,
                        help="fraction of deliveries sent to both processes")  # fmt: skip
    parser.add_argument("--redeliver", type=float, default=d.redeliver)
    parser.add_argument("--workers", type=int, default=d.workers, help="per process")
    parser.add_argument("--seconds", type=float, default=d.seconds, help="sending window")
    parser.add_argument("--handle-ms", default="5:15", help="a job's duration, low:high")
    parser.add_argument("--poll", type=float, default=d.poll, help="idle worker's poll, s")
    parser.add_argument("--lease", type=float, default=d.lease, help="job lease, s")
    parser.add_argument("--janitor", type=float, default=d.janitor,
                        help="janitor interval, s (0: off)")  # fmt: skip
    parser.add_argument("--no-ledger", action="store_true",
                        help="the recorder does not note the repository in the ledger")  # fmt: skip
    parser.add_argument("--cold-start", action="store_true",
                        help="the two processes create the tables themselves, at once")  # fmt: skip
    parser.add_argument("--max-attempts", type=int, default=d.max_attempts)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--drain-timeout", type=float, default=d.drain_timeout)
    parser.add_argument("--database-url", default=None,
                        help="an empty scratch PostgreSQL database")  # fmt: skip
    parser.add_argument("--durable", action="store_true",
                        help="throwaway cluster with fsync and synchronous_commit on")  # fmt: skip
    args = parser.parse_args()
    low, _, high = args.handle_ms.partition(":")
    options = Options(
        prs=args.prs, commits=args.commits, repos=args.repos, tags=args.tags, merge=args.merge,
        burst=args.burst, dup=args.dup, redeliver=args.redeliver, workers=args.workers, seconds=args.seconds,
        handle_ms=(float(low), float(high or low)), poll=args.poll, lease=args.lease,
        janitor=args.janitor, ledger=not args.no_ledger, seed=args.seed,
        drain_timeout=args.drain_timeout, cold_start=args.cold_start, max_attempts=args.max_attempts,
    )  # fmt: skip
    if options.commits < 1 or options.prs < 1 or options.repos < 1:
        parser.error("--prs, --commits and --repos must be at least 1")

    def stopped(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stopped)
    with ExitStack() as stack:
        if args.database_url:
            url, where = normalise(args.database_url), "given by --database-url"
        else:
            try:
                url = stack.enter_context(
                    throwaway_postgres(durable=args.durable, prefix="sluice-conc-pg-")
                )
            except ClusterError as exc:
                sys.exit(f"{exc} (or pass --database-url)")
            where = "throwaway cluster" + ("" if args.durable else " (fsync off)")
        print(f"concurrency benchmark: 2 service processes x {options.workers} workers, "
              f"{options.prs} PRs x {options.commits} heads over {options.repos} repos, "
              f"{options.tags} tags, {options.merge:.0%} merged, {options.burst:.0%} pushed in bursts, "
              f"{options.dup:.0%} sent to "
              f"both, {options.redeliver:.0%} redelivered, over {options.seconds:g} s; jobs "
              f"take {options.handle_ms[0]:g}-{options.handle_ms[1]:g} ms; janitor every "
              f"{options.janitor:g} s")  # fmt: skip
        print(f"  PostgreSQL: {where}; machine: {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} at start")  # fmt: skip
        try:
            report = run(url, options)
        except KeyboardInterrupt:
            print("interrupted: stopping the services and PostgreSQL", file=sys.stderr)
            sys.exit(130)
    show(report, options)
    problems = report.problems()
    print("  checks: " + ("all passed" if not problems else "FAILED: " + "; ".join(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
