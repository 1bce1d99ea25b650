"""Models named with their catalog, built and promoted on a real (in-process) Spark.

The project's default catalog (``local``, its DuckDB gateway's database) and Spark's
session catalog (``spark_catalog``) both mean Spark's current catalog: the models are
built as two-part tables there, read each other across the forms, and are promoted by a
view swap. A second, configured catalog cannot be exercised here: the catalogs Spark ships
without extra jars (the JDBC catalog) support neither ``CREATE TABLE ... USING`` nor views
(MISSING_CATALOG_ABILITY.VIEWS), so the SQL rendered for one is tested in
test_catalog_render.py and the limit is in the README.
"""

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

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

NOW = to_ms("2024-03-01")
FILES = {
    "config.yaml": """
        gateways:
          local:
            connection:
              type: duckdb
              database: local.db
        model_defaults:
          dialect: duckdb
          start: '2024-01-01'
    """,
    "models/items.sql": """
        MODEL (name local.catshop.items, kind FULL);
        SELECT 1 AS id UNION ALL SELECT 2 AS id
    """,
    "models/totals.sql": """
        MODEL (name spark_catalog.catshop.totals, kind FULL);
        SELECT COUNT(*) AS n FROM "local".catshop.items
    """,
    "models/latest.sql": """
        MODEL (name catshop.latest, kind VIEW);
        SELECT t.n, MAX(i.id) AS top
        FROM spark_catalog.catshop.totals AS t CROSS JOIN catshop.items AS i
        GROUP BY t.n
    """,
}


def test_models_named_with_the_default_catalog_build_and_promote(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = write_project(tmp_path / "p", FILES)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    warehouse = local_spark.conf.get("spark.sql.warehouse.dir") or ""
    spark_root = Path(warehouse.removeprefix("file:")).parent
    paths = SparkPaths(root=spark_root, logs=tmp_path / "logs")

    def apply(env: str) -> workflow.ApplyResult:
        project = load_project(root, use_cache=False)
        store = open_state(url)
        try:
            plan = workflow.plan_environment(project, store, env, end=NOW, execution_time=NOW)
            runner = InProcessRunner(project.config.sluice.spark, paths)
            return workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
        finally:
            store.close()

    def rows(sql: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in local_spark.sql(sql).collect()]

    try:
        first = apply("prod")  # two tables and one VIEW model's view
        assert (first.tables_built, first.model_views) == (2, 1)
        assert rows("SELECT n, top FROM spark_catalog.catshop.latest") == [(2, 2)]
        assert rows("SELECT n FROM catshop.totals") == [(2,)]

        items = root / "models" / "items.sql"
        items.write_text(items.read_text().replace("SELECT 2 AS id", "SELECT 2 UNION ALL SELECT 3"))
        built = apply("pr_1")
        # the change is breaking: its children are rebuilt (a table and a view)
        assert built.tables_built + built.model_views == 3
        assert rows("SELECT n, top FROM spark_catalog.catshop__pr_1.latest") == [(3, 3)]
        assert rows("SELECT n, top FROM catshop.latest") == [(2, 2)]

        promoted = apply("prod")
        assert promoted.tables_built == 0 and promoted.views_swapped == 3
        assert rows("SELECT n, top FROM catshop.latest") == [(3, 3)]
        # (not the temporary views other tests of this session left: they list everywhere)
        listed = local_spark.catalog.listTables("sluice__catshop")
        tables = {t.name for t in listed if not t.isTemporary}
        assert len(tables) == 6 and all(t.startswith("catshop__") for t in tables)
    finally:
        for schema in ("catshop", "catshop__pr_1", "sluice__catshop"):
            local_spark.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_the_fixture_s_unit_tests_pass_with_inputs_named_in_either_form(
    local_spark: SparkSession,
) -> None:
    """The catalog_names fixture's tests name models and inputs with `local.` and `lake.`:
    each input becomes a temporary view, so no catalog is needed to run them."""
    from sluice.core.spark import testing
    from sluice.core.spark.steps.context import StepContext
    from sluice.core.spark.steps.unittest import run_unit_test

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects"
    project = load_project(fixture / "catalog_names", use_cache=False)
    steps = testing.unit_test_steps(project, None, NOW)
    assert [s["model"] for s in steps] == ["shop.customers", "lake.finance.revenue"]
    ctx = StepContext(job={}, emit=lambda _event: None)
    results = [run_unit_test(local_spark, step, ctx) for step in steps]
    assert [r["passed"] for r in results] == [True, True], results
