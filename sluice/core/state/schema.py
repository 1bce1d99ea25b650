"""The state's tables (SQLAlchemy Core metadata), as its latest migration leaves them.

The migrations that make them are in :mod:`sluice.core.state.migrations`; change both
together (the test migrating an empty database compares the result with these tables).
The engine, transactions and JSON columns are the database layer's
(:mod:`sluice.core.db`), shared with the bot's queue and ledger.

Every table is prefixed ``sluice_`` so the state can share a database (or a PostgreSQL
schema) with other applications. JSON documents are :class:`~sluice.core.db.jsontext.JsonText`
(TEXT); timestamps are epoch milliseconds in BIGINT columns.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    false,
)

from sluice.core.db.jsontext import JsonText

metadata = MetaData()

schema_version = Table(
    "sluice_schema_version",
    metadata,
    # Exactly one row: the state track's version, for Sluice before the migration runner
    # (which records in sluice_migrations). No primary key: replaced wholesale.
    Column("version", Integer, nullable=False),
)

snapshots = Table(
    "sluice_snapshots",
    metadata,
    Column("name", String, primary_key=True),
    Column("identifier", String, primary_key=True),
    Column("version", String, nullable=False),
    Column("payload", JsonText, nullable=False),
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
    Column("snapshots", JsonText, nullable=False),
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
    Column("payload", JsonText, nullable=False),
    # Migration 6: the commit whose project the plan's models came from, as the promotion
    # that applied it recorded (a scheduled run or a drift repair carries its base plan's
    # on). NULL: not known (a plan recorded before Sluice kept it, by the CLI, a PR's).
    Column("project_commit", String, nullable=True),
)

# Migration 2 -----------------------------------------------------------------------

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
    Column("payload", JsonText, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
)
Index("ix_sluice_results_job", results.c.job_id)
Index("ix_sluice_results_plan", results.c.plan_id)

# Migration 3 -----------------------------------------------------------------------

table_sizes = Table(
    "sluice_table_sizes",
    metadata,
    # How many bytes of files a physical table held when a job last wrote it (the catalog's
    # statistics): what a plan's scan estimate and `sluice environments` sizes come from.
    Column("name", String, primary_key=True),
    Column("version", String, primary_key=True),
    Column("bytes", BigInteger, nullable=False),
    Column("measured_ts", BigInteger, nullable=False),
    # Migration 4: the rows the table held then (NULL: measured before Sluice counted rows,
    # or the catalog kept no row count).
    Column("row_count", BigInteger, nullable=True),
)

# Migration 5 -----------------------------------------------------------------------

run_inputs = Table(
    "sluice_run_inputs",
    metadata,
    # What the last run that rebuilt a model version read (sluice/core/skip.py): its
    # query's key and each input table's version, so the next run can skip the rebuild
    # when none changed. One row per physical table, replaced by each rebuild.
    Column("name", String, primary_key=True),
    Column("version", String, primary_key=True),
    Column("query_key", String, nullable=False),
    Column("inputs", JsonText, nullable=False),
    Column("run_ts", BigInteger, nullable=False),
)
