"""The state database: its tables (SQLAlchemy Core metadata) and the engine reaching it.

The table definitions always describe the *latest* schema version (``SCHEMA_VERSION`` in
:mod:`sluice.core.state.migrations`): a fresh database is created from it directly, and an
older database is brought up to it by migrations. Change both together.

Every table is prefixed ``sluice_`` so the state can share a database (or a PostgreSQL
schema) with other applications. JSON documents are stored as TEXT rather than a native
JSON type so SQLite and PostgreSQL store byte-identical documents; the store never queries
inside them. Timestamps are epoch milliseconds in BIGINT columns.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    URL,
    BigInteger,
    Boolean,
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    false,
    make_url,
)
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from sluice.core.errors import StateError

TABLE_PREFIX = "sluice_"

WRITE_OPTION = "sluice_write"
"""Execution option marking a connection whose transaction will write.

On SQLite such a transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock up
front (waiting up to the busy timeout) instead of failing when a read turns into a write
while another connection holds the lock. Migrations rely on it to run one at a time.
"""

_J = TypeVar("_J", dict[str, Any], list[Any])

_SQLITE_BUSY_TIMEOUT_MS = 5000
_PG_CONNECT_TIMEOUT_S = 10  # fail fast on an unreachable server
_URL_HINT = "use sqlite:///path/to/state.db or postgresql+psycopg://user:pw@host:5432/db"

metadata = MetaData()

schema_version = Table(
    "sluice_schema_version",
    metadata,
    # Exactly one row. No primary key: the row is replaced wholesale when stamping.
    Column("version", Integer, nullable=False),
)

snapshots = Table(
    "sluice_snapshots",
    metadata,
    Column("name", String, primary_key=True),
    Column("identifier", String, primary_key=True),
    Column("version", String, nullable=False),
    Column("payload", Text, nullable=False),
)
# The janitor asks "which snapshots still use this physical table?".
Index("ix_sluice_snapshots_name_version", snapshots.c.name, snapshots.c.version)

intervals = Table(
    "sluice_intervals",
    metadata,
    # INTEGER on SQLite so the column aliases the rowid and actually autoincrements.
    Column(
        "id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("name", String, nullable=False),
    Column("version", String, nullable=False),
    Column("start_ts", BigInteger, nullable=False),
    Column("end_ts", BigInteger, nullable=False),
)
Index("ix_sluice_intervals_name_version", intervals.c.name, intervals.c.version)

environments = Table(
    "sluice_environments",
    metadata,
    Column("name", String, primary_key=True),
    Column("snapshots", Text, nullable=False),
    Column("plan_id", String, nullable=False),
    Column("previous_plan_id", String, nullable=True),
    Column("start_ts", BigInteger, nullable=True),
    Column("end_ts", BigInteger, nullable=True),
    Column("expiration_ts", BigInteger, nullable=True),
    Column("invalidated", Boolean, nullable=False, server_default=false()),
    Column("updated_ts", BigInteger, nullable=False),
)

plans = Table(
    "sluice_plans",
    metadata,
    Column("plan_id", String, primary_key=True),
    Column("environment", String, nullable=False),
    Column("base_plan_id", String, nullable=True),
    Column("created_ts", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
)

# Schema version 2 -----------------------------------------------------------------------

orphans = Table(
    "sluice_orphans",
    metadata,
    # Physical tables no environment references, and since when: the janitor drops them
    # once they have been unreferenced for longer than the TTL.
    Column("name", String, primary_key=True),
    Column("version", String, primary_key=True),
    Column("since_ts", BigInteger, nullable=False),
)

results = Table(
    "sluice_results",
    metadata,
    # What a job found: audit and unit-test outcomes, kept so the bot can report them
    # without Spark.
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("job_id", String, nullable=False),
    Column("plan_id", String, nullable=True),
    Column("kind", String, nullable=False),
    Column("name", String, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
)
Index("ix_sluice_results_job", results.c.job_id)
Index("ix_sluice_results_plan", results.c.plan_id)


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


def dump_json(document: Any) -> str:
    """Canonical JSON text for a TEXT column: the same document always gives the same text."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def load_json(text: str, kind: type[_J], what: str, where: str) -> _J:
    """Decode a JSON column holding a ``kind`` (dict or list).

    Raises:
        StateError: The text is not JSON of that kind; ``what`` names the stored object and
            ``where`` the database (password masked) in the message.
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise corrupt(what, f"invalid JSON ({exc})", where) from exc
    if not isinstance(value, kind):
        raise corrupt(what, f"expected a JSON {'object' if kind is dict else 'array'}", where)
    return value


def corrupt(what: str, problem: str, where: str) -> StateError:
    """The error for a stored object that cannot be decoded."""
    return StateError(
        f"state database {where}: stored {what} is corrupt: {problem}",
        hint="restore the state database from a backup",
    )


CONNECT_HINT = (
    "check the state URL (host, port, database, user, password) and that the database "
    "server is running and reachable from here"
)


class Transactions:
    """Read and write transactions on one state engine, with every SQLAlchemy error turned
    into a :class:`StateError` that says what was being done, where, and how to fix it.

    For the classes that keep tables in the state database (the state store, the bot's
    job queue and ledger): :meth:`bind` once, then ``with self._reading(...)`` /
    ``with self._writing(...)``.
    """

    _engine: Engine
    _writer: Engine
    _where: str

    def bind(self, engine: Engine) -> None:
        """Use ``engine``; writes go through its twin marked :data:`WRITE_OPTION`."""
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._where = render_url(engine.url)

    @contextmanager
    def _reading(self, action: str) -> Iterator[Connection]:
        with self._errors(action), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _writing(self, action: str) -> Iterator[Connection]:
        with self._errors(action), self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StateError(
                f"state database {self._where}: cannot {action}: "
                f"{driver_message(exc, self._engine.url)}",
                hint=CONNECT_HINT,
            ) from exc
