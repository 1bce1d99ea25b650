"""The engine reaching the state database, configured in one place for SQLite and PostgreSQL.

Every owner of tables in the database (state, job queue, ledger) opens it through
:func:`create_state_engine`, so all of them get the same settings: WAL mode, a busy timeout
and ``BEGIN IMMEDIATE`` for writers on SQLite; psycopg, a connect timeout and pre-ping on
PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, cast

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
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
    else:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(
                f"cannot create the directory of state database {database}: {exc}",
                hint="choose a state path in a writable directory",
            ) from exc
        engine = create_engine(parsed)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


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


def _sqlite_on_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


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
