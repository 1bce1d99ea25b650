"""Unified diffs of models for reviewers (pure)."""

from __future__ import annotations

import difflib

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


def unified_diff(old: Model, new: Model) -> str:
    """A unified diff from ``old`` to ``new`` (empty when they read the same)."""
    diff = difflib.unified_diff(
        model_text(old), model_text(new), f"{old.name} (before)", f"{new.name} (after)", lineterm=""
    )
    return "\n".join(diff)
