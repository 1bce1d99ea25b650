"""Environments in the catalog: point views at versions, commit the record, drop (driver).

The views step runs only after every table of the plan is built and audited; the commit
step then swaps the environment record by compare-and-swap. Both are re-runnable: a job
killed between them is finished by applying the same plan again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.core.errors import ConflictError
from sluice.core.spark.steps.context import StepContext
from sluice.core.state.records import EnvironmentRecord, SnapshotRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_views(spark: SparkSession, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    """Create or replace the environment's views; drop those of removed models."""
    _check_not_stale(ctx)
    for schema in step["schemas"]:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    for view in step["views"]:
        spark.sql(f"CREATE OR REPLACE VIEW {view['view']} AS {view['sql']}")
    for view in step["drop"]:
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    return {
        "environment": step["environment"],
        "swapped": len(step["views"]),
        "dropped": len(step["drop"]),
    }


def _check_not_stale(ctx: StepContext) -> None:
    """Refuse to touch views when the environment moved on since the plan was made."""
    if ctx.state is None:
        return
    env = ctx.job["environment"]
    record = ctx.state.get_environment(env)
    current = record.plan_id if record is not None else None
    if current != ctx.job.get("base_plan_id"):
        raise ConflictError(
            f"environment '{env}' changed since this plan was made: it is now at plan "
            f"'{current}', the plan expected '{ctx.job.get('base_plan_id')}'",
            hint=f"re-run `sluice plan {env}` and apply the new plan",
        )


def run_commit(spark: SparkSession, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    """Swap the environment record (compare-and-swap on the plan it was computed from)."""
    assert ctx.state is not None, "a commit step needs the state store"
    data = dict(step["record"])
    data["snapshots"] = tuple(SnapshotRef(**ref) for ref in data["snapshots"])
    record = EnvironmentRecord(**data)
    ctx.state.update_environment(record, expected_plan_id=step["expected_plan_id"])
    return {"environment": record.name, "plan_id": record.plan_id}


def run_drop(spark: SparkSession, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    """Drop views, empty environment schemas and physical tables (the janitor's work)."""
    for view in step.get("views", []):
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    dropped_schemas = []
    for schema in step.get("schemas", []):
        if spark.catalog.databaseExists(schema) and not spark.catalog.listTables(schema):
            spark.sql(f"DROP DATABASE IF EXISTS {schema}")
            dropped_schemas.append(schema)
    for table in step.get("tables", []):
        # A VIEW model's version is a view, everything else a table.
        if spark.catalog.tableExists(table):
            kind = (
                spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Type'").collect()
            )
            is_view = bool(kind) and str(kind[0]["data_type"]).upper() == "VIEW"
            spark.sql(f"DROP {'VIEW' if is_view else 'TABLE'} IF EXISTS {table}")
    return {
        "views": len(step.get("views", [])),
        "schemas": dropped_schemas,
        "tables": len(step.get("tables", [])),
    }
