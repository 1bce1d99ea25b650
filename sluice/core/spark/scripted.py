"""A runner that runs no Spark: each step answers as a :class:`Script` says, through the
driver's own scheduling and the runners' own write checks.

Shipped beside the real runners (as an HTTP library ships a mock transport) so that
whatever drives jobs (the PR build, a promotion, a rollback, a scheduled run, the CLI) can
be run end to end in a fast test: the plan, the job specs, the state written from the
driver's ``write`` events (checked against the spec by
:class:`~sluice.core.spark.writes.JobWrites`, as for a real job), the environment
record, the forge's checks and comment are all the product's own; only what Spark would
compute comes from the script. What the jobs did to the warehouse is kept in a
:class:`Warehouse` (tables by version, views by the SQL they are), so a test can say "prod's
views now read the tables the PR built" and "the promotion built nothing".

Example::

    >>> warehouse = Warehouse(Script(rows={"db.orders": 3}))
    >>> runner = warehouse.runner()
    >>> result = runner.run({"job_id": "j1", "kind": "query", "steps": [
    ...     {"type": "query", "label": "query", "sql": "SELECT 1", "limit": 10}]})
    >>> result.results["0"]
    {'step': 'query', 'columns': [], 'types': [], 'rows': []}
    >>> warehouse.jobs[0]["kind"]
    'query'

A step fails as scripted (``fail``: a step label's pattern -> ``"ExceptionName: message"``,
reported as Spark's error would be), the driver can be lost mid-job (``lose``: the
runner raises :class:`~sluice.core.errors.DriverLost`, as when a signal killed
``spark-submit``), and a step can run until its job is stopped (``hold``: the step waits,
:attr:`Warehouse.holding` set, until :mod:`~sluice.core.spark.cancel` stops the job, which
then ends as :class:`~sluice.core.errors.JobCancelled`, as a real runner's does once it
killed its driver).
"""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.core.config import SparkSettings
from sluice.core.plan.plan import VIEW_MARKER
from sluice.core.spark import cancel, driver, events
from sluice.core.spark.events import Event
from sluice.core.spark.failures import job_failure
from sluice.core.spark.results import (
    AuditResult,
    BuildResult,
    DropResult,
    InspectedTable,
    InspectedView,
    InspectResult,
    QueryResult,
    SqlResult,
    StepResult,
    TableDiffDone,
    UnitTestResult,
    ViewsResult,
    parse_result,
    table_diff_result,
)
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.spec import (
    AuditStep,
    BuildStep,
    DropStep,
    InspectStep,
    JobSpec,
    QueryStep,
    SqlStep,
    TableDiffStep,
    UnitTestStep,
    ViewsStep,
)
from sluice.core.spark.steps.context import Handler, StepContext, Written, filled
from sluice.core.spark.submit import JobResult, OnEvent, Received, _prepare, _RunnerBase
from sluice.core.tablediff.result import DiffOptions, TableDiffResult

DEFAULT_ROWS = 10
HOLD_LIMIT_S = 300.0
"""A held step that nobody stops fails after this (a test's safety net, not a timing)."""
NO_SPARK: Any = None
"""The session the scripted steps are handed: none."""


@dataclass(frozen=True)
class Script:
    """What the scripted steps answer.

    Attributes:
        rows: Model -> the rows its built table holds (default :data:`DEFAULT_ROWS`).
        fail: A step label's pattern (``fnmatch``: ``"build *orders"``) -> the error the
            step fails with, ``"AnalysisException: [UNRESOLVED_COLUMN] ..."``.
        lose: A step label's pattern: the driver dies as that step starts.
        violations: ``model:audit`` -> the rows violating that audit (default none), in
            each batch it audits.
        differ: Model -> the rows its table diff finds differing (default none).
        results: A step label's pattern -> the result the step returns (a ``query`` or
            ``sql`` step's rows), instead of the default: the result's keys but its
            ``step`` tag (the step's type, added), read as a driver's result is (one of
            the wrong shape fails the step).
        hold: A step label's pattern: the step runs until its job is stopped.
    """

    rows: Mapping[str, int] = field(default_factory=dict)
    fail: Mapping[str, str] = field(default_factory=dict)
    lose: str | None = None
    violations: Mapping[str, int] = field(default_factory=dict)
    differ: Mapping[str, int] = field(default_factory=dict)
    results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hold: str | None = None


@dataclass(frozen=True)
class Table:
    """A physical table (or a VIEW model's view) a build made."""

    model: str
    version: str
    rows: int


@dataclass
class Warehouse:
    """What the scripted jobs made, and every job spec they ran (in order)."""

    script: Script = field(default_factory=Script)
    tables: dict[str, Table] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)
    """Environment view -> the SQL it is."""
    schemas: set[str] = field(default_factory=set)
    jobs: list[JobSpec] = field(default_factory=list)
    holding: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    """Set when a step of :attr:`Script.hold` starts to hold."""

    def runner(
        self,
        _project: Any = None,
        _tree: Path | None = None,
        on_event: OnEvent | None = None,
        *,
        settings: SparkSettings | None = None,
    ) -> ScriptedRunner:
        """A runner on this warehouse; the signature of a flow's runner factory
        (project, tree, progress callback)."""
        return ScriptedRunner(self, settings or SparkSettings(), on_event=on_event)

    def built(self, kind: str = "apply") -> list[str]:
        """The models the jobs of ``kind`` built, in order."""
        return [
            str(step["model"])
            for job in self.jobs
            if job["kind"] == kind
            for step in job["steps"]
            if step["type"] == "build"
        ]

    def reads(self, view: str) -> str | None:
        """The physical table ``view`` selects from (None: no such view)."""
        sql = self.views.get(view)
        if sql is None:
            return None
        return next((name for name in self.tables if name in sql), None)


class _Lost(BaseException):
    """The scripted driver died (a ``BaseException``: no step's handling catches it)."""


class _Stopped(BaseException):
    """The job was stopped (:mod:`~sluice.core.spark.cancel`): its driver killed."""


class ScriptedRunner(_RunnerBase):
    """Runs a job spec on a :class:`Warehouse`, as its :class:`Script` says."""

    def __init__(
        self, warehouse: Warehouse, settings: SparkSettings, *, on_event: OnEvent | None = None
    ) -> None:
        super().__init__(
            settings, SparkPaths(root=Path("/nonexistent"), logs=Path("/nonexistent")),
            on_event=on_event, timeout=None,
        )  # fmt: skip
        self.warehouse = warehouse
        self.script = warehouse.script
        self._lost = False

    def run(self, spec: JobSpec) -> JobResult:
        """Run ``spec``'s steps in the driver's order, one at a time; same contract as the
        real runners (``write`` events checked and applied, failures as they report them)."""
        spec, writes = _prepare(spec, self.settings)
        spec = {**spec, "concurrent_tasks": 1}
        self.warehouse.jobs.append(spec)
        job_id = spec["job_id"]
        got = Received(writes)

        def emit(event: Event) -> None:
            # As a real driver's would be: a line, read back as the runner reads it (an
            # event the protocol does not define fails the job's caller: BadEvent).
            line = events.encode(event)
            wired = events.decode(line, spec["steps"])
            assert wired is not None
            self._receive(wired, got, len(line))

        began = time.monotonic()
        emit({"event": "job_start", "job_id": job_id, "steps": len(spec["steps"])})
        try:
            results = driver.run_job(
                spec, NO_SPARK, emit, table=self._handlers(), measure=self._measure
            )
        except _Lost:
            raise job_failure(job_id, got.events, exit_code=-9) from None
        except _Stopped:
            raise cancel.stopped() from None
        except driver.StepFailed:
            if writes.refused is not None:
                raise writes.refused from None
            raise job_failure(job_id, got.events) from None
        if writes.refused is not None:
            raise writes.refused
        emit({"event": "job_done", "job_id": job_id, "results": results})
        return JobResult(job_id, results, time.monotonic() - began, None, got.events)

    # --- the steps ------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Handler]:
        steps: dict[str, Any] = {
            "sql": self._sql,
            "build": self._build,
            "audit": self._audit,
            "views": self._views,
            "drop": self._drop,
            "unit_test": self._unit_test,
            "query": self._query,
            "table_diff": self._table_diff,
            "inspect": self._inspect,
        }
        return {kind: self._scripted(handler) for kind, handler in steps.items()}

    def _scripted(self, handler: Any) -> Handler:
        def run(_spark: Any, step: Any, ctx: StepContext) -> StepResult | None:
            label = str(step.get("label", step["type"]))
            if self.script.hold is not None and fnmatch.fnmatchcase(label, self.script.hold):
                self._hold(label)
            if cancel.reason() is not None:
                raise _Stopped(label)
            if self.script.lose is not None and fnmatch.fnmatchcase(label, self.script.lose):
                self._lost = True
                raise _Lost(label)
            for pattern, error in self.script.fail.items():
                if fnmatch.fnmatchcase(label, pattern):
                    raise _error(error)
            result: StepResult = handler(step, ctx)
            for pattern, answer in self.script.results.items():
                if fnmatch.fnmatchcase(label, pattern):
                    return parse_result({**answer, "step": step["type"]})
            return result

        return run

    def _hold(self, label: str) -> None:
        """Run until the job is stopped (or :data:`HOLD_LIMIT_S` passed: a failure)."""
        released = threading.Event()
        forget = cancel.on_cancel(released.set)
        self.warehouse.holding.set()
        try:
            if not released.wait(HOLD_LIMIT_S):
                raise _error(f"HeldTooLong: step {label} held for {HOLD_LIMIT_S} s, never stopped")
        finally:
            forget()

    def _rows(self, model: str) -> int:
        return self.script.rows.get(model, DEFAULT_ROWS)

    def _build(self, step: BuildStep, ctx: StepContext) -> BuildResult:
        name, version, table = step["model"], step["version"], step["table"]
        if step.get("view_sql"):
            self.warehouse.tables[table] = Table(name, version, 0)
            ctx.created.add(table)
            ctx.add_intervals(name, version, [list(VIEW_MARKER)])
        for start, end in step.get("restate", []):
            ctx.remove_intervals(name, version, start, end)
        audit = self._scripted(self._audit)  # a batch's audits fail or lose as scripted too
        for batch in step["batches"]:
            self.warehouse.tables[table] = Table(name, version, self._rows(name))
            for check in batch.get("audits", []):
                audit(NO_SPARK, check, ctx)
            ctx.add_intervals(name, version, filled(step, batch))
        if step["batches"]:
            ctx.wrote(Written(table=table, model=name, version=version, format=step["format"]))
        return {
            "step": "build",
            "model": name,
            "version": version,
            "table": table,
            "batches": len(step["batches"]),
        }

    def _measure(self, _spark: Any, ctx: StepContext) -> None:
        if self._lost:  # a dead driver measures nothing
            return
        for written in {w.table: w for w in ctx.written_tables}.values():
            rows = self._rows(written.model)
            ctx.table_size(written.model, written.version, rows * 100, rows)

    def _audit(self, step: AuditStep, ctx: StepContext) -> AuditResult:
        name = f"{step['model']}:{step['audit']}"
        count = self.script.violations.get(name, 0)
        result: AuditResult = {
            "step": "audit",
            "model": step["model"],
            "audit": step["audit"],
            "passed": count == 0,
            "violations": count,
            "sample": [],
            "blocking": step["blocking"],
        }
        batch = list(step["batch"]) if "batch" in step else None
        if batch is not None:
            result["batch"] = batch
        ctx.save_result("audit", name, count == 0, result, batch=batch)
        if count and step["blocking"]:
            raise _error(
                f"AuditFailed: audit {step['audit']} on {step['model']} failed: "
                f"{count} row(s) violate it"
            )
        return result

    def _views(self, step: ViewsStep, _ctx: StepContext) -> ViewsResult:
        self.warehouse.schemas.update(step["schemas"])
        for view in step["views"]:
            self.warehouse.views[view["view"]] = view["sql"]
        for name in step["drop"]:
            self.warehouse.views.pop(name, None)
        return {
            "step": "views",
            "environment": step["environment"],
            "swapped": len(step["views"]),
            "dropped": len(step["drop"]),
        }

    def _drop(self, step: DropStep, _ctx: StepContext) -> DropResult:
        for view in step.get("views", []):
            self.warehouse.views.pop(view, None)
        dropped = []
        for schema in step.get("schemas", []):
            if schema in self.warehouse.schemas and not any(
                v.startswith(f"{schema}.") for v in self.warehouse.views
            ):
                self.warehouse.schemas.discard(schema)
                dropped.append(schema)
        for table in step.get("tables", []):
            self.warehouse.tables.pop(table, None)
        return {
            "step": "drop",
            "views": len(step.get("views", [])),
            "schemas": dropped,
            "tables": len(step.get("tables", [])),
        }

    def _unit_test(self, step: UnitTestStep, _ctx: StepContext) -> UnitTestResult:
        return {
            "step": "unit_test",
            "name": step["name"],
            "passed": True,
            "diff": "",
            "notes": step.get("notes", []),
        }

    def _sql(self, _step: SqlStep, _ctx: StepContext) -> SqlResult:
        return {"step": "sql", "rows": []}

    def _query(self, _step: QueryStep, _ctx: StepContext) -> QueryResult:
        return {"step": "query", "columns": [], "types": [], "rows": []}

    def _table_diff(self, step: TableDiffStep, ctx: StepContext) -> TableDiffDone:
        options = DiffOptions.from_json(step.get("options", {}))
        # Each side holds what its build wrote; the smaller side's rows are the larger's
        # less those only in it, and ``differ`` of the rows both hold differ.
        source = self._held(step["source"], step["name"])
        target = self._held(step["target"], step["name"])
        joined = min(source, target)
        differing = min(self.script.differ.get(step["name"], 0), joined)
        result = TableDiffResult(
            name=step["name"],
            source=step["source_label"],
            target=step["target_label"],
            source_table=step["source"],
            target_table=step["target"],
            keys=tuple(step["keys"]),
            decimals=options.decimals,
            tolerance=options.tolerance,
            where=options.where,
            skipped=options.skip,
            identical=differing == 0 and source == target,
            source_rows=source,
            target_rows=target,
            joined=joined,
            source_only=source - joined,
            target_only=target - joined,
            differing_rows=differing,
        )
        payload = result.to_json()
        ctx.save_result("table_diff", result.name, result.identical, payload)
        return table_diff_result(payload)

    def _inspect(self, step: InspectStep, _ctx: StepContext) -> InspectResult:
        """What the warehouse holds: its views (their SQL as their text; a VIEW model's
        view, with no text) and its tables (marked, their rows, their bytes as the
        scripted measurement counts them; their columns not known)."""
        views: list[InspectedView] = []
        for name in step["views"]:
            sql = self.warehouse.views.get(name)
            there = sql is not None or name in self.warehouse.tables
            views.append(
                {"name": name, "exists": there, "type": "VIEW" if there else None,
                 "text": sql, "ddl_ms": None, "error": None}
            )  # fmt: skip
        tables: list[InspectedTable] = []
        for spec in step["tables"]:
            table = self.warehouse.tables.get(spec["table"])
            tables.append(
                {"name": spec["table"], "exists": table is not None,
                 "type": "MANAGED" if table is not None else None,
                 "provider": "parquet" if table is not None else None,
                 "mark": f"{table.model}@{table.version}" if table is not None else None,
                 "columns": [], "expected": None,
                 "rows": table.rows if table is not None else None,
                 "bytes": table.rows * 100 if table is not None else None,
                 "files": None, "newest_ms": None, "ddl_ms": None,
                 "source": "files" if table is not None else "none",
                 "partitions": None, "error": None}
            )  # fmt: skip
        return {"step": "inspect", "views": views, "tables": tables}

    def _held(self, table: str, model: str) -> int:
        """The rows ``table`` (a physical table, or a view of one) holds."""
        built = self.warehouse.tables.get(self.warehouse.reads(table) or table)
        return built.rows if built is not None else self._rows(model)


def _error(text: str) -> Exception:
    """``"Name: message"`` as an exception of that class name (as Spark's would read)."""
    name, sep, message = text.partition(": ")
    if not sep or not name.isidentifier():
        name, message = "ScriptedError", text
    error: Exception = type(name, (Exception,), {})(message)
    return error
