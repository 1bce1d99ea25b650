"""The size of the tables a job wrote: the bytes of their data files and the rows they
hold, measured once, at the job's end, for all of them (runs in the driver).

A build only notes the table it wrote (:meth:`StepContext.wrote`); :func:`record` then
measures every noted table in a few queries and reports each as a ``table_size`` write.
For a file-source table (Parquet, ORC, ...) one aggregate per table reads no column: the
rows are a count (answered from the files' footers) and the bytes the sum of the sizes of
the files holding them (Spark's ``_metadata`` column), fifty tables to a query, so a
50-table build pays one or two Spark jobs for its measurements where ``ANALYZE TABLE``
paid a job and a metastore write per table. A table of another format (Delta, Iceberg,
Hive SerDe) is measured by ``ANALYZE ... COMPUTE
STATISTICS``. A measurement never fails a job: a table it cannot measure keeps no size
("size not measured yet" in the next plan).

Example: after a job wrote ``s.a`` (500 rows in one 6,402-byte Parquet file) and ``s.b``::

    SELECT 0 AS i, COUNT(*) AS n, aggregate(collect_set(struct(_metadata.file_path AS p,
      _metadata.file_size AS s)), 0L, (t, f) -> t + f.s) AS b FROM s.a
    UNION ALL SELECT 1 AS i, ... FROM s.b
    -- -> (0, 500, 6402), (1, ...): two table_size writes
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sluice.core.spark.steps.context import StepContext, Written

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILE_FORMATS = frozenset({"parquet", "orc", "csv", "json", "avro", "text"})
"""Formats whose tables Spark reads as files, with the ``_metadata`` column."""

PER_QUERY = 50
"""Tables measured by one query (a union of that many aggregates)."""


def record(spark: SparkSession, ctx: StepContext) -> None:
    """Measure every table ``ctx`` noted as written and report its size; stop at the first
    measurement that fails (Spark may be gone: each further attempt would wait for it)."""
    tables = list({w.table: w for w in ctx.written_tables}.values())
    files = [w for w in tables if w.format.lower() in FILE_FORMATS]
    others = [w for w in tables if w.format.lower() not in FILE_FORMATS]
    for start in range(0, len(files), PER_QUERY):
        chunk = files[start : start + PER_QUERY]
        measured = _by_query(spark, chunk)
        if measured is None:
            return
        for written, (size, rows) in zip(chunk, measured, strict=True):
            _report(ctx, written, size, rows)
    for written in others:
        stats = analyze(spark, written.table)
        if stats is None:
            return
        _report(ctx, written, *stats)


def _report(ctx: StepContext, written: Written, size: int, rows: int | None) -> None:
    ctx.table_size(written.model, written.version, size, rows)


def _by_query(spark: SparkSession, tables: list[Written]) -> list[tuple[int, int]] | None:
    """Each table's (bytes, rows) from one query, in the order given; None if it failed."""
    parts = [
        f"SELECT {index} AS i, COUNT(*) AS n, aggregate(collect_set(struct("
        "_metadata.file_path AS p, _metadata.file_size AS s)), 0L, (t, f) -> t + f.s) AS b "
        f"FROM {written.table}"
        for index, written in enumerate(tables)
    ]
    try:
        rows = spark.sql(" UNION ALL ".join(parts)).collect()
    except Exception:
        return None
    found = {int(row["i"]): (int(row["b"]), int(row["n"])) for row in rows}
    if len(found) != len(tables):
        return None
    return [found[index] for index in range(len(tables))]


_STATISTICS = re.compile(r"^\s*(\d+)\s+bytes(?:,\s*(\d+)\s+rows)?\b")


def analyze(spark: SparkSession, table: str) -> tuple[int, int | None] | None:
    """The bytes of ``table``'s data files and the rows it holds, as the catalog's
    statistics say once ``ANALYZE ... COMPUTE STATISTICS`` has counted them; the rows are
    None when the catalog kept no count, and the whole None when it keeps no statistics."""
    try:
        spark.sql(f"ANALYZE TABLE {table} COMPUTE STATISTICS")
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    except Exception:
        return None
    for row in rows:
        if row["col_name"] == "Statistics":
            found = _STATISTICS.match(str(row["data_type"]))
            if found is None:
                return None
            counted = found.group(2)
            return int(found.group(1)), int(counted) if counted is not None else None
    return None
