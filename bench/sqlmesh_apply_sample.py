"""A sample of the plan oracle's edits applied by Sluice and by SQLMesh 0.236.4 on the same
local Spark (issue 42, point 6): the edited environment's views compared model by model.

    .venv/bin/python bench/sqlmesh_apply_sample.py [--write docs/plan_oracle.md]
        [--sqlmesh-python PY] [--keep DIR]

The edits are :data:`SAMPLE`, made by ``sqlmesh_diff.generate_edits`` (seed 42) from the
project's own models. Per project, each side gets one copy holding every sampled edit's
*before* files (``sqlmesh_diff.write_pair``'s before side: the edited files as sqlglot
writes them, the new ``SELECT *`` child included), applies it to ``prod``, then for edit
``i`` writes its *after* files, applies that to ``pr_i`` and puts the before files back.

- Sluice: ``python -m sluice apply ENV --in-process`` (its own runner, its own state,
  warehouse and Derby metastore under the copy's ``.sluice``);
- SQLMesh: ``sqlmesh plan ENV --auto-apply`` through ``sqlmesh_spark.plan`` on a copy made
  by ``sqlmesh_spark.prepare`` (Spark with Sluice's session settings, its own warehouse and
  metastore), ``--include-unmodified`` so that its ``pr_i`` has a view per model as
  Sluice's has.

Two of the four (project, tool) runs go at once (a machine of two cores), the longest
first, each one process at a time. Then, per side, one Spark session
reads each ``pr_i`` view of each model of the edited project: its columns (names in
order, Spark's types) and its row count. The table says, per edit and model, both sides'
figures and a verdict: *same*, *differs: explained* (:func:`explain` recognises on the
figures a difference Sluice makes on purpose) or *differs: a bug* (the exit code is
then 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

SEED = 42
SAMPLE: tuple[tuple[str, str], ...] = (
    ("examples/jaffle_shop", "add_column:jaffle.orders"),
    ("examples/jaffle_shop", "drop_column:jaffle.customers"),
    ("examples/jaffle_shop", "change_filter:jaffle.stg_orders"),
    ("examples/jaffle_shop", "change_join:jaffle.orders"),
    ("examples/jaffle_shop", "star_child:jaffle.stg_payments"),
    ("tests/fixtures/sqlmesh_projects/infer_names", "star_child:sales.orders"),
)
"""(project as ``sqlmesh_compat.projects`` names it, edit id): add and drop a column, a
new filter, a join's kind, a ``SELECT *`` child of a parent that gains a column, on the
example and on a fixture project both load."""

PARTITION_LAST = (
    "SQLMesh's view lists the time column last: on Spark it partitions an"
    " INCREMENTAL_BY_TIME_RANGE model's table by its time column, Hive puts partition"
    " columns after the others, and its view is `SELECT *` of the table. Sluice's view"
    " names the query's columns in the query's order (issue 42, point 1: a view's columns"
    " are its query's). Same columns, types and rows."
)
DOUBLE = (
    "SQLMesh types a table from sqlglot's inference when the model declares no columns:"
    " the literal `9.5` is a DOUBLE to it (and so is a SUM of it), and it casts the rows"
    " into that table. Sluice keeps the types Spark gives the query (`9.5` is"
    " decimal(2,1), its SUM decimal(12,1)), as `SELECT 9.5` returns in Spark itself."
    " Same columns, order and rows."
)


def explain(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> str | None:
    """Why Sluice's view differs from SQLMesh's on purpose, if it is one of the known
    reasons (checked on the figures, not assumed): else None, a bug to look at."""
    if "columns" not in ours or "columns" not in theirs or ours["rows"] != theirs["rows"]:
        return None
    mine = [tuple(c) for c in ours["columns"]]
    its = [tuple(c) for c in theirs["columns"]]
    if sorted(mine) == sorted(its) and mine != its:
        moved = [c for c in mine if c != its[-1]] + [its[-1]]
        return PARTITION_LAST if moved == its else None
    if [n for n, _ in mine] == [n for n, _ in its]:
        pairs = [(a, b) for (_, a), (_, b) in zip(mine, its, strict=True) if a != b]
        if pairs and all(a.startswith("decimal(") and b == "double" for a, b in pairs):
            return DOUBLE
    return None


SECTION = "## Applied on the same Spark"


@dataclass
class Side:
    """One tool's copy of one project, and what it did with it."""

    root: Path
    log: Path
    error: str | None = None


@dataclass
class Row:
    edit: str
    what: str
    model: str
    ours: dict[str, Any]
    theirs: dict[str, Any]

    @property
    def verdict(self) -> str:
        if self.ours == self.theirs:
            return "same"
        return "differs: explained" if self.reason else "differs: a bug"

    @property
    def reason(self) -> str | None:
        return None if self.ours == self.theirs else explain(self.ours, self.theirs)


# --- the Spark session that reads the views (run as a process of its own) -----------------


def _describe(conf: Mapping[str, str], views: Sequence[str]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    found: dict[str, Any] = {}
    try:
        for view in views:
            try:
                frame = spark.table(view)
                columns = [[f.name, f.dataType.simpleString()] for f in frame.schema.fields]
                found[view] = {"columns": columns, "rows": frame.count()}
            except Exception as exc:  # a missing view is a finding, not a crash
                found[view] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    finally:
        spark.stop()
    return found


def describe(python: Path, conf: Mapping[str, str], views: Sequence[str], cwd: Path) -> Any:
    """Each view's columns and row count, read by ``python`` with Spark settings ``conf``."""
    request = cwd / "describe.json"
    request.write_text(json.dumps({"conf": dict(conf), "views": list(views)}), encoding="utf-8")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}
    proc = subprocess.run(
        [str(python), str(HERE), "describe", str(request)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"describe failed in {cwd}:\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1])


# --- the two sides ---------------------------------------------------------------------------


def _write(root: Path, files: Mapping[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")


def _restore(root: Path, before: Mapping[str, str], after: Mapping[str, str]) -> None:
    for relative in after:
        if relative not in before:
            (root / relative).unlink()
    _write(root, before)


def sluice_conf(root: Path) -> dict[str, str]:
    """The Spark settings Sluice's runner gives its jobs on ``root``."""
    import yaml

    from sluice.core.config import SparkSettings
    from sluice.core.spark.session import SparkPaths, spark_conf

    config = yaml.safe_load((root / "config.yaml").read_text(encoding="utf-8")) or {}
    settings = SparkSettings(**(config.get("sluice") or {}).get("spark", {}))
    conf = spark_conf(settings, SparkPaths.for_project(root))
    conf["spark.master"] = settings.master
    conf["spark.app.name"] = "sluice-apply-sample"
    return {k: str(v) for k, v in conf.items()}


def _run(command: list[str], log: Path, cwd: Path) -> float:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SLUICE_SPARK_DIR", None)  # the copy keeps its own metastore
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        began = time.perf_counter()
        code = subprocess.run(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    if code != 0:
        raise RuntimeError(f"{' '.join(command[-4:])} failed ({code}): see {log}")
    return time.perf_counter() - began


def run_side(side: Side, steps: Sequence[tuple[str, Any]], apply: Any) -> None:
    """``apply(env)`` for prod and each edit's pr_i (its files written, then undone)."""
    try:
        apply("prod")
        for env, edit in steps:
            _write(side.root, edit.after)
            try:
                apply(env)
            finally:
                _restore(side.root, edit.before, {**edit.before, **edit.after})
    except Exception as exc:
        side.error = str(exc)


@dataclass
class Project:
    name: str
    steps: list[tuple[str, Any]]  # (environment, Edit)
    models: list[str]  # the models of the edited environments (one-dot names)
    sluice: Side
    sqlmesh: Side


def prepare(name: str, folder: Path, ids: Sequence[str], work: Path, venv: Path) -> Project:
    import sqlmesh_compat
    import sqlmesh_diff
    import sqlmesh_spark

    from sluice.core.model.loader import load_project

    base = work / "source"
    sqlmesh_compat.sluice_copy(folder, base)
    edits = {e.id: e for e in sqlmesh_diff.generate_edits(base, seed=SEED, limit=12)}
    missing = [i for i in ids if i not in edits]
    if missing:
        raise SystemExit(f"{name}: generate_edits made no {', '.join(missing)}")
    chosen = [edits[i] for i in ids]
    ours = work / "sluice"
    sqlmesh_compat.sluice_copy(base, ours)
    before: dict[str, str] = {}
    for edit in chosen:
        before.update(edit.before)
    _write(ours, before)
    theirs = sqlmesh_spark.prepare(ours, work / "sqlmesh", venv)
    names: set[str] = set()
    for index, edit in enumerate(chosen):
        after = work / f"after{index}"
        sqlmesh_compat.sluice_copy(ours, after)
        _write(after, edit.after)
        names.update(load_project(after, use_cache=False).models)
        shutil.rmtree(after)
    steps = [(f"pr_{i + 1}", e) for i, e in enumerate(chosen)]
    models = sorted(n for n in names if n.count(".") == 1)
    return Project(
        name, steps, models, Side(ours, work / "sluice.log"), Side(theirs, work / "sqlmesh.log")
    )


def view(model: str, env: str) -> str:
    schema, table = model.split(".")
    return f"{schema}__{env}.{table}"


def run(work: Path, venv: Path) -> tuple[list[Row], list[str], float]:
    import sqlmesh_compat
    import sqlmesh_spark

    folders = dict(sqlmesh_compat.projects())
    began = time.perf_counter()
    projects = []
    for name in dict.fromkeys(n for n, _ in SAMPLE):
        ids = [i for n, i in SAMPLE if n == name]
        projects.append(prepare(name, folders[name], ids, work / name.replace("/", "__"), venv))

    def sluice_side(p: Project) -> None:
        def apply(env: str) -> None:
            command = [sys.executable, "-m", "sluice", "apply", env, "--in-process"]
            _run([*command, "-p", str(p.sluice.root)], p.sluice.log, p.sluice.root)

        run_side(p.sluice, p.steps, apply)

    def sqlmesh_side(p: Project) -> None:
        def apply(env: str) -> None:
            extra = () if env == "prod" else ("--include-unmodified",)
            try:
                sqlmesh_spark.plan(venv, p.sqlmesh.root, env, p.sqlmesh.log, *extra)
            except SystemExit as exc:
                raise RuntimeError(str(exc)) from None

        run_side(p.sqlmesh, p.steps, apply)

    # Two at a time (a machine of two cores), the longest first: SQLMesh's and Sluice's
    # runs of the first project, then whichever ends first takes the next.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for p in projects:
            pool.submit(sqlmesh_side, p)
            pool.submit(sluice_side, p)
    errors = [
        f"{p.name}, {tool}: {s.error}"
        for p in projects
        for tool, s in (("Sluice", p.sluice), ("SQLMesh", p.sqlmesh))
        if s.error
    ]
    rows: list[Row] = []
    found: dict[str, Any] = {}

    def read(key: str, python: Path, conf: Mapping[str, str], views: list[str], cwd: Path) -> None:
        found[key] = describe(python, conf, views, cwd)

    readers = []
    for p in projects:
        views = [view(m, env) for env, _ in p.steps for m in p.models]
        config = json.loads((p.sqlmesh.root / "config.yaml").read_text(encoding="utf-8"))
        theirs_conf = config["gateways"]["spark"]["connection"]["config"]
        for key, python, conf, cwd in (
            (f"{p.name}|sluice", Path(sys.executable), sluice_conf(p.sluice.root), p.sluice.root),
            (f"{p.name}|sqlmesh", venv / "bin" / "python", theirs_conf, p.sqlmesh.root),
        ):
            readers.append(threading.Thread(target=read, args=(key, python, conf, views, cwd)))
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    for p in projects:
        for env, edit in p.steps:
            for model in p.models:
                v = view(model, env)
                rows.append(
                    Row(
                        edit.id,
                        edit.what,
                        model,
                        found.get(f"{p.name}|sluice", {}).get(v, {"error": "not read"}),
                        found.get(f"{p.name}|sqlmesh", {}).get(v, {"error": "not read"}),
                    )
                )
    return rows, errors, time.perf_counter() - began


# --- the report ------------------------------------------------------------------------------


def _side(facts: Mapping[str, Any]) -> str:
    if "error" in facts:
        return f"error: {facts['error'][:120]}"
    columns = ", ".join(f"{n} {t}" for n, t in facts["columns"])
    return f"{columns} · **{facts['rows']} rows**"


def table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| edit | model | Sluice: columns · rows | SQLMesh: columns · rows | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r.ours == r.theirs:
            both = _side(r.ours)
            lines.append(f"| {r.edit} | {r.model} | {both} | (the same) | same |")
        else:
            lines.append(
                f"| {r.edit} | {r.model} | {_side(r.ours)} | {_side(r.theirs)} | {r.verdict} |"
            )
    return lines


def section(rows: Sequence[Row], errors: Sequence[str], command: str, seconds: float) -> str:
    edits = list(dict.fromkeys((r.edit, r.what) for r in rows))
    same = sum(1 for r in rows if r.ours == r.theirs)
    explained = sum(1 for r in rows if r.reason)
    lines = [
        SECTION,
        "",
        f"Written by `{command}` in {seconds:.0f} s. {len(edits)} of the edits above, applied"
        " by both tools on the same local Spark (separate warehouses and metastores): per"
        " project, prod from a copy holding every sampled edit's before files (the new"
        " `SELECT *` child included, so it exists in prod), then each edited copy to a PR"
        " environment of its own (`pr_1`, ...);"
        " Sluice with its in-process runner (`sluice apply ENV --in-process`), SQLMesh with"
        " `sqlmesh plan ENV --auto-apply --include-unmodified` (`bench/sqlmesh_spark.py`,"
        " Sluice's Spark session settings). Per model of the edited environment, its view's"
        " columns (names in order, Spark's types) and row count. The projects' data is"
        " small and clean: the filter and join edits (`NOT x IS NULL`, LEFT to INNER)"
        " change no row count on it, so for them the sample checks that both tools build"
        " the same views, not that the edit shows in the rows.",
        "",
        f"{len(rows)} views compared: {same} the same, {explained} different with a reason,"
        f" {len(rows) - same - explained} different without one.",
        "",
        *(f"- {e}: {w}" for e, w in edits),
        "",
        *table(rows),
        "",
    ]
    if any(r.ours != r.theirs for r in rows):
        lines += ["### The differences", ""]
        grouped: dict[str, list[str]] = {}
        for r in rows:
            if r.ours != r.theirs:
                why = r.reason or "not explained: a bug to look at"
                grouped.setdefault(why, []).append(f"{r.edit} / {r.model}")
        for why, where in grouped.items():
            lines.append(f"- {why} ({len(where)}: {'; '.join(where)})")
        lines.append("")
    if errors:
        lines += ["### Errors", "", *(f"- {e}" for e in errors), ""]
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    """Put ``text`` as the last section of ``path``, in place of an older one."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = old.split(f"\n{SECTION}\n", 1)[0].rstrip("\n")
    path.write_text(f"{kept}\n\n{text}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlmesh-python", type=Path, help="the python of a SQLMesh virtualenv")
    parser.add_argument("--write", type=Path, help="write the section into this report")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args(argv)
    import sqlmesh_compat
    import sqlmesh_spark

    requested = args.sqlmesh_python.absolute().parent.parent if args.sqlmesh_python else None
    venv = sqlmesh_spark.side_venv(sqlmesh_compat.CACHE / "sqlmesh-0.236.4", requested)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        rows, errors, seconds = run(args.keep.resolve(), venv)
    else:
        with tempfile.TemporaryDirectory(prefix="sluice-apply-sample-") as tmp:
            rows, errors, seconds = run(Path(tmp), venv)
    command = ".venv/bin/python bench/sqlmesh_apply_sample.py" + (
        f" --write {args.write}" if args.write else ""
    )
    text = section(rows, errors, command, seconds)
    print(text)
    if args.write:
        write(args.write, text)
        print(f"wrote {args.write}", file=sys.stderr)
    bad = sum(1 for r in rows if r.ours != r.theirs and not r.reason)
    return 1 if bad or errors else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "describe":
        request = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
        print(json.dumps(_describe(request["conf"], request["views"])))
    else:
        raise SystemExit(main())
