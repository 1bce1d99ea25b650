"""The MODEL properties Spark uses, applied on a real (in-process) Spark: the
model_properties fixture project (tests/fixtures/sqlmesh_projects/) applied to prod, then
its tables and views read back with DESCRIBE TABLE EXTENDED and SHOW TBLPROPERTIES."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects"
NOW = to_ms("2024-01-03")


@dataclass
class Applied:
    project: Project
    spark: SparkSession
    tables: dict[str, str]  # model -> physical table
    shuffle_before: str | None
    shuffle_after: str | None

    def describe(self, model: str) -> dict[str, str]:
        """DESCRIBE TABLE EXTENDED of a model's physical table: first value per name."""
        rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {self.tables[model]}").collect()
        out: dict[str, str] = {}
        for row in rows:
            out.setdefault(str(row[0]), str(row[1]))
        return out

    def partition_columns(self, model: str) -> list[str]:
        rows = [tuple(r) for r in self.spark.sql(f"DESCRIBE TABLE {self.tables[model]}").collect()]
        marker = next(i for i, r in enumerate(rows) if r[0] == "# Partition Information")
        return [str(r[0]) for r in rows[marker + 2 :] if r[0] and not str(r[0]).startswith("#")]

    def properties(self, table: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


@pytest.fixture(scope="module")
def applied(
    tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession
) -> Iterator[Applied]:
    root = tmp_path_factory.mktemp("properties") / "project"
    shutil.copytree(FIXTURE / "model_properties", root)
    url = f"sqlite:///{root / '.sluice' / 'state.db'}"
    (root / ".sluice").mkdir(exist_ok=True)
    project = load_project(root, use_cache=False)
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    key = "spark.sql.shuffle.partitions"
    before = local_spark.conf.get(key, None)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        runner = InProcessRunner(project.config.sluice.spark, paths)
        workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
    finally:
        store.close()
    tables = {s.name: s.table for s in plan.snapshots}
    yield Applied(project, local_spark, tables, before, local_spark.conf.get(key, None))


def test_partitions_storage_format_and_table_properties(applied: Applied) -> None:
    events = applied.describe("shop.events")
    assert events["Provider"] == "parquet"
    assert applied.partition_columns("shop.events") == ["event_date"]
    props = applied.properties(applied.tables["shop.events"])
    assert props["retention_days"] == "7" and props["team"] == "web"
    assert applied.spark.sql("SELECT COUNT(*) FROM shop.events").collect()[0][0] == 3


def test_a_partition_expression_parquet_cannot_take_is_left_out_with_a_note(
    applied: Applied,
) -> None:
    assert "# Partition Information" not in applied.describe("shop.daily_events")
    assert any("partitioned_by 'DATE(ts)' is not applied" in n for n in applied.project.notes)


def test_an_incremental_table_is_partitioned_by_time_then_by_partitioned_by(
    applied: Applied,
) -> None:
    assert applied.partition_columns("shop.events_by_day") == ["event_date", "customer_id"]
    assert applied.properties(applied.tables["shop.events_by_day"])["quality"] == "gold"
    rows = applied.spark.sql("SELECT event_id FROM shop.events_by_day ORDER BY 1").collect()
    assert [r[0] for r in rows] == [1, 2, 3]


def test_clustered_by_becomes_spark_clustering(applied: Applied) -> None:
    props = applied.describe("shop.customers")["Table Properties"]
    assert "clusteringColumns" in props and "customer_id" in props


def test_virtual_properties_go_on_the_view(applied: Applied) -> None:
    assert applied.properties("shop.events")["exposed"] == "true"


def test_session_properties_last_for_the_build_only(applied: Applied) -> None:
    assert applied.shuffle_after == applied.shuffle_before
    assert applied.shuffle_after != "3"


def test_blueprints_are_built_with_their_own_values(applied: Applied) -> None:
    countries = {
        view: applied.spark.sql(f"SELECT DISTINCT country FROM {view}").collect()[0][0]
        for view in ("emea.events", "amer.events")
    }
    assert countries == {"emea.events": "FR", "amer.events": "US"}
