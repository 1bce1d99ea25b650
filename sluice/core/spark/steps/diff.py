"""The ``table_diff`` step: compare two tables and report what differs (runs in the driver).

A step is ``{"type": "table_diff", "name", "source", "target", "source_label",
"target_label", "keys", "options": {on, skip, where, decimals, tolerance, sample}}``, made
by :func:`sluice.core.workflow.table_diff`.

Input the user got wrong but only the schemas can reveal (a key or filter column missing
on one side, a filter that is not boolean, columns whose types do not compare) is
returned as ``{"error": {"message", "hint"}}`` rather than raised: the command then shows
it as the user's error, with its hint, instead of as a failed Spark job, and nothing
is stored. Anything else that goes wrong fails the step as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.core.spark.results import TableDiffOutcome, table_diff_result
from sluice.core.spark.spec import TableDiffStep
from sluice.core.spark.steps.context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_table_diff(spark: SparkSession, step: TableDiffStep, ctx: StepContext) -> TableDiffOutcome:
    """Run the diff; report the result for state as a ``table_diff`` job result.

    Returns:
        The result's JSON (:meth:`TableDiffResult.to_json`), or ``{"error": ...}``; both
        tagged as a ``table_diff`` step's result.
    """
    from sluice.core.tablediff.compute import diff_tables
    from sluice.core.tablediff.result import DiffOptions, TableDiffError

    try:
        options = DiffOptions.from_json(step.get("options", {}))
        result = diff_tables(
            spark,
            step["source"],
            step["target"],
            keys=step["keys"],
            options=options,
            name=step["name"],
            source_label=step.get("source_label"),
            target_label=step.get("target_label"),
        )
    except TableDiffError as exc:
        return {"step": "table_diff", "error": {"message": exc.message, "hint": exc.hint}}
    payload = result.to_json()
    ctx.save_result("table_diff", result.name, result.identical, payload)
    ctx.log(
        f"{result.name}: {'identical' if result.identical else f'{result.differing_rows} rows differ'}",
        model=result.name,
    )
    return table_diff_result(payload)
