"""Sluice's state: snapshots, their filled intervals, environments and plans.

Open it with :func:`open_state` (SQLite or PostgreSQL URL); depend on :class:`StateReader`
where state is only read and on :class:`StateStore` where it is written. A process that
only reads a SQLite state can use :func:`sluice.core.state.readonly.read_state`, which
does not import SQLAlchemy; this package imports it only when :func:`open_state` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.core.state.records import (
    SCHEMA_VERSION,
    EnvironmentRecord,
    Interval,
    JobResult,
    PlanRecord,
    SnapshotId,
    SnapshotRef,
    StoredSnapshot,
    TableKey,
    TableSize,
)
from sluice.core.state.store import OpenStateReader, StateReader, StateStore, StateWriter

if TYPE_CHECKING:
    from sluice.core.state.sql import SqlStateStore


def open_state(url: str) -> SqlStateStore:
    """Open (creating or migrating if needed) the state database at ``url``: see
    :func:`sluice.core.state.sql.open_state`."""
    from sluice.core.state import sql

    return sql.open_state(url)


__all__ = [
    "SCHEMA_VERSION",
    "EnvironmentRecord",
    "Interval",
    "JobResult",
    "OpenStateReader",
    "PlanRecord",
    "SnapshotId",
    "SnapshotRef",
    "StateReader",
    "StateStore",
    "StateWriter",
    "StoredSnapshot",
    "TableKey",
    "TableSize",
    "open_state",
]
