"""The size of the tables a job wrote, measured together at its end
(:mod:`sluice.core.spark.steps.statistics`): the same bytes and rows ``ANALYZE TABLE``
counts, fewer Spark jobs, and a measurement that cannot be made costs no build."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core.spark.steps import statistics
from sluice.core.spark.steps.context import StepContext, Written

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DB = "measured_db"


def _sizes(spark: SparkSession, tables: list[Written]) -> dict[str, tuple[int, int | None]]:
    events: list[dict[str, Any]] = []
    ctx = StepContext(job={}, emit=events.append)
    for written in tables:
        ctx.wrote(written)
    statistics.record(spark, ctx)
    assert all(e["event"] == "write" and e["op"] == "table_size" for e in events)
    return {e["model"]: (e["bytes"], e["rows"]) for e in events}


def _data_bytes(spark: SparkSession, table: str) -> int:
    """The bytes of the files of ``table`` that hold rows, read from disk."""
    location = next(
        row["data_type"]
        for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
        if row["col_name"] == "Location"
    )
    files = [
        f
        for f in Path(location.removeprefix("file:")).rglob("*")
        if f.is_file() and not f.name.startswith((".", "_"))
    ]
    return sum(f.stat().st_size for f in files)


@pytest.fixture(scope="module")
def tables(local_spark: SparkSession) -> SparkSession:
    spark = local_spark
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark.sql(f"CREATE DATABASE {DB}")
    # Three files in three partitions; one file; no row at all; a Hive SerDe table.
    spark.sql(
        f"CREATE TABLE {DB}.parted USING parquet PARTITIONED BY (p) AS "
        "SELECT id, CAST(id % 3 AS INT) AS p FROM range(0, 1000, 1, 1)"
    )
    spark.sql(f"CREATE TABLE {DB}.single USING parquet AS SELECT id FROM range(0, 37, 1, 1)")
    spark.sql(f"CREATE TABLE {DB}.orcs USING orc AS SELECT id, 'x' AS s FROM range(0, 5, 1, 1)")
    spark.sql(f"CREATE TABLE {DB}.empty USING parquet AS SELECT id FROM range(0) WHERE FALSE")
    spark.sql(f"CREATE TABLE {DB}.serde (id BIGINT) STORED AS TEXTFILE")
    spark.sql(f"INSERT INTO {DB}.serde SELECT id FROM range(0, 11, 1, 1)")
    return spark


def _written(name: str, fmt: str = "parquet") -> Written:
    return Written(table=f"{DB}.{name}", model=name, version="v1", format=fmt)


def test_file_tables_are_measured_by_one_query_as_analyze_counts_them(
    tables: SparkSession,
) -> None:
    spark = tables
    sizes = _sizes(
        spark, [_written("parted"), _written("single"), _written("orcs", "orc"), _written("empty")]
    )
    assert sizes["parted"] == (_data_bytes(spark, f"{DB}.parted"), 1000)
    assert sizes["single"] == (_data_bytes(spark, f"{DB}.single"), 37)
    assert sizes["orcs"] == (_data_bytes(spark, f"{DB}.orcs"), 5)
    assert sizes["parted"][0] > sizes["single"][0] > 0
    assert sizes["empty"] == (0, 0)  # no file holds a row
    # The same figures ANALYZE TABLE keeps in the catalog, for a table with rows.
    for name in ("parted", "single", "orcs"):
        assert statistics.analyze(spark, f"{DB}.{name}") == sizes[name]


def test_tables_beyond_one_query_and_other_formats_are_measured_too(
    tables: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statistics, "PER_QUERY", 1)  # one query per table
    sizes = _sizes(
        tables,
        [_written("single"), _written("serde", "hive"), _written("parted"), _written("single")],
    )
    assert sizes["single"] == (_data_bytes(tables, f"{DB}.single"), 37)  # once, though noted twice
    assert sizes["parted"][1] == 1000
    bytes_, rows = sizes["serde"]  # by ANALYZE: the catalog's count
    assert bytes_ == _data_bytes(tables, f"{DB}.serde") and rows == 11


def test_a_measurement_that_fails_reports_nothing_and_raises_nothing(
    tables: SparkSession,
) -> None:
    # A table gone since it was written (or a Spark that refuses the query): no size, no
    # error, and no further attempt at the tables after it.
    sizes = _sizes(
        tables, [_written("single"), _written("no_such_table"), _written("serde", "hive")]
    )
    assert sizes == {}
    assert _sizes(tables, []) == {}
