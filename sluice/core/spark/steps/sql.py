"""The plainest step: run Spark SQL statements in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.core.spark.spec import SqlStep
from sluice.core.spark.steps.context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_sql(spark: SparkSession, step: SqlStep, ctx: StepContext) -> dict[str, Any]:
    """``{"type": "sql", "statements": [...]}``: run each; returns the row count of the last."""
    rows: list[Any] = []
    for statement in step["statements"]:
        rows = spark.sql(statement).collect()
    return {"rows": [r.asDict(recursive=True) for r in rows[: step.get("limit", 100)]]}
