"""The plainest step: run Spark SQL statements in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.core.plan import statements as project_statements
from sluice.core.spark.results import SQL_LIMIT, SqlResult
from sluice.core.spark.spec import SqlStep
from sluice.core.spark.steps.context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_sql(spark: SparkSession, step: SqlStep, ctx: StepContext) -> SqlResult:
    """``{"type": "sql", "statements": [...]}``: run each; returns the row count of the last.

    A step that runs the project's own statements (config.yaml's ``before_all`` /
    ``after_all``, a model's pre- and post-statements, by its id) runs only statements of the allow-list the loader checked
    them with (:func:`sluice.core.plan.statements.check`), each checked again here before
    any runs: whatever made the job, no ``USING jdbc``, OPTIONS or LOCATION of a pull
    request reaches Spark.
    """
    queries = project_statements.checked_step(step.get("id"))
    if queries is not None:
        for index, statement in enumerate(step["statements"]):
            refused = project_statements.check(statement, queries=queries)
            if refused is not None:
                raise ValueError(
                    f"{step['id']} statement {index + 1} is not one Sluice runs: it "
                    f"{refused.what} (hint: {refused.hint})"
                )
    rows: list[Any] = []
    for statement in step["statements"]:
        rows = spark.sql(statement).collect()
    kept = rows[: step.get("limit", SQL_LIMIT)]
    return {"step": "sql", "rows": [r.asDict(recursive=True) for r in kept]}
