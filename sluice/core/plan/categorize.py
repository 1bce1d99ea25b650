"""Is a change breaking? (pure)

A change is non-breaking only when the new query is the old one plus extra projections
that cannot change how many rows there are; everything else, including whatever cannot be
decided, is breaking.
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.definition import Model
from sluice.core.snapshot.fingerprint import data_inputs

# Projections that change the number of rows when added: aggregates turn a plain SELECT
# into one row; generators (EXPLODE and friends) multiply rows.
_ROW_CHANGING = (exp.AggFunc, exp.Explode, exp.Posexplode, exp.Unnest, exp.Inline)


def categorize_direct(old: Model, new: Model) -> bool:
    """True when changing ``old`` into ``new`` is non-breaking."""
    old_inputs, new_inputs = data_inputs(old), data_inputs(new)
    query_index = 6  # data_inputs()[6] is the query; all else must be equal
    if old_inputs[:query_index] + old_inputs[query_index + 1 :] != (
        new_inputs[:query_index] + new_inputs[query_index + 1 :]
    ):
        return False
    if old.query is None or new.query is None:
        return False
    return only_adds_projections(old.query, new.query)


def only_adds_projections(old: exp.Expr, new: exp.Expr) -> bool:
    """Whether ``new`` equals ``old`` with projections appended or inserted."""
    if not isinstance(old, exp.Select) or not isinstance(new, exp.Select):
        return False
    if new.args.get("distinct") or any(p.find(exp.Star) for p in new.expressions):
        return False
    old_sqls = [p.sql("spark") for p in old.expressions]
    new_projections = list(new.expressions)
    new_sqls = [p.sql("spark") for p in new_projections]
    if len(new_sqls) <= len(old_sqls):
        return False
    # Old projections must appear in the same order within the new ones.
    position = 0
    kept: list[int] = []
    for index, sql in enumerate(new_sqls):
        if position < len(old_sqls) and sql == old_sqls[position]:
            kept.append(index)
            position += 1
    if position != len(old_sqls):
        return False
    added = [p for i, p in enumerate(new_projections) if i not in kept]
    if any(_changes_rows(p) for p in added):
        return False
    names = {p.alias_or_name for p in old.expressions}
    if any(p.alias_or_name in names for p in added):
        return False
    stripped = new.copy()
    stripped.set("expressions", [stripped.expressions[i] for i in kept])
    return stripped.sql("spark") == old.sql("spark")


def _changes_rows(projection: exp.Expr) -> bool:
    # An aggregate inside a window function (SUM(x) OVER (...)) keeps the row count.
    for node in projection.find_all(*_ROW_CHANGING):
        if isinstance(node, exp.AggFunc) and node.find_ancestor(exp.Window) is not None:
            continue
        return True
    return False
