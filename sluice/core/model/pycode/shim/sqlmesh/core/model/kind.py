"""SQLMesh's kind vocabulary as model files use it: ``ModelKindName`` and the kind
classes (``IncrementalByTimeRangeKind(time_column=TimeColumn("ds", "%Y-%m-%d"))``).

The service reads these from a model file's syntax tree (``pycode.models.KIND_CLASSES``);
here they only let the file import and, when the project's code builds a kind itself,
give the sandboxed process its plain form (``sluice_plain``: the dict a MODEL header's
kind gives).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ModelKindName(StrEnum):
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    INCREMENTAL_BY_UNIQUE_KEY = "INCREMENTAL_BY_UNIQUE_KEY"
    INCREMENTAL_BY_PARTITION = "INCREMENTAL_BY_PARTITION"
    INCREMENTAL_UNMANAGED = "INCREMENTAL_UNMANAGED"
    FULL = "FULL"
    SCD_TYPE_2 = "SCD_TYPE_2"
    SCD_TYPE_2_BY_TIME = "SCD_TYPE_2_BY_TIME"
    SCD_TYPE_2_BY_COLUMN = "SCD_TYPE_2_BY_COLUMN"
    VIEW = "VIEW"
    EMBEDDED = "EMBEDDED"
    SEED = "SEED"
    EXTERNAL = "EXTERNAL"
    CUSTOM = "CUSTOM"
    MANAGED = "MANAGED"


class TimeColumn:
    """``TimeColumn(column, format=None)``."""

    def __init__(self, column: Any, format: str | None = None) -> None:
        self.column = column
        self.format = format

    def sluice_plain(self) -> dict[str, Any]:
        return {"column": str(getattr(self.column, "name", self.column)), "format": self.format}


class _Kind:
    """A kind object: its name and the parameters it was given."""

    kind_name: ModelKindName = ModelKindName.FULL

    def __init__(self, **parameters: Any) -> None:
        self.parameters = parameters
        self.name = self.kind_name

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["parameters"][name]
        except KeyError:
            raise AttributeError(name) from None

    def sluice_plain(self) -> dict[str, Any]:
        return {**self.parameters, "name": self.kind_name.value}


def _kind(class_name: str, kind: ModelKindName) -> type[_Kind]:
    return type(class_name, (_Kind,), {"kind_name": kind, "__module__": __name__})


FullKind = _kind("FullKind", ModelKindName.FULL)
ViewKind = _kind("ViewKind", ModelKindName.VIEW)
IncrementalByTimeRangeKind = _kind(
    "IncrementalByTimeRangeKind", ModelKindName.INCREMENTAL_BY_TIME_RANGE
)
IncrementalByUniqueKeyKind = _kind(
    "IncrementalByUniqueKeyKind", ModelKindName.INCREMENTAL_BY_UNIQUE_KEY
)
IncrementalByPartitionKind = _kind(
    "IncrementalByPartitionKind", ModelKindName.INCREMENTAL_BY_PARTITION
)
IncrementalUnmanagedKind = _kind("IncrementalUnmanagedKind", ModelKindName.INCREMENTAL_UNMANAGED)
SeedKind = _kind("SeedKind", ModelKindName.SEED)
ExternalKind = _kind("ExternalKind", ModelKindName.EXTERNAL)
EmbeddedKind = _kind("EmbeddedKind", ModelKindName.EMBEDDED)
SCDType2ByTimeKind = _kind("SCDType2ByTimeKind", ModelKindName.SCD_TYPE_2_BY_TIME)
SCDType2ByColumnKind = _kind("SCDType2ByColumnKind", ModelKindName.SCD_TYPE_2_BY_COLUMN)
CustomKind = _kind("CustomKind", ModelKindName.CUSTOM)
ManagedKind = _kind("ManagedKind", ModelKindName.MANAGED)

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
]
