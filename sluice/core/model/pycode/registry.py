"""What the ``sqlmesh`` shim's decorators registered in this process (the macro child and
the Spark driver; never the service).

>>> from sluice.core.model.pycode import registry
>>> def total(evaluator, column): ...
>>> registry.add_macro("TOTAL", total)
>>> registry.MACROS["total"] is total
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MACROS: dict[str, Callable[..., Any]] = {}
"""Python macros by lower-case name."""
MODELS: dict[str, PythonModel] = {}
"""Python models by lower-case model name."""


@dataclass(frozen=True)
class PythonModel:
    """One ``@model(...)``-decorated function and the decorator's arguments."""

    name: str
    function: Callable[..., Any]
    arguments: dict[str, Any] = field(default_factory=dict)


def add_macro(name: str, function: Callable[..., Any]) -> None:
    MACROS[name.lower()] = function


def add_model(name: str, function: Callable[..., Any], arguments: dict[str, Any]) -> None:
    MODELS[name.lower()] = PythonModel(name.lower(), function, arguments)
