"""The contract of a step handler: what it gets besides Spark and its step (the job, a way
to report and write), its type, and how its errors read. The driver and every step import
this module, and it imports none of them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sluice.core.spark.events import Event, SaveResult, WriteEvent
from sluice.core.spark.results import StepResult
from sluice.core.spark.spec import BuildBatch, BuildStep, JobSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Written:
    """A table a build wrote, to be measured at the job's end
    (:mod:`sluice.core.spark.steps.statistics`)."""

    table: str
    model: str
    version: str
    format: str


@dataclass
class StepContext:
    """Shared by the steps of one job.

    The driver holds no state store: :meth:`write` reports a write as an event, and the
    runner (service side) checks it against the job's spec and applies it
    (:mod:`sluice.core.spark.writes`).
    """

    job: JobSpec
    emit: Callable[[Event], None]
    results: dict[str, StepResult] = field(default_factory=dict)
    written_tables: list[Written] = field(default_factory=list)
    """The tables the job's builds wrote (appended from the builds' threads)."""
    created: set[str] = field(default_factory=set)
    """The tables the job's builds created, and the views they made: no session of the job
    can hold an old listing of their files (a view has none), so none needs a refresh."""
    input_versions: dict[str, str | None] = field(default_factory=dict)
    """The versions of the tables runs' rebuilds read, each read once a job
    (:mod:`sluice.core.spark.steps.inputs`)."""
    skip_inputs: dict[str, list[list[str | None]]] = field(default_factory=dict)
    """Model -> the versions its rebuild read before it ran, for its result."""

    def log(self, message: str, *, model: str | None = None) -> None:
        """Report progress to the runner (and through it to the user); ``model``: the
        model it is about."""
        if model is None:
            self.emit({"event": "log", "message": message})
        else:
            self.emit({"event": "log", "message": message, "model": model})

    def write(self, event: WriteEvent) -> None:
        """Ask the runner to write to state; sent at once, so it is kept even if the job
        dies right after. The helpers below build each kind of write."""
        self.emit(event)

    def add_intervals(self, model: str, version: str, intervals: list[list[int]]) -> None:
        """Record ``intervals`` of ``model``'s ``version`` as filled (once their blocking
        audits passed: the runner holds them back until then)."""
        self.write(
            {
                "event": "write",
                "op": "add_intervals",
                "model": model,
                "version": version,
                "intervals": intervals,
            }
        )

    def remove_intervals(self, model: str, version: str, start: int, end: int) -> None:
        """Forget ``[start, end)`` of ``model``'s ``version`` (a restatement)."""
        self.write(
            {
                "event": "write",
                "op": "remove_intervals",
                "model": model,
                "version": version,
                "start": start,
                "end": end,
            }
        )

    def save_result(
        self,
        kind: str,
        name: str,
        passed: bool,
        payload: Mapping[str, Any],
        *,
        batch: list[int] | None = None,
    ) -> None:
        """Keep an audit's (of ``batch``, when it audits one), a unit test's or a table
        diff's result."""
        event: SaveResult = {
            "event": "write",
            "op": "save_result",
            "kind": kind,
            "name": name,
            "passed": passed,
            "payload": dict(payload),
        }
        if batch is not None:
            event["batch"] = batch
        self.write(event)

    def table_size(self, model: str, version: str, size: int, rows: int | None) -> None:
        """The size (``size`` bytes, ``rows`` when known) ``model``'s ``version`` was left at."""
        self.write(
            {
                "event": "write",
                "op": "table_size",
                "model": model,
                "version": version,
                "bytes": size,
                "rows": rows,
            }
        )

    def wrote(self, written: Written) -> None:
        """Note a table a build wrote: its size is measured with the others' at the end."""
        self.written_tables.append(written)


def filled(step: BuildStep, batch: BuildBatch) -> list[list[int]]:
    """The intervals a build's ``batch`` fills, as its ``add_intervals`` write names them:
    the step's missing intervals inside the batch, or the batch itself.

    Example::

        >>> step = {"intervals": [[0, 10], [10, 20], [20, 30]]}
        >>> filled(step, {"start": 0, "end": 20, "sql": None})  # type: ignore[arg-type]
        [[0, 10], [10, 20]]
    """
    start, end = batch["start"], batch["end"]
    intervals = step.get("intervals") or [[start, end]]
    return [[s, e] for s, e in intervals if s >= start and e <= end] or [[start, end]]


Handler = Callable[["SparkSession", Any, StepContext], "StepResult | None"]
"""A step type's handler: Spark, the step, the job's context -> the step's result.

The step is ``Any`` here because one registry holds handlers of different step types;
each handler's own signature names its step's ``TypedDict`` (:mod:`sluice.core.spark.spec`),
and the driver hands it only steps of that type (it looks the handler up by ``type``)."""


_ERROR_CLASS = re.compile(r"^\[(?P<condition>[A-Z][A-Z0-9_.]*)\]\s*(?P<message>.*)$")
# What Spark appends to an analysis error's message: its SQLSTATE, then the position in
# the SQL it was given (Sluice's generated SQL, not the author's file) and a logical plan.
_SPARK_TAIL = re.compile(r"\s*(SQLSTATE: \w+)?;?\s*(line \d+,? pos \d+)?;?\s*$")


def spark_error(exc: BaseException) -> str:
    r"""The part of a Spark/Python error a user needs, no JVM stack.

    A Spark error with an error class is one line: the exception, its class and Spark's
    message (with the column and Spark's suggestions), without the SQLSTATE, the
    position in the generated SQL and the logical plan that follow it. Any other error
    (a Python model's traceback) keeps at most 15 lines.

    Example::

        >>> class AnalysisException(Exception): ...
        >>> spark_error(AnalysisException(
        ...     "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `amout` cannot be "
        ...     "resolved. Did you mean one of the following? [`amount`, `id`]. SQLSTATE: "
        ...     "42703; line 1 pos 625;\n'Project ['amout]\n+- SubqueryAlias o"))
        'AnalysisException [UNRESOLVED_COLUMN.WITH_SUGGESTION]: A column with name `amout` cannot be resolved. Did you mean one of the following? [`amount`, `id`].'
    """
    name = exc.__class__.__name__
    text = str(exc) or name
    text = text.split("JVM stacktrace:", 1)[0]
    lines = [ln for ln in text.splitlines() if not re.match(r"^\s+at [\w$.]+\(", ln)]
    lines = [ln.rstrip() for ln in lines if ln.strip()]
    classed = _ERROR_CLASS.match(lines[0].strip()) if lines else None
    if classed is not None:
        message = _SPARK_TAIL.sub("", classed["message"].split("; line ", 1)[0])
        return f"{name} [{classed['condition']}]: {message}"
    if len(lines) > 15:
        lines = [*lines[:15], f"... ({len(lines) - 15} more lines in the log)"]
    body = "\n".join(lines)
    return body if body.startswith(name) else f"{name}: {body}"
