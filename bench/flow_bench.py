"""Benchmark: the whole flow, Sluice against SQLMesh 0.236.4 on the same Spark (issue 21).

Usage: python bench/flow_bench.py [--models 50] [--pairs 3] [--variants submit,connect]
                                  [--sqlmesh-venv DIR] [--keep DIR]

On ``bench/apply_bench.py``'s generated project (5 seeds, then layers of 20 models, half
FULL tables, half views), each tool runs the same four steps, each step one command run
as a whole process as a user runs it, in a fresh folder per flow:

(a) **prod** built from nothing;
(b) **PR 1**: a non-breaking change (an added column) to one first-layer model, built in
    environment ``pr_1``;
(c) **PR 2**: a breaking change (a new filter) to another first-layer model, in ``pr_2``;
(d) **promotion** of PR 1 to prod (a virtual update: PR 1's versions are built already).

- SQLMesh: ``sqlmesh plan ENV --auto-apply --no-prompts --skip-tests`` per step (audits
  on), its Spark gateway in-process with Sluice's session settings and concurrent tasks
  (``bench/sqlmesh_spark.py``), state in DuckDB. After each step its state and warehouse
  are checked (the environment holds the changed version; the promotion wrote no file).
- Sluice ``submit``: ``python -m sluice apply ENV`` per step (a spark-submit each);
- Sluice ``connect``: the same after ``sluice spark start`` (whose time is in the flow's
  total), ``sluice spark stop`` after.

Flows alternate tool by tool in ``--pairs`` rounds (the order reversed every other round).
Printed: each flow's steps; per step and total the medians, and SQLMesh / Sluice per
variant; the load average before and after. After each flow (not timed) prod's rows of
the changed model and of the last model are read, and must be the same for every flow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sqlmesh_spark
from apply_bench import PER_LAYER, SEEDS, generate

STEPS = ("prod", "PR 1", "PR 2", "promotion")
COLUMNS = "id, ds, v0, v1, v2, v3, label"


def change(root: Path, which: int, on: bool) -> None:
    """Apply (or undo) PR ``which``'s edit: 1 adds a column to ``model_0`` (non-breaking),
    2 filters ``model_1``'s rows (breaking)."""
    path = root / "models" / f"model_{which - 1}.sql"
    text = path.read_text(encoding="utf-8")
    old, new = (
        (" AS label\n", " AS label,\n  p0.v0 * 2 AS extra\n")
        if which == 1
        else ("IS NOT NULL\n", "IS NOT NULL AND p0.v0 > 3\n")
    )
    edited = text.replace(old, new, 1) if on else text.replace(new, old, 1)
    if edited == text:
        raise SystemExit(f"{path}: PR {which}'s edit does not apply")
    path.write_text(edited, encoding="utf-8")


def checks(models: int) -> dict[str, str]:
    """The guard's queries: the changed model (with its new column) and the last model."""
    last = models - SEEDS - 1
    name = f"layer_{last // PER_LAYER}.model_{last}"
    return {
        "layer_0.model_0": f"SELECT COUNT(*), BIT_XOR(xxhash64({COLUMNS}, extra)) FROM layer_0.model_0",
        name: f"SELECT COUNT(*), BIT_XOR(xxhash64({COLUMNS})) FROM {name}",
    }


def run(command: list[str], log: Path, cwd: Path) -> float:
    """Seconds of ``command`` as a process; its output goes to ``log``."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        began = time.perf_counter()
        code = subprocess.run(
            command, check=False, cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        ).returncode
        seconds = time.perf_counter() - began
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}): see {log}")
    return seconds


def sluice_flow(source: Path, folder: Path, mode: str) -> tuple[dict[str, float], dict[str, Any]]:
    """Sluice's flow through its command line; seconds per step and prod's check rows."""
    root = folder / "project"
    shutil.copytree(source, root)
    log = folder / "flow.log"

    def sluice(*args: str) -> float:
        return run([sys.executable, "-m", "sluice", *args, "--project", str(root)], log, root)

    seconds: dict[str, float] = {}
    if mode == "connect":
        seconds["spark start"] = sluice("spark", "start")
    try:
        seconds["prod"] = sluice("apply", "prod")
        change(root, 1, on=True)
        seconds["PR 1"] = sluice("apply", "pr_1")
        change(root, 1, on=False)
        change(root, 2, on=True)
        seconds["PR 2"] = sluice("apply", "pr_2")
        change(root, 2, on=False)
        change(root, 1, on=True)
        seconds["promotion"] = sluice("apply", "prod")
        listed = subprocess.run(
            [sys.executable, "-m", "sluice", "environments", "--json", "--project", str(root)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for env in ("prod", "pr_1", "pr_2"):
            if f'"{env}"' not in listed:
                raise SystemExit(f"sluice environments does not list {env}:\n{listed}")
        rows = {}
        for name, sql in checks(len(list((root / "models").glob("*.sql")))).items():
            out = subprocess.run(
                [sys.executable, "-m", "sluice", "query", "prod", sql, "--json", "-p", str(root)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rows[name] = [
                [str(v) for v in row] for row in json.loads(out.strip().splitlines()[-1])["rows"]
            ]
    finally:
        if mode == "connect":
            sluice("spark", "stop")
    return seconds, rows


def sqlmesh_flow(source: Path, folder: Path, venv: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """SQLMesh's flow, each step a ``sqlmesh plan``; checked after each step."""
    root = sqlmesh_spark.prepare(source, folder / "project", venv)
    log = folder / "flow.log"
    models = len(list((root / "models").glob("*.sql")))

    def plan(env: str) -> float:
        return sqlmesh_spark.plan(venv, root, env, log)

    seconds: dict[str, float] = {}
    seconds["prod"] = plan("prod")
    envs = sqlmesh_spark.environments(venv, root)
    if len(envs.get("prod", {})) != models or not sqlmesh_spark.data_files(root):
        raise SystemExit(f"SQLMesh's prod does not hold the {models} models: see {log}")
    for number in (1, 2):
        change(root, number, on=True)
        seconds[f"PR {number}"] = plan(f"pr_{number}")
        change(root, number, on=False)
        envs = sqlmesh_spark.environments(venv, root)
        model = f"layer_0.model_{number - 1}"
        mine = [k for k in envs.get(f"pr_{number}", {}) if k.endswith(model)]
        if not mine or envs[f"pr_{number}"][mine[0]] == envs["prod"][mine[0]]:
            raise SystemExit(f"SQLMesh's pr_{number} does not hold a new {model}: see {log}")
    change(root, 1, on=True)
    files = sqlmesh_spark.data_files(root)
    seconds["promotion"] = plan("prod")
    envs = sqlmesh_spark.environments(venv, root)
    key = next(k for k in envs["prod"] if k.endswith("layer_0.model_0"))
    if envs["prod"][key] != envs["pr_1"][key]:
        raise SystemExit(f"SQLMesh's prod was not promoted to pr_1's model_0: see {log}")
    if sqlmesh_spark.data_files(root) != files:
        raise SystemExit(f"SQLMesh's promotion wrote data files (not a virtual update): {log}")
    rows = {
        name: [[str(v) for v in row] for row in sqlmesh_spark.query(venv, root, sql)]
        for name, sql in checks(models).items()
    }
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--variants", default="submit,connect", help="Sluice's Spark modes")
    parser.add_argument("--sqlmesh-venv", type=Path, default=None, help="reuse this venv")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    args = parser.parse_args()
    work = (args.keep or Path(tempfile.mkdtemp(prefix="sluice-flow-bench-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    venv = sqlmesh_spark.side_venv(work / "sqlmesh-venv", args.sqlmesh_venv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.pop("SLUICE_SPARK_DIR", None)  # each project keeps its own metastore
    source = work / "source"
    if not source.exists():
        generate(source, args.models)
    variants = [v for v in ("submit", "connect") if v in args.variants.split(",")]
    tools = ["sqlmesh", *(f"sluice {v}" for v in variants)]
    print(f"flow benchmark: {args.models} models, {args.pairs} rounds, in {work}")
    load_before = os.getloadavg()
    results: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
    guard: dict[str, Any] = {}
    for pair in range(args.pairs):
        for tool in tools if pair % 2 == 0 else list(reversed(tools)):
            folder = work / f"round_{pair + 1}" / tool.replace(" ", "_")
            folder.mkdir(parents=True)
            if tool == "sqlmesh":
                seconds, rows = sqlmesh_flow(source, folder, venv)
            else:
                seconds, rows = sluice_flow(source, folder, tool.split()[1])
            seconds["total"] = sum(seconds.values())
            results[tool].append(seconds)
            guard.setdefault(json.dumps(rows, sort_keys=True), []).append(f"{tool} #{pair + 1}")
            steps = ", ".join(f"{k} {v:.1f}" for k, v in seconds.items())
            print(f"  round {pair + 1} {tool}: {steps} s", flush=True)
    load_after = os.getloadavg()
    if len(guard) != 1:
        raise SystemExit(f"prod's rows differ between flows: {json.dumps(guard, indent=1)}")
    print(f"prod's rows agree in every flow: {next(iter(guard))}")
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
        f"{os.cpu_count()} CPUs; medians of {args.pairs}"
    )
    header = "| step | SQLMesh s |" + "".join(
        f" Sluice {v} s | SQLMesh / Sluice {v} |" for v in variants
    )
    print(header)
    print("| --- " * (2 + 2 * len(variants)) + "|")
    for step in ("spark start", *STEPS, "total"):
        cells = []
        medians = {t: statistics.median(r.get(step, 0.0) for r in results[t]) for t in tools}
        if not any(medians.values()):
            continue
        base = medians["sqlmesh"]
        cells.append(f"{base:.2f}" if step != "spark start" else "-")
        for v in variants:
            mine = medians[f"sluice {v}"]
            ratio = f"**{base / mine:.2f}x**" if mine and step != "spark start" else "-"
            cells += [f"{mine:.2f}" if mine else "-", ratio]
        print(f"| {step} | " + " | ".join(cells) + " |")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
