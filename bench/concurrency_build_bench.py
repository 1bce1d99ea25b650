"""Benchmark: building prod of a generated 50-model project one model at a time against
``--tasks`` (default 4) at once, in the same run.

Usage: python bench/concurrency_build_bench.py [--models 50] [--tasks 4] [--pairs 3]
                                               [--mode submit|in-process] [--keep DIR]

(Not ``bench/concurrency.py``, which measures two webhook service processes sharing one
PostgreSQL state.) The project is ``bench/apply_bench.py``'s (5 seeds, then layers of 20
models each reading 1-3 models of the layer before: many independent branches; half FULL
tables, half views). Two copies differ only in ``sluice.spark.concurrent_tasks`` (1 and
``--tasks``). Each measured apply starts from an empty state store, so it plans and builds
all models (their tables, made by an unmeasured warm-up apply, are overwritten: the same
work each time), through spark-submit (or ``--mode in-process``: one session for all).
Applies alternate between the two settings, ``--pairs`` pairs, the order flipped each
pair. Printed: each apply's seconds (the whole apply, and its builds: from the first
build's start to the last build's end, from the job's events), the medians, and the ratio
sequential / concurrent of both, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_bench import generate

NOW = 1706745600000  # 2024-02-01


def project_copy(base: Path, source: Path, tasks: int) -> Path:
    root = base / f"tasks_{tasks}"
    shutil.copytree(source, root)
    settings = root / "sluice.yaml"
    with settings.open("a") as out:  # the generated project's settings, and this count
        out.write(f"spark:\n  concurrent_tasks: {tasks}\n")
    return root


def apply(root: Path, in_process: bool) -> dict[str, float]:
    """Apply prod from an empty state store; seconds of the apply and of its builds."""
    from sluice.core import workflow

    shutil.rmtree(root / ".sluice", ignore_errors=True)
    marks: dict[str, list[float]] = {"start": [], "end": []}

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "build" or str(event.get("label", "")).startswith("build "):
            kind = event.get("event")
            if kind == "step_start":
                marks["start"].append(time.perf_counter())
            elif kind in ("step_done", "step_failed"):
                marks["end"].append(time.perf_counter())

    project = workflow.load_project(root)
    assert project.config.sluice.spark.concurrent_tasks == int(root.name.split("_")[1])
    store = workflow.open_project_state(project)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        runner = workflow.make_runner(project, in_process=in_process, on_event=on_event)
        began = time.perf_counter()
        result = workflow.apply_plan(
            project, store, plan, runner, url=workflow.state_url(project), now=NOW
        )
        ended = time.perf_counter()
    finally:
        store.close()
    return {
        "seconds": ended - began,
        "builds": max(marks["end"]) - min(marks["start"]),
        "tables": float(result.tables_built),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--mode", choices=("submit", "in-process"), default="submit")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="sluice-concurrency-bench-"))
    source = base / "project"
    generate(source, args.models)
    os.environ["SLUICE_SPARK_DIR"] = str(base / "spark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    one, many = project_copy(base, source, 1), project_copy(base, source, args.tasks)
    in_process = args.mode == "in-process"
    load_before = os.getloadavg()
    warm = apply(many, in_process)  # creates the tables (and the driver's class archive)
    runs: dict[int, list[dict[str, float]]] = {1: [], args.tasks: []}
    for pair in range(args.pairs):
        order = (one, many) if pair % 2 == 0 else (many, one)
        for root in order:
            tasks = int(root.name.split("_")[1])
            runs[tasks].append(apply(root, in_process))
            print(
                f"  pair {pair + 1}: concurrent_tasks {tasks}: {runs[tasks][-1]['seconds']:.1f} s "
                f"(builds {runs[tasks][-1]['builds']:.1f} s)",
                flush=True,
            )
    load_after = os.getloadavg()

    def median(tasks: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[tasks])

    print(
        f"concurrent builds: {args.models} models ({int(warm['tables'])} tables and views "
        f"built per apply), {args.mode}, {os.cpu_count()} CPUs; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; project at {base}"
    )
    for key, title in (("seconds", "whole apply"), ("builds", "builds only")):
        seq, conc = median(1, key), median(args.tasks, key)
        pairs = [a[key] / b[key] for a, b in zip(runs[1], runs[args.tasks], strict=True)]
        print(
            f"  {title:11}: 1 at a time {seq:.1f} s, {args.tasks} at a time {conc:.1f} s "
            f"(medians of {args.pairs}); ratio of the medians {seq / conc:.2f}x, pairs' "
            f"ratios {', '.join(f'{r:.2f}' for r in pairs)} (median {statistics.median(pairs):.2f}x)"
        )


if __name__ == "__main__":
    main()
