"""SQLMesh as the oracle of the plan (issue 42, point 6): edits made to every project, each
planned by Sluice and categorised by SQLMesh 0.236.4, model by model.

    .venv/bin/python bench/sqlmesh_diff.py [--only PROJECT ...] [--edits 12] [--seed 42]
        [--write docs/plan_oracle.md] [--sqlmesh-python PY]

Projects: those ``sqlmesh_compat.py`` compares (``examples/*``, the SQLMesh-format
projects under ``tests/``, ``../shared/compat/*``, the last copied first: never written).
For each, :func:`generate_edits` picks edits from the project's own models (seeded, at
most ``--edits``): add, drop and rename a column, change an expression, a filter, a
join's kind, add a column to a CTE, give a parent of a new ``SELECT *`` child a column,
edit a Python macro a model calls, add a row to a seed, change a model's kind. Each edit
is a (before, after) pair of copies of the project; the before copy differs from the
project only in the edited file being re-written by sqlglot (the after copy is written the
same way, so formatting is no part of the change).

Sluice plans ``after`` against a prod built from ``before`` (``build_plan``, as ``sluice
plan`` does, in this process). SQLMesh, in its own virtualenv (``sqlmesh_spark.side_venv``)
through ``sqlmesh_categories.py``, records ``before`` as prod and plans ``after`` with
automatic categorisation. Per model: the category (breaking / non-breaking /
forward-only / metadata / unchanged) and whether a new table is built (a new version).
Each difference is classified by :func:`classify`: *Sluice stricter* (it rebuilds, or
calls breaking, where SQLMesh does not; the reason is written) or *Sluice less safe*
(it keeps a table SQLMesh rebuilds, calls non-breaking what SQLMesh calls breaking, sees
no change where SQLMesh sees one, or plans what SQLMesh refuses without a warning).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import sqlmesh_compat  # noqa: E402

CATEGORIES = HERE / "sqlmesh_categories.py"
PLAN_END = "2024-01-02"
KINDS = (
    "add_column",
    "drop_column",
    "rename_column",
    "change_expression",
    "change_filter",
    "change_join",
    "star_child",
    "cte_edit",
    "macro_edit",
    "seed_edit",
    "kind_change",
)
STAR_CHILD = "sluice_diff_star_child"
SAME_OUTPUT = "what it returns is the same"
DISTINCT = "under SELECT DISTINCT"
LARGE, LARGE_EDITS = 30, 4
"""A project of more than LARGE models gets fewer edits (``limit * LARGE / models``, at
least LARGE_EDITS): SQLMesh parses the whole project twice per edit (40 s for 114 models
here), and the harness must stay a matter of minutes."""


# --- the edits (pure but for files: tests/test_sqlmesh_diff.py) ------------------------------


@dataclass
class Edit:
    """One change to one project: files to write over a copy of it, before and after."""

    kind: str
    model: str  # the model edited (or whose parent is, for star_child)
    what: str  # in words
    before: dict[str, str] = field(default_factory=dict)  # relative path -> text
    after: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.model}"


@dataclass
class _Sql:
    """A SQL model whose file is a MODEL block and one query sqlglot reads."""

    name: str
    path: str  # relative to the project
    dialect: str
    header: str  # the MODEL (...) block and what follows it up to the query
    query: Any  # sqlglot expression, macros masked
    masks: dict[str, str]
    kind: str
    parents: tuple[str, ...]
    children: tuple[str, ...]

    def text(self, query: Any) -> str:
        sql = query.sql(dialect=self.dialect, pretty=True)
        for mask, original in self.masks.items():  # sqlglot may upper-case a function's name
            sql = re.sub(re.escape(mask), lambda _m, o=original: o, sql, flags=re.IGNORECASE)
        return f"{self.header}\n{sql}\n"


_MACRO = re.compile(r"@\{?[A-Za-z_][A-Za-z_0-9]*\}?")


def _mask(body: str) -> tuple[str, dict[str, str]]:
    masks: dict[str, str] = {}

    def swap(match: re.Match[str]) -> str:
        key = f"sluice_mask_{len(masks)}_"
        masks[key] = match.group(0)
        return key

    return _MACRO.sub(swap, body), masks


def _model_block_end(text: str) -> int | None:
    """Where the MODEL (...) block ends (after its ``;``), or None."""
    start = re.search(r"(?im)^\s*MODEL\s*\(", text)
    if start is None:
        return None
    depth, i, quote = 0, start.end() - 1, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                rest = re.match(r"\s*;", text[i + 1 :])
                return i + 1 + (rest.end() if rest else 0)
        i += 1
    return None


def read_sql_model(root: Path, model: Any, children: Sequence[str]) -> _Sql | None:
    """The model's file as a MODEL block and one query sqlglot reads (None: not so)."""
    import sqlglot
    from sqlglot import exp

    if model.python_code is not None or not model.path or not model.path.endswith(".sql"):
        return None
    path = root / _relative(root, model.path)
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    if "{{" in text or "{%" in text:
        return None
    end = _model_block_end(text)
    if end is None:
        return None
    body = text[end:]
    masked, masks = _mask(body)
    try:
        statements = [s for s in sqlglot.parse(masked, read=model.dialect) if s is not None]
    except Exception:
        return None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return None
    query = statements[0]
    for node in query.walk():
        node.comments = None
    sql = _Sql(
        model.name,
        _relative(root, model.path),
        model.dialect,
        text[:end].rstrip() + "\n",
        query,
        masks,
        str(model.kind.name),
        tuple(model.depends_on),
        tuple(children),
    )
    rendered = sql.text(query)
    if "sluice_mask_" in rendered.lower() or any(
        original not in rendered for original in masks.values()
    ):
        return None
    return sql


def _relative(root: Path, path: str) -> str:
    """A model's path (the loader's is absolute) relative to the project."""
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate.resolve().relative_to(root.resolve()).as_posix()
    return candidate.as_posix()


def _outer_select(query: Any) -> Any:
    from sqlglot import exp

    return query if isinstance(query, exp.Select) else None


def _projections(select: Any) -> list[Any]:
    from sqlglot import exp

    return [
        p
        for p in select.expressions
        if not isinstance(p, exp.Star)
        and not (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        and p.alias_or_name
        and "sluice_mask" not in p.sql()
    ]


def _inside(node: Any, ancestor: Any) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _has_star(select: Any) -> bool:
    from sqlglot import exp

    return any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        for p in select.expressions
    )


def _referenced(root: Path, files: Mapping[str, str], column: str, children: Sequence[str]) -> bool:
    """Whether a child's file names ``column`` (a word) or takes its parent with a star
    (the model's own MODEL block is one of ``children``: its time column, grain...)."""
    for child in children:
        text = files.get(child, "")
        if re.search(rf"(?i)\b{re.escape(column)}\b", text) or "*" in text:
            return True
    return False


def generate_edits(root: Path, *, seed: int = 42, limit: int = 12) -> list[Edit]:
    """Edits of the project at ``root`` (Sluice loads it), chosen from its own models with
    ``random.Random(seed)``: at most one of each kind per round, models with parents and
    children first, until ``limit`` (fewer for a large project: :data:`LARGE`)."""
    from sqlglot import exp

    from sluice.core.model.loader import load_project

    project = load_project(root, use_cache=False)
    models = project.models
    limit = min(limit, max(LARGE_EDITS, limit * LARGE // max(1, len(models))))
    children: dict[str, list[str]] = {n: [] for n in models}
    for name, model in models.items():
        for parent in model.depends_on:
            if parent in children:
                children[parent].append(name)
    texts = {
        n: (root / _relative(root, m.path)).read_text(encoding="utf-8")
        for n, m in models.items()
        if m.path and (root / _relative(root, m.path)).is_file()
    }
    sqls = {
        n: s for n, m in models.items() if (s := read_sql_model(root, m, children[n])) is not None
    }
    rng = random.Random(f"{seed}:{root.name}")

    def ranked(names: list[str]) -> list[str]:
        names = sorted(names)
        rng.shuffle(names)
        return sorted(names, key=lambda n: -(bool(children[n]) + bool(models[n].depends_on)))

    def query_edit(kind: str, change: Callable[[_Sql, Any], str | None]) -> list[Edit]:
        found = []
        for name in ranked(list(sqls)):
            sql = sqls[name]
            after = sql.query.copy()
            what = change(sql, after)
            if what:
                found.append(
                    Edit(
                        kind,
                        name,
                        what,
                        {sql.path: sql.text(sql.query)},
                        {sql.path: sql.text(after)},
                    )
                )
        return found

    child_files = {n: texts.get(n, "") for n in models}

    def add_column(sql: _Sql, query: Any) -> str | None:
        select = _outer_select(query)
        if select is None or not _projections(select):
            return None
        first = _projections(select)[0]
        alias = f"{first.alias_or_name}_added"
        select.select(exp.alias_(first.unalias().copy(), alias), copy=False)
        under = f" {DISTINCT}" if select.args.get("distinct") else ""
        return f"adds column {alias} (a copy of {first.alias_or_name}){under}"

    def elsewhere(select: Any, projection: Any) -> bool:
        """Whether the query names the projection's alias outside it (ORDER BY...)."""
        name = projection.alias_or_name.lower()
        return any(
            c.name.lower() == name and not _inside(c, projection)
            for c in select.find_all(exp.Column)
        )

    def unread(sql: _Sql, select: Any) -> list[Any]:
        return [
            p
            for p in _projections(select)
            if not elsewhere(select, p)
            if not _referenced(root, child_files, p.alias_or_name, sql.children)
            and not re.search(rf"(?i)\b{re.escape(p.alias_or_name)}\b", sql.header)
        ]

    def drop_column(sql: _Sql, query: Any) -> str | None:
        select = _outer_select(query)
        if select is None or len(select.expressions) < 2:
            return None
        candidates = unread(sql, select)
        if not candidates:
            return None
        gone = candidates[-1]
        select.set("expressions", [p for p in select.expressions if p is not gone])
        return f"drops column {gone.alias_or_name}"

    def rename_column(sql: _Sql, query: Any) -> str | None:
        select = _outer_select(query)
        if select is None:
            return None
        candidates = unread(sql, select)
        if not candidates:
            return None
        old = candidates[0]
        new_name = f"{old.alias_or_name}_renamed"
        old.replace(exp.alias_(old.unalias().copy(), new_name))
        return f"renames column {old.alias_or_name} to {new_name}"

    def change_expression(sql: _Sql, query: Any) -> str | None:
        select = _outer_select(query)
        if select is None:
            return None
        for projection in _projections(select):
            inner = projection.unalias()
            if isinstance(inner, exp.Literal):
                continue
            name = projection.alias_or_name
            changed = exp.Coalesce(this=inner.copy(), expressions=[inner.copy()])
            projection.replace(exp.alias_(changed, name))
            return f"changes column {name}'s expression (COALESCE(x, x))"
        return None

    def change_filter(sql: _Sql, query: Any) -> str | None:
        select = _outer_select(query)
        if select is None or not (select.args.get("from") or select.args.get("from_")):
            return None
        column = next(
            (
                c
                for p in _projections(select)
                for c in p.find_all(exp.Column)
                if c.find_ancestor(exp.Window) is None and "sluice_mask" not in c.sql()
            ),
            None,
        )
        if column is None:
            return None
        condition = exp.Not(this=exp.Is(this=column.copy(), expression=exp.Null()))
        had = select.args.get("where") is not None
        select.where(condition, copy=False)
        return f"{'narrows' if had else 'adds'} the filter: {condition.sql(dialect=sql.dialect)}"

    def change_join(sql: _Sql, query: Any) -> str | None:
        for select in [query, *(c.this for c in query.find_all(exp.CTE))]:
            if not isinstance(select, exp.Select):
                continue
            for join in select.args.get("joins") or []:
                side = (join.side or "").upper()
                if join.kind and join.kind.upper() == "CROSS":
                    continue
                if side == "LEFT":
                    join.set("side", None)
                    join.set("kind", "INNER")
                    return "changes a LEFT JOIN to an INNER JOIN"
                if not side:
                    join.set("kind", None)
                    join.set("side", "LEFT")
                    return "changes an INNER JOIN to a LEFT JOIN"
        return None

    def cte_edit(sql: _Sql, query: Any) -> str | None:
        ctes = list(query.find_all(exp.CTE))
        for cte in ctes:
            select = cte.this
            if not isinstance(select, exp.Select) or not _projections(select):
                continue
            first = _projections(select)[0]
            alias = f"{first.alias_or_name}_cte_added"
            select.select(exp.alias_(first.unalias().copy(), alias), copy=False)
            return f"adds column {alias} to CTE {cte.alias}"
        return None

    edits: dict[str, list[Edit]] = {
        "add_column": query_edit("add_column", add_column),
        "drop_column": query_edit("drop_column", drop_column),
        "rename_column": query_edit("rename_column", rename_column),
        "change_expression": query_edit("change_expression", change_expression),
        "change_filter": query_edit("change_filter", change_filter),
        "change_join": query_edit("change_join", change_join),
        "cte_edit": query_edit("cte_edit", cte_edit),
    }
    # A new SELECT * child of a parent that gains a column.
    stars = []
    for edit in edits["add_column"]:
        parent = models[edit.model]
        schema = parent.name.split(".")[0]
        child = f"{schema}.{STAR_CHILD}"
        if child in models:
            continue
        text = f"MODEL (name {child}, kind FULL);\n\nSELECT * FROM {parent.name}\n"
        path = f"models/{STAR_CHILD}.sql"
        stars.append(
            Edit(
                "star_child",
                edit.model,
                f"{edit.what} of {edit.model}, read by a new model {child}: SELECT *",
                {**edit.before, path: text},
                {**edit.after, path: text},
            )
        )
    edits["star_child"] = stars
    edits["macro_edit"] = _macro_edits(root, texts, ranked)
    edits["seed_edit"] = _seed_edits(root, models, ranked)
    edits["kind_change"] = _kind_edits(root, models, texts, ranked)
    chosen: list[Edit] = []
    round_ = 0
    while len(chosen) < limit:
        added = False
        for kind in KINDS:
            options = edits.get(kind) or []
            if (
                round_ < len(options)
                and len(chosen) < limit
                and all(e.id != options[round_].id for e in chosen)
            ):
                chosen.append(options[round_])
                added = True
        if not added:
            break
        round_ += 1
    return chosen


def _macro_edits(
    root: Path, texts: Mapping[str, str], ranked: Callable[[list[str]], list[str]]
) -> list[Edit]:
    """A Python macro a model calls, its code changed (a statement added to its body)."""
    found: list[Edit] = []
    for path in sorted(root.glob("macros/**/*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(
            r"(?m)^def ([A-Za-z_][A-Za-z_0-9]*)\(.*?\).*?:[ \t]*\n", text, re.S
        ):
            name = match.group(1)
            callers = [n for n, t in texts.items() if re.search(rf"(?i)@{re.escape(name)}\s*\(", t)]
            if not callers:
                continue
            after, how = _macro_change(text, match.end())
            if after is None:
                continue
            relative = path.relative_to(root).as_posix()
            caller = ranked(callers)[0]
            found.append(
                Edit(
                    "macro_edit",
                    caller,
                    f"macro {name} ({relative}): {how}; {len(callers)} model(s) call it",
                    {relative: text},
                    {relative: after},
                )
            )
    return found


def _macro_change(text: str, at: int) -> tuple[str | None, str]:
    """The macro file with the function whose body starts at ``at`` changed: its first
    number (in its body, else a module constant) plus one, so what it returns changes;
    else a statement added to its body (its code changes, what it returns does not)."""
    body_end = re.search(r"(?m)^\S", text[at:])
    stop = at + body_end.start() if body_end else len(text)
    body = text[at:stop]
    doc = re.match(r"\s*(\"\"\"|\'\'\').*?\1[ \t]*\n", body, re.S)
    skip = doc.end() if doc else 0
    number = re.search(r"(?<![\w.])(\d+)(?![\w.])", body[skip:])
    if number is not None:
        where = at + skip + number.start(1)
        value = int(number.group(1))
        return (
            text[:where] + str(value + 1) + text[where + len(number.group(1)) :],
            f"a number in its body, {value} -> {value + 1}",
        )
    constant = re.search(r"(?m)^([A-Z_][A-Z_0-9]*)\s*=\s*(\d+)\s*$", text)
    if constant is not None and re.search(rf"\b{constant.group(1)}\b", body):
        where, value = constant.start(2), int(constant.group(2))
        return (
            text[:where] + str(value + 1) + text[constant.end(2) :],
            f"the constant {constant.group(1)} it reads, {value} -> {value + 1}",
        )
    indent = re.match(r"([ \t]+)", body[skip:] if skip else body)
    if indent is None:
        return None, ""
    where = at + skip
    return (
        text[:where] + f"{indent.group(1)}sluice_diff_edit = 1  # noqa\n" + text[where:],
        f"a statement added to its body ({SAME_OUTPUT})",
    )


def _seed_edits(
    root: Path, models: Mapping[str, Any], ranked: Callable[[list[str]], list[str]]
) -> list[Edit]:
    found = []
    for name in ranked([n for n, m in models.items() if m.kind.seed_path]):
        seed = Path(models[name].kind.seed_path)
        if seed.parts and seed.parts[0].lower() == "$root":
            path = root.joinpath(*seed.parts[1:])
        elif (root / seed).is_file():  # the loader's: relative to the project
            path = root / seed
        else:
            path = (root / _relative(root, models[name].path)).parent / seed
        path = path.resolve()
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.rstrip("\n").splitlines()
        if len(lines) < 2:
            continue
        relative = path.relative_to(root.resolve()).as_posix()
        after = "\n".join([*lines, lines[-1]]) + "\n"
        found.append(
            Edit("seed_edit", name, f"{relative}: its last row twice", {}, {relative: after})
        )
    return found


_KIND = re.compile(r"(?i)\bkind\s+([A-Z_0-9]+)")


def _kind_edits(
    root: Path,
    models: Mapping[str, Any],
    texts: Mapping[str, str],
    ranked: Callable[[list[str]], list[str]],
) -> list[Edit]:
    found = []
    for name in ranked(list(models)):
        model, text = models[name], texts.get(name)
        if not text or model.python_code is not None or not model.path.endswith(".sql"):
            continue
        kind = str(model.kind.name)
        if kind in ("SEED", "EXTERNAL") or kind.startswith("SCD"):
            continue
        if re.search(r"(?i)@\{?(start|end|execution)_", text):
            continue  # SQLMesh refuses an interval's macros in a FULL or VIEW model
        end = _model_block_end(text)
        match = _KIND.search(text, 0, end or 0)
        if match is None:
            continue
        stop = match.end()
        rest = text[stop:]
        args = re.match(r"\s*\(", rest)
        if args:  # the kind's own arguments go with it
            depth, i = 0, args.end() - 1
            while i < len(rest):
                depth += {"(": 1, ")": -1}.get(rest[i], 0)
                if depth == 0:
                    break
                i += 1
            stop += i + 1
        new = "VIEW" if kind == "FULL" else "FULL"
        after = text[: match.start()] + f"kind {new}" + text[stop:]
        after = re.sub(r"(?im)^\s*forward_only\s+true\s*,?\s*\n", "", after)
        found.append(
            Edit(
                "kind_change",
                name,
                f"kind {kind} -> {new}",
                {},
                {_relative(root, model.path): after},
            )
        )
    return found


# --- the two sides -----------------------------------------------------------------------------


def write_pair(source: Path, edit: Edit, dest: Path) -> tuple[Path, Path]:
    """Sluice's before and after copies of ``source`` for ``edit``, under ``dest``."""
    pair = []
    for side, files in (("before", edit.before), ("after", {**edit.before, **edit.after})):
        folder = dest / side
        sqlmesh_compat.sluice_copy(source, folder)
        for relative, text in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text, encoding="utf-8")
        pair.append(folder)
    return pair[0], pair[1]


def sluice_changes(before: Path, after: Path) -> dict[str, Any]:
    """Sluice's plan of ``after`` against a prod planned from ``before``: model -> facts."""
    from sluice.core.errors import SluiceError
    from sluice.core.model.loader import load_project
    from sluice.core.plan.build import PlanRequest, build_plan
    from sluice.core.snapshot.fingerprint import fingerprint_models
    from sluice.core.timeutil import to_ms

    end = to_ms(PLAN_END)

    def plan(project: Any, base: Any, env: str) -> Any:
        return build_plan(
            PlanRequest(
                environment=env,
                models=project.models,
                fingerprints=fingerprint_models(project.models, project.audits),
                base={s.name: s for s in base.snapshots} if base else {},
                base_plan_id=None,
                start=to_ms("2024-01-01") if base else None,
                end=end,
                execution_time=end,
            )
        )

    try:
        prod = plan(load_project(before, use_cache=False), None, "prod")
    except Exception as exc:
        return {"models": {}, "error": f"before: {type(exc).__name__}: {exc}"[:600]}
    try:
        project = load_project(after, use_cache=False)
        result = plan(project, prod, "pr_1")
    except SluiceError as exc:
        return {"models": {}, "refused": str(exc)[:600], "error": None}
    except Exception as exc:
        return {"models": {}, "error": f"{type(exc).__name__}: {exc}"[:600]}
    models: dict[str, Any] = {}
    for change in result.directly_modified:
        models[change.name] = {
            "direct": True,
            "category": change.category.value,
            "rebuilt": change.rebuilds,
            "reshaped_by": list(change.reshaped_by),
        }
    for change in result.indirectly_modified:
        models[change.name] = {
            "direct": False,
            "category": change.category.value,
            "rebuilt": change.rebuilds,
        }
    by_name = {s.name: s for s in result.snapshots}
    olds = {s.name: s for s in prod.snapshots}
    for name in result.unaffected:
        models[name] = {
            "direct": False,
            "category": "non-breaking",
            "rebuilt": by_name[name].version != olds[name].version,
            "unaffected": True,
        }
    for name in result.metadata_only:
        models[name] = {"direct": True, "category": "metadata", "rebuilt": False}
    for name in result.added:
        models[name] = {"direct": True, "category": "added", "rebuilt": True}
    for name in result.removed:
        models[name] = {"direct": True, "category": "removed", "rebuilt": False}
    kinds = {n: str(m.kind.name) for n, m in project.models.items()}
    for name, facts in models.items():
        facts["kind"] = kinds.get(name, "")
    return {"models": models, "warnings": list(result.warnings), "error": None, "refused": None}


class SQLMeshWorker:
    """One SQLMesh process (``sqlmesh_categories.py -``, in its virtualenv) categorising
    the (id, before, after) pairs of SQLMesh copies written to it, one JSON line each, as
    they come: SQLMesh is imported once, and works while Sluice plans the next project."""

    def __init__(self, python: Path, work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.log = work / "sqlmesh.log"
        self.ids: list[str] = []
        self.proc = subprocess.Popen(
            [str(python), str(CATEGORIES), "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.log, "w", encoding="utf-8"),  # noqa: SIM115
            text=True,
            cwd=work,
            # One process: SQLMesh's loading pool of forks breaks after a few contexts.
            env={**os.environ, "MAX_FORK_WORKERS": "1"},
        )

    def send(self, pair: tuple[str, Path, Path]) -> None:
        assert self.proc.stdin is not None
        ident, before, after = pair
        self.ids.append(ident)
        self.proc.stdin.write(
            json.dumps({"id": ident, "before": str(before), "after": str(after)}) + "\n"
        )
        self.proc.stdin.flush()

    def finish(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(timeout=1800)
        found = {}
        for line in out.splitlines():
            if line.startswith("{"):
                answer = json.loads(line)
                found[answer["id"]] = answer
        if len(found) < len(self.ids):
            tail = self.log.read_text(encoding="utf-8").strip().splitlines() or ["no output"]
            for ident in self.ids:
                found.setdefault(
                    ident, {"models": {}, "error": f"sqlmesh_categories.py failed: {tail[-1]}"}
                )
        return found


# --- the comparison (pure) --------------------------------------------------------------------

LEVEL = {"unchanged": 0, "metadata": 1, "forward-only": 2, "non-breaking": 3, "breaking": 4}


def sqlmesh_level(facts: Mapping[str, Any] | None) -> str:
    """SQLMesh's category of a model in Sluice's words."""
    if not facts:
        return "unchanged"
    category = facts.get("category")
    if category in ("ADDED", "REMOVED"):
        return category.lower()
    if category == "METADATA":
        return "metadata"
    if facts.get("forward_only"):
        return "forward-only"
    if category in ("BREAKING", "INDIRECT_BREAKING"):
        return "breaking"
    if category in ("NON_BREAKING", "INDIRECT_NON_BREAKING"):
        return "non-breaking"
    return "breaking"  # uncategorised: SQLMesh would ask, full mode says breaking


def sluice_level(facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return "unchanged"
    return str(facts["category"])


@dataclass
class Difference:
    model: str
    verdict: str  # "stricter", "less safe", "same effect"
    sqlmesh: str
    sluice: str
    reason: str


@dataclass
class Outcome:
    """One edit's comparison."""

    project: str
    edit: Edit
    differences: list[Difference] = field(default_factory=list)
    error: str | None = None
    models: int = 0  # models either side changed

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        verdicts = {d.verdict for d in self.differences}
        if "less safe" in verdicts:
            return "less safe"
        if "stricter" in verdicts:
            return "stricter"
        return "agree"


def _describe(level: str, facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return level
    where = "direct" if facts.get("direct") else "indirect"
    if facts.get("unaffected"):
        where = "unaffected"
    built = "rebuilt" if facts.get("rebuilt") else "kept"
    return f"{where} {level}, {built}"


def classify(
    name: str,
    theirs: Mapping[str, Any] | None,
    ours: Mapping[str, Any] | None,
    kind: str = "",
    edit: str = "",
) -> Difference | None:
    """How Sluice's plan of one model differs from SQLMesh's (None: it does not)."""
    a, b = sqlmesh_level(theirs), sluice_level(ours)
    a_built = bool(theirs and theirs.get("rebuilt"))
    b_built = bool(ours and ours.get("rebuilt"))
    a_direct = bool(theirs and theirs.get("direct"))
    b_direct = bool(ours and ours.get("direct"))
    said = (_describe(a, theirs), _describe(b, ours))
    if a in ("added", "removed") or b in ("added", "removed"):
        if a == b:
            return None
        return Difference(name, "less safe", *said, "one side adds or removes the model")
    view = kind == "VIEW"
    less, strict = [], []
    if a_built and not b_built:
        less.append("Sluice keeps the table SQLMesh rebuilds")
    if b_built and not a_built:
        strict.append(
            "a VIEW is re-pointed whenever a parent moves (a new version holds no data)"
            if view
            else _stricter_rebuild(a, b, ours, edit)
        )
    if LEVEL.get(a, 4) > LEVEL.get(b, 4):
        if not (a == "non-breaking" and b == "forward-only" and not a_built):
            less.append(f"Sluice says {b} where SQLMesh says {a}")
    elif LEVEL.get(b, 4) > LEVEL.get(a, 4) and not strict:
        strict.append(_stricter_category(a, b, ours, view, edit))
    if less:
        return Difference(name, "less safe", *said, "; ".join(less))
    if strict:
        return Difference(name, "stricter", *said, "; ".join(strict))
    if a_direct != b_direct or a != b:
        return Difference(
            name, "same effect", *said, "the same table and category, labelled otherwise"
        )
    return None


CTE_REASON = (
    "a column added inside a CTE and not passed out: Sluice proves a change non-breaking"
    " only for projections added to the outer SELECT (or passed out by a SELECT * of the"
    " CTE), so it calls it breaking and rebuilds what reads the model; SQLMesh compares"
    " every SELECT of the query"
)


def _stricter_rebuild(a: str, b: str, ours: Mapping[str, Any] | None, edit: str = "") -> str:
    if edit == "cte_edit" and b == "breaking":
        return CTE_REASON
    if ours and ours.get("reshaped_by"):
        return (
            "its query's star takes a changed parent's columns: rebuilt so its columns"
            " are its query's (narrowing.py, rule 1)"
        )
    if b == "breaking":
        return "Sluice calls the change breaking (a change it cannot prove keeps the rows)"
    return "Sluice rebuilds a table SQLMesh keeps"


def _stricter_category(
    a: str, b: str, ours: Mapping[str, Any] | None, view: bool, edit: str = ""
) -> str:
    if edit == "cte_edit" and b == "breaking":
        return CTE_REASON
    if a == "unchanged":
        return f"Sluice sees a change ({b}) where SQLMesh sees none"
    if view and b == "breaking" and not (ours or {}).get("direct"):
        return "a VIEW downstream of a changed parent is re-pointed and reported breaking"
    return f"Sluice says {b} where SQLMesh says {a} (it cannot prove the rows are kept)"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return re.sub(r"/\S*/(sluice|sqlmesh)/(before|after)/", "", line)[:300]


def _refusal_reason(message: str) -> str:
    if "forward-only" in message and "drops column" in message:
        return (
            "a forward-only change that drops a column is refused (on_destructive_change"
            " error); SQLMesh checks only when it knows every column's type, and plans it"
        )
    if "does not have" in message or "unknown column" in message.lower():
        return (
            "the edited query names a column its sources lack: Sluice refuses it at plan"
            " time, SQLMesh plans it and the query fails in the engine"
        )
    return "Sluice refuses the plan at plan time, SQLMesh plans it"


def compare_edit(
    project: str, edit: Edit, theirs: Mapping[str, Any], ours: Mapping[str, Any]
) -> Outcome:
    outcome = Outcome(project, edit)
    if theirs.get("error") or ours.get("error"):
        parts = []
        if theirs.get("error"):
            parts.append(f"SQLMesh: {theirs['error']}")
        if ours.get("error"):
            parts.append(f"Sluice: {ours['error']}")
        outcome.error = "; ".join(parts)
        return outcome
    if theirs.get("refused") or ours.get("refused"):
        warned = any("destructive" in w for w in ours.get("warnings", []))
        if theirs.get("refused") and not ours.get("refused") and not warned:
            outcome.differences.append(
                Difference(
                    edit.model,
                    "less safe",
                    f"refused: {theirs['refused'][:200]}",
                    "planned",
                    "SQLMesh refuses the plan; Sluice plans it without a warning",
                )
            )
        elif ours.get("refused") and not theirs.get("refused"):
            outcome.differences.append(
                Difference(
                    edit.model,
                    "stricter",
                    "planned",
                    f"refused: {_first_line(ours['refused'])}",
                    _refusal_reason(ours["refused"]),
                )
            )
        return outcome
    a, b = theirs.get("models") or {}, ours.get("models") or {}
    outcome.models = len(set(a) | set(b))
    for name in sorted(set(a) | set(b)):
        kind = (b.get(name) or a.get(name) or {}).get("kind", "")
        difference = classify(name, a.get(name), b.get(name), kind, edit.kind)
        if (
            difference is not None
            and edit.kind == "macro_edit"
            and SAME_OUTPUT in edit.what
            and difference.sluice == "unchanged"
        ):
            difference.verdict = "SQLMesh stricter"
            difference.reason = (
                "the macro's code changed, not what it returns: Sluice expands Python macros"
                " when it loads the project, so the query it runs and fingerprints is the"
                " same; SQLMesh versions the macro's code"
            )
        if (
            difference is not None
            and difference.verdict == "stricter"
            and name == edit.model
            and DISTINCT in edit.what
        ):
            difference.reason = (
                "a column added under SELECT DISTINCT can split rows that were one: Sluice"
                " calls it breaking (categorize.py); SQLMesh calls it non-breaking, and"
                " keeps what reads the model though its rows may have changed"
            )
        if difference is not None:
            outcome.differences.append(difference)
    return outcome


# --- the report ---------------------------------------------------------------------------------


def table(outcomes: Sequence[Outcome], projects: Sequence[str]) -> list[str]:
    lines = [
        "| project | edits tried | agree | Sluice stricter | Sluice less safe | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    totals = [0] * 5
    for project in projects:
        mine = [o for o in outcomes if o.project == project]
        counts = [
            len(mine),
            *(
                sum(1 for o in mine if o.verdict == v)
                for v in ("agree", "stricter", "less safe", "error")
            ),
        ]
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        cells = [str(c) for c in counts]
        if counts[3]:
            cells[3] = f"**{counts[3]}**"
        lines.append(f"| {project} | {' | '.join(cells)} |")
    lines.append(f"| **all** | {' | '.join(str(t) for t in totals)} |")
    return lines


def report(
    outcomes: Sequence[Outcome], projects: Sequence[str], command: str, seconds: float
) -> str:
    lines = [
        "# SQLMesh as the oracle of the plan",
        "",
        f"Written by `{command}` (issue 42, point 6) in {seconds:.0f} s. Each project of"
        " the repository and of `../shared/compat/` gets edits generated from its own models"
        " (`bench/sqlmesh_diff.py`'s `generate_edits`, seeded): add, drop and rename a column,"
        " change an expression, a filter, a join's kind, add a column to a CTE, a new"
        " `SELECT *` child of a parent that gains a column, a Python macro a model calls,"
        " a seed's rows, a model's kind. Sluice plans each edited copy against a prod"
        " built from the unedited one (`build_plan`, as `sluice plan`); SQLMesh 0.236.4, in"
        " a virtualenv of its own, records the unedited copy as prod and builds its plan"
        " of the edited one with automatic categorisation (`full` for every kind of model)."
        " Per model, the category (breaking, non-breaking, forward-only, metadata,"
        " unchanged) and whether a new table is built are compared. At most 12 edits a"
        " project, fewer for a project of more than 30 models (`LARGE`: SQLMesh parses the"
        " whole project twice per edit); the SQLMesh copies are changed as"
        " `sqlmesh_compat.py` changes them ([compatibility.md](compatibility.md)), and"
        " the folders of their DuckDB files are made. A sample of the edits is applied by"
        " both on the same Spark by `bench/sqlmesh_apply_sample.py`: its section, the last"
        " one, compares the environments' schemas and row counts (kept when this report"
        " is written again).",
        "",
        "An edit *agrees* when every model is planned alike (or only labelled otherwise:"
        " direct / indirect, with the same table and category); *Sluice stricter* when"
        " Sluice rebuilds or calls breaking where SQLMesh does not (each with its reason"
        " below); *Sluice less safe* when Sluice keeps a table SQLMesh rebuilds, calls"
        " non-breaking what SQLMesh calls breaking, or plans without a warning what SQLMesh"
        " refuses: a bug. *errors*: an edit one side could not load or plan (listed).",
        "",
        *table(outcomes, projects),
        "",
    ]
    stricter = [o for o in outcomes if o.verdict == "stricter"]
    less = [o for o in outcomes if o.verdict == "less safe"]
    errors = [o for o in outcomes if o.verdict == "error"]
    reasons: dict[str, int] = {}
    for o in stricter:
        for d in o.differences:
            if d.verdict == "stricter":
                reasons[d.reason] = reasons.get(d.reason, 0) + 1
    if reasons:
        lines += ["## Why Sluice is stricter", ""]
        lines += ["| reason | models |", "| --- | ---: |"]
        lines += [f"| {r} | {n} |" for r, n in sorted(reasons.items(), key=lambda x: -x[1])]
        lines.append("")
    for title, group, verdicts in (
        ("Sluice less safe", less, ("less safe",)),
        ("Sluice stricter, model by model", stricter, ("stricter", "same effect")),
    ):
        lines += [f"## {title}", ""]
        if not group:
            lines += ["None.", ""]
            continue
        for o in group:
            lines.append(f"- {o.project}, {o.edit.kind} on {o.edit.model}: {o.edit.what}")
            for d in o.differences:
                if d.verdict in verdicts:
                    lines.append(
                        f"  - {d.model}: SQLMesh {d.sqlmesh}; Sluice {d.sluice} ({d.verdict}: {d.reason})"
                    )
        lines.append("")
    same = [(o, d) for o in outcomes if o.verdict == "agree" for d in o.differences]
    if same:
        lines += [
            "## Agreeing edits with a difference that changes nothing Sluice builds",
            "",
            "*same effect*: the same table kept or rebuilt and the same category, labelled"
            " directly or indirectly modified otherwise; *SQLMesh stricter*: SQLMesh"
            " rebuilds what provably cannot change (the reason is given).",
            "",
        ]
        for o, d in same:
            lines.append(
                f"- {o.project}, {o.edit.kind} on {o.edit.model}: {d.model}: SQLMesh"
                f" {d.sqlmesh}; Sluice {d.sluice} ({d.verdict}: {d.reason})"
            )
        lines.append("")
    lines += ["## Errors", ""]
    if not errors:
        lines += ["None.", ""]
    grouped: dict[tuple[str, str], list[Outcome]] = {}
    for o in errors:
        text = re.sub(
            r"(/tmp|/var)/\S*?/(edit\d+/)?(sluice|sqlmesh|source)/((before|after)/)?",
            "",
            o.error or "",
        )
        grouped.setdefault((o.project, sqlmesh_compat._cell(text, 300)), []).append(o)
    for (project, text), group in grouped.items():
        edits = ", ".join(f"{o.edit.kind} on {o.edit.model}" for o in group)
        lines.append(f"- {project} ({len(group)}: {edits}): {text}")
    lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --- the command --------------------------------------------------------------------------------


@dataclass
class Prepared:
    """One project's edits, written, with Sluice's plans of them; SQLMesh's pairs to run."""

    name: str
    edits: list[Edit]
    ours: dict[str, Any]
    pairs: list[tuple[str, Path, Path]]
    error: str | None = None


def prepare(name: str, folder: Path, work: Path, *, seed: int, limit: int) -> Prepared:
    """Generate one project's edits, write both sides' copies, plan each with Sluice."""
    base = work / "source"
    sqlmesh_compat.sluice_copy(folder, base)  # the shared projects are read-only: a copy
    try:
        edits = generate_edits(base, seed=seed, limit=limit)
    except Exception as exc:
        return Prepared(name, [], {}, [], f"Sluice: {type(exc).__name__}: {exc}"[:400])
    pairs, ours = [], {}
    for index, edit in enumerate(edits):
        folder_ = work / f"edit{index}"
        before, after = write_pair(base, edit, folder_ / "sluice")
        ours[edit.id] = sluice_changes(before, after)
        sm_before, sm_after = folder_ / "sqlmesh" / "before", folder_ / "sqlmesh" / "after"
        for sluice_side, sqlmesh_side in ((before, sm_before), (after, sm_after)):
            sqlmesh_compat.sqlmesh_copy(sluice_side, sqlmesh_side)
            _database_folders(sqlmesh_side)
            for config in sqlmesh_compat.CONFIGS:  # rewritten: one mtime for SQLMesh's cache
                if (sqlmesh_side / config).is_file():
                    os.utime(sqlmesh_side / config, (1_700_000_000, 1_700_000_000))
        pairs.append((f"{name}|{edit.id}", sm_before, sm_after))
    return Prepared(name, edits, ours, pairs)


def _database_folders(project: Path) -> None:
    """Make the folders of the DuckDB files a SQLMesh config names (``db/x.db``): the
    copies leave out what the project's own runs made; SQLMesh opens them, relative to
    the pair's folder, even to plan."""
    import yaml

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif (
            isinstance(node, str)
            and (key in ("database", "path") or node.endswith((".db", ".duckdb")))
            and "/" in node
            and not node.startswith((":", "md:"))
            and not Path(node).is_absolute()
        ):
            (project / node).parent.mkdir(parents=True, exist_ok=True)

    for name in ("config.yaml", "config.yml"):
        if (project / name).is_file():
            with contextlib.suppress(yaml.YAMLError):
                walk(yaml.safe_load((project / name).read_text(encoding="utf-8")))


def outcomes_of(prepared: Prepared, theirs: Mapping[str, Any]) -> list[Outcome]:
    if prepared.error:
        return [Outcome(prepared.name, Edit("load", "-", "the project"), error=prepared.error)]
    return [
        compare_edit(
            prepared.name,
            e,
            theirs.get(f"{prepared.name}|{e.id}", {"error": "no answer"}),
            prepared.ours[e.id],
        )
        for e in prepared.edits
    ]


def run_projects(
    projects: Sequence[tuple[str, Path]],
    work: Path,
    python: Path,
    *,
    seed: int,
    limit: int,
    jobs: int = 1,
) -> list[Outcome]:
    """Every edit of every project, both sides: Sluice's here, SQLMesh's in ``jobs``
    processes fed each project's pairs as soon as they are written."""
    workers = [SQLMeshWorker(python, work / f"sqlmesh{i}") for i in range(max(1, jobs))]
    prepared: list[Prepared] = []
    for name, folder in projects:
        print(f"{name} ...", file=sys.stderr, flush=True)
        one = prepare(name, folder, work / name.replace("/", "__"), seed=seed, limit=limit)
        prepared.append(one)
        for pair in one.pairs:
            min(workers, key=lambda w: len(w.ids)).send(pair)
    theirs: dict[str, Any] = {}
    for worker in workers:
        theirs.update(worker.finish())
    return [o for one in prepared for o in outcomes_of(one, theirs)]


def run_project(
    name: str, folder: Path, work: Path, python: Path, *, seed: int, limit: int
) -> list[Outcome]:
    """Every edit of one project, both sides."""
    return run_projects([(name, folder)], work, python, seed=seed, limit=limit, jobs=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlmesh-python", type=Path, help="the python of a SQLMesh virtualenv")
    parser.add_argument("--only", action="append", help="these projects only (as listed)")
    parser.add_argument("--edits", type=int, default=12, help="at most this many per project")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--jobs", type=int, default=2, help="SQLMesh processes at once")
    parser.add_argument("--write", type=Path, help="write the report there (else print it)")
    parser.add_argument("--json", type=Path, help="also write every outcome as JSON")
    args = parser.parse_args(argv)
    import sqlmesh_spark

    requested = args.sqlmesh_python.absolute().parent.parent if args.sqlmesh_python else None
    venv = sqlmesh_spark.side_venv(sqlmesh_compat.CACHE / "sqlmesh-0.236.4", requested)
    python = venv / "bin" / "python"
    chosen = [(n, f) for n, f in sqlmesh_compat.projects() if not args.only or n in args.only]
    began = time.perf_counter()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="sluice-diff-") as tmp:
        outcomes = run_projects(
            chosen, Path(tmp), python, seed=args.seed, limit=args.edits, jobs=args.jobs
        )
    seconds = time.perf_counter() - began
    command = ".venv/bin/python bench/sqlmesh_diff.py" + (
        f" --write {args.write}" if args.write else ""
    )
    if args.only:
        command += "".join(f" --only {o}" for o in args.only)
    text = report(outcomes, [n for n, _ in chosen], command, seconds)
    print("\n".join(table(outcomes, [n for n, _ in chosen])))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "project": o.project,
                        "edit": o.edit.id,
                        "what": o.edit.what,
                        "verdict": o.verdict,
                        "error": o.error,
                        "differences": [d.__dict__ for d in o.differences],
                    }
                    for o in outcomes
                ],
                indent=1,
            ),
            encoding="utf-8",
        )
    if args.write:
        import sqlmesh_apply_sample

        old = args.write.read_text(encoding="utf-8") if args.write.exists() else ""
        applied = old.partition(f"\n{sqlmesh_apply_sample.SECTION}\n")
        if applied[1]:  # the sample applied on Spark is written by its own script
            text = f"{text.rstrip()}\n{applied[1]}{applied[2]}"
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    less = sum(1 for o in outcomes if o.verdict == "less safe")
    return 1 if less else 0


if __name__ == "__main__":
    raise SystemExit(main())
