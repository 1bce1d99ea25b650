"""Physical tables, environment views and rendered Spark SQL of models whose names carry a
catalog (pure: no Spark). A model in a configured catalog has its physical schema, its
tables, its views and their schemas in that catalog; a model in the default catalog has
two-part names, resolved by Spark in its current catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlglot

from sluice.core.jobs import environment_record, janitor_job
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import (
    model_view_schema,
    physical_schema,
    physical_table,
    view_name,
    view_schema,
)
from sluice.core.spark.render import build_steps, resolve_tables, table_expr, view_steps
from sluice.core.timeutil import to_ms
from tests.core.helpers import plan_of

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "catalog_names"
END = to_ms("2024-02-01")


def test_names_of_a_model_in_a_configured_catalog_stay_in_it() -> None:
    name = "lake.finance.revenue"
    assert physical_schema(name) == "lake.sluice__finance"
    assert physical_table(name, "v1") == "lake.sluice__finance.finance__revenue__v1"
    assert view_name(name, "prod") == "lake.finance.revenue"
    assert view_name(name, "pr_7") == "lake.finance__pr_7.revenue"
    assert model_view_schema(name, "pr_7") == "lake.finance__pr_7"
    assert view_schema("lake.finance", "prod") == "lake.finance"


def test_names_of_a_model_in_the_default_catalog_are_two_part() -> None:
    name = "shop.orders"
    assert physical_schema(name) == "sluice__shop"
    assert physical_table(name, "v1") == "sluice__shop.shop__orders__v1"
    assert view_name(name, "pr_7") == "shop__pr_7.orders"
    assert model_view_schema(name, "prod") == "shop"


def test_references_are_swapped_part_by_part_with_quotes_where_spark_needs_them() -> None:
    query = sqlglot.parse_one(
        "SELECT * FROM `1x`.t JOIN lake.s.u AS u USING (id) JOIN s.v USING (id)", read="spark"
    )
    tables = {
        "1x.t": "sluice__1x.1x__t__abc",
        "lake.s.u": "lake.sluice__s.s__u__def",
        "s.v": "sluice__s.s__v__123",
    }
    assert resolve_tables(query, tables).sql("spark") == (
        "SELECT * FROM sluice__1x.`1x__t__abc` AS t "
        "JOIN lake.sluice__s.s__u__def AS u USING (id) "
        "JOIN sluice__s.s__v__123 AS v USING (id)"
    )
    assert table_expr("lake.2024.t").sql("spark") == "lake.`2024`.t"
    assert table_expr("t").sql("spark") == "t"


def _fixture_plan(env: str = "prod") -> Any:
    project = load_project(FIXTURE, use_cache=False)
    return project, plan_of(project, env=env, end=END)


def test_the_build_steps_create_and_fill_tables_in_each_model_s_catalog() -> None:
    project, plan = _fixture_plan()
    version = {s.name: s.version for s in plan.snapshots}
    steps = build_steps(plan, project.audits, str(FIXTURE), "parquet")
    assert steps[0]["type"] == "sql"
    assert steps[0]["statements"] == [
        "CREATE DATABASE IF NOT EXISTS lake.sluice__finance",
        "CREATE DATABASE IF NOT EXISTS sluice__shop",
    ]
    builds = {s["model"]: s for s in steps if s["type"] == "build"}
    revenue = builds["lake.finance.revenue"]
    assert revenue["table"] == f"lake.sluice__finance.finance__revenue__{version[revenue['model']]}"
    sql = revenue["batches"][0]["sql"]
    assert f"FROM sluice__shop.shop__customers__{version['shop.customers']} AS c" in sql
    assert "CROSS JOIN lake.raw.rates AS r" in sql  # an external is read where it is
    assert builds["shop.orders"]["batches"][0]["sql"] == (
        "SELECT id, customer_id, amount FROM raw.orders AS orders"
    )
    report = builds["shop.report"]  # a VIEW model over the table in `lake`
    assert report["view_sql"] == (
        "SELECT customer_id, total_eur FROM "
        f"lake.sluice__finance.finance__revenue__{version['lake.finance.revenue']} AS revenue"
    )
    assert not [s for s in steps if s["type"] == "audit"]  # a table's run in its batches
    audits = [a for b in builds["shop.customers"]["batches"] for a in b.get("audits", [])]
    assert [a["model"] for a in audits] == ["shop.customers"]
    # The audit's own table is the physical one; the table it names as
    # `local.shop.orders` is read as `shop.orders` (audits read other tables as named).
    assert audits[0]["sql"] == (
        f"SELECT * FROM sluice__shop.shop__customers__{version['shop.customers']} "
        "WHERE NOT customer_id IN (SELECT customer_id FROM shop.orders)"
    )


def test_the_views_of_an_environment_are_made_in_each_model_s_catalog() -> None:
    _, plan = _fixture_plan("pr_3")
    version = {s.name: s.version for s in plan.snapshots}
    step = view_steps(plan, None)
    views = {v["view"]: v["sql"] for v in step["views"]}
    assert views["lake.finance__pr_3.revenue"] == (
        f"SELECT * FROM lake.sluice__finance.finance__revenue__{version['lake.finance.revenue']}"
    )
    assert "shop__pr_3.orders" in views
    assert "raw__pr_3.orders" not in views and "lake.raw__pr_3.rates" not in views
    assert step["schemas"] == ["lake.finance__pr_3", "shop__pr_3"]


def test_the_janitor_drops_views_schemas_and_tables_in_each_model_s_catalog() -> None:
    _, plan = _fixture_plan("pr_3")
    record = environment_record(plan, END, 7)
    stored = {(s.name, s.identifier): s.to_stored() for s in plan.snapshots}
    version = {s.name: s.version for s in plan.snapshots}
    job = janitor_job([record], stored, [("lake.finance.revenue", "v0")], END)
    (drop,) = job["steps"]
    assert drop["type"] == "drop"
    assert "lake.finance__pr_3.revenue" in drop["views"]
    assert "lake.raw__pr_3.rates" not in drop["views"]
    assert drop["schemas"] == ["lake.finance__pr_3", "shop__pr_3"]
    assert drop["tables"] == ["lake.sluice__finance.finance__revenue__v0"]
    assert version["lake.finance.revenue"] != "v0"


def test_a_unit_test_reads_its_inputs_for_tables_of_either_catalog() -> None:
    from sluice.core.spark.testing import unit_test_step

    project = load_project(FIXTURE, use_cache=False)
    (test,) = [t for t in project.tests if t.name == "test_revenue"]
    step = unit_test_step(test, project, END)
    views = {i["table"]: i["view"] for i in step["inputs"]}
    assert set(views) == {"lake.raw.rates", "shop.customers"}
    assert step["query"] == (
        f"SELECT c.customer_id, c.total * r.rate AS total_eur FROM {views['shop.customers']} "
        f"AS c CROSS JOIN {views['lake.raw.rates']} AS r WHERE r.currency = 'EUR'"
    )


def test_an_ad_hoc_query_may_name_models_with_their_catalog() -> None:
    from sluice.core.spark.testing import query_step

    project = load_project(FIXTURE, use_cache=False)
    resolve = {
        "shop.orders": view_name("shop.orders", "pr_1"),
        "lake.finance.revenue": view_name("lake.finance.revenue", "pr_1"),
    }
    sql = 'SELECT * FROM "local".shop.orders JOIN lake.finance.revenue USING (customer_id)'
    step = query_step(sql.replace('"', "`"), resolve, 10, project.config.catalogs)
    assert step["sql"] == (
        "SELECT * FROM shop__pr_1.orders AS orders JOIN lake.finance__pr_1.revenue AS revenue "
        "USING (customer_id) LIMIT 10"
    )
