"""The version of each table a run's rebuild reads, as Spark tells it cheaply (runs in the
driver): what :mod:`sluice.core.skip` compares with the last run's.

By the table's provider (``DESCRIBE TABLE EXTENDED``):

- a file table (Parquet, ORC, CSV, JSON, Avro, text, Hive SerDe), which is what Sluice
  writes by default: its files as Spark would read them now (``inputFiles()`` after a
  refresh of the table, so no listing this session cached is used), then their sizes and
  modification times from the file system (on classic Spark asked of the file system through the driver's JVM, no Spark job:
  ``fs:<count>:<bytes>:<latest mtime>:<digest of each path, size, mtime>``; on Spark
  Connect, one ``binaryFile`` aggregate that reads no content:
  ``files:<count>:<bytes>:<latest mtime>:<xor of each file's hash>``).
  A write through Spark makes new files, and a file replaced in place changes its size
  or time, so either changes the version;
- a Delta table: its last commit's version (``DESCRIBE HISTORY ... LIMIT 1``):
  ``delta:<version>``;
- anything else (a view, Iceberg, JDBC, a table that cannot be described): ``None``,
  unknown, and the model runs.

A table read twice in one job (a source many models read) is read once: a table the job
writes is built before any model that reads it starts, so a version read in the job
stays true for the rest of it (a write forgets it all the same).
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any

from sluice.core.skip_rule import MAX_SIGNATURE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILE_PROVIDERS = frozenset({"parquet", "orc", "csv", "json", "avro", "text", "hive"})
"""Providers whose tables are files Spark lists."""


_LOCK = threading.Lock()


def read(
    spark: SparkSession, tables: list[str], known: dict[str, str | None]
) -> dict[str, str | None]:
    """The version of each of ``tables`` (None: unknown); ``known``: those read earlier in
    the job (:attr:`StepContext.input_versions`), added to."""
    found: dict[str, str | None] = {}
    for table in tables:
        with _LOCK:
            if table in known:
                found[table] = known[table]
                continue
        version = version_of(spark, table)
        with _LOCK:
            known[table] = version
        found[table] = version
    return found


def forget(table: str, known: dict[str, str | None]) -> None:
    """``table`` was written: read it again when asked."""
    with _LOCK:
        known.pop(table, None)


def version_of(spark: SparkSession, table: str) -> str | None:
    """The version of ``table`` as the module says, or None when it cannot be read."""
    quoted = quote_table(table)
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
        info = {str(r["col_name"]).strip(): str(r["data_type"]).strip() for r in rows}
        if info.get("Type", "").upper() == "VIEW":
            return None
        provider = info.get("Provider", "").lower()
        if provider == "delta":
            last = spark.sql(f"DESCRIBE HISTORY {quoted} LIMIT 1").collect()
            return f"delta:{int(last[0]['version'])}" if last else None
        if provider not in FILE_PROVIDERS:
            return None
        spark.catalog.refreshTable(quoted)
        return _files(spark, sorted(spark.table(quoted).inputFiles()))
    except Exception:  # any failure is an unknown version: the model runs
        return None


def quote_table(name: str) -> str:
    """``name`` (``[catalog.]schema.table`` as a model reads it) with each part quoted, so
    it goes into a statement as a name whatever it holds.

    >>> quote_table("raw.orders")
    '`raw`.`orders`'
    >>> quote_table("raw.a`b")
    '`raw`.`a``b`'
    """
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def _files(spark: SparkSession, files: list[str]) -> str | None:
    if not files:
        return "files:0"
    if getattr(spark, "_jvm", None) is not None:
        return _statuses(spark, files)
    row = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(files)
        .selectExpr(
            "COUNT(*) AS n",
            "COALESCE(SUM(length), 0) AS b",
            "CAST(MAX(modificationTime) AS STRING) AS m",
            "BIT_XOR(XXHASH64(path, length, modificationTime)) AS h",
        )
        .collect()[0]
    )
    if int(row["n"]) != len(files):
        return None  # a file went while it was read: unknown, run
    return f"files:{row['n']}:{row['b']}:{row['m']}:{row['h']}"[:MAX_SIGNATURE]


def _statuses(spark: SparkSession, files: list[str]) -> str:
    """On classic Spark: each file's size and time asked of its file system through the
    driver's JVM, no Spark job (a Connect session has no JVM here: :func:`_files` asks
    ``binaryFile`` instead; its version reads otherwise, so a change of mode runs each
    model once)."""
    jvm: Any = getattr(spark, "_jvm", None)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    digest = hashlib.sha256()
    total, latest = 0, 0
    for name in files:
        path = jvm.org.apache.hadoop.fs.Path(name)
        status = path.getFileSystem(conf).getFileStatus(path)
        size, mtime = int(status.getLen()), int(status.getModificationTime())
        total, latest = total + size, max(latest, mtime)
        digest.update(f"{name}\t{size}\t{mtime}\n".encode())
    return f"fs:{len(files)}:{total}:{latest}:{digest.hexdigest()[:16]}"
