"""The ``inspect`` step: what the catalog holds of an environment's views and tables,
read and never changed (``sluice drift``, :mod:`sluice.core.drift.catalog`; driver).

Nothing here writes: no ``ANALYZE``, no ``MSCK REPAIR``, no property set. Each view is one
``DESCRIBE TABLE EXTENDED`` (its type and text) and one ``SHOW TBLPROPERTIES`` (when its
definition last changed). Each table is the same two, its schema, and its last write as
the cheapest source that answers says it:

- a file-source table (Parquet, ORC, ...): one aggregate per table, fifty to a query as
  :mod:`sluice.core.spark.steps.statistics` measures them: the rows (a count the files'
  footers answer), the bytes and number of the files holding them, and the newest file's
  modification time (Spark's ``_metadata`` column); ``source`` ``files``;
- a Delta table: ``DESCRIBE DETAIL`` (bytes, files, last modified); ``source`` ``delta``;
- any other: the statistics the catalog keeps, if any (never computed here); ``catalog``.

An INCREMENTAL_BY_TIME_RANGE table's partitions (its time column's values) are listed
(``SHOW PARTITIONS``: the metastore, no data read), at most :data:`MAX_PARTITIONS`. A
model's query is analysed, never run, for the columns Sluice would create. A name the
catalog does not hold is ``exists: false``; any other failure to read an object is its
``error``, and the step goes on with the next one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from sluice.core.spark.results import (
    MAX_ROWS,
    MAX_TEXT_CHARS,
    InspectedTable,
    InspectedView,
    InspectResult,
)
from sluice.core.spark.spec import InspectStep, InspectTable
from sluice.core.spark.steps.context import StepContext, spark_error
from sluice.core.spark.steps.statistics import FILE_FORMATS, PER_QUERY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MARK = "sluice.created_by"  # swap.MARK, without importing the build's module here
DDL_TIME = "transient_lastddltime"
MAX_PARTITIONS = 10_000
"""Partitions listed per table at most (more: not listed, the intervals not checked)."""
_NOT_FOUND = (
    "TABLE_OR_VIEW_NOT_FOUND",
    "SCHEMA_NOT_FOUND",
    "NoSuchTableException",
    "NoSuchDatabaseException",
)


def run_inspect(spark: SparkSession, step: InspectStep, ctx: StepContext) -> InspectResult:
    """Read each of ``step``'s views and tables (see the module docstring)."""
    views = [_view(spark, name) for name in step["views"]]
    tables = [_table(spark, spec) for spec in step["tables"]]
    files = [t for t in tables if t["exists"] and (t["provider"] or "").lower() in FILE_FORMATS]
    for start in range(0, len(files), PER_QUERY):
        _listing(spark, files[start : start + PER_QUERY])
    for table in tables:
        if table["exists"] and table["source"] == "none" and not table["error"]:
            _other(spark, table)
    ctx.log(f"read {len(views)} view(s) and {len(tables)} table(s) from the catalog")
    return {"step": "inspect", "views": views, "tables": tables}


def _missing(exc: BaseException) -> bool:
    text = str(exc)
    return any(word in text for word in _NOT_FOUND)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS]


def _described(spark: SparkSession, name: str) -> dict[str, str]:
    """``DESCRIBE TABLE EXTENDED``'s detail rows (after ``# Detailed Table Information``)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    detail: dict[str, str] = {}
    seen = False
    for row in rows:
        key = str(row["col_name"] or "").strip()
        if key.startswith("# Detailed"):
            seen = True
            continue
        if seen and key and key not in detail:
            detail[key] = "" if row["data_type"] is None else str(row["data_type"])
    return detail


def _properties(spark: SparkSession, name: str) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES {name}").collect()
    return {str(r[0]).lower(): str(r[1]) for r in rows if len(r) > 1}


def _ddl_ms(properties: dict[str, str]) -> int | None:
    value = properties.get(DDL_TIME)
    return int(value) * 1000 if value is not None and value.isdigit() else None


def _view(spark: SparkSession, name: str) -> InspectedView:
    found: InspectedView = {
        "name": name,
        "exists": False,
        "type": None,
        "text": None,
        "ddl_ms": None,
        "error": None,
    }
    try:
        detail = _described(spark, name)
    except Exception as exc:
        if not _missing(exc):
            found["error"] = spark_error(exc)
        return found
    found["exists"] = True
    found["type"] = detail.get("Type")
    found["text"] = _cut(detail.get("View Original Text") or detail.get("View Text"))
    try:
        found["ddl_ms"] = _ddl_ms(_properties(spark, name))
    except Exception as exc:
        found["error"] = spark_error(exc)
    return found


def _table(spark: SparkSession, spec: InspectTable) -> InspectedTable:
    name = spec["table"]
    found: InspectedTable = {
        "name": name,
        "exists": False,
        "type": None,
        "provider": None,
        "mark": None,
        "columns": [],
        "expected": None,
        "rows": None,
        "bytes": None,
        "files": None,
        "newest_ms": None,
        "ddl_ms": None,
        "source": "none",
        "partitions": None,
        "error": None,
    }
    query = spec.get("query")
    if query:
        try:  # analysed only: a DataFrame's schema runs no Spark job
            found["expected"] = [
                [f.name, f.dataType.simpleString()] for f in spark.sql(query).schema.fields
            ]
        except Exception:
            found["expected"] = None  # a parent gone: its own drift says so
    try:
        detail = _described(spark, name)
    except Exception as exc:
        if not _missing(exc):
            found["error"] = spark_error(exc)
        return found
    found["exists"] = True
    found["type"] = detail.get("Type")
    found["provider"] = detail.get("Provider")
    try:
        properties = _properties(spark, name)
        found["mark"] = properties.get(MARK)
        found["ddl_ms"] = _ddl_ms(properties)
        found["columns"] = [
            [f.name, f.dataType.simpleString()] for f in spark.table(name).schema.fields
        ]
        column = spec.get("time_column")
        if column and (found["type"] or "").upper() != "VIEW":
            found["partitions"] = _partitions(spark, name, column)
    except Exception as exc:
        found["error"] = spark_error(exc)
    return found


def _partitions(spark: SparkSession, table: str, column: str) -> list[str] | None:
    """The values of ``column`` among ``table``'s partitions (escaped as Spark lists them),
    or None when it is not a partition column, the table's partitions cannot be listed or
    there are more than :data:`MAX_PARTITIONS`."""
    from urllib.parse import unquote

    try:
        rows = spark.sql(f"SHOW PARTITIONS {table}").limit(MAX_PARTITIONS + 1).collect()
    except Exception:
        return None
    if len(rows) > MAX_PARTITIONS:
        return None
    values: set[str] = set()
    for row in rows:
        spec = dict(part.partition("=")[::2] for part in str(row[0]).split("/"))
        if column not in spec:
            return None
        values.add(unquote(spec[column]))
    return sorted(values)[:MAX_ROWS]


def _listing(spark: SparkSession, tables: list[InspectedTable]) -> None:
    """Rows, bytes, files and the newest file's time of file-source ``tables``, one query."""
    parts = [
        f"SELECT {index} AS i, COUNT(*) AS n, COUNT(DISTINCT _metadata.file_path) AS f, "
        "aggregate(collect_set(struct(_metadata.file_path AS p, _metadata.file_size AS s)), "
        "0L, (t, x) -> t + x.s) AS b, "
        "CAST(unix_millis(MAX(_metadata.file_modification_time)) AS BIGINT) AS m "
        f"FROM {table['name']}"
        for index, table in enumerate(tables)
    ]
    try:
        rows = spark.sql(" UNION ALL ".join(parts)).collect()
    except Exception:
        for table in tables:  # one at a time: which one fails is that one's error
            _listing_one(spark, table)
        return
    for row in rows:
        _listed(tables[int(row["i"])], row)


def _listing_one(spark: SparkSession, table: InspectedTable) -> None:
    try:
        rows = spark.sql(
            "SELECT 0 AS i, COUNT(*) AS n, COUNT(DISTINCT _metadata.file_path) AS f, "
            "aggregate(collect_set(struct(_metadata.file_path AS p, _metadata.file_size AS s)), "
            "0L, (t, x) -> t + x.s) AS b, "
            "CAST(unix_millis(MAX(_metadata.file_modification_time)) AS BIGINT) AS m "
            f"FROM {table['name']}"
        ).collect()
    except Exception as exc:
        table["error"] = spark_error(exc)
        return
    _listed(table, rows[0])


def _listed(table: InspectedTable, row: Any) -> None:
    table["rows"] = int(row["n"])
    table["files"] = int(row["f"])
    table["bytes"] = int(row["b"])
    table["newest_ms"] = int(row["m"]) if row["m"] is not None else None
    table["source"] = "files"


_STATISTICS = re.compile(r"^\s*(\d+)\s+bytes(?:,\s*(\d+)\s+rows)?\b")


def _other(spark: SparkSession, table: InspectedTable) -> None:
    """A table of another format: Delta's details, else the catalog's own statistics."""
    name = table["name"]
    if (table["provider"] or "").lower() == "delta":
        try:
            [row] = spark.sql(f"DESCRIBE DETAIL {name}").collect()
            [count] = spark.sql(f"SELECT COUNT(*) AS n FROM {name}").collect()
        except Exception as exc:
            table["error"] = spark_error(exc)
            return
        modified = row["lastModified"]
        table["bytes"] = int(row["sizeInBytes"]) if row["sizeInBytes"] is not None else None
        table["files"] = int(row["numFiles"]) if row["numFiles"] is not None else None
        table["newest_ms"] = int(modified.timestamp() * 1000) if modified is not None else None
        table["rows"] = int(count["n"])
        table["source"] = "delta"
        return
    try:
        detail = _described(spark, name)
    except Exception as exc:
        table["error"] = spark_error(exc)
        return
    found = _STATISTICS.match(detail.get("Statistics", ""))
    if found is not None:
        table["bytes"] = int(found.group(1))
        table["rows"] = int(found.group(2)) if found.group(2) is not None else None
        table["source"] = "catalog"
