"""Is a change breaking? (pure)

A change is non-breaking only when the new query is the old one plus extra projections
that cannot change how many rows there are; everything else, including whatever cannot be
decided, is breaking.
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.definition import Model
from sluice.core.model.pycode.models import all_columns_added
from sluice.core.snapshot.fingerprint import data_inputs

# Projections that change the number of rows when added: an aggregate turns a plain SELECT
# into one row (but not a query already grouped); generators (EXPLODE...) multiply rows.


def categorize_direct(old: Model, new: Model) -> bool:
    """True when changing ``old`` into ``new`` is non-breaking."""
    if old.python_code is not None or new.python_code is not None:
        return _python_adds_columns(old, new)
    old_inputs, new_inputs = data_inputs(old), data_inputs(new)
    query_index = 6  # data_inputs()[6] is the query; all else must be equal
    if old_inputs[:query_index] + old_inputs[query_index + 1 :] != (
        new_inputs[:query_index] + new_inputs[query_index + 1 :]
    ):
        return False
    if old.query is None or new.query is None:
        return False
    return only_adds_projections(old.query, new.query)


def _python_adds_columns(old: Model, new: Model) -> bool:
    """A Python model's change is non-breaking only when it adds declared columns and
    changes nothing else about the table (its code may change: it must, to fill them)."""
    if old.python_code is None or new.python_code is None:
        return False

    def rest(model: Model) -> list[object]:
        inputs = data_inputs(model)  # [..., query (6), columns (7), ..., {present} (11)]
        present = dict(inputs[11]) if len(inputs) > 11 else {}
        present.pop("python", None)
        return [*inputs[:7], *inputs[8:11], present]

    return rest(old) == rest(new) and all_columns_added(dict(old.columns), dict(new.columns))


def only_adds_projections(old: exp.Expr, new: exp.Expr) -> bool:
    """Whether ``new`` equals ``old`` with projections appended or inserted."""
    if not isinstance(old, exp.Select) or not isinstance(new, exp.Select):
        return False
    if new.args.get("distinct") or any(is_star(p) for p in new.expressions):
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
    aggregated = bool(old.args.get("group")) or any(_aggregates(p) for p in old.expressions)
    if any(_generates(p) or (_aggregates(p) and not aggregated) for p in added):
        return False
    names = {p.alias_or_name for p in old.expressions}
    if any(p.alias_or_name in names for p in added):
        return False
    stripped = new.copy()
    stripped.set("expressions", [stripped.expressions[i] for i in kept])
    return stripped.sql("spark") == old.sql("spark")


def is_star(projection: exp.Expr) -> bool:
    """Whether a projection is ``*`` or ``t.*`` (``COUNT(*)`` is not)."""
    return isinstance(projection, exp.Star) or (
        isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
    )


def _aggregates(projection: exp.Expr) -> bool:
    # An aggregate inside a window function (SUM(x) OVER (...)) keeps the row count.
    return any(node.find_ancestor(exp.Window) is None for node in projection.find_all(exp.AggFunc))


def _generates(projection: exp.Expr) -> bool:
    return projection.find(exp.Explode, exp.Posexplode, exp.Unnest, exp.Inline) is not None
