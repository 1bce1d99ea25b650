"""Sluice's state: snapshots, their filled intervals, environments and plans.

Open it with :func:`open_state` (SQLite or PostgreSQL URL); depend on :class:`StateReader`
where state is only read and on :class:`StateStore` where it is written.
"""

from sluice.core.state.housekeeping import JobResult
from sluice.core.state.migrations import SCHEMA_VERSION
from sluice.core.state.records import (
    EnvironmentRecord,
    Interval,
    PlanRecord,
    SnapshotId,
    SnapshotRef,
    StoredSnapshot,
    TableKey,
    TableSize,
)
from sluice.core.state.sql import open_state
from sluice.core.state.store import StateReader, StateStore, StateWriter

__all__ = [
    "SCHEMA_VERSION",
    "EnvironmentRecord",
    "Interval",
    "JobResult",
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
