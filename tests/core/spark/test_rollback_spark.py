"""Rollback on a real Spark: prod's views go back to the previous plan's tables, the
queries answer what they answered then, and no data file is written."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import rollback, workflow
from sluice.core.model.definition import Project
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW = to_ms("2024-01-05")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
PRICES = """
    MODEL (name rollbk.prices, kind FULL);
    SELECT * FROM VALUES (1, 10.0), (2, 20.0) AS t(item, price)
"""
TOTAL = """
    MODEL (name rollbk.total, kind FULL);
    SELECT SUM(price) AS total FROM rollbk.prices
"""


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _apply(project: Project, store: SqlStateStore, spark: SparkSession, now: int) -> None:
    from sluice.core.spark.session import SparkPaths

    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir", "").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=now)
    runner = InProcessRunner(project.config.sluice.spark, paths)
    workflow.apply_plan(project, store, plan, runner, now=now)


def test_a_rollback_restores_the_previous_answers_without_writing_data(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    files = {"config.yaml": CONFIG, "models/prices.sql": PRICES, "models/total.sql": TOTAL}
    first = load(tmp_path / "v1", files)
    _apply(first, store, local_spark, NOW)

    def total() -> float:
        return float(local_spark.sql("SELECT total FROM rollbk.total").collect()[0][0])

    assert total() == 30.0
    files["models/prices.sql"] = PRICES.replace("(2, 20.0)", "(2, 200.0)")
    _apply(load(tmp_path / "v2", files), store, local_spark, NOW + 1)
    assert total() == 210.0

    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir", "").removeprefix("file:"))
    before = _files(warehouse)
    back = rollback.plan_rollback(store, "prod", now=NOW + 2)
    assert {name for name, _, _ in back.changed} == {"rollbk.prices", "rollbk.total"}
    runner_project = load(tmp_path / "v2", files)  # the checkout the command runs in
    from sluice.core.spark.session import SparkPaths

    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    runner = InProcessRunner(runner_project.config.sluice.spark, paths)
    result = workflow.apply_plan(runner_project, store, back.plan, runner, now=NOW + 2)
    assert result.tables_built == 0 and result.views_swapped == 2
    assert total() == 30.0
    assert _files(warehouse) == before  # views only: not one data file written
    store.close()
