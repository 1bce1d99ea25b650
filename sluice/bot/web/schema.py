"""The API's answers as pydantic models (the OpenAPI schema of ``/api/v1`` is made of
them). Times are epoch milliseconds; ``None`` means "not recorded"."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")
MAX_STEPS = 50
"""How far upstream or downstream a cut lineage graph reaches at most."""


class Page(BaseModel, Generic[T]):
    """One page of a list that grows: ``items`` from ``offset``, ``total`` in all."""

    items: list[T]
    total: int
    offset: int
    limit: int


class Repository(BaseModel):
    key: str = Field(description="forge:owner/name")


class ModelVersion(BaseModel):
    name: str
    version: str
    identifier: str
    own: bool = Field(default=False, description="its table is not prod's (built for it)")
    bytes: int | None = Field(default=None, description="its table's size when last measured")
    rows: int | None = None


class Environment(BaseModel):
    name: str
    kind: str = Field(description="prod, tier or pr")
    status: str = Field(description="active, expired or invalidated")
    plan_id: str
    previous_plan_id: str | None
    pull_request: int | None
    created: int | None = Field(description="when its current plan was made")
    updated: int
    expires: int | None
    models: int
    versions: list[ModelVersion] = Field(default_factory=list)
    own_bytes: int | None = Field(
        default=None, description="the measured size of the tables it does not share with prod"
    )


class Change(BaseModel):
    name: str
    category: str
    version: str
    previous_version: str
    why: list[str] = Field(
        description="the changed parents that reach it (indirect), or "
        "whose columns its stars take (directly modified, reshaped)"
    )
    diff: str = ""


class BackfillRange(BaseModel):
    model: str
    version: str
    start: str
    end: str
    intervals: int
    batches: int


class PlanView(BaseModel):
    plan_id: str
    environment: str
    base_plan_id: str | None
    created: int
    added: list[str]
    removed: list[str]
    directly_modified: list[Change]
    indirectly_modified: list[Change]
    metadata_only: list[str]
    unaffected: list[str]
    backfill: list[BackfillRange]
    warnings: list[str]
    scan_bytes: int | None = Field(description="what the backfill reads, estimated")
    write_rows: int | None = Field(description="what the backfill writes, estimated")
    write_bytes: int | None


class SampleCounts(BaseModel):
    """How many example rows the table diff kept of each kind."""

    differing: int
    source_only: int
    target_only: int


class TableDiff(BaseModel):
    name: str
    source: str
    target: str
    identical: bool
    source_rows: int | None
    target_rows: int | None
    source_only: int | None
    target_only: int | None
    differing_rows: int | None
    changed_columns: list[str]
    note: str | None
    keys: list[str] = Field(default_factory=list, description="the join key columns")
    samples: SampleCounts | None = Field(default=None, description="the example rows it kept")


class TableDiffSamples(BaseModel):
    """A page of one table diff's example rows of one kind. A ``differing`` row holds the
    key columns and, for each column that differs in it, ``{"source": v, "target": v}``;
    the others hold the row's values."""

    pull_request: int
    plan_id: str
    diff: TableDiff
    kind: str = Field(description="differing, source_only or target_only")
    columns: list[str] = Field(description="the key columns, then the others the rows hold")
    rows: Page[dict[str, Any]]


class AuditOutcome(BaseModel):
    name: str
    passed: bool
    violations: int | None


class CheckView(BaseModel):
    name: str
    status: str
    conclusion: str | None
    title: str
    summary: str


class Build(BaseModel):
    sha: str
    fingerprint: str
    created: int


class Approvals(BaseModel):
    review: str = Field(
        description="the fingerprint of the plan review at the head: what an approval approves"
    )
    clicks: list[str] = Field(description="who clicked Approve this plan, on the head")
    owners_of_changes: dict[str, str | None] = Field(
        description="directly modified or added model -> its owner (who must approve it)"
    )
    breaking_owners: dict[str, str | None]
    merge_intervals: int
    check: CheckView | None = Field(description="the sluice/approval check: given and needed")


class PullRequestView(BaseModel):
    repository: str
    number: int
    title: str
    author: str | None
    head_sha: str | None
    open: bool | None
    environment: str
    plan: PlanView | None
    checks: list[CheckView]
    approvals: Approvals | None
    builds: list[Build]
    table_diffs: list[TableDiff] = Field(description="the PR's tables against prod's")
    audits: list[AuditOutcome] = Field(description="the audits its build ran")


class PullSummary(BaseModel):
    number: int
    title: str
    environment: str
    plan_id: str | None
    head_sha: str | None


class QueueJob(BaseModel):
    id: int
    key: str
    kind: str
    status: str
    attempts: int
    head_sha: str | None
    created: float
    started: float | None
    finished: float | None
    error: str | None = Field(description="why it failed, or why it is retried")
    next_try: float | None = Field(description="when a retried job runs again")


class JobLog(BaseModel):
    job_id: str
    size: int
    modified: float


class SparkServer(BaseModel):
    """The repository's warm Spark Connect server, as the service's pool has it."""

    state: str = Field(
        description="running, starting, down (died: its next job starts it again), not "
        "started, stopping, or stopped (by the pool: stopped_because; its next job starts "
        "it again)"
    )
    port: int | None = Field(description="its port on 127.0.0.1 while it runs or starts")
    jobs: int = Field(description="jobs running on it now")
    idle_since: float | None = Field(description="when its last job ended (none while one runs)")
    stopped_because: str | None = Field(
        description="idle (SLUICE_SPARK_CONNECT_IDLE_MINUTES) or least recently used "
        "(SLUICE_SPARK_CONNECT_SERVERS)"
    )


class Jobs(BaseModel):
    queue: Page[QueueJob]
    logs: Page[JobLog]
    spark_server: SparkServer | None = Field(
        default=None,
        description="the repository's Spark Connect server when the service runs its own "
        "(Spark Connect mode without SLUICE_SPARK_REMOTE); none before its first job",
    )


class HistoryEntry(BaseModel):
    plan_id: str
    environment: str
    created: int
    kind: str = Field(
        description="promotion, rollback, or run (a scheduled run: nothing changed, "
        "intervals processed)"
    )
    source: str | None = Field(
        description="the pull requests whose gate approved what it changed, when one did"
    )
    by: str | None = Field(description="who approved it there")
    added: list[str]
    removed: list[str]
    changed: list[str]


class RunModel(BaseModel):
    """One model a scheduled run processed: its table's due intervals."""

    name: str
    version: str
    start: int
    end: int = Field(description="the end of its last interval (exclusive)")
    intervals: int


class ScheduledRun(BaseModel):
    """One scheduled run of an environment (``sluice run``, the service's schedule), as
    the state recorded it (:mod:`sluice.core.runs`): only runs that had intervals due or
    failed are recorded."""

    job_id: str = Field(description="its Spark job's id (its log's name), or the run's")
    plan_id: str | None = Field(description="the run's plan (None: it failed before one)")
    environment: str
    outcome: str = Field(description="ok or failed")
    at: int | None = Field(description="the time it processed what was due by")
    started: int | None
    finished: int | None
    seconds: float | None = Field(description="how long it took, start to end")
    spark_seconds: float | None = Field(description="its Spark job's time, when it ran one")
    intervals: int = Field(description="the intervals due, all models together")
    tables_built: int
    models: list[RunModel] = Field(description="the models it processed (the first 1,000)")
    models_total: int
    error: str | None = Field(description="why it failed (scrubbed, at most 4,000 chars)")
    log: bool = Field(default=False, description="whether its Spark job's log is kept")


class AuditRow(BaseModel):
    """One row of the audit log (:mod:`sluice.bot.flow.audit`): bounded, scrubbed text."""

    id: int
    at: int
    kind: str = Field(description="approval, refusal, promotion, rollback, override, ...")
    actor: str = Field(description="a forge login, or sluice for the service itself")
    ref: str | None = Field(description="the pull request (#7) or tag it was about")
    plan_id: str | None
    outcome: str
    detail: str


class Column(BaseModel):
    name: str
    type: str
    description: str | None = None


class UnitTestView(BaseModel):
    """A unit test of a model as the last build that tested the model ran it."""

    name: str
    passed: bool
    at: int = Field(description="when its result was recorded")
    plan_id: str | None = Field(description="the plan of the build that ran it")
    diff: str = Field(description="what differed when it failed (cut at 4,000 chars)")


class ModelView(BaseModel):
    name: str
    kind: str
    owner: str | None
    description: str | None
    version: str
    columns: list[Column] = Field(
        description="its declared columns; one model's answer infers them when it declares "
        "none (columns_inferred)"
    )
    columns_inferred: bool = Field(
        default=False,
        description="columns and types inferred from its query and its parents' (as "
        "SQLMesh's columns_to_types); a type sqlglot cannot tell is unknown",
    )
    audits: list[str]
    cron: str
    depends_on: list[str]
    path: str
    query: str | None
    bytes: int | None = Field(default=None, description="its prod table's size when last measured")
    rows: int | None = Field(default=None, description="its prod table's rows then")
    measured: int | None = Field(default=None, description="when it was measured")
    tests: list[UnitTestView] | None = Field(
        default=None,
        description="the unit tests the last build that tested it ran, and their outcome "
        "(one model's answer only; None in lists)",
    )


class Span(BaseModel):
    """A run of consecutive built intervals, ``[start, end)`` in epoch ms."""

    start: int
    end: int
    start_text: str = Field(description="its start, a date when midnight, else a timestamp")
    end_text: str = Field(description="its end (exclusive), as start_text")


class CalendarCell(BaseModel):
    start: int
    end: int
    label: str = Field(description="the day of the month, or the month")
    group: str = Field(description="its month (YYYY-MM) or year")


class ModelIntervals(BaseModel):
    name: str
    version: str
    view: bool = Field(description="a view: built once, it holds no time range")
    spans: list[Span] = Field(description="the first spans, oldest first (at most 100)")
    spans_total: int = Field(description="all its spans; more than listed means more gaps")
    cells: list[str] = Field(description="each cell of the window: full, part or none")


class IntervalCalendar(BaseModel):
    """The intervals each model of an environment holds, over a window of cells."""

    environment: str
    plan_id: str
    unit: str = Field(description="day or month: what one cell is")
    cells: list[CalendarCell]
    earlier: str | None = Field(description="the until of the window before this one")
    later: str | None = Field(description="the until of the window after it, if any is built")
    models: Page[ModelIntervals]


class LineageNode(BaseModel):
    """A model of the lineage graph, and what the chosen plan does to it."""

    name: str
    kind: str
    impact: str | None = Field(
        default=None,
        description="with a plan: breaking, non-breaking, forward-only, metadata (changed "
        "directly), indirect (reached by a change upstream), added, or unchanged",
    )
    category: str | None = Field(
        default=None, description="an indirect change's category (breaking, non-breaking...)"
    )
    why: list[str] = Field(
        default_factory=list, description="an indirect change: the changed models reaching it"
    )


class LineageEdge(BaseModel):
    """``source`` is read by ``target`` (one of its ``depends_on``)."""

    source: str
    target: str


class LineageGraph(BaseModel):
    """The model graph of prod, or of the environment a chosen plan points at."""

    environment: str = Field(description="prod, or the chosen plan's environment")
    plan_id: str | None = Field(description="the plan whose impact colours the nodes")
    focus: str | None = Field(default=None, description="the model the graph is cut around")
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    removed: list[str] = Field(
        default_factory=list, description="models the plan removes (not in its graph)"
    )
    total: int = Field(description="the models of the whole graph (the cut's are fewer)")


class ColumnRef(BaseModel):
    model: str = Field(description="a model, or a table nobody models (external)")
    column: str = Field(description="a column; * stands for the table's rows")


class ColumnLink(BaseModel):
    """``target``'s value reads ``source``."""

    source: ColumnRef
    target: ColumnRef


class ModelColumn(BaseModel):
    name: str
    type: str | None = Field(description="its declared type, when the model declares it")


class ColumnLineageView(BaseModel):
    """One model's columns and, for the chosen one, where it comes from and what it
    reaches."""

    model: str
    kind: str
    columns: list[ModelColumn]
    column: str | None = Field(description="the chosen column (None: only the columns)")
    upstream: list[ColumnRef] = Field(default_factory=list, description="nearest first")
    downstream: list[ColumnRef] = Field(default_factory=list, description="nearest first")
    links: list[ColumnLink] = Field(default_factory=list)
    rows: list[str] = Field(
        default_factory=list, description="models downstream whose rows it decides"
    )
    unknown: dict[str, str] = Field(
        default_factory=dict, description="model -> why its lineage cannot be followed"
    )
    truncated: bool = Field(default=False, description="the analysis budget was spent")
