"""EMBEDDED models applied on a real (in-process) Spark: the embedded SQL model and the
embedded is_sql Python model of tests/core/model/test_embedded_models.py inlined into
the model reading them; no table or view of their own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import write_project

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW = to_ms("2024-01-03")
FILES = {
    "config.yaml": """
        model_defaults:
          dialect: duckdb
          start: '2024-01-01'
    """,
    "models/orders.sql": """
        MODEL (name emb.orders, kind FULL);
        SELECT * FROM VALUES (1, 7, DATE '2024-01-01'), (2, 7, DATE '2024-01-02'),
          (3, 8, DATE '2023-12-01') AS t(id, waiter_id, event_date)
    """,
    "models/recent.sql": """
        MODEL (name emb.recent, kind EMBEDDED);
        SELECT id, waiter_id FROM emb.orders WHERE event_date >= @start_ds
    """,
    "models/waiters.py": """
        from sqlmesh import model
        from sqlmesh.core.model.kind import ModelKindName

        @model("emb.waiters", is_sql=True, kind=dict(name=ModelKindName.EMBEDDED))
        def entrypoint(evaluator):
            return "SELECT DISTINCT waiter_id FROM emb.orders"
    """,
    "models/by_waiter.sql": """
        MODEL (name emb.by_waiter, kind FULL);
        SELECT w.waiter_id, COUNT(r.id) AS n
        FROM emb.waiters AS w LEFT JOIN emb.recent AS r ON r.waiter_id = w.waiter_id
        GROUP BY w.waiter_id
    """,
}


def test_embedded_models_are_inlined_where_they_are_read(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = write_project(tmp_path / "project", FILES)
    (root / ".sluice").mkdir()
    url = f"sqlite:///{root / '.sluice' / 'state.db'}"
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
    store = open_state(url)
    try:
        project = load_project(root, use_cache=False)
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        runner = InProcessRunner(project.config.sluice.spark, paths)
        workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
        rows = sorted(tuple(r) for r in local_spark.table("emb.by_waiter").collect())
        assert rows == [(7, 2), (8, 0)]  # waiter 8's only order is before the start
        views = {r.viewName for r in local_spark.sql("SHOW VIEWS IN emb").collect()}
        assert views == {"orders", "by_waiter"}
        tables = {r.tableName for r in local_spark.sql("SHOW TABLES IN sluice__emb").collect()}
        assert all(t.startswith(("emb__orders__", "emb__by_waiter__")) for t in tables)
    finally:
        store.close()
        for schema in ("emb", "sluice__emb"):
            local_spark.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
