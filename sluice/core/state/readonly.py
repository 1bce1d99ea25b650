"""A :class:`~sluice.core.state.store.StateReader` on a SQLite state file, through the
standard library's ``sqlite3`` and read-only: for a process that only reads state
(``sluice plan`` without ``--apply``), which then never imports SQLAlchemy (about a
quarter of such a process's start, issue 21).

It reads what :mod:`sluice.core.state.sql` writes, with the same row decoders
(:mod:`sluice.core.state.rows`); the reader contract tests run against both. It only
reads a database at this Sluice's schema version: any other (older, to be migrated;
newer, to be refused; not Sluice's) is left to :func:`sluice.core.state.open_state`,
which says what to do. A state file that does not exist yet is an empty state: a plan
does not create it (``sluice apply`` does).

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     empty = read_state(f"sqlite:///{tmp}/none.db")
...     (empty.get_environment("prod"), empty.get_intervals([("s.a", "v1")]))
(None, {})
>>> read_state("postgresql://u@h/db") is None  # the SQLAlchemy store reads that
True
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sluice.core.errors import StateError
from sluice.core.intervals import merge as merge_intervals
from sluice.core.state import rows
from sluice.core.state.records import (
    SCHEMA_VERSION,
    EnvironmentRecord,
    Interval,
    PlanRecord,
    SnapshotId,
    StoredSnapshot,
    TableKey,
    TableSize,
    chunks,
)

if TYPE_CHECKING:
    from sluice.core.state.store import OpenStateReader

_SCHEMES = ("sqlite:///", "sqlite+pysqlite:///")
_BATCH = 400  # keys per IN list: two parameters each, under SQLite's 999
_BUSY_TIMEOUT_S = 5.0
_ENVIRONMENT_COLUMNS = (
    "name, snapshots, plan_id, previous_plan_id, start_ts, end_ts, expiration_ts, "
    "invalidated, updated_ts"
)


def read_state(url: str) -> SqliteStateReader | None:
    """A read-only reader of the SQLite state file ``url`` names, or None where this
    module does not read it: not a plain SQLite file URL (PostgreSQL, ``:memory:``, URL
    options), or a database not at this Sluice's schema version. Then open it with
    :func:`sluice.core.state.open_state`, which creates, migrates or refuses it."""
    path = _file_of(url)
    if path is None:
        return None
    if not path.exists():
        return SqliteStateReader(None, str(path))
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro",
            uri=True,
            timeout=_BUSY_TIMEOUT_S,
            isolation_level=None,  # transactions begun and ended here
            check_same_thread=False,
        )
    except sqlite3.Error:
        return None  # open_state says what is wrong with it
    conn.row_factory = sqlite3.Row
    try:
        found = conn.execute(
            "SELECT MAX(number) FROM sluice_migrations WHERE track = 'state'"
        ).fetchone()
    except sqlite3.Error:
        found = None  # no version table: older than the runner, or not Sluice's
    if found is None or found[0] != SCHEMA_VERSION:
        conn.close()
        return None
    return SqliteStateReader(conn, str(path))


def _file_of(url: str) -> Path | None:
    scheme = next((s for s in _SCHEMES if url.startswith(s)), None)
    if scheme is None:
        return None
    database = url[len(scheme) :]
    # URL options, escapes and in-memory databases are the SQLAlchemy store's to read.
    if not database or database == ":memory:" or any(c in database for c in "?%#"):
        return None
    return Path(database)


class SqliteStateReader:
    """The reader :func:`read_state` returns: over ``conn``, or an empty state when the
    file does not exist (``conn`` None)."""

    def __init__(self, conn: sqlite3.Connection | None, path: str) -> None:
        self._conn = conn
        self._where = f"sqlite:///{path}"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    @contextmanager
    def _reading(self, action: str) -> Iterator[sqlite3.Connection | None]:
        """One read transaction (so chunked reads see one state), its errors in words."""
        conn = self._conn
        if conn is None:
            yield None
            return
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise StateError(
                f"state database {self._where}: cannot {action}: {exc}",
                hint="check that the state file is readable and not damaged; "
                "`sluice apply` opens it read-write and says more",
            ) from exc

    def _all(self, action: str, query: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """All rows of one query (none from an empty state)."""
        with self._reading(action) as conn:
            return [] if conn is None else conn.execute(query, params).fetchall()

    def get_environment(self, name: str) -> EnvironmentRecord | None:
        found = self._all(
            f"read environment {name!r}",
            f"SELECT {_ENVIRONMENT_COLUMNS} FROM sluice_environments WHERE name = ?",
            (name,),
        )
        return rows.environment(found[0], self._where) if found else None

    def list_environments(self) -> list[EnvironmentRecord]:
        found = self._all(
            "list environments",
            f"SELECT {_ENVIRONMENT_COLUMNS} FROM sluice_environments ORDER BY name",
        )
        return [rows.environment(row, self._where) for row in found]

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, StoredSnapshot]:
        found: dict[SnapshotId, StoredSnapshot] = {}
        query = "SELECT name, identifier, version, payload FROM sluice_snapshots WHERE "
        with self._reading("read snapshots") as conn:
            for name, identifier, version, payload in _pairs(
                conn, query, "name", "identifier", ids
            ):
                found[(name, identifier)] = rows.snapshot(
                    name, identifier, version, payload, self._where
                )
        return found

    def get_intervals(self, tables: Iterable[TableKey]) -> dict[TableKey, list[Interval]]:
        raw: dict[TableKey, list[Interval]] = {}
        query = "SELECT name, version, start_ts, end_ts FROM sluice_intervals WHERE "
        with self._reading("read intervals") as conn:
            for name, version, start, end in _pairs(conn, query, "name", "version", tables):
                raw.setdefault((name, version), []).append((start, end))
        return {key: merge_intervals(spans) for key, spans in raw.items()}

    def get_plan(self, plan_id: str) -> PlanRecord | None:
        found = self._all(
            f"read plan {plan_id!r}",
            "SELECT plan_id, environment, base_plan_id, created_ts, payload, project_commit "
            "FROM sluice_plans WHERE plan_id = ?",
            (plan_id,),
        )
        return rows.plan(found[0], self._where) if found else None

    def get_table_sizes(self, names: Iterable[str]) -> dict[TableKey, TableSize]:
        found: dict[TableKey, TableSize] = {}
        with self._reading("read table sizes") as conn:
            if conn is None:
                return found
            for chunk in chunks(sorted(set(names)), _BATCH):
                marks = ", ".join("?" * len(chunk))
                for name, version, size, ts, count in conn.execute(
                    "SELECT name, version, bytes, measured_ts, row_count "
                    f"FROM sluice_table_sizes WHERE name IN ({marks})",
                    tuple(chunk),
                ):
                    found[(name, version)] = rows.table_size(size, ts, count)
        return found


def _pairs(
    conn: sqlite3.Connection | None,
    query: str,
    first: str,
    second: str,
    keys: Iterable[tuple[str, str]],
) -> Iterator[Any]:
    """The rows of ``query`` whose ``(first, second)`` columns are among ``keys``."""
    if conn is None:
        return
    for chunk in chunks(list(dict.fromkeys(keys)), _BATCH):
        values = ", ".join("(?, ?)" for _ in chunk)
        params = tuple(part for key in chunk for part in key)
        yield from conn.execute(f"{query}({first}, {second}) IN (VALUES {values})", params)


if TYPE_CHECKING:
    # Static proof that the class satisfies the protocol it is used through.
    _conforms: type[OpenStateReader] = SqliteStateReader
