"""The state's migrations: the ``state`` track of :mod:`sluice.core.db.migrate`.

Opening the state runs :func:`sluice.core.db.migrate.migrate` with :data:`STATE`; the
runner records each migration in ``sluice_migrations``. The numbers are the schema versions
Sluice used before the runner, which kept one number in ``sluice_schema_version``: that
table is still kept equal to the track's number, so a Sluice from before the runner can
share the database (and refuses it, "upgrade Sluice", once a newer migration has run).

A database from before the runner (``sluice_schema_version`` and no record) is adopted at
the version that table holds; state tables without it are refused (half-created, or made
by something else).

Migrations 1 to 3 create the tables as :mod:`sluice.core.state.schema` declares them now,
so a migration that adds a column to one of them (4, 6) adds it only where an older Sluice
made the table without it. A later migration that changes a table in any other way must first
give the earlier migration a frozen copy of the table's old definition.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert, inspect, select

from sluice.core.db.engine import render_url
from sluice.core.db.migrate import Migration, Track, create_tables
from sluice.core.errors import StateError
from sluice.core.state import schema


def _table_rows(conn: Connection) -> None:
    # Migration 3 makes the table as declared now (with the column): add it only to a table
    # an older Sluice made.
    table = schema.table_sizes
    if "row_count" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN row_count BIGINT")


def _plan_commits(conn: Connection) -> None:
    # Migration 1 makes the table as declared now (with the column): add it only to a table
    # an older Sluice made. Plans from before keep NULL: which commit they came from is not
    # known, and nothing may guess it (prod's jobs refuse until prod is promoted once).
    table = schema.plans
    if "project_commit" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN project_commit VARCHAR")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "snapshots, intervals, environments and plans",
        create_tables(
            schema.schema_version,
            schema.snapshots,
            schema.intervals,
            schema.environments,
            schema.plans,
        ),
    ),
    Migration(
        2,
        "track unreferenced tables and job results",
        create_tables(schema.orphans, schema.results),
    ),
    Migration(
        3,
        "record the size of each physical table a job wrote",
        create_tables(schema.table_sizes),
    ),
    Migration(4, "the rows of each measured table", _table_rows),
    Migration(
        5,
        "what each run's rebuild of a table read, to skip the next when nothing changed",
        create_tables(schema.run_inputs),
    ),
    Migration(
        6, "the commit each plan's project came from, as its promotion recorded it", _plan_commits
    ),
)
"""Every migration of the state, oldest first."""


def _legacy_version(conn: Connection) -> int:
    """The version a state database from before the runner is at (its
    ``sluice_schema_version``), or a refusal when it has state tables but no version."""
    where = render_url(conn.engine.url)
    table = schema.schema_version
    if table.name not in inspect(conn).get_table_names():
        ours = sorted(set(schema.metadata.tables) & set(inspect(conn).get_table_names()))
        raise StateError(
            f"state database {where} has Sluice tables ({', '.join(ours)}) but no "
            f"{table.name} table, so its schema version is unknown",
            hint="the schema was only partly created or was created by something else; "
            "drop the sluice_ tables (or point Sluice at an empty database) and run again",
        )
    found = list(conn.execute(select(table.c.version)).scalars())
    if len(found) != 1:
        raise StateError(
            f"state database {where}: {table.name} must hold exactly one row, found {len(found)}",
            hint="restore the state database from a backup, or point Sluice at an empty "
            "database to start afresh",
        )
    return int(found[0])


def _stamp_legacy(conn: Connection, version: int) -> None:
    conn.execute(delete(schema.schema_version))
    conn.execute(insert(schema.schema_version).values(version=version))


STATE = Track(
    name="state",
    tables=schema.metadata,
    migrations=MIGRATIONS,
    adopt=_legacy_version,
    stamp=_stamp_legacy,
)
"""The state's track."""
