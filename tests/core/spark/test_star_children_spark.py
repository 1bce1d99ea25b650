"""Output columns drive categories, on a real Spark (issue 42, point 1): a parent gains a
column; the models that take its columns through a star are rebuilt in the PR's
environment, so their views there have the new column, and prod takes the same tables on
promotion without writing data. A model reading columns by name keeps prod's table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.definition import Project
from sluice.core.snapshot.snapshot import Category
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import to_ms
from sluice.core.workflow import ApplyResult
from tests.core.helpers import load

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW = to_ms("2024-01-05")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
SOURCE = """
    MODEL (name starkid.src, kind FULL);
    SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)
"""
PARENT = "MODEL (name starkid.p, kind FULL);\nSELECT id, name FROM starkid.src"
WIDER = "MODEL (name starkid.p, kind FULL);\nSELECT id, name, id * 10 AS extra FROM starkid.src"
FILES = {
    "config.yaml": CONFIG,
    "models/src.sql": SOURCE,
    "models/p.sql": PARENT,
    "models/star.sql": "MODEL (name starkid.star, kind FULL);\nSELECT * FROM starkid.p",
    "models/cte.sql": """
        MODEL (name starkid.cte, kind FULL);
        WITH x AS (SELECT * FROM starkid.p) SELECT * FROM x
    """,
    "models/view.sql": "MODEL (name starkid.view, kind VIEW);\nSELECT t.* FROM starkid.p AS t",
    "models/named.sql": "MODEL (name starkid.named, kind FULL);\nSELECT id, name FROM starkid.p",
}


def _apply(project: Project, store: SqlStateStore, spark: SparkSession, env: str) -> ApplyResult:
    from sluice.core.spark.session import SparkPaths

    warehouse = Path(str(spark.conf.get("spark.sql.warehouse.dir", "")).removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    plan = workflow.plan_environment(
        project, store, env, end=NOW, execution_time=NOW, against="prod"
    )
    runner = InProcessRunner(project.config.sluice.spark, paths)
    return workflow.apply_plan(project, store, plan, runner, now=NOW)


def test_star_children_take_a_parent_s_new_column_in_the_pr_and_in_prod(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        _apply(load(tmp_path / "v1", FILES), store, local_spark, "prod")

        def columns(view: str) -> list[str]:
            return local_spark.table(view).columns

        def table_of(view: str) -> str:
            created = str(local_spark.sql(f"SHOW CREATE TABLE {view}").collect()[0][0])
            return created.split("FROM", 1)[1].split(maxsplit=1)[0]

        assert columns("starkid.star") == ["id", "name"]
        before = {name: table_of(f"starkid.{name}") for name in ("star", "cte", "named")}

        changed = load(tmp_path / "v2", {**FILES, "models/p.sql": WIDER})
        plan = _apply(changed, store, local_spark, "pr_1").plan
        direct = {c.name: c for c in plan.directly_modified}
        for name in ("starkid.star", "starkid.cte", "starkid.view"):
            assert (direct[name].category, direct[name].reshaped_by) == (
                Category.NON_BREAKING,
                ("starkid.p",),
            )
        assert plan.unaffected == ("starkid.named",)

        # The PR's views have the new column, with its values.
        for name in ("star", "cte", "view"):
            assert columns(f"starkid__pr_1.{name}") == ["id", "name", "extra"], name
            rows = local_spark.sql(f"SELECT id, extra FROM starkid__pr_1.{name} ORDER BY id")
            assert [tuple(r) for r in rows.collect()] == [(1, 10), (2, 20)], name
        # The model reading by name kept prod's table; the star ones were rebuilt.
        assert table_of("starkid__pr_1.named") == before["named"]
        assert table_of("starkid__pr_1.star") != before["star"]
        assert table_of("starkid__pr_1.cte") != before["cte"]

        # Promoted: prod takes the tables the PR built (a virtual update: nothing built).
        promoted = _apply(changed, store, local_spark, "prod")
        assert promoted.plan.backfill == () and promoted.tables_built == 0
        for name in ("star", "cte", "view"):
            assert columns(f"starkid.{name}") == ["id", "name", "extra"], name
        assert table_of("starkid.star") == table_of("starkid__pr_1.star")
        assert columns("starkid.named") == ["id", "name"]
    finally:
        store.close()
