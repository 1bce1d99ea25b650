"""The state store on a SQL database (SQLite or PostgreSQL), with SQLAlchemy Core.

SQLite suits one machine (a developer, a single CI runner); PostgreSQL suits a team whose
CI jobs and bot share one state. Both run the same statements but for a few dialect bits.

Concurrency: every writer method is one transaction. Environment updates are guarded by a
compare-and-swap on the plan id, so two applies racing for one environment cannot both
win. On SQLite, writers begin with ``BEGIN IMMEDIATE`` and wait (busy timeout) for each
other; on PostgreSQL, interval rewrites of one physical table are serialised with an
advisory lock because they read before they write.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Table,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import SQLAlchemyError

from sluice.core.db.documents import dump_json
from sluice.core.db.engine import create_state_engine, driver_message, render_url
from sluice.core.db.migrate import migrate
from sluice.core.db.transactions import CONNECT_HINT
from sluice.core.errors import ConflictError, StateError
from sluice.core.intervals import merge as merge_intervals
from sluice.core.state import rows, schema
from sluice.core.state.housekeeping import HousekeepingMixin
from sluice.core.state.migrations import STATE
from sluice.core.state.records import (
    EnvironmentRecord,
    Interval,
    PlanRecord,
    SnapshotId,
    StoredSnapshot,
    TableKey,
    TableSize,
    checked_intervals,
    chunks,
)
from sluice.core.state.run_inputs import RunInputsMixin
from sluice.core.state.store import StateStore

logger = logging.getLogger(__name__)

# Keys per IN list: keeps every statement well under SQLite's and PostgreSQL's bind
# parameter limits (two parameters per key) while needing few round trips for 1,000s.
_BATCH = 500
# Namespace (first key) of the per-table advisory locks guarding interval rewrites.
_PG_INTERVAL_LOCK_SPACE = int.from_bytes(b"slIV", "big")


def open_state(url: str) -> SqlStateStore:
    """Open (creating or migrating if needed) the state database at ``url``.

    Args:
        url: ``sqlite:///path/to/state.db`` or ``postgresql+psycopg://user:pw@host/db``
            (plain ``postgresql://`` means psycopg too).

    Raises:
        StateError: The URL is invalid or unsupported, the database is unreachable, or its
            schema cannot be brought up to date. The URL in the message has its password
            masked.
    """
    engine = create_state_engine(url)
    where = render_url(engine.url)
    try:
        migrate(engine, [STATE])
    except BaseException as exc:
        engine.dispose()
        if isinstance(exc, SQLAlchemyError):
            raise StateError(
                f"cannot open state database {where}: {driver_message(exc, engine.url)}",
                hint=CONNECT_HINT,
            ) from exc
        raise
    logger.debug("opened state database %s", where)
    return SqlStateStore(engine)


class SqlStateStore(HousekeepingMixin, RunInputsMixin):
    """:class:`~sluice.core.state.store.StateStore` on SQLite or PostgreSQL.

    Create it with :func:`open_state`, which migrates the schema first.
    """

    def __init__(self, engine: Engine) -> None:
        self.bind(engine)

    @property
    def engine(self) -> Engine:
        """The underlying engine (for tooling and tests)."""
        return self._engine

    def close(self) -> None:
        self._engine.dispose()

    # -- reader ---------------------------------------------------------------------------

    def get_environment(self, name: str) -> EnvironmentRecord | None:
        t = schema.environments
        with self._reading("read environment " + repr(name)) as conn:
            row = conn.execute(select(t).where(t.c.name == name)).mappings().first()
        return None if row is None else rows.environment(row, self._where)

    def list_environments(self) -> list[EnvironmentRecord]:
        t = schema.environments
        with self._reading("list environments") as conn:
            found = conn.execute(select(t).order_by(t.c.name)).mappings().all()
        return [rows.environment(row, self._where) for row in found]

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, StoredSnapshot]:
        t = schema.snapshots
        found: dict[SnapshotId, StoredSnapshot] = {}
        with self._reading("read snapshots") as conn:
            for chunk in chunks(list(dict.fromkeys(ids)), _BATCH):
                key = tuple_(t.c.name, t.c.identifier)
                columns = (t.c.name, t.c.identifier, t.c.version, t.c.payload)
                stored = conn.execute(select(*columns).where(key.in_(chunk)))
                for name, identifier, version, payload in stored:
                    found[(name, identifier)] = rows.snapshot(
                        name, identifier, version, payload, self._where
                    )
        return found

    def get_intervals(self, tables: Iterable[TableKey]) -> dict[TableKey, list[Interval]]:
        t = schema.intervals
        raw: dict[TableKey, list[Interval]] = {}
        with self._reading("read intervals") as conn:
            for chunk in chunks(list(dict.fromkeys(tables)), _BATCH):
                query = select(t.c.name, t.c.version, t.c.start_ts, t.c.end_ts).where(
                    tuple_(t.c.name, t.c.version).in_(chunk)
                )
                for name, version, start, end in conn.execute(query):
                    raw.setdefault((name, version), []).append((start, end))
        # Writers keep each table's rows merged; merging again is cheap and keeps the answer
        # right for rows that were not (older versions, manual repairs).
        return {key: merge_intervals(spans) for key, spans in raw.items()}

    def get_plan(self, plan_id: str) -> PlanRecord | None:
        t = schema.plans
        with self._reading(f"read plan {plan_id!r}") as conn:
            row = conn.execute(select(t).where(t.c.plan_id == plan_id)).mappings().first()
        return None if row is None else rows.plan(row, self._where)

    def get_table_sizes(self, names: Iterable[str]) -> dict[TableKey, TableSize]:
        t = schema.table_sizes
        found: dict[TableKey, TableSize] = {}
        with self._reading("read table sizes") as conn:
            for chunk in chunks(sorted(set(names)), _BATCH):
                query = select(t.c.name, t.c.version, t.c.bytes, t.c.measured_ts, t.c.row_count)
                for name, version, size, ts, count in conn.execute(
                    query.where(t.c.name.in_(chunk))
                ):
                    found[(name, version)] = rows.table_size(size, ts, count)
        return found

    # -- writer ---------------------------------------------------------------------------

    def set_table_size(self, name: str, version: str, size: TableSize) -> None:
        if size.bytes < 0 or (size.rows is not None and size.rows < 0):
            raise ValueError(f"table size of {name}@{version} is negative ({size})")
        t = schema.table_sizes
        where = (t.c.name == name) & (t.c.version == version)
        with self._writing(f"record the size of {name}@{version}") as conn:
            conn.execute(delete(t).where(where))
            conn.execute(
                insert(t).values(
                    name=name,
                    version=version,
                    bytes=size.bytes,
                    measured_ts=size.measured_ts,
                    row_count=size.rows,
                )
            )

    def push_snapshots(self, snapshots: Iterable[StoredSnapshot]) -> None:
        unique = {s.id: s for s in reversed(list(snapshots))}  # first occurrence wins
        if not unique:
            return
        rows = [
            {
                "name": s.name,
                "identifier": s.identifier,
                "version": s.version,
                "payload": dump_json(s.payload),
            }
            for s in unique.values()
        ]
        with self._writing("store snapshots") as conn:
            for chunk in chunks(rows, _BATCH):
                conn.execute(_insert_if_absent(conn, schema.snapshots), chunk)

    def add_intervals(self, name: str, version: str, intervals: Iterable[Interval]) -> None:
        new = merge_intervals(checked_intervals(intervals))
        if not new:
            return
        lo, hi = new[0][0], new[-1][1]
        t = schema.intervals
        with self._writing(f"record intervals of {name} ({version})") as conn:
            self._lock_table(conn, name, version)
            # Take out every stored interval touching the new span (adjacent ones too) and
            # put back their union with the new ones, so the table stays compact.
            touching = conn.execute(
                delete(t)
                .where(t.c.name == name, t.c.version == version)
                .where(t.c.start_ts <= hi, t.c.end_ts >= lo)
                .returning(t.c.start_ts, t.c.end_ts)
            ).all()
            merged = merge_intervals(new + [(s, e) for s, e in touching])
            conn.execute(insert(t), _interval_rows(name, version, merged))
        logger.debug("intervals of %s (%s): added %s", name, version, new)

    def remove_intervals(self, name: str, version: str, start: int, end: int) -> None:
        checked_intervals([(start, end)])
        t = schema.intervals
        with self._writing(f"remove intervals of {name} ({version})") as conn:
            self._lock_table(conn, name, version)
            overlapping = conn.execute(
                delete(t)
                .where(t.c.name == name, t.c.version == version)
                .where(t.c.start_ts < end, t.c.end_ts > start)
                .returning(t.c.start_ts, t.c.end_ts)
            ).all()
            keep: list[Interval] = []
            for s, e in overlapping:
                if s < start:
                    keep.append((s, start))
                if e > end:
                    keep.append((end, e))
            if keep:
                conn.execute(insert(t), _interval_rows(name, version, keep))
        logger.debug("intervals of %s (%s): removed [%d, %d)", name, version, start, end)

    def update_environment(self, env: EnvironmentRecord, expected_plan_id: str | None) -> None:
        t = schema.environments
        values = {
            "name": env.name,
            "snapshots": dump_json([asdict(ref) for ref in env.snapshots]),
            "plan_id": env.plan_id,
            "previous_plan_id": env.previous_plan_id,
            "start_ts": env.start,
            "end_ts": env.end,
            "expiration_ts": env.expiration_ts,
            "invalidated": env.invalidated,
            "updated_ts": env.updated_ts,
        }
        hint = f"re-run `sluice plan {env.name}` and apply the new plan"
        with self._writing(f"update environment {env.name!r}") as conn:
            if expected_plan_id is None:
                # Insert-if-absent rather than catching a key violation: on PostgreSQL the
                # violation would abort the transaction we still need to read the winner.
                # preserve_rowcount: SQLAlchemy only keeps INSERT row counts when asked.
                insert_env = _insert_if_absent(conn, t).values(values)
                done = conn.execute(insert_env.execution_options(preserve_rowcount=True)).rowcount
                if done == 1:
                    return
                current = self._plan_of(conn, env.name)
                raise ConflictError(
                    f"environment '{env.name}' already exists at plan '{current}', but this "
                    "plan expected to create it",
                    hint=hint,
                )
            done = conn.execute(
                update(t)
                .where(t.c.name == env.name, t.c.plan_id == expected_plan_id)
                .values(values)
            ).rowcount
            if done == 1:
                logger.debug(
                    "environment %s: plan %s -> %s", env.name, expected_plan_id, env.plan_id
                )
                return
            current = self._plan_of(conn, env.name)
            now = "it no longer exists" if current is None else f"it is now at plan '{current}'"
            raise ConflictError(
                f"environment '{env.name}' changed since this plan was made: the plan "
                f"expected it at plan '{expected_plan_id}', but {now}",
                hint=hint,
            )

    def invalidate_environment(self, name: str) -> None:
        t = schema.environments
        with self._writing(f"invalidate environment {name!r}") as conn:
            done = conn.execute(update(t).where(t.c.name == name).values(invalidated=True)).rowcount
            if done == 1:
                return
            names = list(conn.execute(select(t.c.name).order_by(t.c.name)).scalars())
        raise StateError(
            f"cannot invalidate environment '{name}': there is no such environment",
            hint="existing environments: " + (", ".join(names) if names else "(none)"),
        )

    def delete_environment(self, name: str) -> None:
        t = schema.environments
        with self._writing(f"delete environment {name!r}") as conn:
            conn.execute(delete(t).where(t.c.name == name))

    def save_plan(self, plan: PlanRecord) -> None:
        row = {
            "plan_id": plan.plan_id,
            "environment": plan.environment,
            "base_plan_id": plan.base_plan_id,
            "created_ts": plan.created_ts,
            "payload": dump_json(plan.payload),
            "project_commit": plan.project_commit,
        }
        with self._writing(f"save plan {plan.plan_id!r}") as conn:
            conn.execute(_insert_if_absent(conn, schema.plans).values(row))

    def set_plan_commit(self, plan_id: str, commit: str) -> None:
        t = schema.plans
        with self._writing(f"record the commit of plan {plan_id!r}") as conn:
            done = conn.execute(
                update(t).where(t.c.plan_id == plan_id).values(project_commit=commit)
            )
        if not done.rowcount:
            raise StateError(
                f"cannot record commit {commit[:12]} on plan '{plan_id}': no such plan",
                hint="the plan was never recorded: apply it (or promote again)",
            )

    def delete_snapshots(self, ids: Iterable[SnapshotId]) -> None:
        t = schema.snapshots
        keys = list(dict.fromkeys(ids))
        if not keys:
            return
        with self._writing("delete snapshots") as conn:
            for chunk in chunks(keys, _BATCH):
                conn.execute(delete(t).where(tuple_(t.c.name, t.c.identifier).in_(chunk)))

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _lock_table(conn: Connection, name: str, version: str) -> None:
        """Serialise read-modify-write of one table's intervals across PostgreSQL sessions.

        SQLite needs nothing: the write transaction already excludes other writers.
        """
        if conn.dialect.name != "postgresql":
            return
        digest = hashlib.blake2b(f"{name}\0{version}".encode(), digest_size=4).digest()
        key = int.from_bytes(digest, "big", signed=True)
        conn.execute(select(func.pg_advisory_xact_lock(_PG_INTERVAL_LOCK_SPACE, key)))

    @staticmethod
    def _plan_of(conn: Connection, name: str) -> str | None:
        query = select(schema.environments.c.plan_id).where(schema.environments.c.name == name)
        plan: str | None = conn.execute(query).scalar_one_or_none()
        return plan


def _insert_if_absent(conn: Connection, table: Table) -> Insert:
    # Each dialect imported when its database is in use: PostgreSQL's (with its drivers'
    # modules) costs a SQLite ``sluice plan`` about 0.1 s.
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table).on_conflict_do_nothing()


def _interval_rows(name: str, version: str, spans: Sequence[Interval]) -> list[dict[str, Any]]:
    return [{"name": name, "version": version, "start_ts": s, "end_ts": e} for s, e in spans]


if TYPE_CHECKING:
    # Static proof that the class satisfies the protocol it is used through.
    _conforms: type[StateStore] = SqlStateStore
