"""``/api/v1/lineage``, ``/api/v1/lineage/columns`` and ``/ui/lineage`` on ``sluice ui``'s
app, over a state with prod built and pull request 7 built by the real flow (its plan
changes ``jaffle.orders``, breaking): the graph is prod's models and what each reads,
coloured by a chosen plan, cut around a model; a column's sources and reach; the page
loads only Sluice's own files."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.web.routes import STATIC
from tests.helpers.web import KEY


@pytest.fixture(scope="module")
def pr_plan(ui: TestClient) -> str:
    plan_id = ui.get("/api/v1/environments/pr_7").json()["plan_id"]
    assert isinstance(plan_id, str)
    return plan_id


def test_the_schema_lists_the_lineage_endpoints_and_their_models(ui: TestClient) -> None:
    schema = ui.get("/openapi.json").json()
    for path in ("/api/v1/lineage", "/api/v1/lineage/columns"):
        assert set(schema["paths"][path]) == {"get"}, path
    assert {"LineageGraph", "LineageNode", "LineageEdge", "ColumnLineageView"} <= set(
        schema["components"]["schemas"]
    )


def test_the_graph_is_prods_models_and_what_each_reads(ui: TestClient) -> None:
    graph = ui.get("/api/v1/lineage").json()
    assert (graph["environment"], graph["plan_id"], graph["total"]) == ("prod", None, 11)
    kinds = {n["name"]: n["kind"] for n in graph["nodes"]}
    assert kinds["jaffle.orders"] == "FULL" and kinds["jaffle.stg_orders"] == "VIEW"
    assert kinds["jaffle.raw_orders"] == "SEED"
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert ("jaffle.stg_orders", "jaffle.orders") in edges
    assert ("jaffle.orders", "jaffle.customers") in edges
    assert all(n["impact"] is None for n in graph["nodes"])  # no plan, no colours


def test_a_plan_colours_each_model_by_its_impact(ui: TestClient, pr_plan: str) -> None:
    graph = ui.get("/api/v1/lineage", params={"plan": pr_plan}).json()
    assert (graph["environment"], graph["plan_id"]) == ("pr_7", pr_plan)
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert nodes["jaffle.orders"]["impact"] == "breaking"
    customers = nodes["jaffle.customers"]
    assert (customers["impact"], customers["category"]) == ("indirect", "breaking")
    assert customers["why"] == ["jaffle.orders"]
    assert nodes["jaffle.stg_orders"]["impact"] == "unchanged"
    assert ui.get("/api/v1/lineage", params={"plan": "0" * 32}).status_code == 404


def test_the_graph_is_cut_around_a_model(ui: TestClient) -> None:
    cut = ui.get("/api/v1/lineage", params={"focus": "jaffle.orders", "up": 1, "down": 0})
    graph = cut.json()
    names = {n["name"] for n in graph["nodes"]}
    assert names == {"jaffle.orders", "jaffle.stg_orders", "jaffle.stg_payments"}
    assert graph["focus"] == "jaffle.orders" and graph["total"] == 11
    assert {(e["source"], e["target"]) for e in graph["edges"]} == {
        ("jaffle.stg_orders", "jaffle.orders"),
        ("jaffle.stg_payments", "jaffle.orders"),
    }
    everything = ui.get("/api/v1/lineage", params={"focus": "jaffle.orders", "down": 50})
    assert "jaffle.customer_segments" in {n["name"] for n in everything.json()["nodes"]}
    assert ui.get("/api/v1/lineage", params={"focus": "jaffle.nothing"}).status_code == 404
    assert ui.get("/api/v1/lineage", params={"up": 51}).status_code == 422
    assert ui.get("/api/v1/lineage", params={"focus": "x" * 301}).status_code == 422


def test_a_models_columns_and_a_columns_sources_and_reach(ui: TestClient) -> None:
    listed = ui.get("/api/v1/lineage/columns", params={"model": "jaffle.orders"}).json()
    assert listed["column"] is None and listed["upstream"] == []
    assert [c["name"] for c in listed["columns"]][:3] == ["order_id", "customer_id", "order_date"]
    found = ui.get(
        "/api/v1/lineage/columns", params={"model": "jaffle.orders", "column": "ORDER_DATE"}
    ).json()
    assert found["column"] == "order_date"
    refs = [(r["model"], r["column"]) for r in found["upstream"]]
    assert refs == [("jaffle.stg_orders", "order_date"), ("jaffle.raw_orders", "order_date")]
    reached = {(r["model"], r["column"]) for r in found["downstream"]}
    assert ("jaffle.customers", "first_order") in reached
    assert ("jaffle.daily_revenue", "order_date") in reached
    assert "jaffle.daily_revenue" in found["rows"]  # it groups by the date
    # the Python model downstream cannot be followed: said, not guessed
    assert "Python" in found["unknown"]["jaffle.customer_segments"]


def test_an_unknown_model_column_or_plan_is_not_found(ui: TestClient, pr_plan: str) -> None:
    ask = "/api/v1/lineage/columns"
    assert ui.get(ask, params={"model": "jaffle.nothing"}).status_code == 404
    assert ui.get(ask, params={"model": "jaffle.orders", "column": "nope"}).status_code == 404
    assert ui.get(ask, params={"model": "jaffle.orders", "plan": "f" * 32}).status_code == 404
    assert ui.get(ask).status_code == 422  # model is required
    assert ui.get(ask, params={"model": "m" * 301}).status_code == 422
    in_pr = ui.get(ask, params={"model": "jaffle.orders", "plan": pr_plan, "column": "status"})
    assert in_pr.status_code == 200
    other = {"model": "jaffle.orders", "repo": "github:someone/else"}
    assert ui.get(ask, params=other).status_code == 404
    assert ui.get("/api/v1/lineage", params={"repo": "github:someone/else"}).status_code == 404


def test_the_page_loads_the_vendored_graph_library_and_its_own_script(
    ui: TestClient, pr_plan: str
) -> None:
    page = ui.get("/ui/lineage", params={"repo": KEY, "plan": pr_plan, "focus": "jaffle.orders"})
    assert page.status_code == 200
    text = page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    for script in ("vendor/cytoscape.min.js", "vendor/cytoscape-dagre.min.js", "lineage.js"):
        assert f'<script src="/ui/static/{script}"></script>' in text
        assert ui.get(f"/ui/static/{script}").status_code == 200
    assert "<script>" not in text and "style=" not in text  # nothing inline
    assert "http://" not in text and "https://" not in text
    assert f'data-graph="/api/v1/lineage?repo=github%3Aocto%2Fwarehouse&amp;plan={pr_plan}"' in (
        text
    )
    assert 'data-focus="jaffle.orders"' in text and f'value="{pr_plan}" selected' in text
    assert 'class="impact breaking"' in text  # the legend, with a plan
    assert ui.get("/ui/lineage", params={"plan": "0" * 32}).status_code == 404
    assert "MIT" in ui.get("/ui/static/vendor/NOTICE").text


def test_a_focus_is_shown_as_text_never_markup(ui: TestClient) -> None:
    page = ui.get("/ui/lineage", params={"focus": '"><script>alert(1)</script>'}).text
    assert 'data-focus="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in page


def test_a_plans_page_links_to_its_lineage(ui: TestClient, pr_plan: str) -> None:
    page = ui.get(f"/ui/plans/{pr_plan}").text
    assert f'href="/ui/lineage?repo=github%3Aocto%2Fwarehouse&amp;plan={pr_plan}"' in page


def test_every_static_file_is_in_the_packages_data() -> None:
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
    sluice = STATIC.parents[2]

    def packaged(path: str) -> bool:  # setuptools' glob: a * never crosses a /
        parts = path.split("/")
        return any(
            len(p.split("/")) == len(parts)
            and all(fnmatch.fnmatch(a, b) for a, b in zip(parts, p.split("/"), strict=True))
            for p in patterns["sluice"]
        )

    files = [p.relative_to(sluice).as_posix() for p in STATIC.rglob("*") if p.is_file()]
    assert "bot/web/static/vendor/cytoscape.min.js" in files
    assert [f for f in files if not packaged(f)] == []
