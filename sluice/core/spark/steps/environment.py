"""Environments in the catalog: point views at versions, drop them (driver).

The views step runs only after every table of the plan is built and audited, and is
re-runnable: a job killed in it is finished by applying the same plan again. The driver
writes no environment record: the service checks, right before it starts the job, that
the environment is still at the plan's base, and commits the record itself (a
compare-and-swap on that base, which still guards it) once the job has succeeded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.core.spark.spec import DropStep, ViewsStep
from sluice.core.spark.steps import script
from sluice.core.spark.steps.context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_views(spark: SparkSession, step: ViewsStep, ctx: StepContext) -> dict[str, Any]:
    """Create or replace the environment's views, drop those of removed models: one SQL
    script (:func:`sluice.core.spark.steps.script.run_all`)."""
    statements = [f"CREATE DATABASE IF NOT EXISTS {schema}" for schema in step["schemas"]]
    for view in step["views"]:
        pairs = view.get("properties", [])
        props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs)
        clause = f" TBLPROPERTIES ({props})" if props else ""
        statements.append(f"CREATE OR REPLACE VIEW {view['view']}{clause} AS {view['sql']}")
    statements += [f"DROP VIEW IF EXISTS {name}" for name in step["drop"]]
    script.run_all(spark, statements)
    return {
        "environment": step["environment"],
        "swapped": len(step["views"]),
        "dropped": len(step["drop"]),
    }


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_drop(spark: SparkSession, step: DropStep, ctx: StepContext) -> dict[str, Any]:
    """Drop views, empty environment schemas and physical tables (the janitor's work)."""
    for view in step.get("views", []):
        spark.sql(f"DROP VIEW IF EXISTS {view}")
    dropped_schemas = []
    for schema in step.get("schemas", []):
        if not spark.catalog.databaseExists(schema):
            continue
        # listTables lists the session's temp views too, which belong to no schema.
        if not [t for t in spark.catalog.listTables(schema) if not t.isTemporary]:
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
