"""Benchmark: how long a user waits, step by step, on the example project (issue 21).

Usage: python bench/latency_bench.py [--reps 5] [--quick] [--modes submit,connect]
                                     [--keep DIR] [--no-sqlmesh] [--sqlmesh-venv DIR]

On ``examples/jaffle_shop`` through the local forge (the flow ``sluice pr`` and ``sluice
demo`` run, in this one process as the service runs it), per Spark mode (``submit``: a
``spark-submit`` per job; ``connect``: each job a client of one warm Spark Connect server
that this process starts once, as the service does with ``SLUICE_SPARK_MODE=connect``):

1. a fresh git repository with the example (the demo's: one approval by ``reviewer``), and
   prod built on local Spark (not timed: once per mode; in connect mode it starts the
   server, whose start is in that time);
2. per repetition, a branch adding one column to ``jaffle.customers`` (a one-model
   non-breaking change), then, timed:
   - **PR comment**: ``sluice pr open`` until the PR comment is posted (plan, the PR
     environment's build of the one model, its audits, the table diff, the comment);
   - (``sluice pr approve``, not timed)
   - **promotion**: ``sluice pr merge`` until prod is promoted (a virtual update: the PR's
     version is already built, so only views move) and ``sluice/deploy`` passed;
   - **query**: ``sluice query prod`` with one row back (what ``sluice query`` runs);
3. the yardstick, measured in the same run between the repetitions: a cold PySpark
   session in a fresh process (a JVM, Hive support on an embedded Derby metastore,
   ``SELECT 1``);
4. unless ``--no-sqlmesh``, SQLMesh 0.236.4 on the same Spark settings
   (``bench/sqlmesh_spark.py``; its virtualenv from ``--sqlmesh-venv``, else built in the
   work folder): a copy of the example with prod built (not timed: ``sqlmesh plan prod
   --end 2018-04-30``), then per repetition the same column added to ``jaffle.customers``
   and, each a ``sqlmesh plan ENV --auto-apply --no-prompts --skip-tests`` process (audits
   on), timed: the **environment build** (``pr_N``: the one model) and the **promotion**
   (that change to prod: a virtual update, checked to write no data file).

Prints per step and mode the median seconds, the connect/submit ratio and each median
against the cold start, with the issue's targets (promotion and query at most half a cold
start, the PR comment at most three); then SQLMesh's medians beside Sluice's PR comment
and promotion, with SQLMesh / Sluice. ``--quick``: 2 repetitions instead of 5.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sqlmesh_spark

REPO = Path(__file__).resolve().parents[1]
Mode = Literal["submit", "connect"]
STEPS = ("PR comment", "promotion", "query")
TARGETS = {"PR comment": 3.0, "promotion": 0.5, "query": 0.5}  # x the cold Spark start
QUERY = "SELECT COUNT(*) AS customers FROM jaffle.customers"
COLD_SPARK = """
import sys
from pyspark.sql import SparkSession
spark = (
    SparkSession.builder.master("local[*]").appName("cold-start")
    .config("spark.sql.warehouse.dir", sys.argv[1] + "/warehouse")
    .config("spark.ui.enabled", "false")
    .enableHiveSupport().getOrCreate()
)
assert spark.sql("SELECT 1").collect()[0][0] == 1
spark.stop()
"""


def cold_spark(work: Path) -> float:
    """Seconds of a fresh process's cold PySpark session (Hive support, ``SELECT 1``)."""
    folder = Path(tempfile.mkdtemp(prefix="cold-", dir=work))
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", COLD_SPARK, str(folder)],
        cwd=folder,  # Derby's metastore_db and its log
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - began
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


LOG: list[Path] = []  # where the flow's own output goes (set in main)


def timed(step: Callable[[], Any]) -> float:
    """Seconds of ``step()``; what it prints goes to the log, not to the table."""
    with (
        open(LOG[0], "a", encoding="utf-8") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
    ):
        began = time.perf_counter()
        step()
        return time.perf_counter() - began


def add_column(root: Path, number: int) -> None:
    """Add column ``number`` to jaffle.customers (one model, a non-breaking change)."""
    path = root / "models" / "customers.sql"
    text, count = re.subn(
        r"(\n(\s*)c\.last_name,\n)",
        f"\\1\\2UPPER(c.last_name) AS last_name_upper_{number},\n",
        path.read_text(encoding="utf-8"),
        count=1,
    )
    if count != 1:
        raise SystemExit(f"{path}: the edit does not apply (the example changed?)")
    path.write_text(text, encoding="utf-8")


class Flow:
    """One mode's repository, its prod, and the pull requests of the repetitions."""

    def __init__(self, root: Path, mode: Mode) -> None:
        from sluice.bot.entry import demo

        self.root = root
        self.mode = mode
        self.state = f"sqlite:///{root / '.sluice' / 'state.db'}"
        self.changes = 0
        demo._make_repo(root)
        print(f"[{mode}] building prod in {root} ...", flush=True)
        seconds = timed(lambda: demo._build_prod(root, self.state, mode))
        print(f"[{mode}] prod built in {seconds:.1f} s (not timed below)", flush=True)

    def pr(self, *args: str) -> None:
        """``sluice pr ARGS`` in this process (what the command line runs)."""
        from sluice.bot.entry import local_pr

        common = ["--repo", str(self.root), "--state", self.state, "--spark", self.mode]
        local_pr.pr.main([*args, *common, "--quiet"], standalone_mode=False)

    def branch(self) -> str:
        """A branch adding one column to jaffle.customers (one model, non-breaking)."""
        self.changes += 1
        name = f"change-{self.changes}"
        git = ["git", "-C", str(self.root)]
        subprocess.run([*git, "checkout", "-q", "-b", name, "main"], check=True)
        add_column(self.root, self.changes)
        subprocess.run(
            [*git, "commit", "-q", "-am", f"customers: column {self.changes}"], check=True
        )
        subprocess.run([*git, "checkout", "-q", "main"], check=True)
        return name

    def one(self) -> dict[str, float]:
        """One repetition: open (comment), approve, merge (promotion), query."""
        from sluice.bot.forge.local import LocalForge

        head = self.branch()
        forge = LocalForge(self.root)
        seconds = {}
        seconds["PR comment"] = timed(
            lambda: self.pr("open", "--base", "main", "--head", head, "--user", "author")
        )
        number = max(forge.pull_numbers())
        comment = forge.comments(number)
        if not comment or "jaffle.customers" not in comment[0]:
            raise SystemExit(f"#{number}: no PR comment naming jaffle.customers: {comment}")
        if "non-breaking" not in comment[0].lower():
            raise SystemExit(f"#{number}: the change is not planned as non-breaking:\n{comment[0]}")
        timed(lambda: self.pr("approve", str(number), "--user", "reviewer"))
        seconds["promotion"] = timed(lambda: self.pr("merge", str(number), "--user", "author"))
        merged = forge.record(number)
        deploy = forge.checks(merged["merge_sha"]).get("sluice/deploy") or forge.checks(
            forge.pull_request(number).head_sha
        ).get("sluice/deploy")
        if merged["state"] != "merged" or not deploy or deploy["conclusion"] != "success":
            raise SystemExit(f"#{number}: not promoted: {merged['state']}, {deploy}")
        seconds["query"] = timed(self.query)
        return seconds

    def query(self) -> None:
        from sluice.core import workflow
        from sluice.core.state import open_state

        project = workflow.load_project(self.root)
        store = open_state(self.state)
        try:
            runner = workflow.make_runner(project, mode=self.mode)
            result = workflow.query_environment(project, store, "prod", QUERY, runner, limit=1)
        finally:
            store.close()
        if not result["rows"] or not result["rows"][0][0]:
            raise SystemExit(f"the query returned {result}")


class SqlmeshFlow:
    """SQLMesh's copy of the example on the same Spark: prod, then one change per rep.

    Every plan runs at the day after the example's data ends (``--execution-time``: a
    prod plan cannot take ``--end``), so no later interval is ever missing."""

    CLOCK = ("--execution-time", "2018-05-01")

    def __init__(self, root: Path, venv: Path) -> None:
        self.venv = venv
        self.root = sqlmesh_spark.prepare(REPO / "examples" / "jaffle_shop", root, venv)
        self.log = root / "sqlmesh.log"
        self.changes = 0
        print(f"[sqlmesh] building prod in {root} ...", flush=True)
        seconds = sqlmesh_spark.plan(venv, self.root, "prod", self.log, *self.CLOCK)
        print(f"[sqlmesh] prod built in {seconds:.1f} s (not timed below)", flush=True)
        self.prod = self.version("prod")

    def plan(self, env: str) -> float:
        return sqlmesh_spark.plan(self.venv, self.root, env, self.log, *self.CLOCK)

    def version(self, env: str) -> str:
        """The version of jaffle.customers in ``env`` (from SQLMesh's state)."""
        models = sqlmesh_spark.environments(self.venv, self.root).get(env, {})
        found = [v for k, v in models.items() if k.endswith("jaffle.customers")]
        if not found:
            raise SystemExit(f"SQLMesh's {env} has no jaffle.customers: see {self.log}")
        return found[0]

    def one(self) -> dict[str, float]:
        """One repetition: the change's environment build, then its promotion."""
        self.changes += 1
        env = f"pr_{self.changes}"
        add_column(self.root, self.changes)
        seconds = {"environment build": self.plan(env)}
        built, files = self.version(env), sqlmesh_spark.data_files(self.root)
        if built == self.prod:
            raise SystemExit(f"SQLMesh's {env} did not build the change: see {self.log}")
        seconds["promotion"] = self.plan("prod")
        self.prod = self.version("prod")
        if self.prod != built:
            raise SystemExit(f"SQLMesh's prod is not {env}'s version: see {self.log}")
        if sqlmesh_spark.data_files(self.root) != files:
            raise SystemExit(f"SQLMesh's promotion wrote data (not a virtual update): {self.log}")
        return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5, help="repetitions per mode")
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    parser.add_argument("--modes", default="submit,connect")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    parser.add_argument("--no-sqlmesh", action="store_true", help="Sluice only")
    parser.add_argument("--sqlmesh-venv", type=Path, default=None, help="reuse this venv")
    args = parser.parse_args()
    reps = 2 if args.quick else args.reps
    modes: list[Mode] = [m for m in ("submit", "connect") if m in args.modes.split(",")]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = (args.keep or Path(tempfile.mkdtemp(prefix="sluice-latency-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    LOG.append(work / "flow.log")
    print(f"latency benchmark: {reps} repetitions per mode in {work} (output: {LOG[0]})")
    print(f"  load before: {os.getloadavg()[0]:.2f} (1 min); {os.cpu_count()} cores")

    from sluice.core.spark.connect import stop_all

    venv = None
    if not args.no_sqlmesh:
        venv = sqlmesh_spark.side_venv(work / "sqlmesh-venv", args.sqlmesh_venv)
    flows = {mode: Flow(work / mode, mode) for mode in modes}
    results: dict[Mode, list[dict[str, float]]] = {mode: [] for mode in modes}
    sqlmesh = None
    theirs: list[dict[str, float]] = []
    cold: list[float] = []
    try:
        if venv is not None:  # the connect server is up: stopped below whatever happens
            sqlmesh = SqlmeshFlow(work / "sqlmesh", venv)
        for rep in range(reps):
            cold.append(cold_spark(work))
            order: list[str] = [*modes, "sqlmesh"] if sqlmesh else list(modes)
            for mode in order if rep % 2 == 0 else list(reversed(order)):
                if mode == "sqlmesh" and sqlmesh is not None:
                    theirs.append(sqlmesh.one())
                elif mode in flows:
                    results[mode].append(flows[mode].one())
            line = "; ".join(
                f"{mode} " + ", ".join(f"{s} {results[mode][-1][s]:.1f}" for s in STEPS)
                for mode in modes
            )
            if theirs:
                line += "; sqlmesh " + ", ".join(f"{s} {v:.1f}" for s, v in theirs[-1].items())
            print(f"  rep {rep + 1}: cold Spark {cold[-1]:.1f} s; {line}", flush=True)
    finally:
        stop_all()  # the connect mode's server
    load = os.getloadavg()[0]
    yardstick = statistics.median(cold)
    print(f"  load after: {load:.2f} (1 min)")
    print()
    print(f"cold PySpark session (Hive, SELECT 1), median of {len(cold)}: {yardstick:.2f} s")
    print()
    header = "| step | " + " | ".join(f"{m} s | {m} / cold" for m in modes)
    if len(modes) == 2:
        header += " | connect / submit"
    print(header + " | target |")
    print("| --- " * (2 + 2 * len(modes) + (len(modes) == 2)) + "|")
    for step in STEPS:
        medians = {m: statistics.median(r[step] for r in results[m]) for m in modes}
        cells = " | ".join(f"{medians[m]:.2f} | {medians[m] / yardstick:.2f}x" for m in modes)
        if len(modes) == 2:
            cells += f" | **{medians['connect'] / medians['submit']:.2f}**"
        target = TARGETS[step]
        met = {m: medians[m] / yardstick <= target for m in modes}
        said = ", ".join(f"{m} {'met' if ok else 'missed'}" for m, ok in met.items())
        print(f"| {step} | {cells} | ≤ {target:g}x cold: {said} |")
    if theirs:
        sqlmesh_table(results, theirs, modes)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def sqlmesh_table(
    results: dict[Mode, list[dict[str, float]]], theirs: list[dict[str, float]], modes: list[Mode]
) -> None:
    """SQLMesh's medians beside Sluice's, with SQLMesh / Sluice per mode."""
    print()
    print(f"SQLMesh 0.236.4 on the same Spark, medians of {len(theirs)}:")
    print("| step | SQLMesh s |" + "".join(f" Sluice {m} s | SQLMesh / {m} |" for m in modes))
    print("| --- " * (2 + 2 * len(modes)) + "|")
    for mine, step in (("PR comment", "environment build"), ("promotion", "promotion")):
        base = statistics.median(r[step] for r in theirs)
        cells = [f"{base:.2f}"]
        for m in modes:
            median = statistics.median(r[mine] for r in results[m])
            cells += [f"{median:.2f}", f"**{base / median:.2f}x**"]
        label = "environment build (Sluice: PR comment)" if mine == "PR comment" else step
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
