"""Macros that need other tables' columns and clause operators, applied on a real
(in-process) Spark: the macros_columns fixture project (tests/fixtures/sqlmesh_projects/)
applied to prod, its views read back row by row."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "macros_columns"
NOW = to_ms("2024-01-03")
SCHEMAS = (
    "shop_raw",
    "shop_stg",
    "shop_mart",
    "sluice__shop_raw",
    "sluice__shop_stg",
    "sluice__shop_mart",
)


def test_star_union_clauses_and_resolve_template_build_the_rows(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / ".sluice").mkdir()
    url = f"sqlite:///{root / '.sluice' / 'state.db'}"
    local_spark.sql("CREATE SCHEMA IF NOT EXISTS shop_raw")
    local_spark.sql(
        "CREATE TABLE shop_raw.events (id INT, city STRING, amount DOUBLE, note STRING) USING parquet"
    )
    local_spark.sql(
        "INSERT INTO shop_raw.events VALUES (1, 'Oslo', 50.0, 'a'), (2, 'Lyon', -5.0, 'b'), "
        "(3, 'Oslo', 150.0, 'c'), (4, 'Paris', 200.0, 'd')"
    )
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    store = open_state(url)
    try:
        project = load_project(root, use_cache=False)
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        runner = InProcessRunner(project.config.sluice.spark, paths)
        workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
        tables = {s.name: s.table for s in plan.snapshots}

        enriched = local_spark.table("shop_mart.orders_enriched")
        # @STAR's prefix and exclude, the seed's columns without `city`, in order.
        assert enriched.columns == [
            "o_id",
            "o_city",
            "o_amount",
            "o_written_by",
            "country",
            "population",
        ]
        rows = [tuple(r) for r in enriched.orderBy("o_id").collect()]
        own = tables["shop_stg.orders"]  # the table @RESOLVE_TEMPLATE named, when it ran
        assert own.startswith("sluice__shop_stg.shop_stg__orders__")
        # @WHERE kept (amount > 0 drops id 2); @JOIN kept (Oslo's country and population).
        assert rows == [
            (1, "Oslo", 50.0, own, "NO", 700000),
            (3, "Oslo", 150.0, own, "NO", 700000),
            (4, "Paris", 200.0, own, None, None),
        ]
        union = local_spark.table("shop_mart.all_events")
        assert union.columns == ["id", "city", "amount"]  # late_by and note are not shared
        ids = sorted(r.id for r in union.collect())
        assert ids == [1, 2, 3, 3, 4, 4]  # raw events, then the late ones (@WHERE kept)
    finally:
        store.close()
        for schema in SCHEMAS:
            local_spark.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
