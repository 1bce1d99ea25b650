"""Benchmark: the Spark time a scheduled run saves by skipping what did not change.

Usage: python bench/skip_bench.py [--sources 9] [--rows 200000] [--rounds 4]

One in-process Spark, a few external source tables (Parquet, ``--rows`` rows each) and two
copies of one project reading them: per source a FULL aggregate and a FULL model over it,
and a FULL model over every third aggregate. Prod of both is applied, and one run of each
records what it read. Then each round changes a third of the sources (rows appended to
them, in turn) and runs both copies' ``sluice run prod`` a day later: one skipping
unchanged rebuilds (``skip_unchanged=True``), one rebuilding all without reading any
version (``skip_unchanged=False``, a run as before skipping; the order flipped each round).
It prints each round's Spark seconds (the job's, as ``sluice run`` records it) and models
built, and the ratio of the skipping runs' total to the others'.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import textwrap
from pathlib import Path

from sluice.core import workflow
from sluice.core.config import SparkSettings
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths, local_session
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import DAY_MS, to_ms

START = to_ms("2024-01-01")


def project_files(schema: str, sources: int) -> dict[str, str]:
    files = {
        "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
        "external_models.yaml": "".join(
            f"- name: skipbench_src.s{i}\n  columns:\n    id: bigint\n    k: int\n    v: double\n"
            for i in range(sources)
        ),
    }
    for i in range(sources):
        files[f"models/agg{i}.sql"] = textwrap.dedent(f"""\
            MODEL (name {schema}.agg{i}, kind FULL);
            SELECT k, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean,
                   PERCENTILE_APPROX(v, 0.9) AS p90
            FROM skipbench_src.s{i} GROUP BY k
            """)
        files[f"models/top{i}.sql"] = textwrap.dedent(f"""\
            MODEL (name {schema}.top{i}, kind FULL);
            SELECT s.k, s.id, s.v, a.mean FROM skipbench_src.s{i} AS s
            JOIN {schema}.agg{i} AS a ON s.k = a.k WHERE s.v > a.p90
            """)
    for group in range(0, sources, 3):
        members = [f"{schema}.agg{i}" for i in range(group, min(group + 3, sources))]
        union = "\nUNION ALL ".join(f"SELECT k, total FROM {m}" for m in members)
        files[f"models/sum{group}.sql"] = textwrap.dedent(f"""\
            MODEL (name {schema}.sum{group}, kind FULL);
            SELECT k, SUM(total) AS total FROM ({union}) GROUP BY k
            """)
    return files


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=9)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sluice-skip-bench-"))
    try:
        paths = SparkPaths(root=folder / "spark", logs=folder / "logs")
        settings = SparkSettings(master="local[2]")
        spark = local_session(settings, paths)
        spark.sql("CREATE DATABASE IF NOT EXISTS skipbench_src")
        for i in range(args.sources):
            spark.sql(
                f"CREATE TABLE skipbench_src.s{i} USING parquet AS SELECT id, "
                f"CAST(id % 1000 AS INT) AS k, rand({i}) * 100 AS v FROM range({args.rows})"
            )
        copies = {}
        for skipping, schema in ((True, "skipbench_on"), (False, "skipbench_off")):
            root = write(folder / schema, project_files(schema, args.sources))
            project = load_project(root, use_cache=False)
            store = open_state(f"sqlite:///{folder / schema}.db")
            runner = InProcessRunner(project.config.sluice.spark, paths)
            at = START + 3 * DAY_MS
            plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
            workflow.apply_plan(project, store, plan, runner, now=at)
            copies[skipping] = (project, store, runner)

        def run(skipping: bool, day: int) -> tuple[float, int, int]:
            project, store, runner = copies[skipping]
            at = START + day * DAY_MS + 3_600_000
            plan = workflow.plan_run(project, store, "prod", now=at)
            done = workflow.apply_plan(
                project, store, plan, runner, now=at, skip_unchanged=skipping
            )
            seconds = done.job.seconds if done.job is not None else 0.0
            return seconds, done.tables_built, len(done.skipped)

        for skipping in (True, False):  # each records what its rebuilds read (a warm-up)
            run(skipping, 4)
        totals = {True: 0.0, False: 0.0}
        third = max(1, args.sources // 3)
        print(
            f"{args.sources} sources of {args.rows:,} rows, "
            f"{len(project_files('x', args.sources)) - 2} FULL models, {third} sources "
            "changed per round",
            flush=True,
        )
        for round_ in range(args.rounds):
            changed = [(round_ * third + j) % args.sources for j in range(third)]
            for i in changed:
                spark.sql(
                    f"INSERT INTO skipbench_src.s{i} SELECT id + {args.rows}, "
                    f"CAST(id % 1000 AS INT), rand() * 100 FROM range(1000)"
                )
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for skipping in order:
                seconds, built, skipped = run(skipping, 5 + round_)
                totals[skipping] += seconds
                label = "skipping" if skipping else "all    "
                print(
                    f"round {round_ + 1} {label} {seconds:7.1f} s of Spark  "
                    f"{built:3} built  {skipped:3} skipped  (sources changed: {changed})",
                    flush=True,
                )
        ratio = totals[True] / totals[False]
        print(
            f"total: skipping {totals[True]:.1f} s, all {totals[False]:.1f} s: "
            f"ratio {ratio:.2f} ({(1 - ratio) * 100:.0f}% of the Spark time saved)"
        )
        for _project, store, _runner in copies.values():
            store.close()
        spark.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
