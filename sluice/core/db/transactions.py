"""Read and write transactions on the state database, with errors that say what failed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from sluice.core.db.engine import WRITE_OPTION, driver_message, render_url
from sluice.core.errors import StateError

CONNECT_HINT = (
    "check the state URL (host, port, database, user, password) and that the database "
    "server is running and reachable from here"
)


LOCKED_HINT = (
    "SQLite lets one writer in at a time: a process's writers take turns, first come first "
    "served, and one fails only when those ahead of it hold the database 5 s in all "
    "(measured on 2 cores, bench/sqlite_writers.py: up to 128 threads writing at once, none "
    "failed; the code before failed from 16). Run again; for more writers at once than "
    "that, or for several service processes, use PostgreSQL (SLUICE_DATABASE_URL="
    "postgresql://user:password@host:5432/db)"
)


class Transactions:
    """Read and write transactions on one state engine, with every SQLAlchemy error turned
    into a :class:`StateError` that says what was being done, where, and how to fix it.

    For the classes that keep tables in the state database (the state store, the bot's
    job queue and ledger): :meth:`bind` once, then ``with self._reading(...)`` /
    ``with self._writing(...)``; a caller groups several of their reads and writes into one
    transaction with :meth:`together`.
    """

    _engine: Engine
    _writer: Engine
    _where: str
    _shared: threading.local

    def bind(self, engine: Engine) -> None:
        """Use ``engine``; writes go through its twin marked :data:`WRITE_OPTION`."""
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._where = render_url(engine.url)
        self._shared = threading.local()

    @contextmanager
    def together(self, action: str) -> Iterator[None]:
        """The reads and writes made in this thread inside the block as one transaction:
        committed at its end, rolled back when it raises (nested: part of the outer one).

        Keep the block short and local: no forge call, no Spark job inside. It is a
        writer's transaction (on SQLite it holds the database's write lock), so what it
        reads is what it writes on, and nobody writes in between.
        """
        if getattr(self._shared, "conn", None) is not None:
            yield
            return
        with self._errors(action), self._writer.begin() as conn:
            self._shared.conn = conn
            try:
                yield
            finally:
                self._shared.conn = None

    @contextmanager
    def _reading(self, action: str) -> Iterator[Connection]:
        shared: Connection | None = getattr(self._shared, "conn", None)
        if shared is not None:
            with self._errors(action):
                yield shared
            return
        with self._errors(action), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _writing(self, action: str) -> Iterator[Connection]:
        shared: Connection | None = getattr(self._shared, "conn", None)
        if shared is not None:
            with self._errors(action):
                yield shared
            return
        with self._errors(action), self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            message = driver_message(exc, self._engine.url)
            raise StateError(
                f"state database {self._where}: cannot {action}: {message}",
                hint=LOCKED_HINT if "database is locked" in message else CONNECT_HINT,
            ) from exc
