"""Destructive changes: a forward-only change that drops or retypes a column of a table
that keeps its data (pure).

A forward-only change writes its new rows into the existing table, so a column it no
longer produces, or produces with another type, is lost or broken for every row already
there. ``on_destructive_change`` (SQLMesh's property, on the model or in
``model_defaults``) decides: ``error`` (the default) stops the plan naming the columns and
the ways forward, ``warn`` plans it with a warning, ``allow`` plans it silently.

Columns are the query's output names, every star expanded from the parents' columns as
the plan resolved them (:mod:`sluice.core.plan.outputs`: a ``SELECT *`` over a CTE or a
subquery that names its columns, or over a parent whose columns are known), and the
declared ``columns`` (their types); where neither tells (a star over a table whose
columns nobody declares), nothing is claimed. Types not declared are inferred as SQLMesh
infers them (:mod:`sluice.core.plan.column_types`, the old query against the old parents,
the new against the new): a column whose inferred type changes is retyped too, named as
inferred. Inferred types only add findings, never take one away (SQLMesh compares them
only when every type of both is known; a column either side cannot type is left to the
declared types and the names).

>>> # MODEL (name shop.orders, kind INCREMENTAL_BY_TIME_RANGE (time_column ds,
>>> #   forward_only true));  -- and the new query no longer selects `discount`
>>> # -> error: "forward-only change to shop.orders drops column discount of its table"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from sluice.core.errors import PlanError
from sluice.core.model.definition import Model
from sluice.core.plan.column_types import Typed
from sluice.core.plan.outputs import is_star, query_columns
from sluice.core.snapshot.fingerprint import Fingerprint
from sluice.core.snapshot.snapshot import Snapshot


def destructive_columns(
    old: Model,
    new: Model,
    old_output: Sequence[str] | None = None,
    new_output: Sequence[str] | None = None,
    old_types: Typed | None = None,
    new_types: Typed | None = None,
) -> list[str]:
    """``"drops column x"`` / ``"changes column y from INT to STRING"`` for each column of
    ``old`` that ``new`` loses or retypes; ``old_output`` and ``new_output`` are their
    output columns as resolved (None: from their queries alone), ``old_types`` and
    ``new_types`` their columns' types as inferred (None: not known)."""
    before, after = dict(old.columns), dict(new.columns)
    old_names = list(old_output) if old_output is not None else _output_names(old)
    new_names = list(new_output) if new_output is not None else _output_names(new)
    if old_names is None or new_names is None:  # a star: compare the declared columns
        old_names, new_names = list(before), list(after) or list(before)
    found = [f"drops column {c}" for c in old_names if c not in new_names]
    found += [
        f"changes column {c} from {before[c]} to {after[c]}"
        for c in before
        if c in after and before[c].upper() != after[c].upper()
    ]
    inferred_before, inferred_after = dict(old_types or ()), dict(new_types or ())
    found += [
        f"changes column {c} from {kind} to {inferred_after[c]} (inferred)"
        for c, kind in inferred_before.items()
        if kind
        and inferred_after.get(c)
        and kind.upper() != inferred_after[c].upper()
        and not widens(kind, inferred_after[c])
        and not (c in before and c in after)  # declared on both sides: compared above
        and c not in _validity(old)
    ]
    # An SCD type 2 table's validity columns (valid_from_name, valid_to_name,
    # time_data_type) hold its history: renaming or retyping one loses it.
    old_validity, new_validity = _validity(old), _validity(new)
    found += [f"drops column {c}" for c in old_validity if c not in new_validity]
    found += [
        f"changes column {c} from {kind} to {new_validity[c]}"
        for c, kind in old_validity.items()
        if c in new_validity and kind != new_validity[c]
    ]
    return found


_WIDER = (("TINYINT", "SMALLINT", "INT", "BIGINT"), ("FLOAT", "DOUBLE"))
"""Types in order of width: a value of one fits every later one of its line."""


def widens(old: str, new: str) -> bool:
    """Whether an inferred change from ``old`` to ``new`` only widens a number: sqlglot's
    rules promote where Spark's do not (``COALESCE(id, id)`` of an INT is a BIGINT to
    sqlglot, an INT to Spark), and a wider value of the same kind loses nothing, so such a
    change is not called destructive (a declared one still is).

    >>> widens("INT", "BIGINT"), widens("FLOAT", "DOUBLE"), widens("BIGINT", "INT")
    (True, True, False)
    >>> widens("INT", "DOUBLE")
    False
    """
    for line in _WIDER:
        if old.upper() in line and new.upper() in line:
            return line.index(old.upper()) < line.index(new.upper())
    return False


# What a query says besides its projections that cannot change their types (which rows,
# in what order, how many): a change there alone leaves every column's type as it was.
_NOT_TYPES = ("expressions", "where", "group", "having", "qualify", "order", "limit", "offset")


def types_may_differ(old: Model, new: Model, parents_may: bool) -> bool:
    """Whether the inferred types of a column both ``old`` and ``new`` have may differ,
    so that they are worth inferring (about 2 ms a model, for the model and each of its
    ancestors). ``parents_may``: whether a parent's may (:class:`Retyping`). They cannot
    when no parent's may, the kind and declared columns are the same, and the two
    queries differ only in projections one of them lacks and in clauses that choose rows
    (WHERE, GROUP BY, HAVING, QUALIFY, ORDER BY, LIMIT): each column both have is then the
    same expression over the same tables. Anything else (a star, another shape) may."""
    if parents_may or old.kind != new.kind or old.columns != new.columns:
        return True
    before, after = old.query, new.query
    if not isinstance(before, exp.Select) or not isinstance(after, exp.Select):
        return before is not None or after is not None  # no query: the declared types
    projections = []
    for query in (before, after):
        if any(is_star(s) or not s.alias_or_name for s in query.selects):
            return True
        projections.append({s.alias_or_name.lower(): s.sql("spark") for s in query.selects})
    common = projections[0].keys() & projections[1].keys()
    if any(projections[0][c] != projections[1][c] for c in common):
        return True
    return _rest(before) != _rest(after)


def _rest(query: exp.Select) -> list[tuple[str, object]]:
    """What a query says besides its projections and the clauses choosing its rows."""
    return [
        (
            key,
            value.sql("spark") if isinstance(value, exp.Expr) else [v.sql("spark") for v in value],
        )
        if isinstance(value, exp.Expr | list)
        else (key, value)
        for key, value in sorted(query.args.items())
        if key not in _NOT_TYPES and value
    ]


class Retyping:
    """Which models of a plan may have a column whose inferred type changed, on demand:
    a model added, one whose own change may retype (:func:`types_may_differ`), or one
    with a parent that may. A model whose data fingerprint is the same and whose parents'
    are too has the types it had."""

    def __init__(
        self,
        models: Mapping[str, Model],
        fingerprints: Mapping[str, Fingerprint],
        base: Mapping[str, Snapshot],
    ) -> None:
        self.models, self.fingerprints, self.base = models, fingerprints, base
        self.known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        stack = [name]
        while stack:
            top = stack[-1]
            if top in self.known:
                stack.pop()
                continue
            model, old = self.models.get(top), self.base.get(top)
            if model is None or old is None:
                self.known[top] = model is not None  # added: no old types to compare
                stack.pop()
                continue
            fingerprint = self.fingerprints[top]
            if old.fingerprint.parent_data_hash == fingerprint.parent_data_hash:
                parents = []  # every ancestor as it was
            else:
                parents = [p for p in model.depends_on if p != top]
            waiting = [p for p in parents if p not in self.known]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            parents_may = any(self.known[p] for p in parents)
            if old.fingerprint.data_hash == fingerprint.data_hash:
                self.known[top] = parents_may
            else:
                self.known[top] = types_may_differ(old.model, model, parents_may)
        return self.known[name]


def _validity(model: Model) -> dict[str, str]:
    scd = model.kind.scd
    if scd is None:
        return {}
    return {scd.valid_from_name: scd.time_data_type, scd.valid_to_name: scd.time_data_type}


def _output_names(model: Model) -> list[str] | None:
    """The query's output column names (None: not known without a catalog)."""
    if model.query is None:
        return [name for name, _ in model.columns] or None
    return list(query_columns(model.query, {}) or ()) or None


def check(
    old: Model,
    new: Model,
    old_output: Sequence[str] | None = None,
    new_output: Sequence[str] | None = None,
    readers: Mapping[str, Sequence[str]] | None = None,
    old_types: Typed | None = None,
    new_types: Typed | None = None,
    *,
    found: Sequence[str] | None = None,
) -> str | None:
    """The plan warning for a destructive forward-only change of ``new`` (None: none, or
    allowed). ``readers``: model downstream -> the columns of ``new`` it reads, to name
    the models that read a dropped column; ``found``: :func:`destructive_columns` of
    these, when the caller has it.

    Raises:
        PlanError: at the model's file:line, when its ``on_destructive_change`` is ``error``.
    """
    if found is None:
        found = destructive_columns(old, new, old_output, new_output, old_types, new_types)
    if not found or new.on_destructive_change == "allow":
        return None
    what = f"forward-only change to {new.name} {', '.join(found)} of its table"
    dropped = {f.removeprefix("drops column ") for f in found if f.startswith("drops column ")}
    reading = sorted(m for m, columns in (readers or {}).items() if dropped & set(columns))
    if reading:
        what += f" ({', '.join(reading)} {'reads' if len(reading) == 1 else 'read'} it)"
    hint = (
        "the rows already in the table would lose that data: make the change breaking "
        "(remove forward_only, or plan without --forward-only) to rebuild the table, keep "
        "the column, or set on_destructive_change warn or allow on the model"
    )
    if new.on_destructive_change == "error":
        raise PlanError(what, path=new.path or None, line=new.line if new.path else None, hint=hint)
    where = f"{new.path}:{new.line}: " if new.path else ""
    return f"{where}{what}\n  hint: {hint}"
