"""A Python (PySpark) model and a Python macro built on a real Spark: prod of
examples/python_shop, then a change to the model's helper rebuilt in a PR environment
while its SQL parent stays prod's table."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "python_shop"
NOW = to_ms("2024-02-01")


def _apply(root: Path, url: str, spark: SparkSession, env: str) -> workflow.ApplyResult:
    from sluice.core.spark.session import SparkPaths

    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, env, end=NOW, execution_time=NOW)
        warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
        paths = SparkPaths(root=warehouse.parent, logs=warehouse.parent / "logs")
        runner = InProcessRunner(project.config.sluice.spark, paths)
        return workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
    finally:
        store.close()


@dataclass
class Shop:
    """examples/python_shop applied to prod, then to pr_1 with the model's helper changed,
    and what was seen on the way (prod read before the PR was built)."""

    root: Path
    url: str
    prod_built: int
    prod_segments: dict[int, str]
    prod_dtypes: list[tuple[str, str]]
    pr_backfill: set[str]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory, local_spark: SparkSession) -> Shop:
    """One prod and one PR environment for the module (both tests below read them)."""
    tmp = tmp_path_factory.mktemp("pyshop")
    root = Path(shutil.copytree(EXAMPLE, tmp / "shop"))
    url = f"sqlite:///{tmp / 'state.db'}"
    built = _apply(root, url, local_spark, "prod").tables_built
    segments = {
        r[0]: r[1]
        for r in local_spark.sql(
            "SELECT customer_id, segment FROM pyshop.customer_segments"
        ).collect()
    }
    dtypes = local_spark.table("pyshop.customer_segments").dtypes
    path = root / "models" / "customer_segments.py"
    path.write_text(path.read_text().replace("LOYAL_ORDERS = 3", "LOYAL_ORDERS = 5"))
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_1", end=NOW, execution_time=NOW)
    finally:
        store.close()
    backfill = {b.name for b in plan.backfill}
    _apply(root, url, local_spark, "pr_1")
    return Shop(root, url, built, segments, dtypes, backfill)


def test_a_pyspark_model_builds_and_a_helper_change_rebuilds_it(
    shop: Shop, local_spark: SparkSession
) -> None:
    assert shop.prod_built == 4
    # customer 1: 4 orders (loyal); 2: $7 once; 3: $99 once (big spender).
    assert shop.prod_segments == {1: "loyal", 2: "occasional", 3: "big spender"}
    assert shop.prod_dtypes == [
        ("customer_id", "int"),
        ("number_of_orders", "bigint"),
        ("lifetime_value", "double"),
        ("segment", "string"),
    ]
    # LOYAL_ORDERS 3 -> 5 in the model's helper: the model and its child only.
    assert shop.pr_backfill == {"pyshop.customer_segments", "pyshop.segment_counts"}
    assert (
        local_spark.sql(
            "SELECT segment FROM pyshop__pr_1.customer_segments WHERE customer_id = 1"
        ).collect()[0][0]
        == "big spender"  # 4 orders, $50.50: no longer loyal at 5
    )
    # prod is untouched, and the PR reads prod's table for the unchanged SQL parent.
    assert (
        local_spark.sql(
            "SELECT segment FROM pyshop.customer_segments WHERE customer_id = 1"
        ).collect()[0][0]
        == "loyal"
    )


def _unit_test(root: Path, spark: SparkSession) -> dict[str, object]:
    from sluice.core.spark import testing
    from sluice.core.spark.steps.context import StepContext
    from sluice.core.spark.steps.unittest import run_unit_test

    (step,) = testing.unit_test_steps(load_project(root, use_cache=False), None, NOW)
    return run_unit_test(spark, step, StepContext(job={}, emit=lambda event: None))


def test_a_yaml_unit_test_runs_the_pyspark_function_on_its_inputs(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "shop"))
    assert _unit_test(root, local_spark)["passed"] is True
    path = root / "models" / "customer_segments.py"
    path.write_text(path.read_text().replace('"big spender"', '"high value"'))
    result = _unit_test(root, local_spark)
    assert result["passed"] is False
    assert "high value" in str(result["diff"]) and "big spender" in str(result["diff"])
    views = [t.name for t in local_spark.catalog.listTables() if t.isTemporary]
    assert not [v for v in views if v.startswith("__sluice_test_")]


def test_a_failing_function_fails_its_test_naming_its_line(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "shop"))
    path = root / "models" / "customer_segments.py"
    source = path.read_text().replace(
        "    return segment(customers)", "    raise ValueError('no customers today')"
    )
    path.write_text(source)
    line = source.splitlines().index("    raise ValueError('no customers today')") + 1
    result = _unit_test(root, local_spark)
    assert result["passed"] is False
    assert "the model's function failed" in str(result["diff"])
    assert "ValueError: no customers today" in str(result["diff"])
    assert f"customer_segments.py:{line})" in str(result["diff"])


def test_a_pandas_model_is_tested_with_its_declared_types(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "shop"))
    (root / "models" / "customer_segments.py").write_text(
        """import pandas as pd
from sqlmesh import model


@model(
    "pyshop.customer_segments",
    kind="FULL",
    columns={"customer_id": "int", "number_of_orders": "bigint",
             "lifetime_value": "double", "segment": "string"},
)
def execute(context, start, end, execution_time, **kwargs):
    df = context.fetchdf(f"SELECT * FROM {context.resolve_table('pyshop.customers')}")
    value = df["customer_lifetime_value"].fillna(0.0)
    segment = ["new" if n == 0 else "loyal" if n >= 3 else "big spender" if v >= 50
               else "occasional" for n, v in zip(df["number_of_orders"], value)]
    return pd.DataFrame({"customer_id": df["customer_id"], "segment": segment,
                         "number_of_orders": df["number_of_orders"], "lifetime_value": value})
"""
    )
    result = _unit_test(root, local_spark)
    assert result["passed"] is True, result["diff"]


def test_sluice_query_reads_a_python_model_s_environment_views(shop: Shop) -> None:
    """`sluice query ENV` reads a Python model's view like a SQL model's: prod's table
    through prod's view, and the PR's rebuilt table through the PR environment's view,
    with the SQL model downstream of it; the project loads with its Python macro."""
    import json

    from click.testing import CliRunner

    from sluice.core.cli import cli

    root, url = shop.root, shop.url

    def query(environment: str, sql: str) -> dict[str, object]:
        args = ["query", environment, sql, "--project", str(root), "--state", url]
        result = CliRunner().invoke(cli, [*args, "--json", "--in-process"])
        assert result.exit_code == 0, result.output
        answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
        return answer

    sql = "SELECT segment, COUNT(*) AS n FROM pyshop.customer_segments GROUP BY 1 ORDER BY 1"
    assert query("prod", sql)["rows"] == [["big spender", 1], ["loyal", 1], ["occasional", 1]]
    assert query("pr_1", sql)["rows"] == [["big spender", 2], ["occasional", 1]]
    joined = query(
        "pr_1",
        "SELECT c.segment, s.* FROM pyshop.customer_segments AS c "
        "JOIN pyshop.segment_counts AS s USING (segment) WHERE c.customer_id = 1",
    )
    assert joined["columns"][:2] == ["segment", "segment"]  # type: ignore[index]
    assert joined["rows"][0][0] == "big spender"  # type: ignore[index]
