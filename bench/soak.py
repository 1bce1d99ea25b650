"""Soak (issue 45, point 3): continuous pull-request traffic against one service, and what
the service holds over time.

Usage: python bench/soak.py [--minutes 10] [--every 30] [--open 4] [--tick 1.0]
                            [--janitor 60] [--csv PATH] [--heap]
                            [--forget-after 40] [--memory] [--warmup 5]
                            [--tracemalloc FRAMES] [--malloc-trim SECONDS]
                            [--plan-cache ENTRIES]

The real service in its own process (``create_app`` on uvicorn, 127.0.0.1 only: intake,
queue, workers, flow, the janitor every ``--janitor`` seconds), GitHub in memory (the
example project on ``main``), Spark played by the scripted runner
(``core/spark/scripted.py``: the real plans, job specs, write checks and state records;
Spark's work is a 0.2 s wait), state on SQLite in the workdir. The service process also
takes ``POST /bench/forge`` (this bench's only addition to it, on loopback), through which
the bench makes each pull request's commits in the in-memory forge before it sends the
webhook GitHub would send.

Traffic, every ``--tick`` seconds, one step of each of up to ``--open`` pull requests in
flight: opened (a new head changing ``orders.sql`` on the current ``main``), a push (a
second head), approved (a review by a writer), then merged (``main`` moves to it: a
promotion) or, every third one, closed unmerged. Bounded: the run stops after
``--minutes``; a pull request is new each time (numbers grow).

Every ``--every`` seconds it samples the service process: RSS, threads, open files, the
files in its temp folder (``TMPDIR``, its own), the workdir's size (state database
apart), its log (stderr, to a file) and the job logs' size, and the state's rows (every
table of the SQLite file, read-only). It prints a line per sample and writes them as CSV
(``--csv``; matplotlib is not a dependency: plot the CSV as you like). ``--heap`` also
prints, at each sample, the kinds of Python objects in the service grown most since the
last. The in-memory GitHub lives in the service's process: so that its records do not
count as the service's memory, it forgets each pull request ``--forget-after`` pull
requests later (its commits' files, parents, checks and check runs, comments, reviews,
pushes, its call log), and the scripted Spark the job specs it keeps.

Where the memory is (docs/reliability.md, "Where the growth is"): ``--memory`` adds to
each sample glibc's heap (from the system, in use, free, its arenas), Python's
small-object arenas, SQLite's own memory, the planner's caches and the fake GitHub's
records, and the run ends with each one's slope a minute after ``--warmup``;
``--tracemalloc FRAMES`` prints the 20 allocation sites grown most between the warm-up's
end and the run's; ``--malloc-trim SECONDS`` and ``--plan-cache ENTRIES`` (and
``MALLOC_ARENA_MAX`` in the environment) are comparisons.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from fastapi import Request  # noqa: E402

OWNER = "octo/warehouse"
SECRET = "soak-bench-secret"
MAIN = "c" * 40


def sha(number: int, step: int) -> str:
    return f"{step:02x}{number:038x}"


# --- the service process -------------------------------------------------------------------


def serve(config: dict[str, Any]) -> None:
    """The service: the real app on uvicorn, in-memory GitHub, the scripted runner."""
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
    github.roles.update({"alice": "write", "bob": "write"})
    src = workdir / "tree-main"
    shutil.copytree(
        ROOT / "examples" / "jaffle_shop", src, ignore=shutil.ignore_patterns(".sluice")
    )
    github.commit_folder(MAIN, src, branch="main")
    warehouse = Warehouse()
    lock = threading.Lock()

    class Slow:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def run(self, spec: Any) -> Any:
            released = threading.Event()
            forget = cancel.on_cancel(released.set)
            try:
                if released.wait(config["job_seconds"]):
                    raise cancel.stopped()
            finally:
                forget()
            return self.inner.run(spec)

    def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
        return Slow(warehouse.runner(project, tree, on_event))

    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_soakBenchToken", workdir=workdir / "work",
        github_request_interval=0, github_write_interval=0,
        janitor_interval_seconds=config["janitor"], repositories=(OWNER,),
        spark_mode="submit", workers=2, project_python="on",
    )  # fmt: skip
    app = create_app(settings, forge_for=lambda _event: github, runner_for=runner_for)

    counted: list[dict[str, int]] = []

    @app.post("/bench/heap")
    async def heap() -> dict[str, Any]:
        """With --heap: the kinds of Python objects grown most since the last call."""
        import gc
        from collections import Counter

        gc.collect()
        now = Counter(type(o).__qualname__ for o in gc.get_objects())
        grown = []
        if counted:
            diff = {k: v - counted[-1].get(k, 0) for k, v in now.items()}
            grown = [f"{k} {d:+d}" for k, d in sorted(diff.items(), key=lambda x: -x[1])[:12]]
        counted[:] = [dict(now)]
        return {"objects": sum(now.values()), "grown": grown}

    if config.get("plan_cache"):
        from sluice.core.plan import column_types, lineage, outputs

        for cache in (column_types._CACHE, lineage._CACHE, outputs._READS, outputs._RESOLVED):
            cache.entries = config["plan_cache"]
    if config.get("tracemalloc"):
        import tracemalloc

        tracemalloc.start(config["tracemalloc"])
    marks: dict[str, Any] = {}

    @app.post("/bench/memory")
    async def memory() -> dict[str, Any]:
        """With --memory: where the process's memory is, by allocator (glibc's malloc,
        Python's arenas, SQLite's, tracemalloc's count of Python's allocations), and what
        the in-memory GitHub holds."""
        held = {"forge_runs": len(github.runs), "forge_commits": len(github.parents)}
        return {**_memory(), **held}

    @app.post("/bench/tracemalloc/{mark}")
    async def trace(mark: str) -> dict[str, Any]:
        """With --tracemalloc: a snapshot named ``mark``; at ``end``, the allocation sites
        grown most since ``warm`` (by traceback)."""
        import gc
        import tracemalloc

        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        marks[mark] = snap
        if mark != "end" or "warm" not in marks:
            return {"grown": []}
        stats = snap.compare_to(marks["warm"], "traceback")
        grown = []
        for stat in stats[:20]:
            frames = [f"{f.filename}:{f.lineno}" for f in stat.traceback]
            grown.append({"kib": round(stat.size_diff / 1024, 1), "blocks": stat.count_diff,
                          "traceback": frames})  # fmt: skip
        return {"grown": grown}

    if config.get("malloc_trim"):
        import ctypes

        libc = ctypes.CDLL("libc.so.6")

        def trim() -> None:
            while True:
                time.sleep(config["malloc_trim"])
                libc.malloc_trim(0)

        threading.Thread(target=trim, name="bench-malloc-trim", daemon=True).start()

    def forget(old: int) -> None:
        """The in-memory GitHub forgets pull request ``old`` (long closed): its commits'
        files and checks, comments, reviews; and its call log and all but the last
        merges and deployments; the scripted Spark its job specs. Both live in the
        service's process: kept, their records would count in the service's memory."""
        heads = {sha(old, 0), sha(old, 1), sha(old, 0xFF)} - {github.refs["main"]}
        for head in heads:
            github.checks.pop(head, None)
            github.files.pop(head, None)
            github.parents.pop(head, None)
            github.people.pop(head, None)
        # Every check run by id, each with its check's text (a plan's summary: KiB, past
        # what Python's small-object allocator takes), and the push log: kept, they grew
        # the service's RSS by some 0.3 MiB a minute while its objects looked flat.
        for made in [made for made, run in github.runs.items() if run.sha in heads]:
            del github.runs[made]
        github.push_log[:] = [push for push in github.push_log if push[1] not in heads]
        for records in (github.pulls, github.comments, github.review_log):
            records.pop(old, None)
        github.calls.clear()
        del github.merges[:-50], github.deployments[:-50]
        # The scripted Spark, in the service's process too, keeps every job's spec; its
        # tables and views are the catalog's, which the janitor keeps as Spark's.
        warehouse.jobs.clear()

    @app.post("/bench/forge")
    async def forge(request: Request) -> dict[str, str]:
        """The bench's hand on the in-memory forge: a PR's commit, review, merge, close."""
        ask = await request.json()
        number, step, what = int(ask["number"]), int(ask["step"]), ask["what"]
        with lock:
            head = sha(number, step)
            if what in ("open", "push"):
                files: dict[str, str | bytes] = dict(github.files[github.refs["main"]])
                path = "models/orders.sql"
                text = files[path].decode() if isinstance(files[path], bytes) else files[path]
                files[path] = str(text).replace("SELECT", f"SELECT /* pr {number} {step} */", 1)
                github.commit(head, files, parents=(github.refs["main"],))
                if what == "open":
                    github.open_pull(number, head_sha=head, base="main", author="alice")
                else:
                    github.push(number, head)
            elif what == "approve":
                github.add_review(number, "bob", "APPROVED", head)
            elif what == "merge":
                merged = sha(number, 0xFF)
                github.commit(merged, dict(github.files[head]), parents=(github.refs["main"], head),
                              branch="main")  # fmt: skip
                github.close_pull(number, merged=True)
                if 0 < config["forget_after"] < number:
                    forget(number - config["forget_after"])
                return {"merge": merged}
            elif what == "close":
                github.close_pull(number)
            if what == "close" and 0 < config["forget_after"] < number:
                forget(number - config["forget_after"])
        return {}

    uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=config["port"], log_level="warning")
    ).run()


def _memory() -> dict[str, Any]:
    """This process's memory by allocator: glibc's malloc (all arenas: from the system,
    in use, free), Python's own arenas (``sys._debugmallocstats``), SQLite's
    (``sqlite3_memory_used``: page caches, statements, schema), tracemalloc's count of
    Python's allocations if it runs, and the count of objects the collector tracks."""
    import ctypes
    import gc
    import tracemalloc

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]  # fmt: skip

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    info = libc.mallinfo2()
    sqlite = ctypes.CDLL("libsqlite3.so.0")  # the one the sqlite3 module links
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    with tempfile.TemporaryFile(mode="w+") as out:  # it writes to fd 2: catch it there
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
            libc.malloc_stats()  # glibc's, an "Arena N:" paragraph each
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        stats = out.read()
    # (nothing while tracemalloc runs: its hooks hide Python's allocator)
    arenas = next((int(line.split("=")[1].replace(",", "")) for line in stats.splitlines()
                   if line.startswith("# arenas allocated current")), None)  # fmt: skip
    from sluice.core.plan import column_types, lineage, outputs

    caches = (column_types._CACHE, lineage._CACHE, outputs._READS, outputs._RESOLVED)
    glibc_arenas = sum(1 for line in stats.splitlines() if line.startswith("Arena "))
    mib = 2**20
    return {
        "malloc_arenas": glibc_arenas,
        "plan_cache_entries": sum(len(cache) for cache in caches),
        "plan_cache_query_kib": round(sum(cache.held() for cache in caches) / 1024, 1),
        "malloc_system_mib": round((info.arena + info.hblkhd) / mib, 1),
        "malloc_used_mib": round((info.uordblks + info.hblkhd) / mib, 1),
        "malloc_free_mib": round(info.fordblks / mib, 1),
        "pymalloc_arenas_mib": "" if arenas is None else round(arenas * 1048576 / mib, 1),
        "sqlite_mib": round(sqlite.sqlite3_memory_used() / mib, 2),
        "traced_mib": round(tracemalloc.get_traced_memory()[0] / mib, 1)
        if tracemalloc.is_tracing()
        else "",
        "objects": len(gc.get_objects()),
    }


def slope(samples: list[dict[str, Any]], key: str, after: float) -> float | None:
    """Least-squares slope of ``key`` per minute over the samples from ``after`` s on."""
    points = [(s["seconds"] / 60, float(s[key])) for s in samples
              if s["seconds"] >= after and s.get(key) not in (None, "")]  # fmt: skip
    if len(points) < 3:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else None


# --- the traffic -----------------------------------------------------------------------------


def _payload(case: str, **changes: Any) -> dict[str, Any]:
    from tests.helpers.cases import realcase

    return realcase(case, OWNER, **changes)


def _pull(number: int, head: str, action: str, **more: Any) -> dict[str, Any]:
    event = _payload("github/pull_request/opened.payload.json", action=action, number=number,
                     **{"pull_request.number": number, "pull_request.head.sha": head,
                        "pull_request.user.login": "alice", "pull_request.base.ref": "main",
                        "pull_request.draft": False, "pull_request.head.repo.full_name": OWNER,
                        "pull_request.head.ref": f"feature-{number}"})  # fmt: skip
    event["pull_request"].update(more)
    return event


def _review(number: int, head: str) -> dict[str, Any]:
    return _payload("github/pull_request_review/submitted.payload.json", **{
        "pull_request.number": number, "pull_request.head.sha": head,
        "review.user.login": "bob", "review.state": "approved", "review.commit_id": head,
        "review.id": number * 1000 + 7,
    })  # fmt: skip


class Traffic:
    """Pull requests, each a step per tick: open, push, approve, merge or close."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        self.next = 1
        self.steps: dict[int, int] = {}  # PR -> the next step
        self.sent = 0
        self.refused = 0

    def forge(self, number: int, step: int, what: str) -> dict[str, Any]:
        got = self.client.post("/bench/forge", json={"number": number, "step": step, "what": what})
        got.raise_for_status()
        answer: dict[str, Any] = got.json()
        return answer

    def deliver(self, event: str, body: dict[str, Any]) -> None:
        from tests.helpers.github_service import sign

        raw = json.dumps(body).encode()
        self.sent += 1
        answer = self.client.post("/webhooks/github", content=raw, headers={
            "X-GitHub-Event": event, "X-GitHub-Delivery": f"soak-{self.sent}",
            "X-Hub-Signature-256": sign(raw, SECRET), "Content-Type": "application/json",
        })  # fmt: skip
        if answer.status_code != 202:
            self.refused += 1

    def tick(self, open_at_once: int) -> None:
        while len(self.steps) < open_at_once:
            self.steps[self.next] = 0
            self.next += 1
        for number, step in list(self.steps.items()):
            if step == 0:
                self.forge(number, 0, "open")
                self.deliver("pull_request", _pull(number, sha(number, 0), "opened"))
            elif step == 1:
                self.forge(number, 1, "push")
                self.deliver("pull_request", _pull(number, sha(number, 1), "synchronize"))
            elif step == 2:
                self.forge(number, 1, "approve")
                self.deliver("pull_request_review", _review(number, sha(number, 1)))
            elif number % 3:
                merged = self.forge(number, 1, "merge")["merge"]
                self.deliver("pull_request", _pull(number, sha(number, 1), "closed",
                             merged=True, merge_commit_sha=merged, state="closed"))  # fmt: skip
            else:
                self.forge(number, 1, "close")
                self.deliver("pull_request", _pull(number, sha(number, 1), "closed",
                                                   state="closed"))  # fmt: skip
            if step >= 3:
                del self.steps[number]
            else:
                self.steps[number] = step + 1


# --- the samples -----------------------------------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    return out


def _size(folder: Path, skip: set[Path] = frozenset()) -> tuple[int, int]:  # type: ignore[assignment]
    """Bytes and files under ``folder`` (``skip`` left out)."""
    total = files = 0
    for base, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(base) / name
            if path in skip:
                continue
            try:
                total += path.lstat().st_size
                files += 1
            except OSError:
                continue
    return total, files


def _rows(db: Path) -> tuple[int, dict[str, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        counts = {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()
    return sum(counts.values()), counts


def sample(pid: int, work: Path, tmpdir: Path, log: Path, began: float) -> dict[str, Any]:
    status = _status(pid)
    db = work / "state.db"
    workdir_bytes, _ = _size(work, {db, Path(f"{db}-wal"), Path(f"{db}-shm")})
    job_logs, job_log_files = _size(work / "logs")
    _, temp_files = _size(tmpdir)
    rows, counts = _rows(db)
    return {
        "seconds": round(time.monotonic() - began),
        "rss_mib": round(status["VmRSS"] / 1024, 1),
        "threads": status["Threads"],
        "open_files": len(os.listdir(f"/proc/{pid}/fd")),
        "temp_files": temp_files,
        "workdir_mib": round(workdir_bytes / 2**20, 2),
        "state_db_mib": round(sum(p.stat().st_size for p in work.glob("state.db*")) / 2**20, 2),
        "service_log_kib": round(log.stat().st_size / 1024, 1),
        "job_logs_kib": round(job_logs / 1024, 1),
        "job_log_files": job_log_files,
        "state_rows": rows,
        "biggest_tables": " ".join(
            f"{n}={c}" for n, c in sorted(counts.items(), key=lambda x: -x[1])[:3]
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--every", type=float, default=30)
    parser.add_argument("--open", type=int, default=4)
    parser.add_argument("--tick", type=float, default=1.0)
    parser.add_argument("--janitor", type=float, default=60)
    parser.add_argument("--job-seconds", type=float, default=0.2)
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument(
        "--forget-after",
        type=int,
        default=40,
        help="the in-memory GitHub forgets a PR this many PRs later (0: never)",
    )
    parser.add_argument(
        "--heap",
        action="store_true",
        help="print the kinds of Python objects in the service grown most between samples",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="sample where the service's memory is: glibc malloc (from the system, in use, "
        "free), Python's arenas, SQLite's, the collector's objects",
    )
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace the service's Python allocations (FRAMES deep); print the 20 sites "
        "grown most between the end of --warmup and the end",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=5,
        help="minutes left out of the slopes printed at the end (and --tracemalloc's start)",
    )
    parser.add_argument(
        "--malloc-trim",
        type=float,
        default=0,
        metavar="SECONDS",
        help="the service calls glibc's malloc_trim(0) every SECONDS (a comparison)",
    )
    parser.add_argument(
        "--plan-cache",
        type=int,
        default=0,
        metavar="ENTRIES",
        help="cap the planner's caches (column types, lineage shapes, star reads, resolved "
        "outputs) at ENTRIES each in the service, not their 4096 (a comparison)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return 0

    from tests.pgcluster import free_port

    tmp = Path(tempfile.mkdtemp(prefix="sluice-soak-"))
    child_tmp = tmp / "tmp"
    child_tmp.mkdir()
    port = free_port()
    config = {"port": port, "workdir": str(tmp), "janitor": args.janitor,
              "job_seconds": args.job_seconds, "heap": args.heap,
              "forget_after": args.forget_after, "tracemalloc": args.tracemalloc,
              "malloc_trim": args.malloc_trim, "plan_cache": args.plan_cache}  # fmt: skip
    log = tmp / "service.log"
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", json.dumps(config)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(child_tmp)},
        )  # fmt: skip
    samples: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 180  # tracemalloc slows the imports
        while True:
            if child.poll() is not None:
                raise SystemExit(f"the service exited ({child.returncode}); see {log}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the service did not answer")
            time.sleep(0.2)
        traffic = Traffic(port)
        began = time.monotonic()
        end = began + args.minutes * 60
        next_sample = began
        print(f"soak: {args.minutes:g} min, {args.open} PRs in flight, a step each every "
              f"{args.tick:g} s, janitor every {args.janitor:g} s; workdir {tmp}; "
              f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '-')}, "
              f"malloc_trim every {args.malloc_trim or '-'} s")  # fmt: skip
        warm = False
        while time.monotonic() < end:
            if time.monotonic() >= next_sample:
                got = sample(child.pid, tmp / "work", child_tmp, log, began)
                got["prs"] = traffic.next - 1
                got["deliveries"] = traffic.sent
                if args.memory:
                    got.update(traffic.client.post("/bench/memory", timeout=120).json())
                samples.append(got)
                print("  " + "  ".join(f"{k}={v}" for k, v in got.items()), flush=True)
                if args.heap:
                    heap = traffic.client.post("/bench/heap", timeout=120).json()
                    print(f"    {heap['objects']} objects; grown most: {', '.join(heap['grown'])}")
                next_sample += args.every
            if args.tracemalloc and not warm and time.monotonic() >= began + args.warmup * 60:
                traffic.client.post("/bench/tracemalloc/warm", timeout=300)
                warm = True
            traffic.tick(args.open)
            time.sleep(args.tick)
        time.sleep(min(args.every, 10))  # the last jobs end
        got = sample(child.pid, tmp / "work", child_tmp, log, began)
        got["prs"], got["deliveries"] = traffic.next - 1, traffic.sent
        if args.memory:
            got.update(traffic.client.post("/bench/memory", timeout=120).json())
        samples.append(got)
        print("  " + "  ".join(f"{k}={v}" for k, v in got.items()), flush=True)
        print(f"deliveries refused: {traffic.refused}")
        after = args.warmup * 60
        for key in ("rss_mib", "malloc_system_mib", "malloc_used_mib", "malloc_free_mib",
                    "pymalloc_arenas_mib", "sqlite_mib", "traced_mib", "objects"):  # fmt: skip
            rate = slope(samples, key, after)
            if rate is not None:
                print(f"{key} after {args.warmup:g} min: {rate:+.3f} a minute")
        if warm:
            # Comparing two snapshots of N frames takes minutes on a loaded machine.
            grown = traffic.client.post("/bench/tracemalloc/end", timeout=3600).json()["grown"]
            print("allocation sites grown most since the warm-up (KiB, blocks, traceback):")
            for site in grown:
                print(f"  {site['kib']:+.1f} KiB {site['blocks']:+d} blocks")
                for frame in site["traceback"]:
                    print(f"      {frame}")
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
    if args.csv is not None and samples:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(samples[0]))
            writer.writeheader()
            writer.writerows(samples)
        print(f"samples: {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
