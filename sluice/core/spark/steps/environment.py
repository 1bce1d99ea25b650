"""Environments in the catalog: point views at versions, drop them (driver).

The views step runs only after every table of the plan is built and audited, and is
re-runnable: a job killed in it is finished by applying the same plan again. The driver
writes no environment record: the service checks, right before it starts the job, that
the environment is still at the plan's base, and commits the record itself (a
compare-and-swap on that base, which still guards it) once the job has succeeded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.core.model.names import quote_column, sql_name
from sluice.core.spark.results import DropResult, ViewsResult
from sluice.core.spark.spec import DropStep, ViewFill, ViewsStep
from sluice.core.spark.steps import build, script
from sluice.core.spark.steps.context import StepContext, spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_views(spark: SparkSession, step: ViewsStep, ctx: StepContext) -> ViewsResult:
    """Create or replace the environment's views, drop those of removed models: one SQL
    script (:func:`sluice.core.spark.steps.script.run_all`). A view over a table a
    forward-only change kept (its ``fill``) first gets the columns the table lacks:
    added to the table (prod) or read as NULLs (:func:`filled`)."""
    statements = [f"CREATE DATABASE IF NOT EXISTS {schema}" for schema in step["schemas"]]
    for view in step["views"]:
        pairs = view.get("properties", [])
        props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs)
        clause = f" TBLPROPERTIES ({props})" if props else ""
        sql = filled(spark, view["fill"], ctx) if "fill" in view else None
        statements.append(f"CREATE OR REPLACE VIEW {view['view']}{clause} AS {sql or view['sql']}")
    statements += [f"DROP VIEW IF EXISTS {name}" for name in step["drop"]]
    script.run_all(spark, statements)
    return {
        "step": "views",
        "environment": step["environment"],
        "swapped": len(step["views"]),
        "dropped": len(step["drop"]),
    }


def filled(spark: SparkSession, fill: ViewFill, ctx: StepContext) -> str | None:
    """The view's query when its table lacks columns the model's query has (None: it has
    them all; the view's own ``sql`` stands).

    Such a table was kept by a forward-only change that added columns, and no batch has
    written into it since (a batch adds them: :func:`build._fit`). With ``alter`` (prod,
    the table's owner) they are added to the table, as a batch would; otherwise (another
    environment reads prod's table and may not change it), or when Spark cannot add a
    column to the table, the view reads each as ``CAST(NULL AS its type)``.
    """
    table = fill["table"]
    have = {f.name.lower() for f in spark.table(table).schema.fields}
    query = spark.sql(fill["query"]).schema.fields  # analysed only, never run
    missing = [f for f in query if f.name.lower() not in have]
    if not missing:
        return None
    names = ", ".join(f.name for f in missing)
    if fill["alter"]:
        try:
            build.add_columns(spark, table, missing)
        except Exception as exc:  # a table format without ADD COLUMNS: NULLs below
            ctx.log(f"{table}: cannot add {names} ({spark_error(exc)}); the view reads NULLs")
        else:
            ctx.log(f"{table}: added {names}, which the forward-only change added")
            return None
    nulls = {f.name.lower(): f for f in missing}

    def column(name: str) -> str:
        field = nulls.get(name.lower())
        if field is None:
            return quote_column(name)
        return f"CAST(NULL AS {build.type_sql(field.dataType)}) AS {quote_column(field.name)}"

    columns = fill["columns"]
    select = (
        ", ".join(column(c) for c in columns)
        if columns is not None
        else ", ".join(["*", *(column(f.name) for f in missing)])
    )
    return f"SELECT {select} FROM {sql_name(table)}"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_drop(spark: SparkSession, step: DropStep, ctx: StepContext) -> DropResult:
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
        "step": "drop",
        "views": len(step.get("views", [])),
        "schemas": dropped_schemas,
        "tables": len(step.get("tables", [])),
    }
