"""Read and write transactions on the state database, with errors that say what failed."""

from __future__ import annotations

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
