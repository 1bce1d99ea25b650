"""Small SQLMesh projects written from SQLMesh's documentation, one per feature of issue 20
items 4, 5 and 8 (tests/fixtures/sqlmesh_projects/<feature>/), each loaded and planned by
Sluice unmodified, with its model set (and, where a change is made, its categories).

Each project was also loaded by SQLMesh 0.236.4 (in a throwaway virtualenv, duckdb gateway
as in the projects' config): ``SQLMESH_MODELS`` is what it loaded, and the categories
asserted below are the ones its plan gave for the same edits (METADATA for the edited
audit; NON_BREAKING for the model given a new column, INDIRECT_NON_BREAKING for its
children). One difference found on the way: SQLMesh 0.236.4 refuses an audit file whose
last query is followed by a comment ("Missing SELECT query"); Sluice accepts it, so the
fixture keeps its trailing comment in a model file, where both accept it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sluice.core.model.definition import KindName, Project
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.snapshot.snapshot import Category
from sluice.core.timeutil import to_ms

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects"
END = to_ms("2026-01-01")


def project_of(name: str) -> Project:
    return load_project(CORPUS / name, use_cache=False)


def plan_of(project: Project, base: Plan | None = None) -> Plan:
    return build_plan(
        PlanRequest(
            environment="prod",
            models=project.models,
            fingerprints=fingerprint_models(project.models, project.audits),
            base={s.name: s for s in base.snapshots} if base else {},
            base_plan_id=base.plan_id if base else None,
            end=END,
            execution_time=END,
        )
    )


def changed(tmp_path: Path, name: str, file: str, old: str, new: str) -> Project:
    """A copy of the project ``name`` with ``old`` replaced by ``new`` in ``file``."""
    copy = tmp_path / name
    shutil.copytree(CORPUS / name, copy)
    path = copy / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    return load_project(copy, use_cache=False)


def categories(plan: Plan) -> dict[str, Category]:
    return {c.name: c.category for c in (*plan.directly_modified, *plan.indirectly_modified)}


SQLMESH_MODELS = {
    "audit_equals_arguments": {"sushi.items"},
    "audit_file_layout": {"shop.orders"},
    "before_after_all": {"ops_models.counts"},
    "config_yml": {"web.events"},
    "external_models_folder": {"raw.customers", "raw.orders", "raw.products", "shop.order_lines"},
    "infer_names": {"reporting.revenue", "sales.big_orders", "sales.orders"},
    "inline_audits": {"sushi.items", "sushi.seed"},
    "scd_type_2": {
        "scd_src.menu_days",
        "scd_src.stock_days",
        "scd.menu_by_time",
        "scd.menu_kept",
        "scd.menu_by_column",
        "scd.stock",
    },
    "seed_root_path": {"sushi.waiter_names", "sushi.waiters"},
    "soft_checks": {"web.events"},
    "standalone_audits": {"crm.customers"},
}


@pytest.mark.parametrize("name", sorted(SQLMESH_MODELS))
def test_sluice_loads_the_models_sqlmesh_loads(name: str) -> None:
    project = project_of(name)
    assert set(project.models) == SQLMESH_MODELS[name]
    assert set(plan_of(project).added) == SQLMESH_MODELS[name]


def test_the_projects_are_in_the_corpus() -> None:
    # Other features' projects live beside these, with tests of their own.
    assert set(SQLMESH_MODELS) <= {p.name for p in CORPUS.iterdir() if p.is_dir()}


def test_audit_equals_arguments() -> None:
    project = project_of("audit_equals_arguments")
    plan = plan_of(project)
    assert plan.added == ("sushi.items",)
    calls = project.models["sushi.items"].audits
    assert [(c.name, c.args) for c in calls] == [
        ("not_null", (("columns", "(id, name)"),)),
        ("unique_values", (("columns", "(id)"),)),
        ("forall", (("criteria", "ARRAY(LENGTH(name) > 0, price >= 0)"),)),
        ("accepted_values", (("column", "category"), ("is_in", "('food', 'drink')"))),
    ]


def test_audit_file_layout(tmp_path: Path) -> None:
    project = project_of("audit_file_layout")
    first = plan_of(project)
    assert first.added == ("shop.orders",)
    assert sorted(project.audits) == [
        "assert_no_future_orders",
        "assert_positive_amount",
        "does_not_exceed_threshold",
    ]
    assert project.audits["does_not_exceed_threshold"].defaults == (
        ("threshold", "10"),
        ("column", "id"),
    )
    # Editing an audit changes what is checked, not the data: metadata only.
    edited = changed(
        tmp_path, "audit_file_layout", "audits/orders.sql", "amount <= 0", "amount < 0"
    )
    second = plan_of(edited, first)
    assert second.metadata_only == ("shop.orders",) and not categories(second)


def test_inline_audits(tmp_path: Path) -> None:
    project = project_of("inline_audits")
    first = plan_of(project)
    assert first.added == ("sushi.seed", "sushi.items")
    assert [a.name for a in project.models["sushi.items"].audits] == [
        "does_not_exceed_threshold",
        "price_is_not_null",
    ]
    assert project.audits["price_is_not_null"].path.endswith("models/items.sql")
    # A new column in the upstream model: non-breaking for it; its child reads none of it.
    edited = changed(
        tmp_path, "inline_audits", "models/seed_items.sql", "2.5 AS price", "2.5 AS price, 1 AS n"
    )
    second = plan_of(edited, first)
    assert categories(second) == {"sushi.seed": Category.NON_BREAKING}
    assert second.unaffected == ("sushi.items",)


def test_standalone_audits() -> None:
    project = project_of("standalone_audits")
    assert plan_of(project).added == ("crm.customers",)
    audit = project.audits["assert_customers_exist"]
    assert audit.standalone and not audit.blocking
    assert any("standalone audit assert_customers_exist is loaded" in n for n in project.notes)


def test_seed_root_path() -> None:
    project = project_of("seed_root_path")
    assert plan_of(project).added == ("sushi.waiter_names", "sushi.waiters")
    seed = project.models["sushi.waiter_names"]
    assert seed.kind.name == KindName.SEED and seed.kind.seed_path == "seeds/waiter_names.csv"


def test_config_yml() -> None:
    project = project_of("config_yml")
    assert plan_of(project).added == ("web.events",)
    events = project.models["web.events"]
    assert events.dialect == "bigquery"
    assert events.query_sql == "SELECT TRY_CAST('1' AS BIGINT) AS id, TIMESTAMP_MICROS(0) AS at"


def test_external_models_folder() -> None:
    project = project_of("external_models_folder")
    plan = plan_of(project)
    externals = sorted(n for n, m in project.models.items() if m.kind.name == KindName.EXTERNAL)
    assert externals == ["raw.customers", "raw.orders", "raw.products"]
    assert project.models["shop.order_lines"].depends_on == (
        "raw.customers",
        "raw.orders",
        "raw.products",
    )
    assert set(plan.added) == {*externals, "shop.order_lines"}


def test_infer_names(tmp_path: Path) -> None:
    project = project_of("infer_names")
    first = plan_of(project)
    assert first.added == ("sales.orders", "sales.big_orders", "reporting.revenue")
    assert project.models["sales.big_orders"].kind.name == KindName.VIEW
    edited = changed(
        tmp_path, "infer_names", "models/sales/orders.sql", "9.5 AS amount", "9.5 AS amount, 1 AS n"
    )
    second = plan_of(edited, first)
    assert categories(second) == {"sales.orders": Category.NON_BREAKING}
    assert second.unaffected == ("sales.big_orders", "reporting.revenue")


def test_before_after_all() -> None:
    project = project_of("before_after_all")
    assert plan_of(project).added == ("ops_models.counts",)
    assert project.before_all == (
        "CREATE SCHEMA IF NOT EXISTS ops",
        "CREATE TABLE IF NOT EXISTS ops.analytics (table_name STRING, eval_time STRING)",
    )
    assert project.after_all == (
        "CREATE VIEW IF NOT EXISTS ops.latest_eval AS "
        "SELECT MAX(eval_time) AS eval_time FROM ops.analytics",
    )


def test_soft_checks() -> None:
    project = project_of("soft_checks")
    plan = plan_of(project)
    assert plan.added == ("web.events",)
    assert project.tests == ()  # the test of the removed model is skipped
    notes = "\n".join(project.notes)
    assert "grain 'event_id' is not a column of web.events's query" in notes
    assert "grain 'CONCAT(session_id, '-', event_id)' of web.events is not a column name" in notes
    assert "test test_sessions: model 'web.sessions' does not exist; the test is skipped" in notes
    assert project.models["web.events"].grain == ("event_id",)
    (warning,) = plan.warnings
    assert "cron '*/5 * * * *' makes 631296 intervals" in warning
