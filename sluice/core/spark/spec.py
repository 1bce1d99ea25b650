"""The job contract between the service and the Spark driver: the JSON a job spec is.

One owner for every key: the producers (:mod:`sluice.core.spark.render`,
:mod:`sluice.core.spark.testing`, :mod:`sluice.core.jobs`, :mod:`sluice.core.preview`,
:mod:`sluice.core.workflow`) build these, the runners (:mod:`sluice.core.spark.submit`),
the write checker (:mod:`sluice.core.spark.writes`) and the driver's step handlers
(:mod:`sluice.core.spark.steps`) read them, and mypy checks the two sides against each
other. They are ``TypedDict``s, so still plain dicts (JSON on the wire): nothing here
exists at runtime beyond the classes themselves, and this module imports no pyspark
(the producers run without Spark).

A key is ``NotRequired`` when a producer leaves it out (a build's ``seed``, a step's
``id``, an apply's ``environment``) or when no producer sets it but a handler accepts it
(a ``sql`` step's ``limit``). Every other key is set by every producer; a consumer that
still reads one with ``.get(key, default)`` is being defensive about hand-written specs.

No ``from __future__ import annotations`` here: on Python 3.11 a ``NotRequired`` inside a
string annotation is not seen by ``TypedDict``, which would then count the key as required
(``__required_keys__``, which the tests read).
"""

from typing import Any, Literal, NotRequired, TypedDict

# --- the steps ----------------------------------------------------------------------------


class StepBase(TypedDict):
    """What every step has besides its ``type``."""

    label: str
    """What the step does, for logs and errors (``build db.orders``)."""
    id: NotRequired[str]
    """The key of the step's result in the job's results (default: its index, as text)."""


class SqlStep(StepBase):
    """Run Spark SQL statements in order (:func:`sluice.core.spark.steps.sql.run_sql`)."""

    type: Literal["sql"]
    statements: list[str]
    limit: NotRequired[int]
    """How many rows of the last statement to return (default 100)."""


class AuditStep(StepBase):
    """Run one audit of a model's table (:func:`sluice.core.spark.steps.build.run_audit`):
    a step of its own after the model's build (a VIEW model's), or one of a build batch's
    ``audits``, run by the build right after that batch is written."""

    type: Literal["audit"]
    model: str
    version: str
    audit: str
    """The audit's name; ``name#2``, ``name#3``... for a model's further uses of it."""
    blocking: bool
    sql: str
    """The query returning the rows that violate the audit."""
    batch: NotRequired[list[int]]
    """``[start, end]``: the build batch it audits (rendered with that batch's times; an
    INCREMENTAL_BY_TIME_RANGE model's ``@this_model`` holds that batch's rows only). Its
    result names the batch, and only that batch's intervals wait for it. Absent: it
    audits the whole build, and every interval of the model the job records waits for it."""


class BuildBatch(TypedDict):
    """One interval of a build, ``[start, end)`` in epoch ms, and the query filling it."""

    start: int
    end: int
    sql: str | None
    """None for a SEED model: its rows come from the seed file."""
    audits: NotRequired[list[AuditStep]]
    """The model's audits of this batch (each with its ``batch``), run right after the
    batch is written and before its intervals are reported: the write checker records
    them once the blocking ones passed (:mod:`sluice.core.spark.writes`), so a backfill
    killed later keeps the batches already audited."""


class SeedFile(TypedDict):
    """A SEED model's CSV file and how to read it."""

    path: str
    columns: list[list[str]]
    """``[name, Spark type]`` pairs."""
    csv_settings: list[list[str]]
    """``[setting, value]`` pairs (delimiter, quotechar, escapechar are used)."""


class PythonModelSpec(TypedDict):
    """A Python model's function and what it may resolve
    (:func:`sluice.core.model.pycode.run.frame`)."""

    path: str
    """The model's file (absolute)."""
    entry: str
    """The function's name in the file."""
    root: str
    """The project folder (on ``sys.path``, for the project's own modules)."""
    tables: list[list[str]]
    """``[model, physical table]`` pairs ``context.resolve_table`` answers from."""
    columns: list[list[str]]
    """``[name, Spark type]`` pairs: the declared columns, in order."""
    variables: dict[str, Any]
    """The config.yaml variables ``context.var`` answers (those the code names)."""


class ScdSpec(TypedDict):
    """How an SCD type 2 build merges its query's rows into the history
    (:mod:`sluice.core.spark.steps.scd`)."""

    by: Literal["time", "column"]
    updated_at: str | None
    """By time: the column telling when a row last changed."""
    columns: list[str]
    """By column: the compared columns (``["*"]``: every column but the key)."""
    valid_from: str
    valid_to: str
    invalidate_hard_deletes: bool
    time_type: str
    """The Spark SQL type of the validity columns (TIMESTAMP, TIMESTAMP_NTZ or DATE)."""
    first_valid_from: Literal["epoch", "updated_at", "execution_time"]
    """Where the rows of the first load start, and by time every new key's (SQLMesh:
    1970-01-01 unless told)."""
    execution_time: int
    """The run's time (epoch ms): by column, when a change was seen; a delete's end."""


class SeenInputs(TypedDict):
    """What the last run that rebuilt a model version read (:class:`sluice.core.state.
    records.Seen` as JSON)."""

    key: str
    inputs: list[list[str | None]]
    """``[table, version or null]`` pairs."""
    at: int


class SkipCheck(TypedDict):
    """A scheduled run's rebuild the driver skips when nothing it reads changed
    (:mod:`sluice.core.skip`): the key of the query it would send, the tables it reads
    (whose versions the driver reads right before the build), and what the last run of
    this version read (absent: none recorded, so it runs). Set by the service alone, from
    state (:func:`sluice.core.skip.attach`)."""

    key: str
    inputs: list[str]
    last: NotRequired[SeenInputs]


class BuildStep(StepBase):
    """Create and fill one model version's table, or its view
    (:func:`sluice.core.spark.steps.build.run_build`)."""

    type: Literal["build"]
    model: str
    version: str
    table: str
    kind: str
    """The model's kind (``KindName`` value: FULL, SEED, INCREMENTAL_BY_TIME_RANGE, ...)."""
    format: str
    time_column: str | None
    """Set for INCREMENTAL_BY_TIME_RANGE models."""
    unique_key: list[str]
    columns: list[str] | None
    partitioned_by: list[str]
    restate: list[list[int]]
    """``[start, end]`` ranges whose recorded intervals are removed first."""
    batches: list[BuildBatch]
    source: NotRequired[str]
    """The model's file and line in the project (``models/orders.sql:1``): a failed
    build's message names it."""
    seed: NotRequired[SeedFile]
    """SEED models only."""
    python: NotRequired[PythonModelSpec]
    """Python models only: each batch's query reads the rows the function returns."""
    view_sql: NotRequired[str]
    """Models materialized as a view: the view's query."""
    intervals: NotRequired[list[list[int]]]
    """The missing ``[start, end]`` intervals the batches cover (models with a backfill)."""
    clustered_by: list[str]
    """``CLUSTER BY`` columns of the table (the model's ``clustered_by``)."""
    table_properties: list[list[str]]
    """``[key, value]`` pairs: the table's ``TBLPROPERTIES`` (``physical_properties``)."""
    session_properties: list[list[str]]
    """``[key, value]`` pairs set (``spark.sql.*``) for this build only."""
    scd: NotRequired[ScdSpec]
    """SCD type 2 models only."""
    adopt_unmarked: NotRequired[bool]
    """State records a build of this version (an earlier Sluice's, before it marked its
    tables): a table of this name without Sluice's mark is marked and written into, not
    refused (:func:`sluice.core.spark.steps.swap.check_mark`). Set from state by the
    service alone (:func:`sluice.core.jobs.adopt_recorded`); absent (a hand-written spec,
    :func:`sluice.core.spark.render.build_steps` alone): refused."""
    skip: NotRequired[SkipCheck]
    """A scheduled run's rebuild that may be skipped (:class:`SkipCheck`)."""
    parents: NotRequired[list[str]]
    """The models this job builds that this one reads, directly or through models the job
    does not build: its build starts once theirs are built and audited
    (:mod:`sluice.core.spark.schedule`). Absent (a hand-written spec): after every build
    before it in the job."""


class ViewFill(TypedDict):
    """The columns of a view over a kept table (a forward-only change) that the table may
    lack, no batch having written the new ones into it yet
    (:func:`sluice.core.spark.steps.environment.run_views`)."""

    table: str
    """The physical table the view reads."""
    query: str
    """The model's query, read for its columns and their types only (never run)."""
    columns: list[str] | None
    """The view's columns in order, as ``sql`` names them (None: ``*``, the table's)."""
    alter: bool
    """The environment owns the table (prod): a column the table lacks is added to it
    (``ALTER TABLE ... ADD COLUMNS``) before the view is pointed, as a batch writing into
    it would. False (any other environment, which reads prod's table and may not change
    it), or a table Spark cannot add a column to: the view reads the column as NULL of
    the query's type."""


class ViewSpec(TypedDict):
    """One environment view and the query it is."""

    view: str
    sql: str
    properties: list[list[str]]
    """``[key, value]`` pairs: the view's ``TBLPROPERTIES`` (``virtual_properties``)."""
    fill: NotRequired[ViewFill]
    """Set for a view over a table a forward-only change keeps, whose columns changed:
    ``sql`` is used as it is once the table has every column the query has."""


class ViewsStep(StepBase):
    """Point an environment's views at the plan's versions
    (:func:`sluice.core.spark.steps.environment.run_views`)."""

    type: Literal["views"]
    environment: str
    schemas: list[str]
    views: list[ViewSpec]
    drop: list[str]
    """Views to drop (of models the plan removes)."""


class DropStep(StepBase):
    """The janitor's work: drop views, empty schemas and physical tables
    (:func:`sluice.core.spark.steps.environment.run_drop`)."""

    type: Literal["drop"]
    views: list[str]
    schemas: list[str]
    tables: list[str]


class UnitTestInput(TypedDict):
    """A unit test's input rows for one table, as a temp view."""

    view: str
    table: str
    columns: list[list[str]]
    """``[name, Spark type]`` pairs."""
    rows: list[list[Any]]
    """JSON values, one list per row, in the order of ``columns``."""


class UnitTestCte(TypedDict):
    """A top-level CTE of the tested query and the rows it must return."""

    name: str
    query: str
    expected: list[dict[str, Any]]


class UnitTestPython(TypedDict):
    """How a unit test runs a Python model's function: the parents resolve to the test's
    input views; the interval is the test's (``start`` and ``end`` inclusive, as the
    function receives them; epoch ms)."""

    model: PythonModelSpec
    view: str
    start: int
    end: int
    execution: int


class UnitTestStep(StepBase):
    """Run one unit test (:func:`sluice.core.spark.steps.unittest.run_unit_test`)."""

    type: Literal["unit_test"]
    name: str
    model: str
    path: str
    line: int
    inputs: list[UnitTestInput]
    query: str
    expected: list[dict[str, Any]] | None
    """None when the test gives no output rows for the query (only for CTEs)."""
    ctes: list[UnitTestCte]
    grain: list[str]
    notes: list[str]
    python: NotRequired[UnitTestPython]
    """A Python model's test: its function runs first, its rows become ``view``, and
    ``query`` reads that view."""


class QueryStep(StepBase):
    """Run one read-only query (:func:`sluice.core.spark.steps.query.run_query`)."""

    type: Literal["query"]
    sql: str
    limit: int


class TableDiffStep(StepBase):
    """Compare two tables (:func:`sluice.core.spark.steps.diff.run_table_diff`)."""

    type: Literal["table_diff"]
    name: str
    source: str
    target: str
    source_label: str
    target_label: str
    keys: list[str]
    options: dict[str, Any]
    """:meth:`sluice.core.tablediff.result.DiffOptions.to_json`."""


class InspectTable(TypedDict):
    """One physical table ``sluice drift`` reads (:class:`InspectStep`)."""

    table: str
    query: str | None
    """The model's query against its parents' tables, analysed (never run) for the
    columns Sluice would create; None: not known this way (a Python model, a seed)."""
    time_column: str | None
    """An INCREMENTAL_BY_TIME_RANGE model's time column: its partitions are listed."""


class InspectStep(StepBase):
    """Read what the catalog holds of views and tables, changing nothing
    (:func:`sluice.core.spark.steps.inspect.run_inspect`; ``sluice drift``)."""

    type: Literal["inspect"]
    views: list[str]
    tables: list[InspectTable]


Step = (
    SqlStep
    | BuildStep
    | AuditStep
    | ViewsStep
    | DropStep
    | UnitTestStep
    | QueryStep
    | TableDiffStep
    | InspectStep
)
"""Any step; its ``type`` says which."""

# --- the job ------------------------------------------------------------------------------

JobKind = Literal["apply", "janitor", "preview", "test", "query", "table_diff", "drift"]


class JobSpec(TypedDict):
    """One Spark job: its steps, run in order by one driver."""

    job_id: str
    kind: JobKind
    steps: list[Step]
    plan_id: NotRequired[str | None]
    """The plan the job's results belong to (apply, preview, table_diff)."""
    environment: NotRequired[str]
    """The environment the job points (apply, and a preview that builds)."""
    base_plan_id: NotRequired[str | None]
    """The plan the environment was at when the job's plan was made (same jobs)."""
    concurrent_tasks: NotRequired[int]
    """How many models may build at once (1 to 32; default 4): set by the runner from
    ``sluice.spark.concurrent_tasks`` (:mod:`sluice.core.spark.submit`)."""
    state_url: NotRequired[None]
    """Never a URL: the runner refuses a spec holding one, and strips the key before the
    driver gets the spec (:mod:`sluice.core.spark.submit`); declared so that mypy refuses
    a producer that sets one."""
