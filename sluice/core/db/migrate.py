"""Numbered migrations for every owner of tables in the state database, and their runner.

Each owner (core's state, the bot's job queue, its ledger) declares a :class:`Track`: its
name, its tables as they are now (a ``MetaData``) and its migrations ``1..n``, oldest first.
:func:`migrate` brings the tracks it is given up to date, recording every migration that
ran, per track, in the one version table ``sluice_migrations``. Within one call:

* everything runs in one transaction, under one lock (a transaction-level advisory lock
  on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so two processes starting at once migrate
  one after the other and the second finds nothing to do;
* each migration runs in the same transaction as its record, so a failure (or a refusal)
  leaves the database exactly as it was;
* a track whose recorded migrations go beyond the code's is refused: upgrade Sluice;
* a track with tables but no record was made before this runner existed: its ``adopt``
  brings it to a known migration (without losing data) and that many are recorded, then
  the later ones run. A track without ``adopt`` refuses such tables.

A migration's ``up`` must not commit; after it has run on some database it never changes
(a change is a new migration). The test that migrates an empty database and compares the
result with the declared tables keeps the two in step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from sluice.core.db.engine import WRITE_OPTION, driver_message, render_url
from sluice.core.errors import StateError

logger = logging.getLogger(__name__)

metadata = MetaData()

versions = Table(
    "sluice_migrations",
    metadata,
    # One row per migration that ran (or was found done, "adopted"), per track.
    Column("track", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("applied_ts", BigInteger, nullable=False),  # epoch milliseconds
)

# Arbitrary but fixed: every Sluice process must contend for the same advisory lock. The
# bytes spell "sluiceMG" (the key state's migrations used before, so a Sluice from before
# the runner and this one still take turns).
_PG_MIGRATION_LOCK_KEY = int.from_bytes(b"sluiceMG", "big")

UPGRADE_HINT = (
    "upgrade Sluice here to the version that last wrote this state database, "
    "or point this Sluice at a different state database"
)


@dataclass(frozen=True)
class Migration:
    """One numbered step of a track.

    Attributes:
        number: Its place in the track: 1 for the first, no gaps.
        name: What it changes, for logs, errors and the version table.
        up: Performs the change on a connection inside the migration transaction.
    """

    number: int
    name: str
    up: Callable[[Connection], None]


@dataclass(frozen=True)
class Track:
    """One owner's tables and the migrations that make them.

    Attributes:
        name: The owner, as recorded in the version table ("state", "queue", "ledger").
        tables: The tables as the migrations leave them (their latest declaration).
        migrations: Every migration of the track.
        adopt: For a database made before the runner: given a connection to a database
            holding some of ``tables`` but no record of the track, bring them to a known
            migration and return its number. None: such a database is refused.
        stamp: Also called, with the track's number, after migrations ran (state keeps
            the version table of the Sluice before the runner up to date with it).
    """

    name: str
    tables: MetaData
    migrations: tuple[Migration, ...]
    adopt: Callable[[Connection], int] | None = None
    stamp: Callable[[Connection, int], None] | None = None

    @property
    def last(self) -> int:
        """The number this code takes the track to."""
        return len(self.migrations)

    def ordered(self) -> list[Migration]:
        """The migrations by number.

        Raises:
            ValueError: Two share a number or one is missing (a bug in Sluice).
        """
        steps = sorted(self.migrations, key=lambda m: m.number)
        numbers = [m.number for m in steps]
        if numbers != list(range(1, len(steps) + 1)):
            raise ValueError(
                f"migrations of track {self.name!r} must be numbered 1..{len(steps)} without "
                f"gaps or repeats, got {numbers}"
            )
        return steps


def create_tables(*tables: Table) -> Callable[[Connection], None]:
    """A migration's ``up`` creating ``tables`` with their indexes."""

    def up(conn: Connection) -> None:
        for table in tables:
            table.create(conn)  # its indexes too

    return up


def create_missing(conn: Connection, tables: Iterable[Table]) -> None:
    """Create whichever of ``tables`` and of their indexes the database lacks: what
    ``create_all`` did on every start before the runner, and a bit more (an index declared
    after its table was made), for an ``adopt``."""
    for table in tables:
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def migrate(engine: Engine, tracks: Sequence[Track]) -> dict[str, int]:
    """Bring ``tracks`` in the database behind ``engine`` up to date, in the given order.

    Args:
        engine: From :func:`sluice.core.db.engine.create_state_engine` (on SQLite its
            ``begin`` hook serialises the migration transaction).
        tracks: The tracks to migrate; a track another one depends on comes first.

    Returns:
        Every track's number afterwards.

    Raises:
        StateError: A track is newer than this code, holds tables it cannot account for,
            or a migration failed; the database is then left unchanged.
        ValueError: A track's migrations are misnumbered (a bug in Sluice).
    """
    plans = [(track, track.ordered()) for track in tracks]
    where = render_url(engine.url)
    reached: dict[str, int] = {}
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
        _lock(conn)
        present = set(inspect(conn).get_table_names())
        recorded = _recorded(conn, where) if versions.name in present else {}
        for track, steps in plans:
            done = recorded.get(track.name)
            if done is None:
                done = _adopt(conn, track, present, where)
            if done > track.last:
                raise StateError(
                    f"state database {where}: the {track.name} schema is version {done} but "
                    f"this Sluice knows only up to {track.last}; upgrade Sluice",
                    hint=UPGRADE_HINT,
                )
            if done < track.last or track.name not in recorded:
                metadata.create_all(conn, checkfirst=True)  # the version table
            if track.name not in recorded and done:
                _record(conn, track.name, steps[:done], adopted=True)
            for step in steps[done:]:
                _run(conn, track, step, done, where, engine)
            if done < track.last and track.stamp is not None:
                track.stamp(conn, track.last)
            if done == track.last:
                logger.debug("%s schema in %s is at version %d", track.name, where, done)
            reached[track.name] = track.last
    return reached


def _lock(conn: Connection) -> None:
    """Serialise migrations across processes for the rest of the transaction."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK_KEY)))
    # SQLite: the transaction began with BEGIN IMMEDIATE and already holds the write lock.


def _recorded(conn: Connection, where: str) -> dict[str, int]:
    """Per track, the number of migrations recorded (they must be ``1..k``)."""
    numbers: dict[str, list[int]] = {}
    rows = conn.execute(select(versions.c.track, versions.c.number).order_by("track", "number"))
    for track, number in rows:
        numbers.setdefault(track, []).append(number)
    for track, got in numbers.items():
        if got != list(range(1, len(got) + 1)):
            raise StateError(
                f"state database {where}: {versions.name} records migrations {got} of "
                f"{track}, not 1..{len(got)}",
                hint="restore the state database from a backup",
            )
    return {track: len(got) for track, got in numbers.items()}


def _adopt(conn: Connection, track: Track, present: set[str], where: str) -> int:
    """The number of a track with no record: 0 on a database without its tables, else
    what ``adopt`` finds (tables left by a Sluice from before the runner)."""
    found = sorted(set(track.tables.tables) & present)
    if not found:
        return 0
    if track.adopt is None:
        raise StateError(
            f"state database {where} has {track.name} tables ({', '.join(found)}) but no "
            f"record of their migrations in {versions.name}",
            hint="the tables were made by something else; drop them (or point Sluice at "
            "an empty database) and run again",
        )
    number = track.adopt(conn)
    logger.info("adopting %s schema in %s at version %d", track.name, where, number)
    return number


def _run(
    conn: Connection, track: Track, step: Migration, before: int, where: str, engine: Engine
) -> None:
    logger.info(
        "migrating %s schema in %s to version %d: %s", track.name, where, step.number, step.name
    )
    try:
        step.up(conn)
        _record(conn, track.name, [step], adopted=False)
    except SQLAlchemyError as exc:
        # Raising inside the ``begin()`` block rolls the whole run back.
        raise StateError(
            f"state database {where}: migration {step.number} of {track.name} "
            f"({step.name}) failed: {driver_message(exc, engine.url)}",
            hint=f"the database was left as it was ({track.name} at version {before}); fix "
            "the cause and run Sluice again, or restore the state database from a backup",
        ) from exc


def _record(conn: Connection, track: str, steps: Sequence[Migration], *, adopted: bool) -> None:
    now = int(time.time() * 1000)
    suffix = " (adopted)" if adopted else ""
    conn.execute(
        insert(versions),
        [
            {"track": track, "number": s.number, "name": s.name + suffix, "applied_ts": now}
            for s in steps
        ],
    )
