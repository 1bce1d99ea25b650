"""A forward-only change of an incremental model's columns, applied when no batch is due,
on a real (in-process) Spark.

The bug: the change keeps the table (same version) and no batch writes into it, so the
table never gained the new column, and pointing the view (which names the query's
columns) failed with UNRESOLVED_COLUMN. Now prod, which owns the table, adds the column
to it (ALTER TABLE ... ADD COLUMNS) before its view is pointed; a PR environment, which
reads prod's table and may not change it, reads the column as NULL of its type.
A forward-only change that drops a column is stopped at plan time as destructive.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.errors import PlanError
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DAY = 86_400_000
END = to_ms("2024-01-04")
RAW = (
    "MODEL (name fo_cols.raw, kind FULL);\n"
    "SELECT CAST(id AS INT) AS id, DATE_ADD(DATE'2024-01-01', CAST(id % 5 AS INT)) AS ds, "
    "CAST(id * 10 AS BIGINT) AS amount FROM range(10)"
)
HEADER = "MODEL (name fo_cols.{name}, kind {kind}{more});\n"
TIME = "INCREMENTAL_BY_TIME_RANGE (time_column ds, forward_only true)"
KEY = "INCREMENTAL_BY_UNIQUE_KEY (unique_key id, forward_only true)"
BEFORE = "SELECT id, ds FROM fo_cols.raw WHERE ds BETWEEN @start_ds AND @end_ds"
AFTER = "SELECT id, ds, amount FROM fo_cols.raw WHERE ds BETWEEN @start_ds AND @end_ds"


class World:
    def __init__(self, root: Path, spark: SparkSession) -> None:
        self.root, self.spark = root, spark
        self.url = f"sqlite:///{root / 'state.db'}"
        (root / "models").mkdir(parents=True)
        (root / "config.yaml").write_text(
            "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
        )
        (root / "models" / "raw.sql").write_text(RAW)

    def model(self, name: str, kind: str, query: str, more: str = "") -> None:
        header = HEADER.format(name=name, kind=kind, more=more)
        (self.root / "models" / f"{name}.sql").write_text(header + query)

    def apply(self, env: str, end: int = END) -> workflow.ApplyResult:
        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            plan = workflow.plan_environment(project, store, env, end=end, execution_time=end)
            root = Path(self.spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
            paths = SparkPaths(root=root.parent, logs=root.parent / "logs")
            runner = InProcessRunner(project.config.sluice.spark, paths)
            return workflow.apply_plan(project, store, plan, runner, url=self.url, now=end)
        finally:
            store.close()

    def plan(self, env: str, end: int = END):  # type: ignore[no-untyped-def]
        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            return workflow.plan_environment(project, store, env, end=end, execution_time=end)
        finally:
            store.close()

    def columns(self, name: str) -> list[str]:
        return list(self.spark.table(name).columns)

    def target(self, view: str) -> str:
        text = str(self.spark.sql(f"SHOW CREATE TABLE {view}").collect()[0][0])
        return text.split("FROM", 1)[1].split(maxsplit=1)[0].replace("`", "")

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        return sorted(tuple(r) for r in self.spark.sql(sql).collect())


@pytest.mark.parametrize("kind", [TIME, KEY])
def test_a_column_added_forward_only_with_no_batch_due_is_readable_in_pr_and_prod(
    tmp_path: Path, local_spark: SparkSession, kind: str
) -> None:
    world = World(tmp_path / "project", local_spark)
    world.model("events", kind, BEFORE)
    world.apply("prod")
    table = world.target("fo_cols.events")
    assert world.columns("fo_cols.events") == ["id", "ds"]
    before = world.rows("SELECT id, ds FROM fo_cols.events")

    world.model("events", kind, AFTER)
    plan = world.plan("pr_1")
    assert not [b for b in plan.backfill if b.name == "fo_cols.events"]  # nothing is due
    # A PR environment reads prod's table, which it may not change: the new column is
    # NULL there, of the query's type; prod's table is as it was.
    world.apply("pr_1")
    assert world.target("fo_cols__pr_1.events") == table
    assert world.columns("fo_cols__pr_1.events") == ["id", "ds", "amount"]
    pr = world.spark.table("fo_cols__pr_1.events").schema["amount"].dataType.simpleString()
    assert pr == "bigint"
    assert world.rows("SELECT id, ds, amount FROM fo_cols__pr_1.events") == [
        (*r, None) for r in before
    ]
    assert "amount" not in world.columns(table)
    assert world.columns("fo_cols.events") == ["id", "ds"]

    # Prod owns the table: the column is added to it before the view is pointed.
    assert not [b for b in world.plan("prod").backfill if b.name == "fo_cols.events"]
    world.apply("prod")
    assert world.target("fo_cols.events") == table  # kept, not rebuilt
    assert "amount" in world.columns(table)
    assert world.columns("fo_cols.events") == ["id", "ds", "amount"]
    assert world.rows("SELECT id, ds, amount FROM fo_cols.events") == [(*r, None) for r in before]

    # The next day's batch fills the column for its rows (the time-range model; the
    # unique-key one is built once).
    if kind == TIME:
        world.apply("prod", end=END + DAY)
        filled = world.rows("SELECT id, amount FROM fo_cols.events WHERE amount IS NOT NULL")
        assert filled == [(3, 30), (8, 80)]  # 2024-01-04's rows


def test_a_column_dropped_forward_only_is_destructive(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    world = World(tmp_path / "project", local_spark)
    world.model("dropped", TIME, AFTER)
    world.apply("prod")
    world.model("dropped", TIME, BEFORE)
    with pytest.raises(
        PlanError, match=r"forward-only change to fo_cols\.dropped drops column amount"
    ):
        world.plan("prod")
    # Allowed by the model: the view shows the query's columns; the table keeps the column.
    warned = TIME.replace("forward_only true", "forward_only true, on_destructive_change warn")
    world.model("dropped", warned, BEFORE)
    plan = world.plan("prod")
    assert any("drops column amount" in w for w in plan.warnings)
    world.apply("prod")
    assert world.columns("fo_cols.dropped") == ["id", "ds"]
