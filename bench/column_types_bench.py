"""Benchmark: what inferring column types (``sluice/core/plan/column_types.py``, issue 41)
costs a plan, two source trees compared in pairs.

    python bench/column_types_bench.py --before DIR --after DIR [--reps 5] [--models 1000]

DIR is a Sluice source tree (``git archive <commit> | tar -x -C DIR``); each plan runs in
its own process with ``PYTHONPATH=DIR``, the two trees back to back, alternating which
goes first. ``bench/plan_bench.py``'s generated project (N models) is planned:

- ``cold``: plan_bench's own cold phase (no parse cache, empty state);
- ``fwd-one`` / ``fwd-all``: with ``--forward-only`` against the committed prod, after
  adding a column to one last-layer model / to every model (each a forward-only direct
  change; no type of a column both versions have can change);
- ``fwd-oneexpr`` / ``fwd-allexpr``: the same, after changing a column's expression
  (``v0 + 0`` to ``v0 + 100``): the destructive-change check infers the types of the
  model and its ancestors, old and new (every model's, twice, for ``fwd-allexpr``).

Per pair, the ratio after / before of the process's wall clock and CPU (children
included) and of its load+plan or plan time; the medians and ranges are printed. On a
loaded machine the CPU figures are the ones to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_bench as pb

FORWARD = """
import json, sys, time
t0 = time.perf_counter()
from sluice.core import workflow
from sluice.core.state import open_state
project = workflow.load_project(sys.argv[1])
t1 = time.perf_counter()
store = open_state(sys.argv[2])
plan = workflow.plan_environment(project, store, "prod", end=1735689600000,
                                 execution_time=1735689600000, forward_only=True)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "plan_s": t2 - t1,
                  "direct": len(plan.directly_modified), "warnings": len(plan.warnings)}))
"""
PHASES = ("cold", "fwd-one", "fwd-oneexpr", "fwd-all", "fwd-allexpr")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--models", type=int, default=1000)
    args = parser.parse_args()
    trees = {"before": str(args.before.resolve()), "after": str(args.after.resolve())}
    base = Path(tempfile.mkdtemp(prefix="sluice-types-bench-"))
    root = base / "project"
    pb.generate(root, args.models)
    last = root / "models" / f"model_{args.models - 1}.sql"

    def run(tree: str, command: list[str]) -> dict[str, Any]:
        pb.BYTECODE_ENV["PYTHONPATH"] = trees[tree]
        seconds, cpu, _, out = pb.timed(command)
        result: dict[str, Any] = json.loads(out)
        result["process_s"], result["process_cpu_s"] = seconds, cpu
        return result

    def cold(tree: str) -> dict[str, Any]:
        shutil.rmtree(root / ".sluice", ignore_errors=True)
        state = base / "state.db"
        state.unlink(missing_ok=True)
        command = [sys.executable, "-c", pb.PHASE, str(root), f"sqlite:///{state}", "-"]
        return run(tree, [*command, "column-check"])

    prod = base / "prod.db"  # the same state for both trees: prod, committed once
    pb.BYTECODE_ENV["PYTHONPATH"] = trees["before"]
    pb.timed([sys.executable, "-c", pb.PHASE, str(root), f"sqlite:///{prod}", "commit", "x"])
    originals = {p: p.read_text() for p in (root / "models").glob("*.sql")}

    def forward(tree: str, which: str) -> dict[str, Any]:
        for path, text in originals.items():
            path.write_text(text)
        for path in [last] if which.startswith("one") else list(originals):
            if which.endswith("expr"):
                path.write_text(originals[path].replace(".v0 + 0 AS v0", ".v0 + 100 AS v0"))
            else:
                path.write_text(
                    originals[path].replace(" AS label\n", " AS label,\n  1 AS extra\n")
                )
        state = base / "forward.db"
        shutil.copy(prod, state)
        return run(tree, [sys.executable, "-c", FORWARD, str(root), f"sqlite:///{state}"])

    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        p: {"before": [], "after": []} for p in PHASES
    }
    print(f"{args.models} models, {args.reps} pairs; load {os.getloadavg()[0]:.2f}", flush=True)
    for rep in range(args.reps):
        order = ("before", "after") if rep % 2 == 0 else ("after", "before")
        for phase in PHASES:
            for tree in order:
                found = cold(tree) if phase == "cold" else forward(tree, phase.split("-")[1])
                results[phase][tree].append(found)
            b, a = results[phase]["before"][-1], results[phase]["after"][-1]
            print(
                f"  pair {rep + 1} {phase}: CPU {b['process_cpu_s']:.2f} / "
                f"{a['process_cpu_s']:.2f} s, wall {b['process_s']:.2f} / {a['process_s']:.2f} s",
                flush=True,
            )
    for phase, runs in results.items():
        inner = "load_plan_s" if phase == "cold" else "plan_s"
        for key in ("process_cpu_s", "process_s", inner):
            ratios = [a[key] / b[key] for b, a in zip(runs["before"], runs["after"], strict=True)]
            print(
                f"{phase} {key}: before {statistics.median(r[key] for r in runs['before']):.3f}"
                f", after {statistics.median(r[key] for r in runs['after']):.3f}, ratio median "
                f"{statistics.median(ratios):.3f} (range {min(ratios):.3f} .. {max(ratios):.3f})"
            )
    print(f"load {os.getloadavg()[0]:.2f}")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
