"""State rows to records: one decoder per kind of row, shared by the SQLAlchemy store
(:mod:`sluice.core.state.sql`) and the read-only SQLite reader
(:mod:`sluice.core.state.readonly`), so both read a stored row the same way and report a
corrupt one in the same words. No SQLAlchemy here.

>>> environment({"name": "prod", "snapshots": '[{"name": "s.a", "identifier": "i", '
...     '"version": "v"}]', "plan_id": "p1", "previous_plan_id": None, "start_ts": None,
...     "end_ts": None, "expiration_ts": None, "invalidated": 0, "updated_ts": 5}, "db")
... # doctest: +NORMALIZE_WHITESPACE
EnvironmentRecord(name='prod', snapshots=(SnapshotRef(name='s.a', identifier='i',
    version='v'),), plan_id='p1', previous_plan_id=None, start=None, end=None,
    expiration_ts=None, invalidated=False, updated_ts=5)
"""

from __future__ import annotations

from typing import Any, Protocol

from sluice.core.db.documents import corrupt, load_json
from sluice.core.state.records import (
    EnvironmentRecord,
    PlanRecord,
    SnapshotRef,
    StoredSnapshot,
    TableSize,
)


class Row(Protocol):
    """A row whose columns are read by name: SQLAlchemy's ``RowMapping``, ``sqlite3.Row``."""

    def __getitem__(self, column: str, /) -> Any: ...


def environment(row: Row, where: str) -> EnvironmentRecord:
    """A ``sluice_environments`` row; ``where``: the database, for a corrupt row's error."""
    what = f"environment {row['name']}"
    refs = load_json(row["snapshots"], list, what, where)
    try:
        snapshots = tuple(SnapshotRef(r["name"], r["identifier"], r["version"]) for r in refs)
    except (KeyError, TypeError) as exc:
        raise corrupt(what, f"bad snapshot reference ({exc})", where) from exc
    return EnvironmentRecord(
        name=row["name"],
        snapshots=snapshots,
        plan_id=row["plan_id"],
        previous_plan_id=row["previous_plan_id"],
        start=row["start_ts"],
        end=row["end_ts"],
        expiration_ts=row["expiration_ts"],
        invalidated=bool(row["invalidated"]),
        updated_ts=row["updated_ts"],
    )


def snapshot(name: str, identifier: str, version: str, payload: str, where: str) -> StoredSnapshot:
    """A ``sluice_snapshots`` row."""
    document = load_json(payload, dict, f"snapshot {name} ({identifier})", where)
    return StoredSnapshot(name, identifier, version, document)


def plan(row: Row, where: str) -> PlanRecord:
    """A ``sluice_plans`` row."""
    document = load_json(row["payload"], dict, f"plan {row['plan_id']}", where)
    return PlanRecord(
        row["plan_id"],
        row["environment"],
        row["base_plan_id"],
        row["created_ts"],
        document,
        row["project_commit"],
    )


def table_size(size: int, measured_ts: int, rows: int | None) -> TableSize:
    """A ``sluice_table_sizes`` row's figures."""
    return TableSize(int(size), int(measured_ts), int(rows) if rows is not None else None)
