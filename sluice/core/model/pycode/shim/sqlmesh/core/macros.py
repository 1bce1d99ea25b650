"""``macro`` and ``MacroEvaluator`` as macro files use them.

What the evaluator offers: ``dialect``, ``var(name, default=None)``, ``locals`` (the
project's variables), ``runtime_stage`` (always ``"loading"``: Sluice expands macros when
it loads a model), ``parse_one(sql)`` and ``this_model`` (a placeholder filled in when the
model runs). Anything else (``columns_to_types``, ``engine_adapter``, ...) raises
:class:`NotSupported`, naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NewType

import sqlglot
from sqlglot import exp

from sluice.core.model.pycode import registry

SQL = NewType("SQL", str)
"""An argument annotated ``SQL`` receives the argument's SQL text."""

THIS_MODEL = "__sluice_macro__this_model"


class NotSupported(AttributeError):
    """A member of SQLMesh's MacroEvaluator that Sluice does not offer."""


class MacroEvaluator:
    """What a Python macro receives as its first argument."""

    def __init__(self, dialect: str, variables: Mapping[str, Any]) -> None:
        self.dialect = dialect
        self.locals: dict[str, Any] = {str(k).lower(): v for k, v in variables.items()}
        self.runtime_stage = "loading"

    def var(self, name: str, default: Any = None) -> Any:
        return self.locals.get(name.lower(), default)

    def parse_one(self, sql: str, into: Any = None, **kwargs: Any) -> exp.Expr:
        parsed: exp.Expr = sqlglot.parse_one(sql, read=self.dialect, into=into, **kwargs)
        return parsed

    @property
    def this_model(self) -> exp.Expr:
        return exp.column(THIS_MODEL)

    def __getattr__(self, name: str) -> Any:
        raise NotSupported(
            f"MacroEvaluator.{name} is not offered by Sluice (it offers dialect, var(), "
            "locals, runtime_stage, parse_one() and this_model)"
        )


def macro(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Python macro under ``name`` (default: the function's name)."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        registry.add_macro(name or function.__name__, function)
        return function

    return register
