"""SQLMesh as the oracle (issue 41): what SQLMesh 0.236.4 loads from each project, against
what Sluice loads, written to ``docs/compatibility.md``.

    .venv/bin/python bench/sqlmesh_compat.py [--sqlmesh-python PY] [--write docs/compatibility.md]

Projects: ``examples/*``, every whole SQLMesh-format project under ``tests/`` (a folder
with ``models/`` and a config file), and ``../shared/compat/*`` (read-only: copied first).
Each is copied to a temporary folder twice: Sluice loads its copy unmodified, in this
process, as ``sluice plan`` does (``workflow.load_project``); SQLMesh loads its own copy
with ``sqlmesh.Context`` in its own virtualenv (``sqlmesh_spark.side_venv``: built once
under ``~/.cache/sluice``, or ``--sqlmesh-python``), through ``sqlmesh_facts.py``. What
the SQLMesh side changes (a ``sluice:`` section removed, a DuckDB gateway given, stand-in
custom materializations) is said in the report; the virtualenv this command builds also
gets what the shared projects' own Python imports (:data:`PROJECT_PACKAGES`).

Compared per model: the name, the kind, the dependencies, the column names (in order),
their types (where SQLMesh knows one), and the query rendered for one day (2024-01-01),
each side normalised the same way by :func:`normalise_query`. Nothing is counted as a
match unless it is equal after that normalisation; every difference is listed.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "compat"
FACTS = Path(__file__).resolve().parent / "sqlmesh_facts.py"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sluice"
CONFIGS = ("config.yaml", "config.yml", "config.py")
# The interval each query is rendered for: SQLMesh takes inclusive dates, Sluice [start, end).
START, END, EXECUTION = "2024-01-01", "2024-01-01", "2024-01-02"
SLUICE_INTERVAL = ("2024-01-01", "2024-01-02", "2024-01-02")
KIND_ALIASES = {"SCD_TYPE_2": "SCD_TYPE_2_BY_TIME"}  # SQLMesh's own alias of the kind
# Large files a shared project's snapshot leaves out, stubbed (header only) in the copies.
STUBS = {
    "omop_synthea": {
        "seeds/vocabulary/concept_seed.csv": "concept_id,concept_name,domain_id,vocabulary_id,"
        "concept_class_id,standard_concept,concept_code,valid_start_date,valid_end_date,"
        "invalid_reason\n"
    }
}


# --- the comparison (pure: tests/test_sqlmesh_compat.py) ---------------------------------


def normalise_type(type_sql: str, dialect: str = "spark") -> str:
    """A column type as Spark spells it ("" when not known)."""
    from sqlglot import exp

    if not type_sql:
        return ""
    try:
        built = exp.DataType.build(type_sql, dialect=dialect or "spark")
    except Exception:
        return type_sql.upper()
    if built.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return ""
    return str(built.sql(dialect="spark")).upper()


def normalise_query(
    sql: str,
    dialect: str,
    schema: Mapping[str, Sequence[Sequence[str]]] | None = None,
    default_catalog: str | None = None,
) -> str:
    """One form for two spellings of a query: parsed in ``dialect``, comments dropped, the
    default catalog dropped from table names, columns qualified against ``schema`` (model
    name -> columns; stars expanded where it knows them), identifiers unquoted and lower
    case, written as Spark SQL, then simplified by sqlglot (which orders AND's operands and
    equalities and writes BETWEEN as two comparisons, as SQLMesh's rendering does)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.simplify import simplify

    expression = sqlglot.parse_one(sql, read=dialect or "spark")
    for node in expression.walk():
        node.comments = None
        if isinstance(node, exp.Identifier):
            node.set("quoted", False)
            node.set("this", node.name.lower())
        if (
            isinstance(node, exp.Table)
            and default_catalog
            and node.catalog.lower() == default_catalog.lower()
        ):
            node.set("catalog", None)
    names = [n for n, columns in (schema or {}).items() if columns and n.count(".") in (1, 2)]
    mixed = len({n.count(".") for n in names}) > 1  # sqlglot wants one depth: catalog ""
    mapping: dict[str, Any] = {}
    for name in names:
        parts = name.split(".")
        level = mapping.setdefault("", {}) if mixed and len(parts) == 2 else mapping
        for part in parts[:-1]:
            level = level.setdefault(part, {})
        level[parts[-1]] = {c: (t or "UNKNOWN") for c, t in (schema or {})[name]}
    for attempt in (mapping, None):
        try:
            expression = qualify(
                expression.copy(),
                schema=attempt,
                dialect="spark",
                quote_identifiers=False,
                identify=False,
                validate_qualify_columns=False,
            )
            break
        except Exception:  # an unqualifiable query is compared as written
            continue
    # One order for AND's operands and equalities, BETWEEN as two comparisons... (else as is)
    with contextlib.suppress(Exception):
        expression = simplify(expression, dialect="spark")
    return str(expression.sql(dialect="spark", normalize=True, comments=False))


@dataclass
class ModelDiff:
    """How one model, loaded by both, differs (empty: it matches)."""

    name: str
    kind: str | None = None
    deps: str | None = None
    columns: str | None = None
    types: str | None = None
    untyped: bool = False  # the types differ only where Sluice does not know one
    query: str | None = None
    has_query: bool = False

    def problems(self) -> list[str]:
        return [
            f"{what}: {text}"
            for what, text in (
                ("kind", self.kind),
                ("dependencies", self.deps),
                ("columns", self.columns),
                ("types", self.types),
                ("query", self.query),
            )
            if text
        ]


@dataclass
class Comparison:
    """One project: what each side loaded and how the models both loaded differ."""

    sqlmesh_models: int | None
    sluice_models: int | None
    only_sqlmesh: list[str] = field(default_factory=list)
    only_sluice: list[str] = field(default_factory=list)
    diffs: list[ModelDiff] = field(default_factory=list)
    sqlmesh_error: str | None = None
    sluice_error: str | None = None
    expected: int | None = None  # what MANIFEST.tsv says SQLMesh loads (shared projects)
    not_run: list[str] = field(default_factory=list)  # loaded and planned, never run

    @property
    def common(self) -> int:
        return len(self.diffs)

    def count(self, what: str) -> int:
        """How many of the models both loaded match on ``what``."""
        return sum(1 for d in self.diffs if getattr(d, what) is None)

    @property
    def queries(self) -> tuple[int, int]:
        """(matching, compared) of the models with a SQL query on either side."""
        compared = [d for d in self.diffs if d.has_query]
        return sum(1 for d in compared if d.query is None), len(compared)

    @property
    def matches(self) -> bool:
        """Whether Sluice loads every model SQLMesh does, and nothing differs."""
        return (
            self.sqlmesh_error is None
            and (self.expected is None or self.expected == self.sqlmesh_models)
            and self.sluice_error is None
            and not self.only_sqlmesh
            and not self.only_sluice
            and all(not d.problems() for d in self.diffs)
        )


def _first_difference(one: str, other: str, width: int = 50) -> str:
    at = next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), None)
    if at is None:
        at = min(len(one), len(other))
    begin = max(0, at - 10)
    return f"SQLMesh `…{one[begin : at + width]}…` / Sluice `…{other[begin : at + width]}…`"


def _schema(*sides: Mapping[str, Any]) -> dict[str, list[list[str]]]:
    """Model -> columns, from the first side that knows them (SQLMesh's first)."""
    schema: dict[str, list[list[str]]] = {}
    for side in sides:
        for name, model in side.get("models", {}).items():
            if name not in schema and model.get("columns"):
                schema[name] = [[c, normalise_type(t)] for c, t in model["columns"]]
    return schema


def compare(sqlmesh: Mapping[str, Any], sluice: Mapping[str, Any]) -> Comparison:
    """Compare two sides' facts (``sqlmesh_facts.py``'s JSON, and :func:`sluice_facts`'s)."""
    ours: Mapping[str, Any] = sluice.get("models") or {}
    theirs: Mapping[str, Any] = sqlmesh.get("models") or {}
    result = Comparison(
        None if sqlmesh.get("error") else len(theirs),
        None if sluice.get("error") else len(ours),
        sqlmesh_error=sqlmesh.get("error"),
        sluice_error=sluice.get("error"),
    )
    if result.sqlmesh_error or result.sluice_error:
        result.only_sqlmesh = sorted(theirs)
        result.only_sluice = sorted(ours)
        return result
    result.only_sqlmesh = sorted(set(theirs) - set(ours))
    result.only_sluice = sorted(set(ours) - set(theirs))
    schema = _schema(sqlmesh, sluice)
    catalog = sqlmesh.get("default_catalog")
    for name in sorted(set(theirs) & set(ours)):
        them, us = theirs[name], ours[name]
        diff = ModelDiff(name)
        kinds = [KIND_ALIASES.get(k, k) for k in (them["kind"], us["kind"])]
        if kinds[0] != kinds[1]:
            diff.kind = f"SQLMesh {them['kind']}, Sluice {us['kind']}"
        deps = set(them["depends_on"]), set(us["depends_on"])
        if deps[0] != deps[1]:
            missing, extra = sorted(deps[0] - deps[1]), sorted(deps[1] - deps[0])
            diff.deps = "; ".join(
                text
                for text in (
                    f"Sluice lacks {', '.join(missing)}" if missing else "",
                    f"Sluice adds {', '.join(extra)}" if extra else "",
                )
                if text
            )
        their_columns = [(c.lower(), normalise_type(t)) for c, t in them["columns"]]
        if us["columns"] is None:
            names = None
            diff.columns = f"Sluice does not know them (SQLMesh: {len(their_columns)})"
        else:
            # Sluice keeps every type in Spark's spelling, whatever the model's dialect.
            our_columns = [(c.lower(), normalise_type(t)) for c, t in us["columns"]]
            names = [c for c, _ in our_columns]
            if [c for c, _ in their_columns] != names:
                diff.columns = (
                    f"SQLMesh ({', '.join(c for c, _ in their_columns) or 'none'}), "
                    f"Sluice ({', '.join(names) or 'none'})"
                )
            ours_typed = dict(our_columns)
            wrong = [
                (c, t, ours_typed[c])
                for c, t in their_columns
                if t and c in ours_typed and ours_typed[c] != t
            ]
            if wrong:
                diff.untyped = all(not ours for _, _, ours in wrong)
                listed = ", ".join(f"{c} {t} / {ours or 'unknown'}" for c, t, ours in wrong)
                diff.types = f"SQLMesh / Sluice: {listed}"
        if names is None and any(t for _, t in their_columns):
            diff.types = "Sluice does not know the columns"
            diff.untyped = True
        if them.get("query") is not None or us.get("query") is not None:
            diff.has_query = True
            unrendered = (sqlmesh.get("render_errors") or {}).get(name)
            if unrendered:
                diff.query = f"SQLMesh fails to render it: {unrendered}"
            elif them.get("query") is None or us.get("query") is None:
                side = "SQLMesh" if them.get("query") is None else "Sluice"
                diff.query = f"{side} has no SQL query"
            else:
                try:
                    a = normalise_query(them["query"], them.get("dialect", ""), schema, catalog)
                except Exception as exc:
                    a = f"(SQLMesh's query does not parse: {type(exc).__name__})"
                try:
                    b = normalise_query(us["query"], "spark", schema)
                except Exception as exc:
                    b = f"(Sluice's query does not parse: {type(exc).__name__})"
                if a != b:
                    diff.query = _first_difference(a, b)
        result.diffs.append(diff)
    return result


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def _ratio(k: int, n: int) -> str:
    return f"{k}/{n}" if k == n else f"**{k}/{n}**"


def table(rows: Sequence[tuple[str, Comparison]]) -> list[str]:
    """The report's table: a row per project."""
    lines = [
        "| project | SQLMesh loads | Sluice loads | names | kinds | deps | columns | types "
        "| queries | Sluice's first error |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, c in rows:
        n = c.common
        theirs = "error" if c.sqlmesh_models is None else str(c.sqlmesh_models)
        if c.expected is not None and c.expected != c.sqlmesh_models:
            theirs = f"**{theirs}** (MANIFEST: {c.expected})"
        ours = "error" if c.sluice_models is None else str(c.sluice_models)
        if c.sqlmesh_error or c.sluice_error:
            cells = ["-"] * 6
        else:
            same, compared = c.queries
            untyped = sum(1 for d in c.diffs if d.untyped)
            types = _ratio(c.count("types"), n)
            if untyped:
                types += f" ({untyped} unknown to Sluice)"
            cells = [
                _ratio(n, c.sqlmesh_models or 0),
                *(_ratio(c.count(w), n) for w in ("kind", "deps", "columns")),
                types,
                _ratio(same, compared),
            ]
        error = _cell(c.sluice_error.splitlines()[0]) if c.sluice_error else ""
        if c.sqlmesh_error:
            error = (error + "; " if error else "") + "SQLMesh: " + _cell(c.sqlmesh_error)
        mark = "" if c.matches else " ✗"
        lines.append(f"| {name}{mark} | {theirs} | {ours} | {' | '.join(cells)} | {error} |")
    return lines


def details(name: str, c: Comparison) -> list[str]:
    """Every difference of one project, one line each."""
    lines: list[str] = []
    if c.expected is not None and c.sqlmesh_models != c.expected:
        lines.append(f"- SQLMesh loads {c.sqlmesh_models}, not the {c.expected} MANIFEST.tsv gives")
    if c.sqlmesh_error:
        lines.append(f"- SQLMesh fails to load it: {_cell(c.sqlmesh_error, 400)}")
    if c.sluice_error:
        lines.append("- Sluice fails to load it:")
        lines += [f"  - `{_cell(e, 600)}`" for e in _errors(c.sluice_error)]
        if c.sqlmesh_models:
            lines.append(f"- SQLMesh's models: {', '.join(c.only_sqlmesh)}")
        return [f"### {name}", "", *lines, ""]
    if c.only_sqlmesh:
        lines.append(f"- loaded by SQLMesh only: {', '.join(c.only_sqlmesh)}")
    if c.only_sluice:
        lines.append(f"- loaded by Sluice only: {', '.join(c.only_sluice)}")
    for diff in c.diffs:
        for problem in diff.problems():
            lines.append(f"- {diff.name}: {_cell(problem, 400)}")
    return [f"### {name}", "", *lines, ""] if lines else []


# --- the two sides ------------------------------------------------------------------------


def sluice_facts(project: Path) -> dict[str, Any]:
    """What Sluice loads from ``project``, as ``sluice plan`` loads it, in this process."""
    from sluice.core import workflow
    from sluice.core.errors import ProjectErrors, SluiceError
    from sluice.core.plan.column_types import ColumnTypes
    from sluice.core.spark.render import render_query
    from sluice.core.timeutil import to_ms

    try:
        loaded = workflow.load_project(project, use_cache=False)
    except ProjectErrors as exc:
        return {"models": {}, "error": "\n".join(_relative(str(e), project) for e in exc.errors)}
    except SluiceError as exc:
        return {"models": {}, "error": _relative(str(exc), project)}
    except Exception as exc:  # a crash is a finding too
        return {"models": {}, "error": f"crash: {type(exc).__name__}: {exc}"}
    start, end, execution = (to_ms(v) for v in SLUICE_INTERVAL)
    models: dict[str, Any] = {}
    # Declared, or inferred as SQLMesh infers them (external tables' in the project's dialect)
    types = ColumnTypes(loaded.models, loaded.config.model_defaults.dialect or "spark")
    for model in loaded.models.values():
        typed = types(model.name)
        columns = list(typed) if typed is not None else None if model.query_sql else []
        query = None
        if model.query_sql is not None and model.python_code is None:
            query = render_query(model, {}, model.name, start, end, execution)
        models[model.name] = {
            "kind": str(model.kind.name),
            "depends_on": sorted(model.depends_on),
            "columns": None if columns is None else [list(c) for c in columns],
            "dialect": model.dialect,
            "query": query,
        }
    return {"models": models, "error": None, "not_run": _not_run(loaded, project)}


def _not_run(loaded: Any, project: Path) -> list[str]:
    """What Sluice loads and plans but will not run (issue 41): a custom materialization
    the settings map to no kind, a model statement or project statement that would change
    what exists already; each as its file:line and what it is."""
    from sluice.core.model.definition import KindName
    from sluice.core.plan import statements

    found = []
    for model in loaded.models.values():
        where = _relative(f"{model.path}:{model.line}", project)
        if model.kind.name == KindName.CUSTOM:
            found.append(
                f"{where}: {model.name}: kind CUSTOM (materialization"
                f" '{model.kind.materialization}'): planned, its build refused until"
                " sluice.materializations maps it to a built-in kind"
            )
        for line, what, _ in model.statement_refusals:
            where = _relative(f"{model.path}:{line}", project)
            found.append(f"{where}: {model.name}: {what}: planned, its build refused")
    for key in ("before_all", "after_all"):
        for index, sql in enumerate(getattr(loaded, key)):
            refused = statements.check(sql)
            if refused is not None:
                found.append(
                    f"{key} statement {index + 1} ({sql}): {refused.what}: every job refused"
                )
    return found


def _relative(text: str, root: Path) -> str:
    return text.replace(f"{root}/", "").replace(str(root), ".")


def sqlmesh_facts(python: Path, project: Path) -> dict[str, Any]:
    """What SQLMesh loads from ``project`` (``sqlmesh_facts.py`` in its virtualenv)."""
    proc = subprocess.run(
        [str(python), str(FACTS), str(project), START, END, EXECUTION],
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
        timeout=900,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"models": {}, "error": f"sqlmesh_facts.py failed: {tail[0]}"}
    facts: dict[str, Any] = json.loads(lines[-1])
    if facts.get("error"):
        facts["error"] = _relative(facts["error"], project)
    return facts


# --- the projects ---------------------------------------------------------------------------


def projects() -> list[tuple[str, Path]]:
    """(report name, folder) of every project compared."""
    found: list[tuple[str, Path]] = []
    for folder in sorted((ROOT / "examples").iterdir()):
        if (folder / "models").is_dir():
            found.append((f"examples/{folder.name}", folder))
    for models in sorted((ROOT / "tests").rglob("models")):
        folder = models.parent
        if models.is_dir() and any((folder / c).is_file() for c in CONFIGS):
            found.append((folder.relative_to(ROOT).as_posix(), folder))
    if SHARED.is_dir():
        for folder in sorted(SHARED.iterdir()):
            if (folder / "models").is_dir():
                found.append((f"shared/{folder.name}", folder))
    return found


def _copy(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".sluice", "__pycache__"))
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the shared projects are read-only
    for relative, text in STUBS.get(source.name, {}).items():
        if not (dest / relative).exists():
            (dest / relative).write_text(text, encoding="utf-8")
    return dest


def sqlmesh_copy(source: Path, dest: Path) -> list[str]:
    """Copy ``source`` for SQLMesh; what had to change for it to load, if anything."""
    import yaml

    _copy(source, dest)
    changed = _stubs(source)
    for name in ("config.yaml", "config.yml"):
        path = dest / name
        if not path.is_file():
            continue
        try:
            config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:  # Jinja SQLMesh renders first: SQLMesh reads it as it is
            continue
        before = copy.deepcopy(config)
        if "sluice" in config:
            del config["sluice"]
            changed.append(f"`sluice:` section removed from {name} (SQLMesh refuses the key)")
        gateways = config.get("gateways") or {}
        types = {
            (g.get("connection") or {}).get("type")
            for g in gateways.values()
            if isinstance(g, dict)
        }
        if not gateways or types - {"duckdb"}:
            config["gateways"] = {"duckdb": {"connection": {"type": "duckdb"}}}
            config["default_gateway"] = "duckdb"
            what = "replaced by" if gateways else "given"
            changed.append(f"{name}: gateways {what} an in-memory DuckDB one (SQLMesh needs one)")
        if config != before:
            path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return changed


def sluice_copy(source: Path, dest: Path) -> list[str]:
    _copy(source, dest)
    return _stubs(source)


def _stubs(source: Path) -> list[str]:
    """What the copies of ``source`` hold in place of a file too large to keep."""
    notes = []
    for relative in STUBS.get(source.name, {}):
        path = source / relative
        if not path.exists():
            notes.append(f"{relative}: a header-only stub (both copies)")
        elif len(path.read_bytes().splitlines()) <= 1:
            notes.append(f"{relative} is the header-only stand-in the shared copy holds")
    return notes


# --- the report -------------------------------------------------------------------------------


FEATURES: dict[str, Callable[[Path], bool]] = {
    "config.py": lambda p: (p / "config.py").is_file(),
    "Python models": lambda p: any(p.glob("models/**/*.py")),
    "Python macros": lambda p: any(p.glob("macros/**/*.py")),
    "SQL (Jinja) macros": lambda p: any(p.glob("macros/**/*.sql")),
    "seed models": lambda p: any(p.rglob("*.csv")),
    "external models": lambda p: any(
        (p / f).exists() for f in ("external_models.yaml", "schema.yaml", "external_models")
    ),
    "audits/ files": lambda p: any(p.glob("audits/**/*.sql")),
    "unit tests (tests/*.yaml)": lambda p: any(p.glob("tests/**/*.y*ml")),
}


def report(
    rows: Sequence[tuple[str, Comparison]],
    changes: Mapping[str, list[str]],
    folders: Mapping[str, Path],
) -> str:
    matched = [name for name, c in rows if c.matches]
    untyped = [
        name
        for name, c in rows
        if not c.matches
        and c.sqlmesh_error is None
        and c.sluice_error is None
        and (c.expected is None or c.expected == c.sqlmesh_models)
        and not c.only_sqlmesh
        and not c.only_sluice
        and all(
            d.untyped and d.problems() == [f"types: {d.types}"] for d in c.diffs if d.problems()
        )
    ]
    lines = [
        "# Compatibility with SQLMesh",
        "",
        "Written by `.venv/bin/python bench/sqlmesh_compat.py --write docs/compatibility.md`"
        " (issue 41): SQLMesh 0.236.4 is the oracle. Each project is loaded by SQLMesh"
        " (`sqlmesh.Context`, offline, in a virtualenv of its own) and by Sluice (as"
        " `sluice plan` loads it), each from its own copy, and what they load is compared"
        " model by model. Rerun it to refresh this page; `--sqlmesh-python PY` reuses a"
        " SQLMesh virtualenv.",
        "",
        "How to read it: *names* counts SQLMesh's models Sluice loads under the same name;"
        " the next columns count, of those, the models whose kind, dependencies, column names"
        " (in order), column types (every type SQLMesh knows, spelt as Spark does; a type"
        " Sluice does not know is a difference, counted in brackets) and"
        " rendered query match. Queries are rendered for 2024-01-01 on both sides and"
        " normalised the same way (sqlglot: comments and SQLMesh's default catalog dropped,"
        " columns qualified against SQLMesh's columns, identifiers unquoted and lower case,"
        " simplified, Spark SQL);"
        " models without a SQL query on either side (seeds, externals, Python) are not"
        " counted there. `SCD_TYPE_2` counts as `SCD_TYPE_2_BY_TIME` (SQLMesh's alias). A"
        " count in bold, or ✗ after a project's name, is a difference: every one is listed"
        " under *Differences*.",
        "",
        f"{len(matched)} of {len(rows)} projects load in Sluice with every model SQLMesh loads"
        " and no difference"
        + (
            f"; {len(untyped)} more differ only in column types Sluice does not know."
            if untyped
            else "; none differs in column types."
        )
        + " Sluice infers a type as SQLMesh does (`sluice/core/plan/column_types.py`):"
        " declared (a seed's from its CSV, an external table's in the project's dialect),"
        " else sqlglot's annotation of the query against its parents' types.",
        "",
        *table(rows),
        "",
    ]
    changed = [(name, notes) for name, notes in changes.items() if notes]
    if changed:
        lines += ["What the copies change (the projects themselves are never modified):", ""]
        lines += [f"- {name}: {'; '.join(notes)}" for name, notes in changed]
        lines.append("")
    lines += ["## Supported and unsupported parts of the format", ""]
    lines += _features(rows, folders)
    not_run = [(name, c.not_run) for name, c in rows if c.not_run]
    if not_run:
        lines += [
            "Loaded and planned, not run: what Sluice's plan names (file:line, what to do)"
            " and refuses to build (README, project format: `kind CUSTOM`, pre- and"
            " post-statements, `before_all`):",
            "",
        ]
        lines += [f"- ({name}) `{item}`" for name, items in not_run for item in items]
        lines.append("")
    lines += ["## Differences", ""]
    body = [line for name, c in rows for line in details(name, c)]
    lines += body or ["None.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _features(rows: Sequence[tuple[str, Comparison]], folders: Mapping[str, Path]) -> list[str]:
    lines = [
        "Supported: a part of the format is listed as supported when it is used by a project"
        " that Sluice loads with every model SQLMesh loads and no difference; otherwise by"
        " the projects using it, with how they fare.",
        "",
        "| part of the format | projects matching SQLMesh | projects differing |",
        "| --- | --- | --- |",
    ]
    for feature, present in FEATURES.items():
        using = [name for name, _ in rows if present(folders[name])]
        good = [name for name, c in rows if name in using and c.matches]
        bad = [name for name in using if name not in good]
        if using:
            lines.append(f"| {feature} | {', '.join(good) or '-'} | {', '.join(bad) or '-'} |")
    lines += ["", "Unsupported: every error Sluice gives on these projects, as users see it:", ""]
    errors: dict[str, list[str]] = {}
    for name, c in rows:
        for error in _errors(c.sluice_error):
            errors.setdefault(error, []).append(name)
    if not errors:
        lines.append("None.")
    for error, names in errors.items():
        lines.append(f"- ({', '.join(names)}) `{_cell(error, 500)}`")
    lines.append("")
    return lines


def _errors(text: str | None) -> list[str]:
    """Each error of a load, with its hint on the same line."""
    if not text:
        return []
    found: list[str] = []
    for line in text.splitlines():
        if line.startswith("  hint:") and found:
            found[-1] += " (" + line.strip() + ")"
        elif line.strip():
            found.append(line.strip())
    return found


def manifest() -> dict[str, int]:
    """Project -> the models SQLMesh 0.236.4 loads from it, as ``MANIFEST.tsv`` says."""
    path = SHARED / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    at = header.index("sqlmesh_0.236.4_models")
    return {
        row.split("\t")[0]: int(row.split("\t")[at])
        for row in lines[1:]
        if row.strip() and row.split("\t")[at].isdigit()
    }


PROJECT_PACKAGES = {
    "google.cloud.bigquery": "sqlmesh[bigquery]",
    "faker": "faker",
    "ibis": "ibis-framework",
}
"""What the shared projects' own Python imports when SQLMesh loads them (module: package):
``sqlmesh_sushi``'s config.py builds a BigQuery connection config (SQLMesh refuses it
without the engine's library), ``sqlmesh_wursthall``'s Python models import Faker,
``sqlmesh_ibis``'s import ibis."""


def _project_packages(venv: Path, pins: Sequence[str], *, mine: bool) -> None:
    """Install :data:`PROJECT_PACKAGES` in the SQLMesh virtualenv this command built (a
    given one is used as it is), keeping SQLMesh's and sqlglot's versions (``pins``)."""
    python = str(venv / "bin" / "python")
    missing = [
        package
        for module, package in PROJECT_PACKAGES.items()
        if subprocess.run(
            [python, "-c", f"import {module}"], check=False, capture_output=True
        ).returncode
    ]
    if not mine or not missing:
        return
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    env.setdefault("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    print(f"installing {', '.join(missing)} for the projects' Python ...", file=sys.stderr)
    version = pins[0].split("==")[1]
    wanted = [f"{p}=={version}" if p.startswith("sqlmesh[") else p for p in missing]
    subprocess.run([uv, "pip", "install", "-q", *wanted, *pins], check=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlmesh-python", type=Path, help="the python of a SQLMesh virtualenv")
    parser.add_argument("--write", type=Path, help="write the report there (else print it)")
    parser.add_argument("--only", action="append", help="compare these projects only")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sqlmesh_spark

    requested = args.sqlmesh_python.absolute().parent.parent if args.sqlmesh_python else None
    venv = sqlmesh_spark.side_venv(CACHE / "sqlmesh-0.236.4", requested)
    python = venv / "bin" / "python"
    pins = (sqlmesh_spark.SQLMESH, sqlmesh_spark.SQLGLOT)
    _project_packages(venv, pins, mine=requested is None)
    expected = manifest()
    rows: list[tuple[str, Comparison]] = []
    changes: dict[str, list[str]] = {}
    folders: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="sluice-compat-") as tmp:
        for name, folder in projects():
            if args.only and name not in args.only:
                continue
            work = Path(tmp) / name.replace("/", "__")
            print(f"{name} ...", file=sys.stderr, flush=True)
            changes[name] = sqlmesh_copy(folder, work / "sqlmesh")
            sluice_copy(folder, work / "sluice")
            folders[name] = folder
            theirs = sqlmesh_facts(python, work / "sqlmesh")
            if theirs.get("stand_ins"):
                listed = ", ".join(theirs["stand_ins"])
                changes[name].append(
                    f"SQLMesh is given do-nothing custom materializations named {listed}"
                    " (the models name them; nothing defines them)"
                )
            ours = sluice_facts(work / "sluice")
            result = compare(theirs, ours)
            result.not_run = list(ours.get("not_run") or [])
            if name.startswith("shared/"):
                result.expected = expected.get(name.removeprefix("shared/"))
            rows.append((name, result))
            print(
                f"  SQLMesh {result.sqlmesh_models}, Sluice {result.sluice_models},"
                f" {'matches' if result.matches else 'differs'}",
                file=sys.stderr,
                flush=True,
            )
    text = report(rows, changes, folders)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
