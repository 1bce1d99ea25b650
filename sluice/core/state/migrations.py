"""Versioned schema of the state database, and the code that brings a database up to date.

The database records its schema version in ``sluice_schema_version``. Opening the state
runs :func:`migrate`, which:

* creates every table from :mod:`sluice.core.state.schema` on a database without any
  ``sluice_`` table, and stamps it with the target version;
* runs the migrations ``k+1 .. target`` in order on a database at version ``k``, all in
  the same transaction as the new stamp, so a failure leaves the database at ``k``;
* refuses a database newer than this Sluice, or one with ``sluice_`` tables but no
  version (half-created, or made by something else).

Two processes may start against a fresh database at the same time (two CI jobs, the bot
and a developer). Migration therefore runs under a lock: a transaction-level advisory lock
on PostgreSQL, and on SQLite a write transaction begun with ``BEGIN IMMEDIATE``, which the
engine's ``begin`` hook (installed by :func:`sluice.core.state.schema.create_state_engine`)
emits for connections carrying the ``WRITE_OPTION`` execution option.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, func, insert, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from sluice.core.errors import StateError
from sluice.core.state.schema import (
    TABLE_PREFIX,
    WRITE_OPTION,
    driver_message,
    metadata,
    render_url,
    schema_version,
)

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""The schema version this Sluice creates and understands."""

# Arbitrary but fixed: every Sluice process must contend for the same advisory lock.
# The bytes spell "sluiceMG" so the lock is recognisable in pg_locks.
_PG_MIGRATION_LOCK_KEY = int.from_bytes(b"sluiceMG", "big")

_UPGRADE_HINT = (
    "upgrade Sluice here to the version that last wrote this state database, "
    "or point this Sluice at a different state database"
)


@dataclass(frozen=True)
class Migration:
    """One step from schema version ``version - 1`` to ``version``.

    Attributes:
        version: The version the database is at after this migration.
        description: What the migration changes, for logs and errors.
        apply: Performs the change on a connection inside the migration transaction.
            It must not commit.
    """

    version: int
    description: str
    apply: Callable[[Connection], None]


def _v2_orphans_and_results(conn: Connection) -> None:
    from sluice.core.state.schema import orphans, results

    # checkfirst: a database created at a later version already has them.
    for table in (orphans, results):
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "track unreferenced tables and job results", _v2_orphans_and_results),
)
"""Every migration, oldest first (version 1 is the first schema)."""


def migrate(
    engine: Engine,
    migrations: Sequence[Migration] = MIGRATIONS,
    target: int = SCHEMA_VERSION,
) -> int:
    """Bring the state database behind ``engine`` to schema version ``target``.

    Args:
        engine: Engine of the state database. On SQLite it should come from
            ``schema.create_state_engine`` so the migration transaction is serialised.
        migrations: The known migrations; those above the database's version and up to
            ``target`` are applied in order.
        target: The version to reach.

    Returns:
        The schema version of the database afterwards (always ``target``).

    Raises:
        StateError: The database is newer than ``target``, is half-created, or a
            migration failed (the database is then left unchanged).
        ValueError: ``migrations`` lacks a step between the database's version and
            ``target`` (a bug in Sluice, not in the database).
    """
    where = render_url(engine.url)
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
        _lock(conn)
        current = _current_version(conn, where)
        if current is None:
            logger.info("creating state schema version %d in %s", target, where)
            metadata.create_all(conn)
            _stamp(conn, target)
            return target
        if current == target:
            logger.debug("state schema in %s is at version %d", where, current)
            return target
        if current > target:
            raise StateError(
                f"state database {where} schema is version {current} but this Sluice "
                f"knows only up to {target}; upgrade Sluice",
                hint=_UPGRADE_HINT,
            )
        for step in _steps(migrations, current, target):
            logger.info(
                "migrating state schema in %s to version %d: %s",
                where,
                step.version,
                step.description,
            )
            try:
                step.apply(conn)
            except SQLAlchemyError as exc:
                # Raising inside the ``begin()`` block rolls the whole upgrade back.
                raise StateError(
                    f"state database {where}: migration to schema version {step.version} "
                    f"({step.description}) failed: {driver_message(exc, engine.url)}",
                    hint=f"the database was left at version {current}; fix the cause and "
                    "run Sluice again, or restore the state database from a backup",
                ) from exc
        _stamp(conn, target)
        return target


def _lock(conn: Connection) -> None:
    """Serialise migrations across processes for the rest of the transaction."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK_KEY)))
    # SQLite: the transaction began with BEGIN IMMEDIATE and already holds the write lock.


def _current_version(conn: Connection, where: str) -> int | None:
    """The database's schema version, or None when it has no ``sluice_`` table at all."""
    tables = set(inspect(conn).get_table_names())
    ours = sorted(t for t in tables if t.startswith(TABLE_PREFIX))
    if not ours:
        return None
    if schema_version.name not in tables:
        raise StateError(
            f"state database {where} has Sluice tables ({', '.join(ours)}) but no "
            f"{schema_version.name} table, so its schema version is unknown",
            hint="the schema was only partly created or was created by something else; "
            "drop the sluice_ tables (or point Sluice at an empty database) and run again",
        )
    versions = list(conn.execute(select(schema_version.c.version)).scalars())
    if len(versions) != 1:
        raise StateError(
            f"state database {where}: {schema_version.name} must hold exactly one row, "
            f"found {len(versions)}",
            hint="restore the state database from a backup, or point Sluice at an empty "
            "database to start afresh",
        )
    return int(versions[0])


def _steps(migrations: Sequence[Migration], current: int, target: int) -> list[Migration]:
    """The migrations taking ``current`` to ``target``, in order, checked for gaps."""
    by_version: dict[int, Migration] = {}
    for migration in migrations:
        if migration.version in by_version:
            raise ValueError(f"two migrations to schema version {migration.version}")
        by_version[migration.version] = migration
    missing = [v for v in range(current + 1, target + 1) if v not in by_version]
    if missing:
        raise ValueError(
            f"no migration to schema version(s) {missing}; cannot go from {current} to {target}"
        )
    return [by_version[v] for v in range(current + 1, target + 1)]


def _stamp(conn: Connection, version: int) -> None:
    conn.execute(delete(schema_version))
    conn.execute(insert(schema_version).values(version=version))
