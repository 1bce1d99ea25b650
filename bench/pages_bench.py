"""Benchmark: each web UI page's and API endpoint's server time (issue 44), for a generated
project of 100 and 1,000 models, and SQLMesh's web server on the same models.

Usage: python bench/pages_bench.py [--sizes 100,1000] [--reps 15]
           [--against-sqlmesh ~/.cache/sluice/sqlmesh-0.236.4/bin/python] [--keep DIR]

The project is bench/plan_bench.py's generator (explicit columns, 1-3 parents, four
kinds, 50 models a layer). Its Sluice state is made without Spark, by core's own calls:
prod planned and committed with every due interval recorded (as if its job built them),
a pull request's environment ``pr_1`` (one model changed, its children reached), and
three scheduled runs recorded through ``core/runs.recorded`` (two ok, one failed).

Each server runs in its own process on 127.0.0.1 under a real uvicorn: Sluice's ``sluice
ui`` app (``bot/web/standalone.ui_app``: pages and API, everyone may read) and, with
``--against-sqlmesh PYTHON``, SQLMesh's own web server (``web.server.main.create_app``,
its ``web`` extra installed in that interpreter's virtualenv; the project a copy of the
same models with a DuckDB gateway, ``UI_MODE=plan``). This script is the only client: one
keep-alive connection, each path asked once (its first answer's time is printed apart:
SQLMesh loads the project on it) and then ``--reps`` times; the median is what is
reported. The time is the request's round trip on loopback (about 0.2 ms of it HTTP).

What compares: SQLMesh's ``/api/models`` (every model, in one answer) with Sluice's
``/api/v1/models`` (a page: 50 by default, 200 at most) at both page sizes; SQLMesh's
``/api/models/{name}`` with Sluice's ``/api/v1/models/{name}`` (one model, columns and
types inferred, its query). SQLMesh's environments endpoint answers from an empty state
here (a SQLMesh prod would need its 1,000 models run on DuckDB), so it is printed but not
compared. SQLMesh has no page for the rest (pull requests, queue, history, audit).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_bench import generate

DAY = 86_400_000
BUILT = 1_735_689_600_000  # 2025-01-01: prod built then
KEY = "local:bench/pages"

STATE = """
import sys
from sluice.core import runs, workflow
from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.state import open_state

root, changed, url, built = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_state(url)
project = load_project(root, use_cache=False)
plan = workflow.plan_environment(project, store, "prod", end=built, execution_time=built)
for b in plan.backfill:
    store.add_intervals(b.name, b.version, b.intervals)
workflow.commit_plan(store, plan, now=built)
pr = load_project(changed, use_cache=False)
plan = workflow.plan_environment(pr, store, "pr_1", end=built, execution_time=built)
workflow.commit_plan(store, plan, now=built)
for day, fail in ((3, False), (5, False), (6, True)):
    at = built + day * 86_400_000
    try:
        with runs.recorded(store, "prod", now=at) as run:
            run.plan = workflow.plan_run(project, store, "prod", now=at)
            if fail:
                raise SluiceError("AnalysisException: a made-up failure of the benchmark")
            for b in run.plan.backfill:
                store.add_intervals(b.name, b.version, b.intervals)
            run.tables_built = len(run.plan.backfill)
    except SluiceError:
        pass
store.close()
print(len(project.models))
"""

SLUICE_SERVER = """
import sys
import uvicorn
from sluice.bot.web.access import Everyone
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import Site
from sluice.bot.web.standalone import ui_app

key, url, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
site = Site(lambda: [key], lambda repo: Reader(repo, url, queue=False), Everyone())
uvicorn.run(ui_app(site), host="127.0.0.1", port=port, log_level="warning", access_log=False)
"""

SQLMESH_SERVER = """
import sys
import uvicorn
from web.server.main import create_app

uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False)
"""

SQLMESH_CONFIG = (
    "gateways:\n  local:\n    connection:\n      type: duckdb\n      database: {db}\n"
    "default_gateway: local\n"
    "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(command: list[str], port: int, env: dict[str, str] | None = None) -> subprocess.Popen:  # type: ignore[type-arg]
    """Start a server process and wait until it answers on ``port``."""
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{command[:3]} exited:\n{process.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{command[:3]} did not listen on {port}")


def stop(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def timings(port: int, paths: list[str], reps: int) -> dict[str, tuple[float, float, int]]:
    """Each path: (its first answer's ms, the median of ``reps`` more, the answer's bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    found = {}
    for path in paths:
        times = []
        size = 0
        for _ in range(reps + 1):
            start = time.perf_counter()
            conn.request("GET", path)
            answer = conn.getresponse()
            body = answer.read()
            times.append((time.perf_counter() - start) * 1000)
            if answer.status != 200:
                raise SystemExit(f"{path}: {answer.status} {body[:300]!r}")
            size = len(body)
        found[path] = (times[0], statistics.median(times[1:]), size)
    conn.close()
    return found


def sluice_paths(models: list[str], pr_plan: str) -> list[str]:
    one = models[len(models) // 2]
    q = "repo=" + KEY.replace(":", "%3A").replace("/", "%2F")
    return [
        f"/ui/environments?{q}",
        f"/ui/environments/prod?{q}",
        f"/ui/environments/prod/intervals?{q}",
        f"/ui/pulls?{q}",
        f"/ui/pulls/1?{q}",
        f"/ui/plans/{pr_plan}?{q}",
        f"/ui/jobs?{q}",
        f"/ui/history?{q}",
        f"/ui/models?{q}",
        f"/ui/models/{one}?{q}",
        f"/ui/audit?{q}",
        f"/api/v1/environments?{q}",
        f"/api/v1/environments/prod?{q}",
        f"/api/v1/environments/prod/intervals?{q}",
        f"/api/v1/pulls?{q}",
        f"/api/v1/pulls/1?{q}",
        f"/api/v1/plans/{pr_plan}?{q}",
        f"/api/v1/jobs?{q}",
        f"/api/v1/history?{q}",
        f"/api/v1/history/runs?{q}",
        f"/api/v1/models?{q}",
        f"/api/v1/models?limit=200&{q}",
        f"/api/v1/models/{one}?{q}",
        f"/api/v1/audit?{q}",
    ]


def prepare(base: Path, count: int) -> tuple[Path, str, list[str], str]:
    """The project of ``count`` models, its Sluice state; (root, state URL, models, the
    pull request's plan id)."""
    root = base / f"project-{count}"
    models = generate(root, count)
    changed = base / f"changed-{count}"
    shutil.copytree(root, changed)
    first = changed / "models" / "model_0.sql"
    first.write_text(first.read_text().replace(" + 0 AS v0", " + 100 AS v0"))
    url = f"sqlite:///{base / f'state-{count}.db'}"
    subprocess.run(
        [sys.executable, "-c", STATE, str(root), str(changed), url, str(BUILT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    probe = (
        "import sys; from sluice.core.state import open_state; "
        "s = open_state(sys.argv[1]); print(s.get_environment('pr_1').plan_id)"
    )
    pr_plan = subprocess.run(
        [sys.executable, "-c", probe, url], check=True, capture_output=True, text=True
    ).stdout.strip()
    return root, url, models, pr_plan


def sqlmesh_copy(base: Path, root: Path, count: int) -> Path:
    copy = base / f"sqlmesh-{count}"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".sluice"))
    (copy / "config.yaml").write_text(SQLMESH_CONFIG.format(db=base / f"sqlmesh-{count}.duckdb"))
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--against-sqlmesh", default=None, metavar="PYTHON")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="pages-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"web UI pages benchmark; projects under {base}; {args.reps} reps, medians")
    print(f"  load before: {os.getloadavg()[0]:.2f} (1 min)")
    results: dict[int, dict[str, dict[str, tuple[float, float, int]]]] = {}
    for count in (int(n) for n in args.sizes.split(",")):
        root, url, models, pr_plan = prepare(base, count)
        one = models[len(models) // 2]
        port = free_port()
        server = serve([sys.executable, "-c", SLUICE_SERVER, KEY, url, str(port)], port)
        try:
            results.setdefault(count, {})["sluice"] = timings(
                port, sluice_paths(models, pr_plan), args.reps
            )
        finally:
            stop(server)
        if args.against_sqlmesh:
            copy = sqlmesh_copy(base, root, count)
            port = free_port()
            env = {**os.environ, "PROJECT_PATH": str(copy), "UI_MODE": "plan"}
            server = serve([args.against_sqlmesh, "-c", SQLMESH_SERVER, str(port)], port, env)
            try:
                results[count]["sqlmesh"] = timings(
                    port, ["/api/models", f"/api/models/{one}", "/api/environments"], args.reps
                )
            finally:
                stop(server)
        for tool, found in results[count].items():
            for path, (first, median, size) in found.items():
                shown = path.split("?")[0] + ("?limit=200" if "limit=200" in path else "")
                print(
                    f"  {count} models, {tool} {shown}: first {first:.1f} ms, "
                    f"median {median:.1f} ms, {size / 1024:.0f} KiB",
                    flush=True,
                )
    print(f"  load after: {os.getloadavg()[0]:.2f} (1 min)")
    print(json.dumps({str(k): v for k, v in results.items()}))


if __name__ == "__main__":
    main()
