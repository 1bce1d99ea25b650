"""Environments in the catalog: point views at versions, drop them (driver).

The views step runs only after every table of the plan is built and audited, and is
re-runnable: a job killed in it is finished by applying the same plan again. The driver
writes no environment record: the service checks, right before it starts the job, that
the environment is still at the plan's base, and commits the record itself (a
compare-and-swap on that base, which still guards it) once the job has succeeded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sluice.core.model.names import quote_column, sql_name
from sluice.core.spark.results import DropResult, ViewsResult
from sluice.core.spark.spec import DropStep, ViewFill, ViewsStep
from sluice.core.spark.steps import build, script
from sluice.core.spark.steps.context import StepContext, spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_views(spark: SparkSession, step: ViewsStep, ctx: StepContext) -> ViewsResult:
    """Point the environment's views at the plan's versions, drop those of removed models:
    one SQL script (:func:`sluice.core.spark.steps.script.run_all`), in the step's order
    (parents first). A view over a table a forward-only change kept (its ``fill``) first
    gets the columns the table lacks: added to the table (prod) or read as NULLs
    (:func:`filled`).

    A view that exists is re-pointed in place, ``ALTER VIEW ... AS`` (one metastore
    update), and its ``TBLPROPERTIES`` made the model's by ``SET`` / ``UNSET``: Spark runs
    ``CREATE OR REPLACE VIEW`` of an existing view as a drop and a create, so a reader
    between the two would find no view (docs/reliability.md, the promotion window). The
    others are created. Which exist is one catalog call per schema (:func:`existing`)."""
    found = existing(spark, step["schemas"], [view["view"] for view in step["views"]])
    statements = [f"CREATE DATABASE IF NOT EXISTS {schema}" for schema in step["schemas"]]
    altered = 0
    for view in step["views"]:
        pairs = [(k, v) for k, v in view.get("properties", [])]
        sql = (filled(spark, view["fill"], ctx) if "fill" in view else None) or view["sql"]
        name = view["view"]
        if name.lower() in found:
            altered += 1
            statements += repoint(spark, name, sql, pairs, found[name.lower()])
            continue
        props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs)
        clause = f" TBLPROPERTIES ({props})" if props else ""
        statements.append(f"CREATE OR REPLACE VIEW {name}{clause} AS {sql}")
    statements += [f"DROP VIEW IF EXISTS {name}" for name in step["drop"]]
    script.run_all(spark, statements)
    if step["views"]:
        created = len(step["views"]) - altered
        ctx.log(f"views of {step['environment']}: {altered} re-pointed in place, {created} created")
    return {
        "step": "views",
        "environment": step["environment"],
        "swapped": len(step["views"]),
        "dropped": len(step["drop"]),
    }


# Keys the metastore keeps on a table or view of its own accord (Hive's DDL times): never
# the model's, never unset.
_METASTORE_KEYS = frozenset({"transient_lastddltime", "last_modified_by", "last_modified_time"})
_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def existing(spark: SparkSession, schemas: list[str], views: list[str]) -> dict[str, str | None]:
    """Which of ``views`` exist as views of Spark's session catalog: lower-cased
    ``schema.view`` -> the ``Table Properties`` text ``SHOW TABLE EXTENDED`` gave (None:
    it showed none). One ``SHOW TABLE EXTENDED`` per existing schema of a ``schema.view``
    name, its pattern the step's views of that schema.

    A view named with its catalog (``catalog.schema.view``: another catalog than Spark's
    own) is left out, so it is made by ``CREATE OR REPLACE VIEW`` as before; so is every
    view of a schema that does not exist yet (one ``SHOW SCHEMAS`` first) or cannot be
    listed: nothing is lost by creating a view that exists, only the instant it is
    missing."""
    wanted: dict[str, list[str]] = {}
    for view in views:
        parts = view.lower().split(".")
        if len(parts) == 2:
            wanted.setdefault(parts[0], []).append(parts[1])
    found: dict[str, str | None] = {}
    listed = [s for s in schemas if wanted.get(s.lower())]
    if not listed:
        return found
    # The schemas that exist, in one call: a new environment's do not, and asking one for
    # its tables would fail (and log an error) per schema.
    pattern = "|".join(listed) if all(_PLAIN.fullmatch(s) for s in listed) else "*"
    try:
        rows = spark.sql(f"SHOW SCHEMAS LIKE {_literal(pattern)}").collect()
    except Exception:  # no listing: every view is created
        return found
    there = {str(row[0]).lower() for row in rows}
    for schema in listed:
        names = wanted[schema.lower()]
        if schema.lower() not in there:
            continue
        pattern = "|".join(names) if all(_PLAIN.fullmatch(n) for n in names) else "*"
        try:
            rows = spark.sql(f"SHOW TABLE EXTENDED IN {schema} LIKE {_literal(pattern)}").collect()
        except Exception:  # no listing: its views are created
            continue
        for row in rows:
            info = _information(str(row["information"]))
            name = f"{schema.lower()}.{str(row['tableName']).lower()}"
            own = info.get("Type") == "VIEW" and not row["isTemporary"]
            if own and name.split(".")[1] in names:
                found[name] = info.get("Table Properties")
    return found


def _information(text: str) -> dict[str, str]:
    """``SHOW TABLE EXTENDED``'s ``information``: its ``Key: value`` lines."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and not key.startswith(" "):
            out.setdefault(key, value)
    return out


def repoint(
    spark: SparkSession, view: str, sql: str, pairs: list[tuple[str, str]], shown: str | None
) -> list[str]:
    """The statements that re-point the existing ``view`` at ``sql`` and leave it exactly
    the properties ``pairs``: ``ALTER VIEW ... AS``, then ``SET TBLPROPERTIES`` of the
    pairs and ``UNSET TBLPROPERTIES IF EXISTS`` of the keys it has beside them (all safe
    to run twice).

    Its keys now are read from ``shown``, the ``[k=v, ...]`` text ``SHOW TABLE EXTENDED``
    printed; a value holding ``", k="`` adds a key that is not there (unset ``IF EXISTS``:
    nothing), and a text that does not read as plain keys (a key or value with ``,`` or
    ``=`` of its own) is asked again exactly, ``SHOW TBLPROPERTIES`` (one more call)."""
    statements = [f"ALTER VIEW {view} AS {sql}"]
    keys = _keys(shown)
    if keys is None:
        rows = spark.sql(f"SHOW TBLPROPERTIES {view}").collect()
        keys = {str(row["key"]) for row in rows}
    if pairs:
        props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs)
        statements.append(f"ALTER VIEW {view} SET TBLPROPERTIES ({props})")
    wanted = {k for k, _ in pairs}
    stale = sorted(k for k in keys if k not in wanted and k.lower() not in _METASTORE_KEYS)
    if stale:
        listed = ", ".join(_literal(k) for k in stale)
        statements.append(f"ALTER VIEW {view} UNSET TBLPROPERTIES IF EXISTS ({listed})")
    return statements


def _keys(shown: str | None) -> set[str] | None:
    """The keys in ``SHOW TABLE EXTENDED``'s ``Table Properties`` text (``[k=v, k2=v2]``,
    sorted by key), or None when the text cannot be read as plain ``k=v`` entries."""
    if shown is None:
        return set()
    if not (shown.startswith("[") and shown.endswith("]")):
        return None
    body = shown[1:-1]
    if not body:
        return set()
    keys = set()
    for entry in body.split(", "):
        key, sep, value = entry.partition("=")
        if not sep or not key or "=" in value or "," in key:
            return None
        keys.add(key)
    return keys


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
