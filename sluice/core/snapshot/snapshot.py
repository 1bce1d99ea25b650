"""Snapshots: one model at one fingerprint, bound to the physical version holding its data."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sluice.core.model.definition import Model
from sluice.core.snapshot.fingerprint import Fingerprint
from sluice.core.snapshot.naming import physical_table
from sluice.core.state.records import SnapshotRef, StoredSnapshot


class Category(StrEnum):
    """How a change affects data downstream; ordered from most to least conservative."""

    BREAKING = "breaking"
    NON_BREAKING = "non-breaking"
    FORWARD_ONLY = "forward-only"
    METADATA = "metadata"


RANK = {
    Category.BREAKING: 3,
    Category.NON_BREAKING: 2,
    Category.FORWARD_ONLY: 1,
    Category.METADATA: 0,
}


@dataclass(frozen=True)
class Snapshot:
    """A model, its fingerprint, and the version (physical table) its data lives in."""

    model: Model
    fingerprint: Fingerprint
    version: str
    category: Category | None = None

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def identifier(self) -> str:
        """Unique per (fingerprint, version): the same model may map to another table."""
        return hashlib.sha256(f"{self.fingerprint.identifier}:{self.version}".encode()).hexdigest()[
            :32
        ]

    @property
    def table(self) -> str:
        return physical_table(self.name, self.version)

    @property
    def ref(self) -> SnapshotRef:
        return SnapshotRef(self.name, self.identifier, self.version)

    def to_stored(self) -> StoredSnapshot:
        payload: dict[str, Any] = {
            "model": self.model.to_dict(),
            "fingerprint": self.fingerprint.to_dict(),
            "category": self.category.value if self.category else None,
        }
        return StoredSnapshot(self.name, self.identifier, self.version, payload)

    @classmethod
    def from_stored(cls, stored: StoredSnapshot) -> Snapshot:
        payload = stored.payload
        category = payload.get("category")
        snapshot = cls(
            model=Model.from_dict(payload["model"]),
            fingerprint=Fingerprint(**payload["fingerprint"]),
            version=stored.version,
            category=Category(category) if category else None,
        )
        return snapshot
