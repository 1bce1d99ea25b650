"""What the job queue stores and hands out: its tables in the state database (and the
``queue`` track of migrations that makes them), a job's statuses, and the records producers
and workers exchange with :mod:`sluice.bot.queue.store`.

A new column or index is a new migration at the end of :data:`MIGRATIONS` as well as a
change to the table here; the test migrating an empty database checks they agree."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
)

from sluice.bot.queue import pg
from sluice.core.db.jsontext import JsonText
from sluice.core.db.migrate import Migration, Track, create_missing, create_tables


class JobStatus(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SUPERSEDED = "superseded"  # a newer head commit made it moot before it started


metadata = MetaData()

deliveries = Table(
    "sluice_deliveries",
    metadata,
    Column("delivery_id", String, primary_key=True),
    Column("forge", String, nullable=False),
    Column("event", String, nullable=False),
    Column("received_ts", BigInteger, nullable=False),
    Column("job_id", BigInteger, nullable=True),
)

jobs = Table(
    "sluice_jobs",
    metadata,
    # INTEGER on SQLite so the column aliases the rowid and actually autoincrements.
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("delivery_id", String, nullable=False),
    Column("key", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("payload", JsonText, nullable=False),
    Column("head_sha", String, nullable=True),
    Column("status", String, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Column("started_ts", BigInteger, nullable=True),
    Column("finished_ts", BigInteger, nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("worker", String, nullable=True),
    Column("error", Text, nullable=True),
    # Migration 3: a retried job waits until then (epoch ms; NULL: ready).
    Column("not_before", BigInteger, nullable=True),
)
Index("ix_sluice_jobs_key", jobs.c.key)
# claim scans queued jobs oldest first; recover scans running ones.
Index("ix_sluice_jobs_status_id", jobs.c.status, jobs.c.id)
# Supersede looks up the queued jobs of a key: only those, not every job the key ever had.
_queued = jobs.c.status == JobStatus.QUEUED.value
Index(
    "ix_sluice_jobs_queued_key",
    jobs.c.key,
    jobs.c.kind,
    postgresql_where=_queued,
    sqlite_where=_queued,
)

job_keys = Table(
    "sluice_job_keys",
    metadata,
    Column("key", String, primary_key=True),
    Column("running_job_id", BigInteger, nullable=True),
)

# Migration 4: a named lease one service replica holds at a time (the scheduler's and the
# janitor's: sluice.bot.queue.lease), taken, renewed and let go by one statement each.
leases = Table(
    "sluice_leases",
    metadata,
    Column("name", String, primary_key=True),
    Column("holder", String, nullable=False),  # the replica: host:pid:random
    Column("expires", BigInteger, nullable=False),  # epoch ms; after it anyone may take it
)


def _accept_function(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        queued, superseded = JobStatus.QUEUED.value, JobStatus.SUPERSEDED.value
        conn.exec_driver_sql(pg.function_ddl(queued=queued, superseded=superseded))


def _adopt(conn: Connection) -> int:
    # Before the runner every start ran create_all and created the partial index and (on
    # PostgreSQL) the function: do what it did, then the track is at migration 1.
    create_missing(conn, (deliveries, jobs, job_keys))
    return 1


def _not_before(conn: Connection) -> None:
    # Migration 1 creates sluice_jobs as declared now (with the column): add it only to a
    # table made before this migration.
    if "not_before" not in {c["name"] for c in inspect(conn).get_columns("sluice_jobs")}:
        conn.exec_driver_sql("ALTER TABLE sluice_jobs ADD COLUMN not_before BIGINT")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "deliveries, jobs and job keys", create_tables(deliveries, jobs, job_keys)),
    # A new function body is a new migration running this again (CREATE OR REPLACE).
    Migration(2, "batch intake function (PostgreSQL)", _accept_function),
    Migration(3, "a retried job's earliest next attempt (not_before)", _not_before),
    Migration(4, "leases (one replica runs the scheduler and the janitor)", create_tables(leases)),
)
"""Every migration of the queue, oldest first."""

QUEUE = Track(name="queue", tables=metadata, migrations=MIGRATIONS, adopt=_adopt)
"""The queue's track of migrations (after the state's: see :class:`~sluice.bot.queue.store.JobQueue`)."""


@dataclass(frozen=True)
class NewJob:
    """A job to enqueue with a delivery.

    Attributes:
        key: Jobs of one key run one at a time, oldest first (``pr_key`` of the event).
        kind: What the job does (the event kind); with ``supersede``, only queued jobs of
            the same kind are superseded.
        payload: JSON-serialisable document for the worker (the event's ``to_json``).
        head_sha: The commit the job is about, when there is one.
        supersede: Mark queued jobs of the same key and kind for another head commit as
            superseded: a newer head makes older waiting work moot. A running job is left
            to finish.
    """

    key: str
    kind: str
    payload: dict[str, Any]
    head_sha: str | None = None
    supersede: bool = False


@dataclass(frozen=True)
class Delivery:
    """A webhook delivery to store, with the job it asks for (None: no work).

    ``now`` is when it arrived (epoch seconds): it becomes the delivery's and the job's time.
    """

    delivery_id: str
    forge: str
    event: str
    job: NewJob | None
    now: float


@dataclass(frozen=True)
class Job:
    """A claimed job, as a worker sees it. ``attempts`` counts this one (1 on the first)."""

    id: int
    delivery_id: str
    key: str
    kind: str
    payload: dict[str, Any]
    head_sha: str | None
    attempts: int
    created_ts: float


@dataclass(frozen=True)
class JobRecord:
    """Everything stored about a job (for tests, diagnostics and the health page)."""

    job: Job
    status: JobStatus
    worker: str | None
    error: str | None
    started_ts: float | None
    finished_ts: float | None
    lease_until: float | None
    not_before: float | None = None  # a retried job's next try
