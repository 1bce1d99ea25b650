"""A build killed while creating its table is finished by running it again; a table that
exists is written again, when Sluice created it (issue 40: never one made ahead).

Found by bench/chaos.py (kill -9 of the service during a PR build): ``CREATE TABLE ... AS``
writes the new table's files before the catalog registers the table, so a driver killed
in between left files no table owned, and every later build of that model version failed
with LOCATION_ALREADY_EXISTS until someone deleted them by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import jobs
from sluice.core.spark.steps.build import run_build
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.swap import MARK, NotSluices
from sluice.core.state import open_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DAY = 86_400_000
SQL = "SELECT id, DATE_ADD(DATE'2024-01-01', CAST(id AS INT)) AS day FROM range(4)"
# The settings of an SCD type 2 build by time (its `scd` key).
SCD = {
    "by": "time", "updated_at": "day", "columns": [], "valid_from": "valid_from",
    "valid_to": "valid_to", "invalidate_hard_deletes": True, "time_type": "TIMESTAMP",
    "first_valid_from": "epoch", "execution_time": 1_704_067_200_000,
}  # fmt: skip


def _step(table: str, kind: str) -> dict[str, Any]:
    return {
        "type": "build", "label": f"build {table}", "model": table, "version": "v1",
        "table": table, "kind": kind, "format": "parquet", "time_column": "day",
        "unique_key": ["id"], "columns": [], "partitioned_by": [], "restate": [],
        "batches": [{"start": 1_704_067_200_000, "end": 1_704_067_200_000 + 4 * DAY,
                     "sql": SQL}],
    }  # fmt: skip


def _fresh(spark: SparkSession, table: str) -> tuple[str, StepContext]:
    """``table`` not there (its database is), and a job's context to build it in."""
    spark.sql("CREATE DATABASE IF NOT EXISTS killed_build")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    return table, StepContext(job={}, emit=lambda _event: None)


def _remains(spark: SparkSession, table: str) -> None:
    """What a create killed before the catalog registered ``table`` leaves behind."""
    database, name = table.split(".", 1)
    location = spark.catalog.getDatabase(database).locationUri.rstrip("/") + "/" + name
    spark.range(7).write.mode("overwrite").parquet(location)
    assert not spark.catalog.tableExists(table)


@pytest.mark.parametrize("kind", ["FULL", "INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY"])
def test_a_table_whose_create_was_killed_is_built_by_running_again(
    local_spark: SparkSession, kind: str
) -> None:
    spark = local_spark
    table, ctx = _fresh(spark, f"killed_build.t_{kind.lower()}")
    _remains(spark, table)
    with pytest.raises(Exception, match="LOCATION_ALREADY_EXISTS"):  # what the retry hit
        spark.sql(f"CREATE TABLE {table} USING parquet AS SELECT 1 AS id")
    run_build(spark, _step(table, kind), ctx)
    rows = spark.sql(f"SELECT id, COUNT(*) FROM {table} GROUP BY id ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(0, 1), (1, 1), (2, 1), (3, 1)]


def test_an_upsert_killed_while_creating_its_scratch_table_is_finished(
    local_spark: SparkSession,
) -> None:
    spark = local_spark
    table, ctx = _fresh(spark, "killed_build.upserted")
    step = _step(table, "INCREMENTAL_BY_UNIQUE_KEY")
    run_build(spark, step, ctx)
    _remains(spark, f"{table}__sluice_new")  # killed creating the new rows' table
    run_build(spark, step, StepContext(job={}, emit=lambda _event: None))
    assert spark.sql(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}").collect()[0] == (4, 4)


def test_a_full_table_that_exists_is_overwritten_and_not_reported_as_created(
    local_spark: SparkSession,
) -> None:
    spark = local_spark
    table, first = _fresh(spark, "killed_build.rebuilt")
    run_build(spark, _step(table, "FULL"), first)
    assert first.created == {table}
    step = _step(table, "FULL")
    step["batches"][0]["sql"] = SQL.replace("range(4)", "range(10, 12)")
    again = StepContext(job={}, emit=lambda _event: None)
    run_build(spark, step, again)  # a run of a FULL model: the same table, new rows
    assert again.created == set()
    rows = spark.sql(f"SELECT id FROM {table} ORDER BY id").collect()
    assert [r["id"] for r in rows] == [10, 11]


def test_a_time_range_table_left_without_its_partitions_tracked_is_repaired(
    local_spark: SparkSession,
) -> None:
    # What a driver killed inside the partitioned create leaves (found by
    # tests/reliability/test_crash.py): the table registered, its partitions not tracked
    # by the metastore, so SHOW PARTITIONS is refused.
    spark = local_spark
    table, ctx = _fresh(spark, "killed_build.untracked")
    spark.conf.set("spark.sql.hive.manageFilesourcePartitions", "false")
    try:
        spark.sql(
            f"CREATE TABLE {table} USING parquet PARTITIONED BY (day) "
            f"TBLPROPERTIES ('{MARK}' = '{table}@v1') AS SELECT * FROM ({SQL}) AS q WHERE FALSE"
        )
    finally:
        spark.conf.unset("spark.sql.hive.manageFilesourcePartitions")
    with pytest.raises(Exception, match="partition metadata is not stored"):
        spark.sql(f"SHOW PARTITIONS {table}").collect()
    run_build(spark, _step(table, "INCREMENTAL_BY_TIME_RANGE"), ctx)
    rows = spark.sql(f"SELECT id FROM {table} ORDER BY id").collect()
    assert [r["id"] for r in rows] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "kind", ["FULL", "INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY", "SCD_TYPE_2"]
)
def test_a_table_sluice_did_not_create_is_never_written_into(
    local_spark: SparkSession, kind: str, tmp_path: Path
) -> None:
    # Made ahead under the version's name (a project's statement, a person), with no build
    # of the version in state: the build neither overwrites, appends to nor rewrites it,
    # and says how to go on.
    spark = local_spark
    table, ctx = _fresh(spark, f"killed_build.ahead_{kind.lower()}")
    spark.sql(f"CREATE TABLE {table} USING parquet AS SELECT * FROM ({SQL}) AS q")
    step = _step(table, kind)
    if kind == "SCD_TYPE_2":
        step["scd"] = dict(SCD)
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        store.add_intervals(table, "v0", [(0, DAY)])  # another version's build
        jobs.adopt_recorded([step], jobs.recorded_builds(store, [(table, "v1")]))
    finally:
        store.close()
    assert step["adopt_unmarked"] is False
    with pytest.raises(NotSluices, match=f"the table {table} exists but Sluice did not create"):
        run_build(spark, step, ctx)
    assert spark.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0] == 4  # untouched
    found = {r[0] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert MARK not in found  # not marked either
    # Marked for another version: refused too (this version's mark: see below), even for
    # a version state records a build of.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{MARK}' = '{table}@v0')")
    step["adopt_unmarked"] = True
    with pytest.raises(NotSluices, match=r"is '.*@v0', not '.*@v1'"):
        run_build(spark, step, ctx)
    assert spark.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0] == 4


@pytest.mark.parametrize(
    "kind", ["INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY", "SCD_TYPE_2"]
)
def test_an_unmarked_table_state_records_as_built_is_adopted_and_marked(
    local_spark: SparkSession, kind: str, tmp_path: Path
) -> None:
    # An earlier Sluice built the table before tables were marked, and state recorded its
    # intervals: after the upgrade, the next run marks it and appends / rewrites / merges
    # as before (it is not refused until someone runs ALTER TABLE by hand).
    spark = local_spark
    table, ctx = _fresh(spark, f"killed_build.unmarked_{kind.lower()}")
    first = _step(table, kind)
    if kind == "SCD_TYPE_2":
        first["scd"] = dict(SCD)
    run_build(spark, first, ctx)
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ('{MARK}')")  # an earlier Sluice's
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        batch = first["batches"][0]
        store.add_intervals(table, "v1", [(batch["start"], batch["end"])])
        recorded = jobs.recorded_builds(store, [(table, "v1"), (table, "v0")])
    finally:
        store.close()
    assert recorded == {(table, "v1")}
    step = _step(table, kind)
    # Two days more (by time range: ids 4 and 5 fall in the batch; the other kinds' query
    # returns every row now).
    more = SQL.replace("range(4)", "range(6)")
    step["batches"] = [{"start": batch["end"], "end": batch["end"] + 2 * DAY, "sql": more}]
    if kind == "SCD_TYPE_2":
        step["scd"] = {**SCD, "execution_time": batch["end"]}
    jobs.adopt_recorded([step], recorded)
    assert step["adopt_unmarked"] is True
    run_build(spark, step, StepContext(job={}, emit=lambda _event: None))
    found = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert found[MARK] == f"{table}@v1"
    rows = spark.sql(f"SELECT id, day FROM {table} ORDER BY id").collect()
    assert [(r["id"], str(r["day"])) for r in rows] == [(i, f"2024-01-0{i + 1}") for i in range(6)]


def test_a_table_sluice_creates_carries_its_mark(local_spark: SparkSession) -> None:
    spark = local_spark
    table, ctx = _fresh(spark, "killed_build.marked")
    run_build(spark, _step(table, "INCREMENTAL_BY_UNIQUE_KEY"), ctx)
    # Written again (the table exists, with this version's mark): rewritten, mark kept.
    run_build(spark, _step(table, "INCREMENTAL_BY_UNIQUE_KEY"), ctx)
    found = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert found[MARK] == f"{table}@v1"
