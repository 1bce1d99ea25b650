"""``model`` and SQLMesh's kinds as Python model files use them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.core.model.pycode import registry

from .kind import (
    CustomKind,
    EmbeddedKind,
    ExternalKind,
    FullKind,
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalUnmanagedKind,
    ManagedKind,
    ModelKindName,
    SCDType2ByColumnKind,
    SCDType2ByTimeKind,
    SeedKind,
    TimeColumn,
    ViewKind,
)

__all__ = [
    "CustomKind",
    "EmbeddedKind",
    "ExternalKind",
    "FullKind",
    "IncrementalByPartitionKind",
    "IncrementalByTimeRangeKind",
    "IncrementalByUniqueKeyKind",
    "IncrementalUnmanagedKind",
    "ManagedKind",
    "ModelKindName",
    "SCDType2ByColumnKind",
    "SCDType2ByTimeKind",
    "SeedKind",
    "TimeColumn",
    "ViewKind",
    "model",
]


def model(
    name: str | None = None, is_sql: bool = False, **arguments: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Python model (Sluice reads the arguments from the file; see
    ``sluice.core.model.pycode.models``)."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        registry.add_model(name or function.__name__, function, {**arguments, "is_sql": is_sql})
        return function

    return register
