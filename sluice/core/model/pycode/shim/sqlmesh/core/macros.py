"""``macro`` and ``MacroEvaluator`` as macro files use them.

What the evaluator offers: ``dialect``, ``var(name, default=None)``, ``locals`` (the
project's variables, and SQLMesh's time variables ``start_date``, ``end_ds``... as
placeholders the model's build fills with its interval's values), ``runtime_stage`` (always ``"loading"``: Sluice expands macros when
it loads a model), ``parse_one(sql)``, ``this_model`` (a placeholder filled in when the
model runs) and ``columns_to_types(table)`` (the columns the loader knows, as SQLMesh's
``{name: sqlglot DataType}``). Anything else (``engine_adapter``, ``get_snapshot``, ...)
raises :class:`NotSupported`, naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NewType

import sqlglot
from sqlglot import exp

from sluice.core.model.pycode import registry

SQL = NewType("SQL", str)
"""An argument annotated ``SQL`` receives the argument's SQL text."""

THIS_MODEL = "__sluice_macro__this_model"
_TIME_LOCALS = tuple(
    f"{prefix}_{suffix}"
    for prefix in ("start", "end", "execution")
    for suffix in ("ds", "ts", "tstz", "date", "dt", "dtntz", "epoch", "millis", "hour")
)
"""SQLMesh's time variables (``sluice.core.model.macros.TIME_VARIABLES``), which its
evaluator's ``locals`` hold: here placeholder columns, filled in when the model runs."""


class NotSupported(AttributeError):
    """A member of SQLMesh's MacroEvaluator that Sluice does not offer."""


class ColumnsUnknown(LookupError):
    """``columns_to_types`` asked for a table whose columns Sluice does not know."""


Columns = Callable[[str], Sequence[tuple[str, str]] | None]
"""The loader's answer: a table's (name, Spark type) columns by its lower-case name."""


class MacroEvaluator:
    """What a Python macro receives as its first argument."""

    def __init__(
        self, dialect: str, variables: Mapping[str, Any], columns: Columns | None = None
    ) -> None:
        self.dialect = dialect
        self.locals: dict[str, Any] = {
            **{name: exp.column(f"__sluice_macro__{name}") for name in _TIME_LOCALS},
            **{str(k).lower(): v for k, v in variables.items()},
        }
        self.runtime_stage = "loading"
        self._columns = columns

    def columns_to_types(self, model_name: str | exp.Expr) -> dict[str, exp.DataType]:
        """The columns of a model, seed or external table, ``{name: DataType}`` in order.

        ``model_name``: the unquoted name (``"schema.parent"``), or the argument as given
        (a table, or a ``schema.parent`` read as a column). A SQL model's column whose type
        is not declared (``columns``) nor a cast is ``UNKNOWN``.

        Raises:
            ColumnsUnknown: Sluice does not know that table's columns.
        """
        name = _table_name(model_name, self.dialect)
        found = self._columns(name) if self._columns is not None else None
        if found is None:
            raise ColumnsUnknown(
                f"columns_to_types('{name}'): Sluice does not know the columns of {name}; it "
                "knows those of external models, seeds, models with declared columns and SQL "
                "models whose every output column has a name (no *)"
            )
        return {
            column: exp.DataType.build(kind or "unknown", dialect="spark", udt=True)
            for column, kind in found
        }

    def var(self, name: str, default: Any = None) -> Any:
        return self.locals.get(name.lower(), default)

    def parse_one(self, sql: str, into: Any = None, **kwargs: Any) -> exp.Expr:
        parsed: exp.Expr = sqlglot.parse_one(sql, read=self.dialect, into=into, **kwargs)
        return parsed

    @property
    def this_model(self) -> exp.Expr:
        return exp.column(THIS_MODEL)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)  # Python's own protocols (copy, pickle) look here
        raise NotSupported(
            f"MacroEvaluator.{name} is not offered by Sluice (it offers dialect, var(), "
            "locals, runtime_stage, parse_one(), this_model and columns_to_types())"
        )


def _table_name(value: str | exp.Expr, dialect: str) -> str:
    """``schema.table`` (lower case, unquoted) from a name or a macro argument."""
    if isinstance(value, exp.Column):
        parts = [p.name for p in value.parts]  # schema.parent read as a column
    elif isinstance(value, exp.Table):
        parts = [p.name for p in value.parts]
    elif isinstance(value, exp.Literal):
        parts = [p.name for p in exp.to_table(str(value.this), dialect=dialect).parts]
    elif isinstance(value, exp.Expr):
        parts = [value.sql(dialect)]
    else:
        parts = [p.name for p in exp.to_table(str(value), dialect=dialect).parts]
    return ".".join(parts).lower()


def macro(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Python macro under ``name`` (default: the function's name)."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        registry.add_macro(name or function.__name__, function)
        return function

    return register
