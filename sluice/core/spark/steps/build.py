"""Build one model version's physical table, and audit it (runs in the driver).

Every write is idempotent, so a job killed half-way is finished by running it again:
FULL and SEED tables are overwritten whole; an INCREMENTAL_BY_TIME_RANGE batch replaces
exactly the partitions of its time range; INCREMENTAL_BY_UNIQUE_KEY rewrites the table as
the new rows plus the old rows whose keys are absent, through a staging table that a
restarted job recovers; the SCD type 2 kinds merge the rows into the history the same way
(:mod:`sluice.core.spark.steps.scd`). A batch's interval is reported (a ``write`` event, recorded by the
service) only after its data is written and its audits ran (the batch's ``audits``, as
SQLMesh audits each batch: a backfill killed, or stopped by a blocking audit, keeps the
batches before it, audited).
A new FULL or SEED table is created by its query; what a killed create left at its
location is cleared when Spark finds it there (Spark writes a new table's files before
the catalog knows the table). The size of each table written is measured with the
others' at the job's end (:mod:`sluice.core.spark.steps.statistics`).
A table that exists is written into only when Sluice created it for the version (its
mark), or when it has no mark and state records a build of the version (an earlier
Sluice's; it is marked first): the rule is :mod:`sluice.core.spark.steps.swap`'s.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sluice.core import skip_rule as skip
from sluice.core.model.names import quote_column
from sluice.core.model.pycode import run as pycode_run
from sluice.core.model.values import plain_column
from sluice.core.plan.plan import VIEW_MARKER
from sluice.core.spark.results import AUDIT_SAMPLE, AuditResult, BuildResult
from sluice.core.spark.spec import AuditStep, BuildBatch, BuildStep
from sluice.core.spark.steps import inputs, scd, swap
from sluice.core.spark.steps.context import StepContext, Written, filled
from sluice.core.spark.steps.query import json_safe
from sluice.core.timeutil import format_range, to_datetime

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField


def run_build(spark: SparkSession, step: BuildStep, ctx: StepContext) -> BuildResult:
    """Create the table (or view) of a model version and fill its missing batches."""
    with _session_properties(spark, step.get("session_properties", [])):
        return _run_build(spark, step, ctx)


@contextmanager
def _session_properties(spark: SparkSession, pairs: list[list[str]]) -> Iterator[None]:
    """The model's ``session_properties`` set for its build, then put back as they were."""
    before = {key: spark.conf.get(key, None) for key, _ in pairs}
    try:
        for key, value in pairs:
            spark.conf.set(key, value)
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _properties_sql(pairs: list[list[str]]) -> str:
    """`` TBLPROPERTIES ('k' = 'v', ...)``, or nothing."""
    if not pairs:
        return ""
    body = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs)
    return f" TBLPROPERTIES ({body})"


_literal = swap.sql_string


def _column(name: str) -> str:
    """A column name of the spec (a time column, a unique key) for Spark SQL: a plain
    name, quoted; anything else is refused, whatever wrote the spec."""
    if not plain_column(name):
        raise ValueError(f"{name!r} is not a column name Sluice writes into SQL")
    return quote_column(name)


def _table_sql(step: BuildStep, partition: str | None = None) -> str:
    """``USING``, ``PARTITIONED BY``, ``CLUSTER BY`` and ``TBLPROPERTIES`` of a new table.

    An INCREMENTAL_BY_TIME_RANGE table is partitioned by its time column first (its
    batches replace partitions of it), then by the model's other partition columns."""
    extra = [p for p in step.get("partitioned_by") or [] if p != partition]
    parts = [_column(partition), *extra] if partition else extra
    sql = f" USING {step['format']}"
    if parts:
        sql += f" PARTITIONED BY ({', '.join(parts)})"
    elif step.get("clustered_by"):
        sql += f" CLUSTER BY ({', '.join(step.get('clustered_by', []))})"
    return sql + _properties_sql(_marked(step))


def _marked(step: BuildStep) -> list[list[str]]:
    """The table's properties: the model's, and Sluice's mark (:data:`swap.MARK`)."""
    return [*step.get("table_properties", []), [swap.MARK, swap.mark_of(step)]]


def _run_build(spark: SparkSession, step: BuildStep, ctx: StepContext) -> BuildResult:
    table = step["table"]
    kind = step["kind"]
    name, version = step["model"], step["version"]
    if step.get("view_sql"):
        props = _properties_sql(_marked(step))
        spark.sql(f"CREATE OR REPLACE VIEW {table}{props} AS {step['view_sql']}")
        ctx.created.add(table)
        ctx.add_intervals(name, version, [list(VIEW_MARKER)])
    for start, end in step.get("restate", []):
        ctx.remove_intervals(name, version, start, end)
    skipped = _skip(spark, step, ctx)
    if skipped is not None:
        return skipped
    written = 0
    for batch in step["batches"]:
        if "python" in step:
            _python_rows(spark, step, batch)
        if kind == "SEED":
            _write_seed(spark, step, ctx)
        elif kind == "INCREMENTAL_BY_TIME_RANGE":
            _write_time_range(spark, step, batch)
        elif kind == "INCREMENTAL_BY_UNIQUE_KEY":
            _write_unique_key(spark, step, _batch_sql(step, batch))
        elif kind.startswith("SCD_TYPE_2"):
            scd.write_scd_type_2(
                spark,
                step,
                _batch_sql(step, batch),
                table_sql=_table_sql(step),
            )
        else:
            _write_whole(spark, step, _batch_sql(step, batch), ctx)
        if "python" in step:
            # Gone once written: SHOW TABLES IN any schema lists a session's temp views, so
            # one left behind would keep the janitor from dropping an emptied schema.
            spark.catalog.dropTempView(pycode_run.VIEW)
        written += 1
        ctx.log(f"{name}: batch {written}/{len(step['batches'])} written", model=name)
        # Audited before its intervals are reported: a blocking audit that fails stops the
        # build with this batch unrecorded, the batches before it kept.
        for audit in batch.get("audits", []):
            run_audit(spark, audit, ctx)
        ctx.add_intervals(name, version, filled(step, batch))
    if written:
        ctx.wrote(Written(table=table, model=name, version=version, format=step["format"]))
        inputs.forget(table, ctx.input_versions)
    result: BuildResult = {
        "step": "build",
        "model": name,
        "version": version,
        "table": table,
        "batches": written,
    }
    if "skip" in step:
        result["skip"] = {"ran": True, "inputs": ctx.skip_inputs.pop(name, [])}
    return result


def _skip(spark: SparkSession, step: BuildStep, ctx: StepContext) -> BuildResult | None:
    """A scheduled run's rebuild (its ``skip`` check): the versions of what it reads, read
    now; when :func:`sluice.core.skip.decide` says nothing changed since the last run, its
    intervals are recorded as done without a write and its result says so (else None, and
    the build runs, its result naming the versions read)."""
    check = step.get("skip")
    if check is None:
        return None
    name, version = step["model"], step["version"]
    read = inputs.read(spark, list(check["inputs"]), ctx.input_versions)
    pairs: list[list[str | None]] = [[t, v] for t, v in read.items()]
    decision = skip.decide(check["key"], skip.seen_of(check.get("last")), read)
    if decision.ran:
        ctx.skip_inputs[name] = pairs
        if decision.code != "new":  # a deploy's build, or a run's first: nothing to say
            ctx.log(f"{name}: runs: {decision.reason}", model=name)
        return None
    for batch in step["batches"]:
        ctx.add_intervals(name, version, filled(step, batch))
    ctx.log(f"{name}: skipped: {decision.reason}", model=name)
    return {
        "step": "build",
        "model": name,
        "version": version,
        "table": step["table"],
        "batches": 0,
        "skip": {"ran": False, "inputs": pairs},
    }


def _python_rows(spark: SparkSession, step: BuildStep, batch: BuildBatch) -> None:
    """Run a Python model's function for the batch; its rows become the view the batch's
    query reads."""
    start, end = to_datetime(batch["start"]), to_datetime(batch["end"] - 1)
    rows = pycode_run.frame(spark, step["model"], step["python"], start, end, end)
    rows.createOrReplaceTempView(pycode_run.VIEW)


def _batch_sql(step: BuildStep, batch: BuildBatch) -> str:
    """The query of a batch: every kind has one but SEED (whose rows are its file)."""
    sql = batch["sql"]
    if sql is None:
        raise ValueError(
            f"{step['model']}: batch [{batch['start']}, {batch['end']}) has no query "
            f"(kind {step['kind']}: only a SEED build's batches have none)"
        )
    return sql


def _write_whole(spark: SparkSession, step: BuildStep, sql: str, ctx: StepContext) -> None:
    """Write a FULL or SEED table whole: a new table is created by its query (one Spark
    job); Spark refuses to create one that exists (a rebuild: a restatement, a run of a
    FULL model) before running the query, and it is overwritten instead. Files a killed
    create left at a new table's location are cleared, then it is created."""
    table = step["table"]
    create = f"CREATE TABLE {table}{_table_sql(step)} AS {sql}"
    try:
        spark.sql(create)
    except Exception as exc:
        condition = _condition(exc)
        if condition == "TABLE_OR_VIEW_ALREADY_EXISTS":
            swap.check_mark(spark, table, step)
            spark.sql(f"INSERT OVERWRITE TABLE {table} {sql}")
            return
        if condition != "LOCATION_ALREADY_EXISTS":
            raise
        swap.clear_location(spark, table)
        spark.sql(create)
    ctx.created.add(table)


def _partitions(spark: SparkSession, table: str) -> list[Any]:
    """``SHOW PARTITIONS`` of ``table``. A create killed between registering the table and
    recording that the metastore tracks its partitions leaves a table Spark refuses this
    for; repairing it (``MSCK REPAIR TABLE``, as Spark's message says) records them."""
    try:
        return spark.sql(f"SHOW PARTITIONS {table}").collect()
    except Exception as exc:
        untracked = "partition metadata is not stored in the Hive metastore" in str(exc)
        if _condition(exc) != "_LEGACY_ERROR_TEMP_1251" and not untracked:
            raise
    spark.sql(f"MSCK REPAIR TABLE {table}")
    return spark.sql(f"SHOW PARTITIONS {table}").collect()


def _condition(exc: Exception) -> str | None:
    """The Spark error condition of ``exc`` (``LOCATION_ALREADY_EXISTS``, ...), if any."""
    condition = getattr(exc, "getCondition", None)
    return condition() if callable(condition) else None


def _create_if_missing(
    spark: SparkSession, step: BuildStep, sql: str, partition: str | None = None
) -> None:
    if spark.catalog.tableExists(step["table"]):
        swap.check_mark(spark, step["table"], step)
        return
    swap.clear_location(spark, step["table"])
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {step['table']}{_table_sql(step, partition)} "
        f"AS SELECT * FROM ({sql}) AS __sluice_q WHERE FALSE"
    )


def _write_time_range(spark: SparkSession, step: BuildStep, batch: BuildBatch) -> None:
    table, column, sql = step["table"], step["time_column"], _batch_sql(step, batch)
    if column is None:
        raise ValueError(f"{step['model']}: an {step['kind']} build without a time column")
    _create_if_missing(spark, step, sql, partition=column)
    low, high = _bounds(spark, table, column, batch["start"], batch["end"])
    # Clear the batch's range first: a re-run, or a restatement that now yields no rows for
    # a day, must not leave old rows behind. Partition values come back as escaped strings.
    stale = []
    for row in _partitions(spark, table):
        # `ds=2024-01-01` or, with more partition columns, `ds=2024-01-01/region=eu`.
        spec = [part.partition("=") for part in str(row[0]).split("/")]
        values = {key: unquote(escaped) for key, _, escaped in spec}
        if column in values and low <= values[column] < high:
            where = ", ".join(f"{k} = {_literal(v)}" for k, v in values.items())
            stale.append(f"PARTITION ({where})")
    if stale:  # one metastore call for the whole batch
        spark.sql(f"ALTER TABLE {table} DROP IF EXISTS {', '.join(stale)}")
    quoted = _column(column)
    rows = spark.sql(
        f"SELECT * FROM ({sql}) AS __sluice_q WHERE {quoted} >= '{low}' AND {quoted} < '{high}'"
    )
    _insert_by_name(spark, rows, table)


def _bounds(
    spark: SparkSession, table: str, column: str, start_ms: int, end_ms: int
) -> tuple[str, str]:
    """The batch's [start, end) as literals comparable with the time column's values."""
    from sluice.core.timeutil import to_ds, to_ts

    kind = dict((f.name, f.dataType.simpleString()) for f in spark.table(table).schema.fields)[
        column
    ]
    if kind == "date":
        return to_ds(start_ms), to_ds(end_ms)
    return to_ts(start_ms), to_ts(end_ms)


def _insert_by_name(spark: SparkSession, rows: DataFrame, table: str) -> None:
    # Partition columns are stored last, so insert by name, not by position; and overwrite
    # only the partitions the rows fall in.
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    _fit(spark, rows, table).write.insertInto(table, overwrite=True)


def _fit(spark: SparkSession, rows: DataFrame, table: str) -> DataFrame:
    """``rows`` in the columns and order of ``table``, which keeps its rows across a
    forward-only change: a column the query gained is added to the table first (its
    older rows read NULL); a column the query lost stays in the table and its new rows
    are NULL, Spark being unable to drop a column of a Hive or file-source table (the
    plan allowed the drop: ``on_destructive_change``)."""
    from pyspark.sql import functions

    fields = spark.table(table).schema.fields
    have = {f.name.lower() for f in fields}
    gained = [f for f in rows.schema.fields if f.name.lower() not in have]
    if gained:
        add_columns(spark, table, gained)
        fields = spark.table(table).schema.fields
    given = {f.name.lower(): f.name for f in rows.schema.fields}
    return rows.select(
        *(
            functions.col(f"`{given[f.name.lower()]}`")
            if f.name.lower() in given
            else functions.lit(None).cast(f.dataType).alias(f.name)
            for f in fields
        )
    )


def add_columns(spark: SparkSession, table: str, fields: list[StructField]) -> None:
    """``ALTER TABLE table ADD COLUMNS`` of ``fields`` (a query's: their names are the
    pull request's), each name quoted and each type written by :func:`type_sql`."""
    columns = ", ".join(f"{quote_column(f.name)} {type_sql(f.dataType)}" for f in fields)
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({columns})")


def type_sql(kind: DataType) -> str:
    """A Spark type as Spark SQL, every name inside it quoted (a struct's field names come
    from a query, so from the pull request); other types are Spark's own words
    (``bigint``, ``decimal(10,2)``, ``timestamp``), never text of the query's.

    A struct ``a`` holding ``x y`` (an int) and a map of strings to arrays of dates::

        struct<`x y`: int>  map<string, array<date>>
    """
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(kind, StructType):
        inner = ", ".join(f"{quote_column(f.name)}: {type_sql(f.dataType)}" for f in kind.fields)
        return f"struct<{inner}>"
    if isinstance(kind, ArrayType):
        return f"array<{type_sql(kind.elementType)}>"
    if isinstance(kind, MapType):
        return f"map<{type_sql(kind.keyType)}, {type_sql(kind.valueType)}>"
    return kind.simpleString()


def _write_unique_key(spark: SparkSession, step: BuildStep, sql: str) -> None:
    table = step["table"]
    staging, fresh = swap.begin(spark, table, step)
    if not spark.catalog.tableExists(table):
        swap.clear_location(spark, table)
        spark.sql(f"CREATE TABLE {table}{_table_sql(step)} AS {sql}")
        return
    swap.check_mark(spark, table, step)
    spark.sql(f"CREATE TABLE {fresh} USING {step['format']} AS {sql}")
    on = " AND ".join(f"o.{_column(k)} <=> n.{_column(k)}" for k in step["unique_key"])
    # The old rows in the new rows' columns (a forward-only change may have added or
    # dropped some): the table is rewritten, so it takes the query's columns.
    kept = {f.name.lower() for f in spark.table(table).schema.fields}
    old = ", ".join(
        f"o.{quote_column(f.name)}"
        if f.name.lower() in kept
        else f"CAST(NULL AS {type_sql(f.dataType)}) AS {quote_column(f.name)}"
        for f in spark.table(fresh).schema.fields
    )
    spark.sql(
        f"CREATE TABLE {staging}{_table_sql(step)} AS "
        f"SELECT * FROM {fresh} UNION ALL SELECT {old} FROM {table} AS o LEFT ANTI JOIN {fresh} AS n ON {on}"
    )
    spark.sql(f"DROP TABLE {table}")
    spark.sql(f"ALTER TABLE {staging} RENAME TO {table}")
    spark.sql(f"DROP TABLE IF EXISTS {fresh}")


_CASTS: dict[str, Any] = {
    "tinyint": int,
    "smallint": int,
    "int": int,
    "bigint": int,
    "float": float,
    "double": float,
    "boolean": lambda v: {"true": True, "false": False, "1": True, "0": False}[v.lower()],
    "date": date.fromisoformat,
    "timestamp": datetime.fromisoformat,
    "string": str,
}


def _write_seed(spark: SparkSession, step: BuildStep, ctx: StepContext) -> None:
    from pyspark.sql.types import StructType, _parse_datatype_string

    seed = step["seed"]
    columns = [(c[0], c[1]) for c in seed["columns"]]
    schema = StructType()
    for col_name, col_type in columns:
        schema.add(col_name, _parse_datatype_string(col_type), nullable=True)
    with open(seed["path"], encoding="utf-8-sig", newline="") as handle:
        text = handle.read()
    # csv.reader's keywords have a type each; these three are all strings.
    options: dict[str, Any] = {
        k: v
        for k, v in seed.get("csv_settings", [])
        if k in ("delimiter", "quotechar", "escapechar")
    }
    reader = csv.reader(io.StringIO(text, newline=""), **options)
    header = [h.strip().lower() for h in next(reader)]
    rows = []
    for line_no, raw in enumerate(reader, start=2):
        if not raw or all(v == "" for v in raw):
            continue
        if len(raw) != len(header):
            raise ValueError(
                f"seed {step['model']}: {seed['path']}:{line_no} has {len(raw)} fields, the header has {len(header)}"
            )
        record = dict(zip(header, raw, strict=True))
        rows.append(
            tuple(
                _convert(step["model"], seed["path"], line_no, n, t, record.get(n, ""))
                for n, t in columns
            )
        )
    frame = spark.createDataFrame(rows, schema)
    frame.createOrReplaceTempView("__sluice_seed")
    _write_whole(spark, step, "SELECT * FROM __sluice_seed", ctx)
    spark.catalog.dropTempView("__sluice_seed")


def _convert(model: str, path: str, line: int, column: str, kind: str, value: str) -> Any:
    if value == "":
        return None
    base = kind.lower().split("(")[0]
    try:
        if base == "decimal":
            return Decimal(value)
        return _CASTS.get(base, str)(value.strip() if base != "string" else value)
    except (ValueError, KeyError, ArithmeticError):
        raise ValueError(
            f"seed {model}: {path}:{line}: column {column} is {kind.upper()}, but the value is {value!r}"
        ) from None


def run_audit(spark: SparkSession, step: AuditStep, ctx: StepContext) -> AuditResult:
    """Run one audit (of a build's batch when it names one: its result says which); a
    blocking one with violating rows fails the job."""
    violations = spark.sql(f"SELECT * FROM ({step['sql']}) AS __sluice_audit")
    # JSON as the result is stored: a violating row's dates, decimals... as strings.
    sample = [json_safe(r) for r in violations.limit(AUDIT_SAMPLE).collect()]
    count = violations.count() if sample else 0
    result: AuditResult = {
        "step": "audit",
        "model": step["model"],
        "audit": step["audit"],
        "passed": count == 0,
        "violations": count,
        "sample": sample,
        "blocking": step["blocking"],
    }
    batch = list(step["batch"]) if "batch" in step else None
    if batch is not None:
        result["batch"] = batch
    ctx.save_result("audit", f"{step['model']}:{step['audit']}", count == 0, result, batch=batch)
    what = f"audit {step['audit']} on {step['model']}{audited_batch(step)}"
    if count and step["blocking"]:
        raise AuditFailed(f"{what} failed: {count} row(s) violate it; first: {sample[:3]}")
    if count:
        ctx.log(f"non-blocking {what}: {count} row(s) violate it", model=step["model"])
    return result


def audited_batch(step: AuditStep) -> str:
    """`` (batch 2024-01-01 .. 2024-01-07)`` for an audit of a build's batch, else nothing."""
    if "batch" not in step:
        return ""
    start, end = step["batch"]
    return f" (batch {format_range(start, end)})"


class AuditFailed(Exception):
    """A blocking audit found violating rows."""
