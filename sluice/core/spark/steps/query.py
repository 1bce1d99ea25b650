"""The ``query`` step: run one read-only query, return its rows as JSON-safe values.

Also home of :func:`collect_json`, which the unit-test step uses to read its results the
same way.
"""

from __future__ import annotations

import base64
import json
import math
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sluice.core.spark.results import QueryResult
from sluice.core.spark.spec import QueryStep
from sluice.core.spark.steps.context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType


def run_query(spark: SparkSession, step: QueryStep, ctx: StepContext) -> QueryResult:
    """``{"type": "query", "sql", "limit"}`` (from :func:`sluice.core.spark.testing.query_step`).

    Returns:
        Its column names, Spark types and rows, with dates, timestamps and decimals as
        strings.
    """
    columns, types, rows = collect_json(spark.sql(step["sql"]), limit=int(step["limit"]))
    return {"step": "query", "columns": columns, "types": types, "rows": rows}


def collect_json(
    df: DataFrame, limit: int | None = None
) -> tuple[list[str], list[str], list[list[Any]]]:
    """A DataFrame's column names, simple type strings and rows, as JSON-safe values.

    Timestamps are formatted by Spark, in the session time zone: PySpark would turn them
    into naive datetimes in this process's local zone, which may be another one.
    """
    from pyspark.sql import functions as sf

    fields = df.schema.fields
    staged = df.toDF(*[f"_c{i}" for i in range(len(fields))])  # names may repeat
    selected = []
    for i, field in enumerate(fields):
        column = sf.col(f"_c{i}")
        if _has_timestamp(field.dataType):
            atomic = _is_atomic(field.dataType)
            column = column.cast("string") if atomic else sf.to_json(column)
        selected.append(column.alias(f"_c{i}"))
    staged = staged.select(*selected)
    collected = staged.take(limit) if limit is not None else staged.collect()
    as_json = [_has_timestamp(f.dataType) and not _is_atomic(f.dataType) for f in fields]
    rows = [
        [
            json.loads(value) if as_json[i] and value is not None else json_safe(value)
            for i, value in enumerate(row)
        ]
        for row in collected
    ]
    return [f.name for f in fields], [f.dataType.simpleString() for f in fields], rows


def json_safe(value: Any) -> Any:
    """A value PySpark collected, as JSON: decimals, dates and times as strings."""
    from pyspark.sql import Row

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Row):
        return {k: json_safe(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(json_safe(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


def _has_timestamp(dtype: DataType) -> bool:
    from pyspark.sql.types import TimestampNTZType, TimestampType

    if isinstance(dtype, TimestampType | TimestampNTZType):
        return True
    return any(_has_timestamp(child) for child in _children(dtype))


def _is_atomic(dtype: DataType) -> bool:
    return not _children(dtype)


def _children(dtype: DataType) -> list[DataType]:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dtype, ArrayType):
        return [dtype.elementType]
    if isinstance(dtype, MapType):
        return [dtype.keyType, dtype.valueType]
    if isinstance(dtype, StructType):
        return [f.dataType for f in dtype.fields]
    return []
