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
    tmp_path: Path, local_spark: SparkSession, state_url: str
) -> None:
    store = open_state(state_url)
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
    tmp_path: Path, local_spark: SparkSession, state_url: str
) -> None:
    store = open_state(state_url)
    # A schema per state database: the Spark session is shared by both.
    schema = "opsrun_" + state_url.split(":", 1)[0].split("+", 1)[0]
    events = EVENTS.replace("opsrun.", f"{schema}.")
    project = load(tmp_path / "p", {"config.yaml": CONFIG, "models/events.sql": events})
    day = 86_400_000
    _apply(project, store, local_spark, to_ms("2024-01-03"))  # prod holds Jan 1-2

    def days() -> list[int]:
        found = local_spark.sql(f"SELECT id FROM {schema}.events ORDER BY id").collect()
        return [r[0] for r in found]

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


FACTS = """
    MODEL (
      name opsdes.facts,
      kind INCREMENTAL_BY_TIME_RANGE (time_column ds, forward_only true{more}),
      start '2024-01-01'
    );
    SELECT id, ds, amount{columns} FROM VALUES
      (1, DATE '2024-01-01', 1.0), (2, DATE '2024-01-02', 2.0),
      (3, DATE '2024-01-03', 3.0), (4, DATE '2024-01-04', 4.0)
      AS t(id, ds, amount)
    WHERE ds BETWEEN @start_ds AND @end_ds
"""


def test_a_destructive_forward_only_change_is_refused_then_allowed_and_keeps_the_rows(
    tmp_path: Path, local_spark: SparkSession, state_url: str
) -> None:
    from sluice.core.errors import PlanError

    def facts(more: str, columns: str) -> dict[str, str]:
        model = FACTS.replace("{more}", more).replace("{columns}", columns)
        return {"config.yaml": CONFIG, "models/facts.sql": model}

    store = open_state(state_url)
    try:
        # prod holds Jan 1-2, with a discount column.
        old = load(tmp_path / "v1", facts("", ", amount / 10 AS discount"))
        _apply(old, store, local_spark, to_ms("2024-01-03"))
        # The change drops discount and adds net: refused by default, naming the column.
        change = ", amount * 0.9 AS net"
        with pytest.raises(PlanError, match="drops column discount"):
            workflow.plan_environment(load(tmp_path / "v2", facts("", change)), store, "prod",
                                      end=to_ms("2024-01-05"), execution_time=to_ms("2024-01-05"))  # fmt: skip
        # Allowed: the kept table gains net, keeps its rows, and the new days are written.
        allowed = load(tmp_path / "v3", facts(", on_destructive_change allow", change))
        _apply(allowed, store, local_spark, to_ms("2024-01-05"))
        rows = local_spark.sql(
            "SELECT id, CAST(amount AS DOUBLE), CAST(net AS DOUBLE) FROM opsdes.facts ORDER BY id"
        ).collect()
        assert [tuple(r) for r in rows] == [
            (1, 1.0, None),  # the old rows as they were, from before net existed
            (2, 2.0, None),
            (3, 3.0, 2.7),  # the new days
            (4, 4.0, 3.6),
        ]
        # The view shows the model's columns; the kept table still holds discount, NULL
        # for the rows written since it was dropped.
        created = str(local_spark.sql("SHOW CREATE TABLE opsdes.facts").collect()[0][0])
        table = created.split("FROM", 1)[1].split(maxsplit=1)[0]
        kept = local_spark.sql(
            f"SELECT id, CAST(discount AS DOUBLE) FROM {table} ORDER BY id"
        ).collect()
        assert [tuple(r) for r in kept] == [(1, 0.1), (2, 0.2), (3, None), (4, None)]
    finally:
        store.close()
