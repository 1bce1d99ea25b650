"""The state database as Sluice left it before the migration runner: a frozen copy of the
table definitions of that code (state at schema version 2, stamped in
``sluice_schema_version``; the queue's and the ledger's tables made by ``create_all``, the
queue's partial index by hand), for the tests that such a database migrates.

Never change these: they are what is out there.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
)

state = MetaData()
queue = MetaData()
ledger = MetaData()

STATE_V2 = ("sluice_orphans", "sluice_results")
"""The state tables schema version 2 added."""

_schema_version = Table(
    "sluice_schema_version",
    state,
    Column("version", Integer, nullable=False),
)

_snapshots = Table(
    "sluice_snapshots",
    state,
    Column("name", String, primary_key=True),
    Column("identifier", String, primary_key=True),
    Column("version", String, nullable=False),
    Column("payload", Text, nullable=False),
)
Index("ix_sluice_snapshots_name_version", _snapshots.c.name, _snapshots.c.version)

_intervals = Table(
    "sluice_intervals",
    state,
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
Index("ix_sluice_intervals_name_version", _intervals.c.name, _intervals.c.version)

_environments = Table(
    "sluice_environments",
    state,
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

_plans = Table(
    "sluice_plans",
    state,
    Column("plan_id", String, primary_key=True),
    Column("environment", String, nullable=False),
    Column("base_plan_id", String, nullable=True),
    Column("created_ts", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
)


_orphans = Table(
    "sluice_orphans",
    state,
    Column("name", String, primary_key=True),
    Column("version", String, primary_key=True),
    Column("since_ts", BigInteger, nullable=False),
)

_results = Table(
    "sluice_results",
    state,
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
Index("ix_sluice_results_job", _results.c.job_id)
Index("ix_sluice_results_plan", _results.c.plan_id)

_deliveries = Table(
    "sluice_deliveries",
    queue,
    Column("delivery_id", String, primary_key=True),
    Column("forge", String, nullable=False),
    Column("event", String, nullable=False),
    Column("received_ts", BigInteger, nullable=False),
    Column("job_id", BigInteger, nullable=True),
)

_jobs = Table(
    "sluice_jobs",
    queue,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("delivery_id", String, nullable=False),
    Column("key", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("payload", Text, nullable=False),
    Column("head_sha", String, nullable=True),
    Column("status", String, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    Column("started_ts", BigInteger, nullable=True),
    Column("finished_ts", BigInteger, nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("worker", String, nullable=True),
    Column("error", Text, nullable=True),
)
Index("ix_sluice_jobs_key", _jobs.c.key)
Index("ix_sluice_jobs_status_id", _jobs.c.status, _jobs.c.id)
QUEUED_BY_KEY = (
    'CREATE INDEX IF NOT EXISTS ix_sluice_jobs_queued_key ON sluice_jobs ("key", kind) '
    "WHERE status = 'queued'"
)

_job_keys = Table(
    "sluice_job_keys",
    queue,
    Column("key", String, primary_key=True),
    Column("running_job_id", BigInteger, nullable=True),
)


_pr_plans = Table(
    "sluice_pr_plans",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("fingerprint", String, nullable=False),
    Column("review", Text, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
)

_plan_clicks = Table(
    "sluice_plan_clicks",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("clicked_ts", BigInteger, nullable=False),
)

_review_heads = Table(
    "sluice_review_heads",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),
    Column("sha", String, nullable=False),
    Column("reviewed_ts", BigInteger, nullable=False),
)

_approved = Table(
    "sluice_approved_models",
    ledger,
    Column("repo", String, primary_key=True),
    Column("model", String, primary_key=True),
    Column("content", String, primary_key=True),
    Column("number", Integer, nullable=False),
    Column("sha", String, nullable=False),
    Column("approvers", Text, nullable=False),
    Column("approved_ts", BigInteger, nullable=False),
)

_comments = Table(
    "sluice_pr_comments",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("body", Text, nullable=True),
    Column("sections", Text, nullable=False),
)

_merged_prs = Table(
    "sluice_merged_prs",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("changes", Text, nullable=False),
    Column("merged_ts", BigInteger, nullable=False),
)

_deployments = Table(
    "sluice_deployments",
    ledger,
    Column("repo", String, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("environment", String, primary_key=True),
    Column("deployment_id", BigInteger, nullable=False),
    Column("started_ts", BigInteger, nullable=False),
)

_handled_events = Table(
    "sluice_handled_events",
    ledger,
    Column("repo", String, primary_key=True),
    Column("key", String, primary_key=True),
    Column("kind", String, nullable=False),
    Column("outcome", String, nullable=False),
    Column("handled_ts", BigInteger, nullable=False),
)

_pr_heads = Table(
    "sluice_pr_heads",
    ledger,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("sha", String, nullable=False),
    Column("at_ts", BigInteger, nullable=True),
    Column("recorded_ts", BigInteger, nullable=False),
)

_repos = Table(
    "sluice_repos",
    ledger,
    Column("repo", String, primary_key=True),
    Column("installation_id", BigInteger, nullable=True),
    Column("last_sha", String, nullable=True),
    Column("seen_ts", BigInteger, nullable=False),
)

_prod_settings = Table(
    "sluice_prod_settings",
    ledger,
    Column("repo", String, primary_key=True),
    Column("sha", String, nullable=False),
    Column("digest", String, nullable=False),
    Column("config", Text, nullable=False),
    Column("pinned_ts", BigInteger, nullable=False),
)

_state_owner = Table(
    "sluice_state_owner",
    ledger,
    Column("slot", Integer, primary_key=True),
    Column("repo", String, nullable=False),
    Column("bound_ts", BigInteger, nullable=False),
)


def build(conn: Connection, *, state_version: int = 2, leave_out: tuple[str, ...] = ()) -> None:
    """Make in an empty database what the code before the runner made on first start (state,
    queue and ledger opened), at ``state_version``, without the tables ``leave_out`` (a
    table or index that code added later)."""
    skip = set(leave_out) | (set(STATE_V2) if state_version < 2 else set())
    for md in (state, queue, ledger):
        for table in md.sorted_tables:
            if table.name not in skip:
                table.create(conn)
    conn.execute(_schema_version.insert().values(version=state_version))
    if "ix_sluice_jobs_queued_key" not in skip:
        conn.exec_driver_sql(QUEUED_BY_KEY)
