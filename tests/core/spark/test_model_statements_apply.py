"""A model's pre- and post-statements run around its build on a real (in-process) Spark
(issue 41, item 6): the pre-statements make the view its query reads, the post-statement
a table; the driver checked them again (tests/security/test_model_statements.py)."""

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
    "config.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n",
    "external_models.yaml": "- name: stm_raw.demographics\n  columns: {customer_id: int, zip: text}\n",
    "models/customers.sql": """
        MODEL (name stm.customers, kind FULL);

        CREATE SCHEMA IF NOT EXISTS stm_raw;
        CREATE VIEW IF NOT EXISTS stm_raw.demographics AS (
          SELECT 1 AS customer_id, '00000' AS zip
        );

        SELECT d.customer_id, d.zip FROM stm_raw.demographics AS d;

        CREATE TABLE IF NOT EXISTS stm_raw.seen (customer_id INT);
    """,
}


def test_pre_and_post_statements_run_around_the_build(
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
        rows = [tuple(r) for r in local_spark.table("stm.customers").collect()]
        assert rows == [(1, "00000")]
        assert local_spark.table("stm_raw.seen").columns == ["customer_id"]
    finally:
        store.close()
        for schema in ("stm", "sluice__stm", "stm_raw"):
            local_spark.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
