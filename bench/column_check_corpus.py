"""The plan-time column check (issue 42) over real projects: false errors and misses.

Usage: python bench/column_check_corpus.py [PROJECT ...] [--mutate]

Each project (by default: examples/*, tests/fixtures/sqlmesh_init_duckdb,
tests/fixtures/sqlmesh_projects/*, ../shared/compat/*) is copied to a temporary folder
(loading a project writes its .sluice/ cache there) and loaded as ``sluice plan`` loads
it. Printed per project: its models, the SQL models whose every column was checked, those
checked in part (a table of unknown columns), those not checked, and the column errors:
every one on these projects is a false error (they run on SQLMesh and Spark as they are).
A project Sluice cannot load for another reason says so.

``--mutate`` also measures what the check catches: for each checked SQL model, the first
column its query names (by its spelling in the file) is renamed to one no table has, and
the project loaded again: caught (a column error naming that model), refused first by
another check (the renamed column was also the model's unique key, grain...: that
check stops the load before the column check runs), or passed (a miss).
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import tempfile
from pathlib import Path

from sluice.core.errors import ProjectErrors, SluiceError
from sluice.core.model import column_check
from sluice.core.model.loader import load_project

REPO = Path(__file__).resolve().parents[1]
DEFAULT = [
    "examples/*",
    "tests/fixtures/sqlmesh_init_duckdb",
    "tests/fixtures/sqlmesh_projects/*",
    "../shared/compat/*",
]


def _errors(exc: SluiceError) -> list[SluiceError]:
    return list(exc.errors) if isinstance(exc, ProjectErrors) else [exc]


def _column_errors(errors: list[SluiceError]) -> list[SluiceError]:
    return [e for e in errors if " reads " in e.message and ("which" in e.message)]


def survey(root: Path, copy: Path, mutate: bool) -> None:
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".sluice", ".cache"))
    try:
        project = load_project(copy, use_cache=False)
    except SluiceError as exc:
        found = _errors(exc)
        wrong = _column_errors(found)
        print(f"{root}: not loaded ({len(found)} errors, {len(wrong)} of them column errors)")
        for error in (wrong or found)[:3]:
            print("    " + str(error).replace(str(copy) + "/", "").splitlines()[0][:200])
        return
    report = column_check.check(project.models)
    sql = sum(1 for m in project.models.values() if m.query_sql)
    print(
        f"{root}: {len(project.models)} models, {sql} SQL: checked {len(report.checked)}, "
        f"in part {len(report.partial)}, not checked {len(report.skipped)}; "
        f"column errors {len(report.errors)}"
    )
    for error in report.errors:
        print("    FALSE ERROR " + str(error).replace(str(copy) + "/", ""))
    if mutate:
        caught, other, tried = _mutations(project.models, report.checked, copy)
        print(
            f"    renamed columns: {tried}, caught by the column check {caught}, "
            f"refused first by another check {other}, passed {tried - caught - other}"
        )


def _mutations(models: dict, checked: tuple[str, ...], copy: Path) -> tuple[int, int, int]:  # type: ignore[type-arg]
    caught = other = tried = 0
    for name in checked:
        model = models[name]
        uses = column_check.decode(model.column_uses)
        refs = [r for s in (uses or {}).get("s", []) for r in s["r"] if r[3]]
        if not refs:
            continue
        _, column, _, line, col = refs[0]
        path = Path(model.path)
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        row = lines[line - 1]
        at = row.lower().find(column, col - 1)
        if at < 0:
            continue
        lines[line - 1] = row[:at] + "zz_no_such_column" + row[at + len(column) :]
        path.write_text("\n".join(lines), encoding="utf-8")
        tried += 1
        try:
            load_project(copy, use_cache=False)
        except SluiceError as exc:
            if any(name in e.message for e in _column_errors(_errors(exc))):
                caught += 1
            else:
                other += 1
        finally:
            path.write_text(text, encoding="utf-8")
    return caught, other, tried


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("projects", nargs="*", help="project folders (globs)")
    parser.add_argument("--mutate", action="store_true", help="also rename a column per model")
    args = parser.parse_args()
    roots = [
        Path(p)
        for pattern in args.projects or [str(REPO / d) for d in DEFAULT]
        for p in sorted(glob.glob(pattern))
        if (Path(p) / "models").is_dir()
    ]
    base = Path(tempfile.mkdtemp(prefix="sluice-columns-"))
    for index, root in enumerate(roots):
        folder = re.sub(r"\W", "_", root.name)
        survey(root.resolve(), base / f"{index}-{folder}", args.mutate)


if __name__ == "__main__":
    main()
