"""A view over a table a forward-only change kept, when the change added a column and no
batch is due (no Spark here; on Spark: test_forward_only_columns_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.spark.render import view_steps
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-04")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
MODEL = (
    "MODEL (name s.events, kind {kind});\n"
    "SELECT id, ds{more} FROM VALUES (1, DATE'2024-01-01', 2) AS t(id, ds, amount)"
)
TIME = "INCREMENTAL_BY_TIME_RANGE (time_column ds, forward_only true)"
KEY = "INCREMENTAL_BY_UNIQUE_KEY (unique_key id, forward_only true)"


@pytest.mark.parametrize(("kind", "columns"), [(TIME, ["id", "ds", "amount"]), (KEY, None)])
def test_prod_alters_its_table_and_a_pr_reads_nulls(
    tmp_path: Path, kind: str, columns: list[str] | None
) -> None:
    files = {"config.yaml": CONFIG, "models/events.sql": MODEL.format(kind=kind, more="")}
    prod = plan_of(load(tmp_path / "1", files), end=END)
    added = {**files, "models/events.sql": MODEL.format(kind=kind, more=", amount")}
    project = load(tmp_path / "2", added)
    [built] = prod.snapshots
    filled = {(built.name, built.version): [(to_ms("2024-01-01"), END)]}
    for env, alter in (("prod", True), ("pr_1", False)):
        plan = plan_of(project, prod, env, end=END, intervals=filled)
        [snap] = plan.snapshots
        assert snap.version == prod.snapshots[0].version  # the table is kept
        assert not plan.backfill  # and no batch is due
        [view] = view_steps(plan, {"s.events": snap.version})["views"]
        fill = view.get("fill")
        assert fill is not None
        assert (fill["table"], fill["columns"], fill["alter"]) == (snap.table, columns, alter)
        assert "amount" in fill["query"] and snap.table not in fill["query"]


def test_an_unchanged_view_has_nothing_to_fill(tmp_path: Path) -> None:
    files = {"config.yaml": CONFIG, "models/events.sql": MODEL.format(kind=TIME, more="")}
    plan = plan_of(load(tmp_path, files), end=END)
    [view] = view_steps(plan, None)["views"]
    assert "fill" not in view


def test_a_type_is_written_with_every_name_inside_it_quoted() -> None:
    from pyspark.sql.types import (
        ArrayType,
        DateType,
        DecimalType,
        IntegerType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    from sluice.core.spark.steps.build import type_sql

    hostile = StructType(
        [
            StructField("x y", IntegerType()),
            StructField("a`: int>, b", DecimalType(10, 2)),
        ]
    )
    assert type_sql(hostile) == "struct<`x y`: int, `a``: int>, b`: decimal(10,2)>"
    assert type_sql(MapType(StringType(), ArrayType(DateType()))) == "map<string, array<date>>"
