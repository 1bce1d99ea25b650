"""The SCD type 2 kinds on real (in-process) Spark: the validity columns over several runs.

The scd_type_2 fixture project (tests/fixtures/sqlmesh_projects/) is applied to prod at
2020-01-01 11:00 and then run (``sluice run``'s plan and apply) at 11:00 on each of the
next three days; each model reads the rows its source has on the day of the run. The
histories asserted below are the ones SQLMesh 0.236.4 wrote for the same project and
runs on duckdb (its Python API: ``plan(execution_time=...)`` then ``run(execution_time=...)``),
but for two rows of ``scd.stock`` where SQLMesh is wrong and Sluice differs on purpose:

- a key with a NULL part (``(NULL, 2)``): SQLMesh matches keys with ``=``, so that key
  never finds its current row and gets one more current row on every run; Sluice matches
  key parts NULL-safely (as INCREMENTAL_BY_UNIQUE_KEY does), so it keeps one row;
- the closed version of ``('eu', 3)``: SQLMesh wrote the new note ('n') into the version
  it closed, whose note was NULL; Sluice keeps a closed version's values.

A few rules the runs cannot show are tested on the build step itself, on the same session.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.spec import BuildStep, ScdSpec
from sluice.core.spark.steps import scd
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "scd_type_2"
RUNS = ("2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04")  # each at 11:00 UTC
E = "1970-01-01 00:00:00"
T1, T2, T3 = "2020-01-01 11:00:00", "2020-01-02 11:00:00", "2020-01-03 11:00:00"
D1, D2, D3 = "2020-01-01 00:00:00", "2020-01-02 00:00:00", "2020-01-03 00:00:00"
S3 = "2020-01-03 06:00:00"
# model -> (columns, valid_from, valid_to), read back in key and valid_from order
SHAPE = {
    "scd.menu_by_time": (["id", "name", "price", "updated_at"], "valid_from", "valid_to"),
    "scd.menu_kept": (["id", "name", "price", "changed_at"], "start_at", "end_at"),
    "scd.menu_by_column": (["id", "name", "price", "updated_at"], "valid_from", "valid_to"),
    "scd.stock": (["region", "sku", "qty", "note"], "valid_from", "valid_to"),
}

History = list[tuple[Any, ...]]


def history(spark: SparkSession, table: str, columns: list[str], vf: str, vt: str) -> History:
    """The table's rows, times as UTC text (the session's time zone), in key order."""

    def text(column: str) -> str:
        return f"date_format({column}, 'yyyy-MM-dd HH:mm:ss')"

    shown = [text(c) if c in ("updated_at", "changed_at") else c for c in columns]
    key = columns[:2] if columns[0] == "region" else columns[:1]
    order = ", ".join([*key, vf])
    rows = spark.sql(
        f"SELECT {', '.join(shown)}, {text(vf)}, {text(vt)} FROM {table} ORDER BY {order}"
    ).collect()
    return [tuple(r) for r in rows]


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession
) -> Iterator[dict[str, dict[str, History]]]:
    """Day of the run -> model -> its history after that run."""
    root = tmp_path_factory.mktemp("scd") / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".sluice"))
    (root / ".sluice").mkdir()
    project = load_project(root, use_cache=False)
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    runner = InProcessRunner(project.config.sluice.spark, paths)
    store = open_state(f"sqlite:///{root / '.sluice' / 'state.db'}")
    seen: dict[str, dict[str, History]] = {}
    try:
        for i, day in enumerate(RUNS):
            now = to_ms(f"{day} 11:00:00")
            if i == 0:
                plan = workflow.plan_environment(
                    project, store, "prod", end=now, execution_time=now
                )
            else:
                plan = workflow.plan_run(project, store, "prod", now=now)
            assert {b.name for b in plan.backfill} >= set(SHAPE), day
            workflow.apply_plan(project, store, plan, runner, now=now)
            tables = {s.name: s.table for s in plan.snapshots}
            seen[day] = {
                model: history(local_spark, tables[model], *shape) for model, shape in SHAPE.items()
            }
        yield seen
    finally:
        store.close()


def test_by_time_closes_at_the_new_updated_at_and_invalidates_deletes(
    runs: dict[str, dict[str, History]],
) -> None:
    assert runs["2020-01-01"]["scd.menu_by_time"] == [
        (1, "tea", 2.5, D1, E, None),
        (2, "cake", 4.0, D1, E, None),
        (3, "soup", 6.0, D1, E, None),
    ]
    assert runs["2020-01-02"]["scd.menu_by_time"] == [
        (1, "tea", 2.5, D1, E, D2),
        (1, "tea", 3.0, D2, D2, None),
        (2, "cake", 4.0, D1, E, T2),  # gone from the source: closed at the run's time
        (3, "soup", 6.0, D1, E, None),
        (4, "pie", 5.0, D2, E, None),  # a new key starts at 1970 (SQLMesh's default)
    ]
    assert runs["2020-01-03"]["scd.menu_by_time"] == [
        (1, "tea", 2.5, D1, E, D2),
        (1, "tea", 3.0, D2, D2, D3),
        (1, "tea", 3.5, D3, D3, None),
        (2, "cake", 4.0, D1, E, T2),
        (2, "cake", 4.0, D3, D3, None),  # back: from the later of updated_at and the delete
        (3, "soup", 6.0, D1, E, S3),  # updated_at grew: a new version, values unchanged
        (3, "soup", 6.0, S3, S3, None),
        (4, "pie", 5.0, D2, E, D3),
        (4, "apple pie", 5.0, D3, D3, None),
    ]


def test_scd_type_2_keeps_deleted_keys_current_without_invalidate_hard_deletes(
    runs: dict[str, dict[str, History]],
) -> None:
    # SCD_TYPE_2 (= BY_TIME), updated_at_name, valid_from_name / valid_to_name, and
    # updated_at_as_valid_from: rows start at their updated_at.
    assert runs["2020-01-02"]["scd.menu_kept"] == [
        (1, "tea", 2.5, D1, D1, D2),
        (1, "tea", 3.0, D2, D2, None),
        (2, "cake", 4.0, D1, D1, None),  # missing from the source, still current
        (3, "soup", 6.0, D1, D1, None),
        (4, "pie", 5.0, D2, D2, None),
    ]
    assert runs["2020-01-03"]["scd.menu_kept"] == [
        (1, "tea", 2.5, D1, D1, D2),
        (1, "tea", 3.0, D2, D2, D3),
        (1, "tea", 3.5, D3, D3, None),
        (2, "cake", 4.0, D1, D1, D3),  # back with a later updated_at: an ordinary update
        (2, "cake", 4.0, D3, D3, None),
        (3, "soup", 6.0, D1, D1, S3),
        (3, "soup", 6.0, S3, S3, None),
        (4, "pie", 5.0, D2, D2, D3),
        (4, "apple pie", 5.0, D3, D3, None),
    ]


def test_by_column_versions_at_the_execution_time_on_the_compared_columns_only(
    runs: dict[str, dict[str, History]],
) -> None:
    assert runs["2020-01-01"]["scd.menu_by_column"][0] == (1, "tea", 2.5, D1, E, None)
    assert runs["2020-01-03"]["scd.menu_by_column"] == [
        (1, "tea", 2.5, D1, E, T2),
        (1, "tea", 3.0, D2, T2, T3),
        (1, "tea", 3.5, D3, T3, None),
        (2, "cake", 4.0, D1, E, T2),  # deleted
        (2, "cake", 4.0, D3, T3, None),  # back: from the run that saw it again
        (3, "soup", 6.0, D1, E, None),  # only updated_at changed: not compared
        (4, "pie", 5.0, D2, T2, T3),  # a new key starts at the run's time
        (4, "apple pie", 5.0, D3, T3, None),
    ]


def test_by_column_star_with_a_composite_key_and_nulls(
    runs: dict[str, dict[str, History]],
) -> None:
    # execution_time_as_valid_from: the first load starts at the run's time too.
    assert runs["2020-01-01"]["scd.stock"] == [
        (None, 2, 1, "z", T1, None),
        ("eu", 1, 5, None, T1, None),
        ("eu", 3, None, None, T1, None),
        ("us", 1, 5, "x", T1, None),
    ]
    after = [
        (None, 2, 1, "z", T1, None),  # a NULL key part still matches its key
        ("eu", 1, 5, None, T1, None),  # NULL = NULL: unchanged
        ("eu", 3, None, None, T1, T2),  # NULL -> 'n' is a change
        ("eu", 3, None, "n", T2, None),
        ("us", 1, 5, "x", T1, T2),  # 'x' -> NULL is a change; ('us', 1) is not ('eu', 1)
        ("us", 1, 5, None, T2, None),
    ]
    assert runs["2020-01-02"]["scd.stock"] == after
    # ('eu', 3) missing on 01-03 (kept current: no invalidate_hard_deletes), back
    # unchanged on 01-04: nothing to write either time.
    assert runs["2020-01-03"]["scd.stock"] == after
    assert runs["2020-01-04"]["scd.stock"] == after


def test_a_run_with_nothing_changed_leaves_every_row_as_it_was(
    runs: dict[str, dict[str, History]],
) -> None:
    # 01-04's source is 01-03's: a later execution time, and not one row different.
    assert runs["2020-01-04"] == runs["2020-01-03"]


# --- the build step itself ------------------------------------------------------------


def _step(table: str, spec: ScdSpec, key: list[str]) -> BuildStep:
    return {
        "type": "build",
        "label": f"build {table}",
        "model": "t.scd",
        "version": "v1",
        "table": table,
        "kind": "SCD_TYPE_2_BY_COLUMN" if spec["by"] == "column" else "SCD_TYPE_2_BY_TIME",
        "format": "parquet",
        "time_column": None,
        "unique_key": key,
        "columns": None,
        "partitioned_by": [],
        "restate": [],
        "batches": [],
        "clustered_by": [],
        "table_properties": [],
        "session_properties": [],
        "scd": spec,
    }


def _spec(by: str = "column", at: str = "2020-01-01", **changes: Any) -> ScdSpec:
    spec: dict[str, Any] = {
        "by": by,
        "updated_at": "updated_at" if by == "time" else None,
        "columns": ["*"],
        "valid_from": "valid_from",
        "valid_to": "valid_to",
        "invalidate_hard_deletes": True,
        "time_type": "TIMESTAMP",
        "first_valid_from": "epoch",
        "execution_time": to_ms(at),
    }
    return {**spec, **changes}  # type: ignore[typeddict-item]


@pytest.fixture(scope="module")
def schema(local_spark: SparkSession) -> str:
    local_spark.sql("CREATE DATABASE IF NOT EXISTS scd_step")
    return "scd_step"


def _write(spark: SparkSession, step: BuildStep, sql: str) -> None:
    from sluice.core.spark.steps import build

    scd.write_scd_type_2(
        spark,
        step,
        sql,
        table_sql=build._table_sql(step),
    )


def test_merging_the_same_rows_at_the_same_time_again_changes_nothing(
    local_spark: SparkSession, schema: str
) -> None:
    table = f"{schema}.again"
    local_spark.sql(f"DROP TABLE IF EXISTS {table}")
    first = "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, v)"
    second = "SELECT * FROM VALUES (1, 'a'), (3, 'c') AS t(id, v)"
    _write(local_spark, _step(table, _spec(), ["id"]), first)
    step = _step(table, _spec(at="2020-01-02"), ["id"])
    _write(local_spark, step, second)
    once = history(local_spark, table, ["id", "v"], "valid_from", "valid_to")
    _write(local_spark, step, second)  # a job re-run after a crash past the swap
    assert history(local_spark, table, ["id", "v"], "valid_from", "valid_to") == once
    assert once == [
        (1, "a", E, None),
        (2, "b", E, "2020-01-02 00:00:00"),
        (3, "c", "2020-01-02 00:00:00", None),
    ]
    assert not local_spark.catalog.tableExists(f"{table}__sluice_new")


def test_a_restatement_rebuilds_the_history_from_the_query(
    local_spark: SparkSession, schema: str
) -> None:
    table = f"{schema}.restated"
    local_spark.sql(f"DROP TABLE IF EXISTS {table}")
    _write(local_spark, _step(table, _spec(), ["id"]), "SELECT 1 AS id, 'a' AS v")
    _write(local_spark, _step(table, _spec(at="2020-01-02"), ["id"]), "SELECT 1 AS id, 'b' AS v")
    step = {**_step(table, _spec(at="2020-01-03"), ["id"]), "restate": [[0, 1]]}
    _write(local_spark, step, "SELECT 1 AS id, 'b' AS v")  # type: ignore[arg-type]
    assert history(local_spark, table, ["id", "v"], "valid_from", "valid_to") == [(1, "b", E, None)]


def test_a_query_returning_a_key_twice_fails_naming_it(
    local_spark: SparkSession, schema: str
) -> None:
    table = f"{schema}.twice"
    local_spark.sql(f"DROP TABLE IF EXISTS {table}")
    sql = "SELECT * FROM VALUES ('eu', 1, 'a'), ('eu', 1, 'b'), ('us', 1, 'c') AS t(r, id, v)"
    with pytest.raises(scd.ScdError, match=r"more than one row for a unique_key \(r='eu', id=1"):
        _write(local_spark, _step(table, _spec(), ["r", "id"]), sql)
    assert not local_spark.catalog.tableExists(table)
    assert not local_spark.catalog.tableExists(f"{table}__sluice_new")


def test_by_time_refuses_a_row_without_updated_at(local_spark: SparkSession, schema: str) -> None:
    table = f"{schema}.no_updated_at"
    local_spark.sql(f"DROP TABLE IF EXISTS {table}")
    sql = "SELECT 1 AS id, CAST(NULL AS TIMESTAMP) AS updated_at"
    with pytest.raises(scd.ScdError, match="1 row\\(s\\) of the query have no updated_at"):
        _write(local_spark, _step(table, _spec("time"), ["id"]), sql)


def test_a_query_returning_a_validity_column_is_refused(
    local_spark: SparkSession, schema: str
) -> None:
    table = f"{schema}.own_column"
    sql = "SELECT 1 AS id, CURRENT_TIMESTAMP() AS valid_to"
    with pytest.raises(scd.ScdError, match="returns a column 'valid_to'"):
        _write(local_spark, _step(table, _spec(), ["id"]), sql)


def test_a_date_typed_history_and_a_column_the_query_gains(
    local_spark: SparkSession, schema: str
) -> None:
    table = f"{schema}.dated"
    local_spark.sql(f"DROP TABLE IF EXISTS {table}")
    spec = _spec(time_type="DATE", first_valid_from="execution_time", columns=["v"])
    _write(local_spark, _step(table, spec, ["id"]), "SELECT 1 AS id, 'a' AS v")
    # A forward-only change adds a column: old rows read NULL in it, the compared column
    # is unchanged, so nothing opens.
    later = _spec(at="2020-01-05 13:00:00", time_type="DATE", columns=["v"])
    _write(local_spark, _step(table, later, ["id"]), "SELECT 1 AS id, 'a' AS v, 9 AS extra")
    rows = local_spark.sql(
        f"SELECT id, v, extra, CAST(valid_from AS STRING), valid_to FROM {table}"
    ).collect()
    assert [tuple(r) for r in rows] == [(1, "a", None, "2020-01-01", None)]
    types = {f.name: f.dataType.simpleString() for f in local_spark.table(table).schema}
    assert types["valid_from"] == "date" and types["valid_to"] == "date"


def test_the_merge_runs_on_spark_connect(tmp_path: Path, connect_server: ConnectServer) -> None:
    """The build step in a Spark Connect client (no JVM of its own): the stock model
    applied and run once, read back through prod's view."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".sluice"))
    for other in ("menu_days", "menu_by_time", "menu_kept", "menu_by_column"):
        (root / "models" / f"{other}.sql").unlink()
    (root / ".sluice").mkdir()
    project = load_project(root, use_cache=False)
    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    runner = ConnectRunner(connect_server.settings, paths, server=connect_server)
    store = open_state(f"sqlite:///{root / '.sluice' / 'state.db'}")
    try:
        now = to_ms("2020-01-01 11:00:00")
        plan = workflow.plan_environment(project, store, "prod", end=now, execution_time=now)
        workflow.apply_plan(project, store, plan, runner, now=now)
        now = to_ms("2020-01-02 11:00:00")
        workflow.apply_plan(
            project, store, workflow.plan_run(project, store, "prod", now=now), runner, now=now
        )
        result = workflow.query_environment(
            project,
            store,
            "prod",
            "SELECT region, sku, qty, note, valid_from, valid_to FROM scd.stock "
            "ORDER BY region, sku, valid_from",
            runner,
            limit=100,
        )
    finally:
        store.close()
    assert [tuple(r) for r in result["rows"]] == [
        (None, 2, 1, "z", T1, None),
        ("eu", 1, 5, None, T1, None),
        ("eu", 3, None, None, T1, T2),
        ("eu", 3, None, "n", T2, None),
        ("us", 1, 5, "x", T1, T2),
        ("us", 1, 5, None, T2, None),
    ]
