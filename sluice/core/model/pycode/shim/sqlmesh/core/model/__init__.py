"""``model`` as Python model files use it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.core.model.pycode import registry

from .kind import ModelKindName

__all__ = ["ModelKindName", "model"]


def model(name: str, **arguments: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Python model (Sluice reads the arguments from the file; see
    ``sluice.core.model.pycode.models``)."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        registry.add_model(name, function, arguments)
        return function

    return register
