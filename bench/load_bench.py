"""Load (issue 45, point 2): many pull requests opened at once against one service.

The real service in its own process (``create_app`` on uvicorn, on 127.0.0.1 only: its
intake, queue, workers, fairness rule and flow), GitHub in memory (the example project
on ``main``, one head per PR, each changing ``orders.sql``), and Spark played by the
scripted runner (``core/spark/scripted.py``: the real plans, job specs, write checks and
state records; only Spark's work is a wait): a PR marked big waits ``--big-seconds`` in its
Spark job, the others ``--small-seconds``, a promotion ``--small-seconds``. The wait ends
at once when the job is stopped (supersede-cancel), as a killed driver does.

What is sent, all at once from threads: ``--prs`` PRs opened (``--big`` of them big), then,
once builds run, a merge of one PR into ``main`` (a promotion) and pushes of a new head to
``--pushes`` PRs whose build runs (each must stop that build). Bounded: every wait has a
limit, the run stops after ``--limit`` seconds.

What it prints: every job's end (each build must complete: done, or superseded by a push
and the newer head done); the queue's wait per class (accepted -> started), and for each
promotion and small PR how many running jobs it waited behind (ended between its accept
and its start) and how many jobs accepted after it started before it; supersede-cancel's
latency (push accepted -> old job ended); the service's RSS (sampled from /proc every
0.2 s) against ``--rss-bound``. The Spark server's heap is not measured here: the runner
double starts no JVM; ``--real-spark`` runs the same on the service's own Spark Connect
server (its JVM's RSS sampled, against ``--jvm-bound``).

    .venv/bin/python bench/load_bench.py --prs 20 --big 4 --workers 3 --max-running 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

OWNER = "octo/warehouse"
SECRET = "load-bench-secret"
C = "c" * 40
MERGE = "e" * 40
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
    "variables:\n  revenue_statuses: completed\n"
)


def head_of(number: int, push: int = 0) -> str:
    return f"{push:02x}{number:038x}"


# --- the service process -------------------------------------------------------------------


def serve(config: dict[str, Any]) -> None:
    """The service: the real app on uvicorn, in-memory GitHub, the scripted runner slowed."""
    import uvicorn

    from sluice.bot.entry.app import create_app
    from sluice.bot.entry.settings import ServiceSettings
    from sluice.bot.forge.memory import MemoryForge
    from sluice.core.spark import cancel
    from sluice.core.spark.scripted import Warehouse

    workdir = Path(config["workdir"])
    from tests.helpers.cases import CASE_REPOSITORY_ID

    github = MemoryForge(OWNER, name="github")
    # GitHub's id of the repository, the one the deliveries carry: the service confirms it.
    github.repositories[CASE_REPOSITORY_ID] = OWNER
    github.roles.update({"alice": "write"})
    src = workdir / "tree-main"
    shutil.copytree(
        ROOT / "examples" / "jaffle_shop", src, ignore=shutil.ignore_patterns(".sluice")
    )
    (src / "config.yaml").write_text(CONFIG)
    (src / "sluice.yaml").write_text("project: jaffle\n")  # the example's, without its pr days
    github.commit_folder(C, src, branch="main")
    big = set(config["big"])
    for number in range(1, config["prs"] + 1):
        for push in range(2 if number in config["pushed"] else 1):
            head = workdir / f"tree-{number}-{push}"
            shutil.copytree(src, head)
            orders = head / "models" / "orders.sql"
            marker = f"SELECT /* pr {number} push {push} */"
            orders.write_text(orders.read_text().replace("SELECT", marker, 1))
            parents = (C,) if push == 0 else (head_of(number),)
            github.commit_folder(head_of(number, push), head, parents=parents)
        github.open_pull(number, head_sha=head_of(number), base="main", author="alice")
    merged = config["merged"]
    github.commit_folder(
        MERGE, workdir / f"tree-{merged}-0", parents=(C, head_of(merged)), branch="main"
    )
    warehouse = Warehouse()

    # The first build of a PR that is pushed to runs until the push stops it (at most the
    # limit): a short one could end before the push is handled on a loaded machine, and
    # then there would be nothing to supersede.
    superseded = {head_of(number) for number in config["pushed"]}

    class Slow:
        def __init__(self, inner: Any, tree: Path) -> None:
            self.inner, self.tree = inner, tree

        def run(self, spec: Any) -> Any:
            env = str(spec.get("environment") or "")
            seconds = config["small_seconds"]
            if env.startswith("pr_") and int(env[3:]) in big:
                seconds = config["big_seconds"]
            if self.tree.name in superseded:
                seconds = config["limit"]
            released = threading.Event()
            forget = cancel.on_cancel(released.set)
            try:
                if released.wait(seconds):
                    raise cancel.stopped()
            finally:
                forget()
            return self.inner.run(spec)

    def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
        return Slow(warehouse.runner(project, tree, on_event), tree)

    real = bool(config.get("real"))

    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_loadBenchToken", workdir=workdir / "work",
        database_url=config["url"], github_request_interval=0, github_write_interval=0,
        janitor_interval_seconds=0, repositories=(OWNER,),
        spark_mode="connect" if real else "submit",
        workers=config["workers"], queue_max_running=config["max_running"],
        project_python="prod" if real else "on",
    )  # fmt: skip
    app = create_app(
        settings, forge_for=lambda _event: github, runner_for=None if real else runner_for
    )
    uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=config["port"], log_level="warning")
    ).run()


# --- the bench -------------------------------------------------------------------------------


def _payload(number: int, action: str, head: str, **more: Any) -> dict[str, Any]:
    from tests.helpers.cases import realcase

    return realcase("github/pull_request/opened.payload.json", OWNER, **{
        "action": action, "number": number, "pull_request.number": number,
        "pull_request.head.sha": head, "pull_request.base.ref": "main",
        "pull_request.user.login": "alice", "pull_request.draft": False,
        "pull_request.head.repo.full_name": OWNER, **more,
    })  # fmt: skip


def _send(port: int, delivery: str, payload: dict[str, Any]) -> float:
    """Post a signed delivery; when it was answered 202 (epoch seconds)."""
    from tests.helpers.github_service import sign

    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
    }
    answer = httpx.post(
        f"http://127.0.0.1:{port}/webhooks/github", content=body, headers=headers, timeout=30
    )
    if answer.status_code != 202:
        raise SystemExit(f"delivery {delivery} answered {answer.status_code}: {answer.text}")
    return time.time()


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _java_under(root: int) -> list[int]:
    """The Java processes descending from ``root`` (the service's Spark Connect server),
    but a Java process's own children: a JVM that forks (Hadoop runs shell commands) has,
    until the child execs, a child whose executable is ``java`` and whose RSS counts the
    parent's pages again."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    found = []
    for pid, parent in parents.items():
        up, seen = pid, 0
        while up in parents and up != root and seen < 64:
            up, seen = parents[up], seen + 1
        if up == root and pid != root and _is_java(pid) and not _is_java(parent):
            found.append(pid)
    return found


def _is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/exe").resolve().name == "java"
    except OSError:
        return False


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="sluice-load-"))
    if args.postgres:
        from tests.pgcluster import throwaway_postgres

        with throwaway_postgres(prefix="sluice-load-pg-") as pg_url:
            args.database_url = pg_url
            return _run(args, tmp, pg_url)
    return _run(args, tmp, args.database_url or f"sqlite:///{tmp / 'state.db'}")


def _run(args: argparse.Namespace, tmp: Path, url: str) -> int:
    from sluice.bot.queue.fairness import job_class
    from sluice.bot.queue.store import JobQueue, JobStatus
    from tests.pgcluster import free_port

    big = list(range(1, args.big + 1))
    pushed = list(range(args.prs - args.pushes + 1, args.prs + 1))
    merged = args.big + 1 if args.big + 1 <= args.prs else 1
    port = free_port()
    config = {
        "port": port, "workdir": str(tmp), "url": url, "prs": args.prs, "big": big,
        "pushed": pushed, "merged": merged, "workers": args.workers,
        "max_running": args.max_running, "small_seconds": args.small_seconds,
        "big_seconds": args.big_seconds, "real": args.real_spark,
    }  # fmt: skip
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", json.dumps(config)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    rss: list[int] = []
    jvm: list[int] = []
    jvms: list[int] = []  # Java processes at each sample
    largest: list[int] = []  # the largest one's RSS at each sample
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.2):
            kib = _rss_kib(child.pid)
            if kib is not None:
                rss.append(kib)
            if args.real_spark:
                sizes = [_rss_kib(p) or 0 for p in _java_under(child.pid)]
                jvm.append(sum(sizes))
                jvms.append(len(sizes))
                largest.append(max(sizes, default=0))

    deadline = time.monotonic() + args.limit
    try:
        while True:
            if child.poll() is not None:
                raise SystemExit(f"the service exited ({child.returncode})")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the service did not answer")
            time.sleep(0.1)
        idle = _rss_kib(child.pid)
        threading.Thread(target=sample, daemon=True).start()
        began = time.time()
        with ThreadPoolExecutor(max_workers=min(args.prs, 20)) as pool:
            list(
                pool.map(
                    lambda n: _send(port, f"open-{n}", _payload(n, "opened", head_of(n))),
                    range(1, args.prs + 1),
                )
            )
        queue = JobQueue(url)
        try:
            # Once builds run: the merge (a promotion) and the pushes (each while its
            # PR's build runs, so it must stop it).
            pushed_at: dict[int, float] = {}
            merge_sent = False
            while time.monotonic() < deadline:
                running = {r.job.key for r in queue.jobs(status=JobStatus.RUNNING, limit=500)}
                if running and not merge_sent:
                    _send(port, "merge", _payload(
                        merged, "closed", head_of(merged), **{"pull_request.merged": True,
                        "pull_request.merge_commit_sha": MERGE, "pull_request.state": "closed"}
                    ))  # fmt: skip
                    merge_sent = True
                for number in pushed:
                    if number not in pushed_at and f"github:{OWNER}#{number}" in running:
                        pushed_at[number] = _send(
                            port, f"push-{number}", _payload(
                                number, "synchronize", head_of(number, 1)))  # fmt: skip
                counts = queue.counts()
                if (
                    merge_sent
                    and len(pushed_at) == len(pushed)
                    and not (counts["queued"] or counts["running"])
                ):
                    break
                time.sleep(0.1)
            records = queue.jobs(limit=1000)
        finally:
            queue.close()
        wall = time.time() - began
    finally:
        sampling.set()
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
    return report(args, records, pushed_at, rss, idle, wall, big, job_class, jvm, jvms, largest)


def report(
    args: argparse.Namespace,
    records: list[Any],
    pushed_at: dict[int, float],
    rss: list[int],
    idle: int | None,
    wall: float,
    big: list[int],
    job_class: Any,
    jvm: list[int],
    jvms: list[int] | None = None,
    largest: list[int] | None = None,
) -> int:
    from sluice.bot.queue.store import JobStatus

    bad = 0
    by_status: dict[str, int] = {}
    for r in records:
        by_status[str(r.status)] = by_status.get(str(r.status), 0) + 1
    waits: dict[str, list[float]] = {}
    behind: dict[str, list[int]] = {}
    jumped: dict[str, list[int]] = {}
    started = [r for r in records if r.started_ts is not None]
    for r in started:
        cls = job_class(r.job.key, r.job.kind).label
        number = r.job.key.rpartition("#")[2]
        if cls == "build" and number.isdigit() and int(number) in big:
            cls = "build (big)"
        elif cls == "build":
            cls = "build (small)"
        accepted, began = r.job.created_ts, r.started_ts
        assert began is not None
        # A claim's time is read before it waits for SQLite's write lock, which the
        # delivery's commit may hold: a job can seem to start a little before it came.
        waits.setdefault(cls, []).append(max(0.0, began - accepted))
        ended_between = [
            o for o in started
            if o is not r and o.finished_ts is not None and o.started_ts is not None
            and o.started_ts < accepted < o.finished_ts <= began
        ]  # fmt: skip
        overtook = [
            o for o in started
            if o is not r and o.job.created_ts > accepted and o.started_ts is not None
            and o.started_ts < began
        ]  # fmt: skip
        behind.setdefault(cls, []).append(len(ended_between))
        jumped.setdefault(cls, []).append(len(overtook))
    # Every PR's last head built: done.
    last: dict[str, Any] = {}
    for r in sorted(records, key=lambda r: r.job.id):
        last[r.job.key] = r
    for key, r in last.items():
        if r.status != JobStatus.DONE:
            bad += 1
            print(f"  NOT DONE: {key} job {r.job.id}: {r.status} {r.error}")
    failed = [r for r in records if r.status == JobStatus.FAILED]
    bad += len(failed)
    cancel_latency = []
    for r in records:
        if r.status == JobStatus.SUPERSEDED and r.started_ts is not None:
            number = int(r.job.key.rpartition("#")[2])
            if number in pushed_at and r.finished_ts is not None:
                cancel_latency.append(r.finished_ts - pushed_at[number])
    peak = max(rss) if rss else 0
    print(
        f"load benchmark: {args.prs} PRs at once ({args.big} big: {args.big_seconds} s of "
        f"Spark, the rest {args.small_seconds} s), 1 merge, {args.pushes} pushes mid-build; "
        f"{args.workers} workers, SLUICE_QUEUE_MAX_RUNNING={args.max_running}; state "
        f"{'PostgreSQL' if args.database_url else 'SQLite'}; Spark: "
        + (
            "the service's Spark Connect server"
            if args.real_spark
            else "the scripted runner (no JVM)"
        )
    )
    print(f"  jobs:                {dict(sorted(by_status.items()))}; bad {bad}; wall {wall:.1f} s")
    again = [r for r in records if r.job.attempts > 1]
    if again:
        print(
            f"  run again:           {len(again)} job(s) took more than one attempt: "
            + "; ".join(f"{r.job.key} ({r.job.attempts})" for r in again[:5])
        )
    for cls in sorted(waits):
        w = waits[cls]
        print(
            f"  wait {cls + ':':15} n={len(w):3}  p50 {_pct(w, 0.5):6.2f} s  max {max(w):6.2f} s"
            f"  behind running (max) {max(behind[cls])}  overtaken by later (max) "
            f"{max(jumped[cls])}"
        )
    if cancel_latency:
        print(
            f"  supersede-cancel:    {len(cancel_latency)} builds stopped; push -> old job "
            f"ended p50 {statistics.median(cancel_latency):.2f} s, max {max(cancel_latency):.2f} s"
        )
    within = peak <= args.rss_bound * 1024
    print(
        f"  service RSS:         idle {(idle or 0) / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
        f"end {(rss[-1] if rss else 0) / 1024:.0f} MiB (bound {args.rss_bound} MiB: "
        f"{'within' if within else 'OVER'})"
    )
    if args.real_spark:
        top = max(jvm) if jvm else 0
        jvm_within = top <= args.jvm_bound * 1024
        print(
            f"  Spark server (JVM):  RSS peak {top / 1024:.0f} MiB, end "
            f"{(jvm[-1] if jvm else 0) / 1024:.0f} MiB (bound {args.jvm_bound} MiB: "
            f"{'within' if jvm_within else 'OVER'}; its heap is capped by spark.driver.memory)"
        )
        print(
            f"                       Java processes at once: at most {max(jvms or [0])}; "
            f"the largest one's RSS peak {max(largest or [0]) / 1024:.0f} MiB"
        )
        within = within and jvm_within
    else:
        print("  Spark server heap:   not measured (the runner double starts no JVM)")
    if args.json:
        summary = {
            "bad": bad,
            "statuses": by_status,
            "waits": {
                c: {"n": len(w), "p50": _pct(w, 0.5), "max": max(w)} for c, w in waits.items()
            },
            "behind_max": {c: max(v) for c, v in behind.items()},
            "overtaken_max": {c: max(v) for c, v in jumped.items()},
            "cancelled": len(cancel_latency),
            "rss_peak_kib": peak,
            "rss_within": within,
        }
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if bad == 0 and within else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--prs", type=int, default=20)
    parser.add_argument("--big", type=int, default=4, help="PRs whose Spark job is long")
    parser.add_argument("--pushes", type=int, default=2, help="PRs pushed to mid-build")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--max-running", type=int, default=3)
    parser.add_argument("--small-seconds", type=float, default=1.0)
    parser.add_argument("--big-seconds", type=float, default=8.0)
    parser.add_argument("--rss-bound", type=int, default=400, help="MiB")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds, at most")
    parser.add_argument("--database-url", help="a PostgreSQL state (default: SQLite)")
    parser.add_argument(
        "--postgres", action="store_true", help="the state on a throwaway PostgreSQL cluster"
    )
    parser.add_argument("--json", help="also write the figures to this file, as JSON")
    parser.add_argument(
        "--real-spark",
        action="store_true",
        help="the service's own Spark Connect server instead of the runner double "
        "(--big-seconds, --small-seconds unused)",
    )
    parser.add_argument(
        "--jvm-bound",
        type=int,
        default=4096,
        help="MiB, with --real-spark (default: the memory the sandbox grants the server, "
        "twice spark.driver.memory's default 1 GiB plus 2 GiB: core/spark/confine.limits)",
    )
    args = parser.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return
    if not 0 <= args.big < args.prs or not 0 <= args.pushes <= args.prs - args.big - 1:
        parser.error("--big and --pushes must leave the merged PR and each other apart")
    raise SystemExit(run(args))


if __name__ == "__main__":
    main()
