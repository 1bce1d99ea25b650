"""Operations on a real Spark: a scheduled run processes exactly the due intervals and
then nothing; a rollback points prod's views back at the previous plan's tables, the
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
    plan = workflow.plan_environment(project, store, "prod", end=now, execution_time=now)
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


EVENTS = """
    MODEL (name opsrun.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2024-01-01');
    SELECT id, ds FROM VALUES
      (1, DATE '2024-01-01'), (2, DATE '2024-01-02'), (3, DATE '2024-01-03'),
      (4, DATE '2024-01-04'), (5, DATE '2024-01-05'), (6, DATE '2024-01-06')
      AS t(id, ds)
    WHERE ds BETWEEN @start_ds AND @end_ds
"""


class _NoSpark:
    def run(self, spec: object) -> object:
        raise AssertionError("nothing was due, yet a Spark job was started")


def test_a_run_processes_the_due_days_once_then_nothing(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    project = load(tmp_path / "p", {"config.yaml": CONFIG, "models/events.sql": EVENTS})
    day = 86_400_000
    _apply(project, store, local_spark, to_ms("2024-01-03"))  # prod holds Jan 1-2

    def days() -> list[int]:
        return [r[0] for r in local_spark.sql("SELECT id FROM opsrun.events ORDER BY id").collect()]

    assert days() == [1, 2]
    at = to_ms("2024-01-05") + 3_600_000  # Jan 3 and 4 are complete, Jan 5 is not
    plan = workflow.plan_run(project, store, "prod", now=at)
    assert [len(b.intervals) for b in plan.backfill] == [2]
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir", "").removeprefix("file:"))
    from sluice.core.spark.session import SparkPaths

    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    runner = InProcessRunner(project.config.sluice.spark, paths)
    workflow.apply_plan(project, store, plan, runner, now=at)
    assert days() == [1, 2, 3, 4]
    again = workflow.plan_run(project, store, "prod", now=at + day // 2)
    assert again.backfill == ()
    workflow.apply_plan(project, store, again, _NoSpark(), now=at)  # type: ignore[arg-type]
    assert days() == [1, 2, 3, 4]
    store.close()
