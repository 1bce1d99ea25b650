"""The engine reaching the state database, configured in one place for SQLite and PostgreSQL.

Every owner of tables in the database (state, job queue, ledger) opens it through
:func:`create_state_engine`, so all of them get the same settings: WAL mode, a busy timeout
and ``BEGIN IMMEDIATE`` for writers on SQLite; psycopg, a connect timeout and pre-ping on
PostgreSQL.

On SQLite the writers of one process also queue for the database in the process, one at a
time (:class:`OneWriter`), before ``BEGIN IMMEDIATE``: SQLite's own wait for its lock is a
poll (sleeps of up to 100 ms, first come not first served), under which a writer among
many can lose every round and fail "database is locked" after the busy timeout
(docs/reliability.md, SQLite under load; ``bench/sqlite_writers.py``).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, cast

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from sluice.core.errors import StateError

WRITE_OPTION = "sluice_write"
"""Execution option marking a connection whose transaction will write.

On SQLite such a transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up
front (waiting up to the busy timeout) instead of failing when a read turns into a write
while another connection holds the lock. Migrations rely on it to run one at a time.
"""

# How long a SQLite writer waits for the lock. Not longer: the webhook's intake writes
# through it too, and a forge gives up on a delivery not answered within 10 s.
_SQLITE_BUSY_TIMEOUT_MS = 5000
# How long a writer waits for the others of its process (then SQLite's busy timeout only
# for another process's): the same bound, for the same reason.
WRITER_WAIT_S = _SQLITE_BUSY_TIMEOUT_MS / 1000
_HELD = "sluice_one_writer"  # in a pooled connection's info: the OneWriter it holds
_PG_CONNECT_TIMEOUT_S = 10  # fail fast on an unreachable server
_URL_HINT = "use sqlite:///path/to/state.db or postgresql+psycopg://user:pw@host:5432/db"


def create_state_engine(url: str) -> Engine:
    """An engine for the state database at ``url``, configured for concurrent use.

    For SQLite this creates the file's parent directory and, on every new connection,
    sets WAL mode, a busy timeout and foreign keys; it also makes transactions of
    connections carrying :data:`WRITE_OPTION` start with ``BEGIN IMMEDIATE``.

    Raises:
        StateError: The URL cannot be parsed or names an unsupported database.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StateError(
            f"state URL {_mask_unparsed(url)} is not a valid database URL",
            hint=_URL_HINT,
        ) from None  # SQLAlchemy's message quotes the raw URL, password included
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise StateError(
            f"state URL {render_url(parsed)} uses {parsed.drivername!r}, which Sluice does not "
            "support for state",
            hint=_URL_HINT,
        )
    if parsed.get_backend_name() == "postgresql":
        # pre-ping: a long-running bot must survive the server closing idle connections.
        return create_engine(parsed, pool_pre_ping=True, connect_args=state_connect_args(parsed))

    database = parsed.database or ""
    if database in ("", ":memory:"):
        # One shared connection, or every pooled connection would see its own database.
        engine = create_engine(
            parsed, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
        database = f"memory-{id(engine)}"
    else:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(
                f"cannot create the directory of state database {database}: {exc}",
                hint="choose a state path in a writable directory",
            ) from exc
        engine = create_engine(parsed)
        database = str(Path(database).resolve())
    writer = OneWriter.of(database)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", lambda conn: _sqlite_on_begin(conn, writer))
    event.listen(engine, "checkin", _sqlite_on_checkin)
    return engine


class OneWriter:
    """The writers of one SQLite database in this process, let in one at a time, first
    come first served: a waiting writer sleeps until the one before it hands over.

    Held from a writer's ``BEGIN IMMEDIATE`` until its connection goes back to the pool,
    so SQLite's lock is free whenever this one is, but for another process's writer (then
    SQLite's busy timeout). Every engine of one database file shares it (the state, the
    queue and the ledger each open one)."""

    _all: dict[str, OneWriter] = {}
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._busy = False
        self._waiting: deque[threading.Event] = deque()
        self.owner: int | None = None  # the thread holding it

    @classmethod
    def of(cls, database: str) -> OneWriter:
        """The one of ``database`` (a resolved file path)."""
        with cls._guard:
            return cls._all.setdefault(database, cls())

    def acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the writers before this one."""
        turn = threading.Event()
        with self._mutex:
            if not self._busy:
                self._busy = True
                self.owner = threading.get_ident()
                return True
            self._waiting.append(turn)
        if not turn.wait(timeout):
            with self._mutex:
                if turn in self._waiting:  # not handed over: give up the place
                    self._waiting.remove(turn)
                    return False
        self.owner = threading.get_ident()
        return True

    def waiting(self) -> int:
        """How many writers wait for their turn."""
        with self._mutex:
            return len(self._waiting)

    def release(self) -> None:
        """Hand over to the first writer waiting, if any."""
        with self._mutex:
            self.owner = None
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._busy = False


def _sqlite_on_connect(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    conn = cast(sqlite3.Connection, dbapi_conn)
    # Hand transaction control to SQLAlchemy's ``begin`` hook: pysqlite would otherwise
    # begin lazily and only before DML, leaving DDL and reads outside the transaction.
    conn.isolation_level = None
    cursor = conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
    # Switching a new database to WAL needs an exclusive lock, and when connections race
    # for it SQLite reports "database is locked" at once instead of calling the busy
    # handler (it would deadlock), so retry here for as long as the busy timeout.
    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL").fetchall()
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _sqlite_on_begin(conn: Connection, writer: OneWriter) -> None:
    immediate = conn.get_execution_options().get(WRITE_OPTION, False)
    if not immediate:
        conn.exec_driver_sql("BEGIN")
        return
    # A connection holding it already (a second transaction before its return), or a
    # thread writing through another connection of its own (it would wait on itself):
    # straight to SQLite, as without it.
    if _HELD not in conn.info and writer.owner != threading.get_ident():
        if not writer.acquire(WRITER_WAIT_S):
            raise OperationalError(
                "BEGIN IMMEDIATE",
                None,
                sqlite3.OperationalError(
                    f"database is locked: the writers of this process ahead of this one "
                    f"held it {WRITER_WAIT_S:g} s ({writer.waiting()} more waiting)"
                ),
            )
        conn.info[_HELD] = writer
    try:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        _release(conn.info)
        raise


def _sqlite_on_checkin(_dbapi_conn: DBAPIConnection | None, record: ConnectionPoolEntry) -> None:
    _release(record.info)


def _release(info: dict[Any, Any]) -> None:
    held: OneWriter | None = info.pop(_HELD, None)
    if held is not None:
        held.release()


def render_url(url: URL) -> str:
    """``url`` for messages and logs, its password masked."""
    return url.render_as_string(hide_password=True)


def _mask_unparsed(url: str) -> str:
    """Show an unparseable URL without its credentials, wherever they are in it."""
    return "***@" + url.rsplit("@", 1)[1] if "@" in url else url


def driver_message(exc: SQLAlchemyError, url: URL) -> str:
    """The database's own message, without SQLAlchemy's statement dump and doc link.

    Any occurrence of the URL's password is masked: drivers may echo connection details.
    """
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    if url.password:
        text = text.replace(str(url.password), "***")
    return text


def state_connect_args(url: URL) -> dict[str, Any]:
    """The driver arguments of a PostgreSQL state connection: a bounded connect timeout
    unless the URL sets one."""
    if "connect_timeout" in url.query:
        return {}
    return {"connect_timeout": _PG_CONNECT_TIMEOUT_S}
