"""Two repositories' prods in one Spark warehouse, each under its own schema prefix (issue
46: :func:`sluice.core.snapshot.naming.schema_prefix`, set by the service per repository),
on a real in-process Spark: the same model names, two sets of schemas, tables and views,
each read back with its own data; one repository's janitor drops its own tables only."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import physical_schema, schema_prefix, view_name
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[3]
NOW = to_ms("2018-05-01")
A, B = "sluice_r_acme_a_0a0a__", "sluice_r_acme_b_0b0b__"


def _paths(spark: SparkSession) -> SparkPaths:
    root = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).parent  # type: ignore[union-attr]
    return SparkPaths(root=root, logs=root / "logs")


def _project(dest: Path, where: str | None) -> Path:
    """The example project without its batched incremental and PySpark models (what is
    checked here is schemas and tables, not kinds: each prod build would pay for them)."""
    shutil.copytree(REPO / "examples" / "jaffle_shop", dest,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    (dest / "models" / "daily_revenue.sql").unlink()
    (dest / "models" / "customer_segments.py").unlink()
    if where is not None:
        orders = dest / "models" / "orders.sql"
        text = orders.read_text()
        assert "  ON o.order_id = p.order_id" in text
        orders.write_text(text.replace("  ON o.order_id = p.order_id", where))
    return dest


def _apply(root: Path, url: str, spark: SparkSession, prefix: str, env: str) -> None:
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        with schema_prefix(prefix):
            plan = workflow.plan_environment(project, store, env, end=NOW, execution_time=NOW)
            runner = InProcessRunner(project.config.sluice.spark, _paths(spark))
            workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
    finally:
        store.close()


@pytest.fixture(scope="module")
def two(
    tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession
) -> Iterator[dict[str, tuple[Path, str]]]:
    base = tmp_path_factory.mktemp("prefixes")
    repos = {
        A: (_project(base / "a", None), f"sqlite:///{base / 'a.db'}"),
        B: (
            _project(base / "b", "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'"),
            f"sqlite:///{base / 'b.db'}",
        ),
    }
    for prefix, (root, url) in repos.items():
        _apply(root, url, local_spark, prefix, "prod")
    yield repos


def _count(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0])


def _tables(spark: SparkSession, schema: str) -> set[str]:
    return {row.tableName for row in spark.sql(f"SHOW TABLES IN {schema}").collect()}


def test_each_repository_s_prod_is_in_its_own_schemas(
    two: dict[str, tuple[Path, str]], local_spark: SparkSession
) -> None:
    with schema_prefix(A):
        a_orders, a_physical = view_name("jaffle.orders", "prod"), physical_schema("jaffle.x")
    with schema_prefix(B):
        b_orders, b_physical = view_name("jaffle.orders", "prod"), physical_schema("jaffle.x")
    assert a_orders == f"{A}jaffle.orders" and b_orders == f"{B}jaffle.orders"
    assert _count(local_spark, a_orders) == 99  # the example's orders
    assert 0 < _count(local_spark, b_orders) < 99  # B's own query: the returned orders left out
    databases = {row[0] for row in local_spark.sql("SHOW DATABASES").collect()}
    assert {f"{A}jaffle", f"{B}jaffle", a_physical, b_physical} <= databases
    # The same model names, two sets of tables: nothing of one is the other's.
    assert _tables(local_spark, a_physical) and _tables(local_spark, b_physical)


def test_a_janitor_drops_its_own_tables_only(
    two: dict[str, tuple[Path, str]], local_spark: SparkSession
) -> None:
    root, url = two[A]
    text = (root / "models" / "customers.sql").read_text()
    (root / "models" / "customers.sql").write_text(
        text.replace("  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    )
    _apply(root, url, local_spark, A, "dev")
    with schema_prefix(B):
        b_physical = physical_schema("jaffle.x")
        b_views = _tables(local_spark, f"{B}jaffle")
    b_tables = _tables(local_spark, b_physical)
    with schema_prefix(A):
        a_physical = physical_schema("jaffle.x")
        before = _tables(local_spark, a_physical)
        assert _tables(local_spark, f"{A}jaffle__dev")
        store = open_state(url)
        try:
            workflow.invalidate_environment(store, "dev")
            project = load_project(root, use_cache=False)
            runner = InProcessRunner(project.config.sluice.spark, _paths(local_spark))
            report = workflow.run_janitor(store, runner, now=NOW + 1, table_ttl_ms=0)
        finally:
            store.close()
    assert report.environments == ("dev",) and report.tables  # model@version
    dropped = before - _tables(local_spark, a_physical)
    assert dropped and all(t.startswith("jaffle__customers__") for t in dropped), dropped
    assert not any(t in _tables(local_spark, b_physical) for t in dropped)  # B's: another
    # B's tables and views are all there.
    assert _tables(local_spark, b_physical) == b_tables
    assert _tables(local_spark, f"{B}jaffle") == b_views
