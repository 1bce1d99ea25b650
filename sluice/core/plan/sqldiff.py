"""Unified diffs of models for reviewers (pure)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import sqlglot

from sluice.core.model import macros
from sluice.core.model.definition import Model


def pretty_sql(model: Model) -> str:
    """The model's query as formatted Spark SQL, macros shown as the user wrote them."""
    if model.query_sql is None:
        return ""
    pretty = sqlglot.parse_one(model.query_sql, read="spark").sql("spark", pretty=True)
    return macros.display(pretty)


def model_text(model: Model) -> list[str]:
    """The lines a reviewer compares: data-relevant header lines, then the query."""
    lines = [f"-- kind {model.kind.name.value}"]
    if model.kind.time_column:
        lines.append(f"-- time_column {model.kind.time_column}")
    if model.kind.unique_key:
        lines.append(f"-- unique_key {', '.join(model.kind.unique_key)}")
    if model.columns and model.query_sql is None:
        lines.extend(f"-- column {name} {kind}" for name, kind in model.columns)
    if model.seed_hash:
        lines.append(f"-- seed {model.kind.seed_path} sha256 {model.seed_hash[:12]}")
    if model.stamp:
        lines.append(f"-- stamp {model.stamp}")
    if model.python_code is not None:
        return lines + model.python_code.splitlines()
    return lines + pretty_sql(model).splitlines()


Columns = tuple[str, ...] | None


def unified_diff(
    old: Model, new: Model, parents: Sequence[tuple[str, Columns, Columns]] = ()
) -> str:
    """A unified diff from ``old`` to ``new`` (empty when they read the same).

    ``parents``: ``(parent, columns before, columns after)`` for each parent whose change
    reshapes the model (its stars take the parent's columns): one line each, so the diff
    shows what its query now expands to although its text is the same.

    >>> from sluice.core.model.definition import Kind, KindName, Model
    >>> star = Model("s.c", Kind(KindName.FULL), query_sql="SELECT * FROM s.p")
    >>> print(unified_diff(star, star, [("s.p", ("id",), ("id", "extra"))]))
    --- s.c (before)
    +++ s.c (after)
    @@ -1,5 +1,5 @@
     -- kind FULL
    --- columns of s.p: id
    +-- columns of s.p: id, extra
     SELECT
       *
     FROM s.p
    """
    before = _with_columns(model_text(old), [(p, c) for p, c, _ in parents])
    after = _with_columns(model_text(new), [(p, c) for p, _, c in parents])
    diff = difflib.unified_diff(
        before, after, f"{old.name} (before)", f"{new.name} (after)", lineterm=""
    )
    return "\n".join(diff)


def _with_columns(lines: list[str], columns: Sequence[tuple[str, Columns]]) -> list[str]:
    """The header lines, then one line of columns per parent, then the query."""
    header = [line for line in lines if line.startswith("-- ")]
    rest = lines[len(header) :]
    shown = [
        f"-- columns of {parent}: {', '.join(names) if names is not None else '(not known)'}"
        for parent, names in columns
    ]
    return header + shown + rest
