"""EMBEDDED models (issue 41): a model whose query SQLMesh inlines into each model reading
it, as a subquery; no table or view is built for it. A SQL model (``kind EMBEDDED``) and
an ``is_sql`` Python model (``kind=dict(name=ModelKindName.EMBEDDED)``, as
``../shared/compat/sqlmesh_sushi``'s waiters.py) take the same path: loaded with its
query and its parents, never backfilled, given no view, inlined where it is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import ModelError
from sluice.core.model.definition import KindName
from sluice.core.spark.render import build_steps, view_steps
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-03")
FILES = {
    "config.yaml": """
        model_defaults:
          dialect: duckdb
          start: '2024-01-01'
    """,
    "models/orders.sql": """
        MODEL (name s.orders, kind FULL);
        SELECT 1 AS id, 7 AS waiter_id, DATE '2024-01-01' AS event_date
    """,
    "models/recent.sql": """
        MODEL (name s.recent, kind EMBEDDED);
        SELECT id, waiter_id FROM s.orders WHERE event_date >= @start_ds
    """,
    "macros/between.py": """
        from sqlmesh import macro

        @macro()
        def in_range(evaluator, column):
            return column.between(evaluator.locals["start_date"], evaluator.locals["end_date"])
    """,
    "models/waiters.py": """
        from sqlmesh import model
        from sqlmesh.core.model.kind import ModelKindName

        @model(
            "s.waiters",
            is_sql=True,
            kind=dict(name=ModelKindName.EMBEDDED),
        )
        def entrypoint(evaluator):
            columns = [c for c in evaluator.columns_to_types("s.orders") if c != "id"]
            return f"SELECT DISTINCT {', '.join(columns)} FROM s.orders WHERE @in_range(event_date)"
    """,
    "models/by_waiter.sql": """
        MODEL (name s.by_waiter, kind FULL);
        SELECT w.waiter_id, COUNT(r.id) AS n
        FROM s.waiters AS w LEFT JOIN s.recent AS r ON r.waiter_id = w.waiter_id
        GROUP BY w.waiter_id
    """,
}


def test_embedded_models_load_with_their_query_and_parents(tmp_path: Path) -> None:
    project = load(tmp_path, FILES)
    recent, waiters = project.models["s.recent"], project.models["s.waiters"]
    assert recent.kind.name == waiters.kind.name == KindName.EMBEDDED
    assert recent.depends_on == waiters.depends_on == ("s.orders",)
    assert project.models["s.by_waiter"].depends_on == ("s.recent", "s.waiters")
    # The Python macro reads SQLMesh's time variables: placeholders the build fills in.
    assert waiters.query_sql == (
        "SELECT DISTINCT waiter_id, event_date FROM s.orders WHERE event_date BETWEEN "
        "__sluice_macro__start_date AND __sluice_macro__end_date"
    )
    assert not recent.kind.materialized and not recent.kind.has_views


def test_an_embedded_model_is_inlined_into_its_readers_and_gets_no_table_or_view(
    tmp_path: Path,
) -> None:
    project = load(tmp_path, FILES)
    plan = plan_of(project, end=END)
    assert {b.name for b in plan.backfill} == {"s.orders", "s.by_waiter"}
    assert plan.create_views == ()
    steps = build_steps(plan, project.audits, str(tmp_path), "parquet")
    builds = {s["model"]: s for s in steps if s["type"] == "build"}
    assert set(builds) == {"s.orders", "s.by_waiter"}
    assert builds["s.by_waiter"]["parents"] == ["s.orders"]  # through the embedded ones
    orders = plan.snapshot("s.orders").table
    (batch,) = builds["s.by_waiter"]["batches"]
    assert batch["sql"] == (
        "SELECT w.waiter_id, COUNT(r.id) AS n FROM (SELECT DISTINCT waiter_id, event_date "
        f"FROM {orders} AS orders WHERE event_date BETWEEN CAST('2024-01-01' AS DATE) AND "
        "CAST('2024-01-02' AS DATE)) AS w LEFT JOIN (SELECT id, waiter_id "
        f"FROM {orders} AS orders WHERE event_date >= '2024-01-01') AS r "
        "ON r.waiter_id = w.waiter_id GROUP BY w.waiter_id"
    )
    views = view_steps(plan, None)["views"]
    assert sorted(v["view"] for v in views) == ["s.by_waiter", "s.orders"]


def test_an_edit_of_an_embedded_model_reaches_its_readers(tmp_path: Path) -> None:
    before = load(tmp_path / "a", FILES)
    base = plan_of(before, end=END)
    edited = {**FILES}
    edited["models/recent.sql"] = edited["models/recent.sql"].replace(">=", ">")
    after = load(tmp_path / "b", edited)
    plan = plan_of(after, base, end=END)
    assert [c.name for c in plan.directly_modified] == ["s.recent"]
    assert [c.name for c in plan.indirectly_modified] == ["s.by_waiter"]
    assert plan.snapshot("s.by_waiter").version != base.snapshot("s.by_waiter").version
    assert "s.by_waiter" in {b.name for b in plan.backfill}
    assert "s.recent" not in {b.name for b in plan.backfill}


def test_a_python_model_may_not_read_an_embedded_model(tmp_path: Path) -> None:
    files = {
        **FILES,
        "models/reader.py": """
            from sqlmesh import model

            @model("s.reader", columns={"id": "int"})
            def execute(context, **kwargs):
                return context.spark.table(context.resolve_table("s.recent"))
        """,
    }
    with pytest.raises(ModelError, match=r"reads s\.recent, an EMBEDDED model") as exc:
        load(tmp_path, files)
    assert exc.value.path is not None and exc.value.path.endswith("models/reader.py")
    assert exc.value.line == 4
