"""Benchmark: a PR environment and its promotion on a generated 200-model project.

Usage: python bench/apply_bench.py [--models 200] [--master local[2]] [--keep DIR]

Builds prod once (in a child process, not measured), then measures through spark-submit:
(a) applying a PR environment for a breaking change to one first-layer model: seconds,
    tables written, and the spark-submit start-up share;
(b) promoting it to prod: seconds, views swapped, tables and files written (must be 0).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_bench import model_sql

SEEDS = 5
PER_LAYER = 20


def generate(root: Path, count: int, seed: int = 11) -> None:
    """A project of ``count`` models over ``SEEDS`` seed tables (real data to compute)."""
    rng = random.Random(seed)
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    )
    sources = []
    for index in range(SEEDS):
        rows = "".join(
            f"{i},2024-01-{1 + i % 28:02d},{i % 17},{i % 5},{i % 11},{i % 3}\n" for i in range(500)
        )
        (root / "seeds" / f"s{index}.csv").write_text("id,ds,v0,v1,v2,v3\n" + rows)
        name = f"src.seed_{index}"
        (root / "models" / f"seed_{index}.sql").write_text(
            f"MODEL (name {name}, kind SEED (path '../seeds/s{index}.csv'), "
            "columns (id INT, ds DATE, v0 INT, v1 INT, v2 INT, v3 INT));"
        )
        sources.append(name)
    previous, names = sources, []
    for index in range(count - SEEDS):
        name = f"layer_{index // PER_LAYER}.model_{index}"
        parents = rng.sample(previous, k=min(len(previous), rng.randint(1, 3)))
        kind = ("FULL", "VIEW")[index % 2]
        sql = model_sql(name, kind, parents).replace("\nJOIN", "\nLEFT JOIN")
        (root / "models" / f"model_{index}.sql").write_text(sql)
        names.append(name)
        if (index + 1) % PER_LAYER == 0:
            previous = names[-PER_LAYER:] + rng.sample(names, k=min(len(names), 10))


SETUP = """
import os, sys, time
from sluice.core import workflow
project = workflow.load_project(sys.argv[1])
store = workflow.open_project_state(project)
now = 1706745600000  # 2024-02-01
plan = workflow.plan_environment(project, store, "prod", end=now, execution_time=now)
runner = workflow.make_runner(project, in_process=True)
workflow.apply_plan(project, store, plan, runner, url=workflow.state_url(project), now=now)
store.close()
"""


def measured(root: Path, env: str) -> dict[str, Any]:
    """Apply ``env`` through spark-submit and time its phases."""
    from sluice.core import workflow

    marks: dict[str, float] = {}

    def on_event(event: dict[str, Any]) -> None:
        marks.setdefault(str(event.get("event")), time.perf_counter())

    project = workflow.load_project(root)
    store = workflow.open_project_state(project)
    now = 1706745600000
    try:
        plan = workflow.plan_environment(project, store, env, end=now, execution_time=now)
        runner = workflow.make_runner(project, on_event=on_event)
        warehouse = Path(os.environ["SLUICE_SPARK_DIR"]) / "warehouse"
        before = {p: p.stat().st_mtime for p in warehouse.rglob("*")}
        began = time.perf_counter()
        result = workflow.apply_plan(
            project, store, plan, runner, url=workflow.state_url(project), now=now
        )
        ended = time.perf_counter()
        after = {p: p.stat().st_mtime for p in warehouse.rglob("*")}
    finally:
        store.close()
    return {
        "seconds": ended - began,
        "startup": marks.get("session_ready", marks.get("step_start", ended)) - began,
        "tables": result.tables_built,
        "views": result.views_swapped,
        "files_written": sum(1 for p, m in after.items() if before.get(p) != m),
        "changed": len(plan.directly_modified) + len(plan.indirectly_modified),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="sluice-apply-bench-"))
    root = base / "project"
    generate(root, args.models)
    os.environ["SLUICE_SPARK_DIR"] = str(base / "spark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", SETUP, str(root)], check=True, capture_output=True)
    setup = time.perf_counter() - began
    # A breaking change to one first-layer model.
    first = root / "models" / "model_0.sql"
    first.write_text(first.read_text().replace("IS NOT NULL", "IS NOT NULL AND 1 = 1", 1))
    breaking = (measured(root, "pr_1"), measured(root, "prod"))
    # A non-breaking change (one added column) to another first-layer model.
    second = root / "models" / "model_1.sql"
    second.write_text(second.read_text().replace(" AS label", " AS label,\n  1 AS added_column", 1))
    additive = (measured(root, "pr_2"), measured(root, "prod"))
    print(
        f"apply benchmark: {args.models} models; prod built in-process in {setup:.0f} s (not measured); project at {root}"
    )
    for title, (pr, promote) in (
        ("breaking change to one upstream model", breaking),
        ("non-breaking change (added column)", additive),
    ):
        print(f"  {title}:")
        print(
            f"    (a) PR environment : {pr['seconds']:.1f} s, of which spark-submit, session and metastore start {pr['startup']:.1f} s; "
            f"{pr['tables']} table(s) written for {pr['changed']} changed model(s)"
        )
        print(f"    (b) promotion      : {promote['seconds']:.1f} s, of which spark-submit, session and metastore start {promote['startup']:.1f} s "
              f"({promote['seconds'] - promote['startup']:.1f} s after Spark is up); {promote['views']} view(s) swapped, "
              f"{promote['tables']} table(s) and {promote['files_written']} warehouse file(s) written")  # fmt: skip


if __name__ == "__main__":
    main()
