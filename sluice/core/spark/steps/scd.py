"""SCD type 2 builds: merge what a query returns now into a table's history (runs in the
driver, or in a Spark Connect client: Spark SQL and the catalog API only).

The table holds the query's columns plus two validity columns (``valid_from``,
``valid_to``; SQLMesh's names and defaults). A row whose ``valid_to`` is NULL is its
key's current version. Each build reads the query once into a scratch table and compares
its rows with the current ones by ``unique_key`` (NULL-safe, part by part):

- the first load (no table yet, or a restatement) opens every row from 1970-01-01, or
  from its ``updated_at`` / the execution time when the model says so;
- a changed row (by time: its ``updated_at`` grew; by column: a compared column differs,
  NULL equal to NULL) is closed and its new version opened, both at the change's time
  (by time: the new ``updated_at``; by column: the execution time), never before the
  old version's start;
- a key the table has no current row for is opened: by time from 1970-01-01 (or its
  ``updated_at``, with ``updated_at_as_valid_from``), but a key that returns after a
  delete at the later of its ``updated_at`` and the delete; by column at the execution
  time;
- with ``invalidate_hard_deletes``, a current key the query no longer returns is closed
  at the execution time; without, it stays current;
- every other row is kept as it is.

The new history is written whole to a staging table that then replaces the table (drop,
rename), the way INCREMENTAL_BY_UNIQUE_KEY rewrites its table; a job killed between the
two finds the staging table and finishes the swap. Merging the same rows at the same
execution time again changes nothing, so a re-run job writes the same history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.core.model.names import quote_column
from sluice.core.spark.spec import BuildStep, ScdSpec
from sluice.core.spark.steps import swap

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HIT, CUR, GONE = "__sluice_hit", "__sluice_cur", "__sluice_gone"


class ScdError(ValueError):
    """The query's rows cannot be merged into the history (duplicate keys, ...)."""


def write_scd_type_2(
    spark: SparkSession,
    step: BuildStep,
    sql: str,
    *,
    table_sql: str,
) -> None:
    """Merge the rows of ``sql`` into the history in ``step['table']``.

    Args:
        table_sql: ``USING ... PARTITIONED BY ... TBLPROPERTIES ...`` of the table.
    """
    scd = step.get("scd")
    if scd is None:
        raise ValueError(f"{step['model']}: an {step['kind']} build without its settings")
    table = step["table"]
    staging, fresh = swap.begin(spark, table, step)
    if spark.catalog.tableExists(table):
        swap.check_mark(spark, table, step)  # never merge into a history Sluice did not make
    # The query once (it may read this very table, or not be deterministic).
    spark.sql(f"CREATE TABLE {fresh} USING {step['format']} AS {sql}")
    try:
        source = {f.name: f.dataType.simpleString() for f in spark.table(fresh).schema}
        _check_source(spark, step, scd, fresh, [c.lower() for c in source])
        if not spark.catalog.tableExists(table):
            swap.clear_location(spark, table)
            spark.sql(f"CREATE TABLE {table}{table_sql} AS {_first_load(scd, fresh)}")
            return
        if step.get("restate"):
            select = _first_load(scd, fresh)  # allowed by `disable_restatement false`
        else:
            select = _merge(spark, step, scd, table, fresh, source)
        spark.sql(f"CREATE TABLE {staging}{table_sql} AS {select}")
        spark.sql(f"DROP TABLE {table}")
        spark.sql(f"ALTER TABLE {staging} RENAME TO {table}")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {fresh}")


def _time(scd: ScdSpec, ms: int) -> str:
    """An instant as the validity columns' type (independent of the session time zone)."""
    return f"CAST(timestamp_millis({int(ms)}) AS {scd['time_type']})"


def _null_time(scd: ScdSpec) -> str:
    return f"CAST(NULL AS {scd['time_type']})"


def _updated(scd: ScdSpec, alias: str) -> str:
    assert scd["updated_at"] is not None
    return f"CAST({alias}.{quote_column(scd['updated_at'])} AS {scd['time_type']})"


def _check_source(
    spark: SparkSession, step: BuildStep, scd: ScdSpec, fresh: str, columns: list[str]
) -> None:
    """The query returns every column the kind names, none it writes itself, one row per
    key, and (by time) an ``updated_at`` in every row."""
    model = step["model"]
    for own in (scd["valid_from"], scd["valid_to"]):
        if own.lower() in columns:
            raise ScdError(
                f"{model}: the query returns a column '{own}', which the SCD type 2 kind "
                "writes itself; rename it, or set valid_from_name / valid_to_name"
            )
    named = [*step["unique_key"], *([scd["updated_at"]] if scd["updated_at"] else [])]
    named += [c for c in scd["columns"] if c != "*"]
    for column in named:
        if column.lower() not in columns:
            raise ScdError(
                f"{model}: the query has no column '{column}', which its kind names "
                f"(the query returns: {', '.join(columns)})"
            )
    key = ", ".join(quote_column(k) for k in step["unique_key"])
    grouped = f"SELECT {key}, COUNT(*) AS n FROM {fresh} GROUP BY {key} HAVING COUNT(*) > 1"
    updated = quote_column(scd["updated_at"]) if scd["updated_at"] else "1"
    # One pass for both checks (a job each costs more than the rows, for most models).
    found = spark.sql(
        f"SELECT (SELECT COUNT(*) FROM ({grouped})) AS twice, "
        f"COUNT_IF({updated} IS NULL) AS empty FROM {fresh}"
    ).collect()[0]
    if found["twice"]:
        twice = spark.sql(f"{grouped} LIMIT 3").collect()
        shown = "; ".join(
            ", ".join(f"{k}={row[k]!r}" for k in step["unique_key"]) + f" ({row['n']} rows)"
            for row in twice
        )
        raise ScdError(
            f"{model}: the query returns more than one row for a unique_key ({shown}); an "
            "SCD type 2 model needs one row per key: deduplicate the query, or widen the key"
        )
    if found["empty"]:
        raise ScdError(
            f"{model}: {found['empty']} row(s) of the query have no {scd['updated_at']} (NULL), "
            "which SCD_TYPE_2_BY_TIME needs to tell when a row changed; fill it in the "
            "query (e.g. COALESCE with a load time)"
        )


def _first_valid_from(scd: ScdSpec) -> str:
    """Where the rows of the first load start (and by time, every new key's)."""
    return {
        "epoch": _time(scd, 0),
        "execution_time": _time(scd, scd["execution_time"]),
        "updated_at": _updated(scd, "s") if scd["updated_at"] else _time(scd, 0),
    }[scd["first_valid_from"]]


def _first_load(scd: ScdSpec, fresh: str) -> str:
    """Every row of the query opened."""
    return (
        f"SELECT s.*, {_first_valid_from(scd)} AS {quote_column(scd['valid_from'])}, "
        f"{_null_time(scd)} AS {quote_column(scd['valid_to'])} FROM {fresh} AS s"
    )


def _merge(
    spark: SparkSession,
    step: BuildStep,
    scd: ScdSpec,
    table: str,
    fresh: str,
    source: dict[str, str],
) -> str:
    """The table's new history: its closed rows, its current rows (some now closed), and
    the new versions."""
    vf, vt = quote_column(scd["valid_from"]), quote_column(scd["valid_to"])
    old = {f.name.lower(): f.name for f in spark.table(table).schema}
    for own in (scd["valid_from"], scd["valid_to"]):
        if own.lower() not in old:
            raise ScdError(
                f"{step['model']}: its table has no validity column '{own}' (it was built "
                "with other valid_from_name / valid_to_name): a change of those needs a new "
                "table; plan the change with `forward_only false` in the model's kind"
            )
    # The old rows in the query's columns (a forward-only change may have added or dropped
    # some): the table is rewritten, so it takes the query's columns.
    names = list(source)
    projected = ", ".join(
        f"t.{quote_column(old[c.lower()])} AS {quote_column(c)}"
        if c.lower() in old
        else f"CAST(NULL AS {kind}) AS {quote_column(c)}"
        for c, kind in source.items()
    )
    keys = step["unique_key"]

    def on(a: str, b: str) -> str:
        return " AND ".join(f"{a}.{quote_column(k)} <=> {b}.{quote_column(k)}" for k in keys)

    if scd["by"] == "time":
        changed = (
            f"(c.{quote_column(scd['updated_at'] or '')} IS NULL OR {_updated(scd, 's')} > "
            f"{_updated(scd, 'c')})"
        )
        change_time = f"GREATEST({_updated(scd, 's')}, c.{vf})"
        returned = f"GREATEST({_updated(scd, 's')}, g.{GONE})"
        new_key = _first_valid_from(scd)
    else:
        compared = [c for c in scd["columns"] if c != "*"] or [
            c for c in names if c.lower() not in {k.lower() for k in keys}
        ]
        same = (
            " AND ".join(f"s.{quote_column(c)} <=> c.{quote_column(c)}" for c in compared) or "TRUE"
        )
        changed = f"NOT ({same})"
        now = _time(scd, scd["execution_time"])
        change_time = f"GREATEST({now}, c.{vf})"
        returned = new_key = now
    deleted = (
        f"GREATEST({_time(scd, scd['execution_time'])}, c.{vf})"
        if scd["invalidate_hard_deletes"]
        else _null_time(scd)
    )
    data_c = ", ".join(f"c.{quote_column(c)}" for c in names)
    data_s = ", ".join(f"s.{quote_column(c)}" for c in names)
    key_list = ", ".join(quote_column(k) for k in keys)
    return f"""
WITH o AS (SELECT {projected}, t.{vf} AS {vf}, t.{vt} AS {vt} FROM {table} AS t),
cur AS (SELECT *, TRUE AS {CUR} FROM o WHERE {vt} IS NULL),
src AS (SELECT *, TRUE AS {HIT} FROM {fresh}),
gone AS (SELECT {key_list}, MAX({vt}) AS {GONE} FROM o WHERE {vt} IS NOT NULL GROUP BY {key_list})
SELECT * FROM o WHERE {vt} IS NOT NULL
UNION ALL
SELECT {data_c}, c.{vf},
  CASE WHEN s.{HIT} IS NULL THEN {deleted}
       WHEN {changed} THEN {change_time}
       ELSE {_null_time(scd)} END
FROM cur AS c LEFT JOIN src AS s ON {on("c", "s")}
UNION ALL
SELECT {data_s},
  CASE WHEN c.{CUR} IS NOT NULL THEN {change_time}
       WHEN g.{GONE} IS NOT NULL THEN {returned}
       ELSE {new_key} END,
  {_null_time(scd)}
FROM src AS s LEFT JOIN cur AS c ON {on("s", "c")} LEFT JOIN gone AS g ON {on("s", "g")}
WHERE c.{CUR} IS NULL OR {changed}
"""
