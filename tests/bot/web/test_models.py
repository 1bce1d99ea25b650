"""The models page (issue 44, item 6): each of prod's models with its kind, owner,
columns and types (declared, else inferred as the planner infers them), description,
audits, unit tests (as the last build testing it ran them: pull request 7's, by the real
flow on the scripted warehouse) and its table's measured size; on ``/api/v1/models`` and
the pages, user text escaped."""

from __future__ import annotations

from fastapi.testclient import TestClient

from sluice.bot.web.reader import TEST_CHARS
from sluice.core.spark.writes import JobWrites
from sluice.core.state import open_state
from tests.helpers.web import OWNER_MARK, WebWorld


def _model(ui: TestClient, name: str) -> dict:  # type: ignore[type-arg]
    answer = ui.get(f"/api/v1/models/{name}")
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_a_model_has_its_kind_owner_columns_types_audits_and_size(ui: TestClient) -> None:
    orders = _model(ui, "jaffle.orders")
    assert (orders["kind"], orders["owner"]) == ("FULL", "finance")
    assert orders["description"].startswith("One row per order")
    assert orders["audits"] == ["unique_values", "not_null"]
    columns = {c["name"]: c for c in orders["columns"]}
    # a SQL model declares none: inferred through its parents (seeds' CSV types)
    assert orders["columns_inferred"]
    assert columns["order_id"]["type"] == "INT" and columns["order_date"]["type"] == "DATE"
    assert columns["credit_card_amount"]["type"] == "DOUBLE"
    assert columns["order_id"]["description"] == "The order's id in the shop database"
    # the scripted warehouse measured the built table: 10 rows, 1,000 bytes
    assert (orders["bytes"], orders["rows"]) == (1000, 10) and orders["measured"] > 0
    view = _model(ui, "jaffle.stg_orders")
    assert view["kind"] == "VIEW" and view["bytes"] is None  # a view holds no table
    # a Python model declares its columns: those, not inferred
    python = _model(ui, "jaffle.customer_segments")
    assert not python["columns_inferred"]
    assert ("segment", "STRING") in [(c["name"], c["type"]) for c in python["columns"]]


def test_a_model_s_unit_tests_are_the_last_build_s(ui: TestClient) -> None:
    pr_plan = ui.get("/api/v1/environments/pr_7").json()["plan_id"]
    [test] = _model(ui, "jaffle.customers")["tests"]
    assert test["name"] == "test_customers_aggregates_orders" and test["passed"]
    assert test["plan_id"] == pr_plan and test["diff"] == ""
    assert _model(ui, "jaffle.orders")["tests"] == []  # no test of it
    page = ui.get("/ui/models/jaffle.customers").text
    assert 'data-testid="tests"' in page and "test_customers_aggregates_orders" in page
    assert "passed" in page
    assert "No build has run a unit test of this model." in ui.get("/ui/models/jaffle.orders").text


def test_the_list_and_the_page_show_sizes_and_escape_user_text(ui: TestClient) -> None:
    listed = ui.get("/api/v1/models", params={"limit": 200}).json()["items"]
    sizes = {m["name"]: (m["bytes"], m["rows"]) for m in listed}
    assert sizes["jaffle.orders"] == (1000, 10) and sizes["jaffle.stg_orders"] == (None, None)
    assert all(m["tests"] is None for m in listed)  # one model's answer only
    page = ui.get("/ui/models").text
    assert "<td>1000 B</td><td>10</td>" in page
    hostile = ui.get("/ui/models/jaffle.hostile").text
    escaped = OWNER_MARK.replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in hostile and OWNER_MARK not in hostile
    assert "<code>marker</code></td><td><code>STRING</code>" in hostile
    assert "Its prod table: 1000 B, 10 rows, measured" in hostile


def test_a_huge_unit_test_result_is_not_read_by_the_model_page(
    world: WebWorld, ui: TestClient
) -> None:
    # A pull request's driver may store a result of up to 1 MiB (the job checker's bound):
    # the model page reads results of at most TEST_CHARS, so a build's 1,000 such tests
    # cost it nothing; the last readable build's tests are shown.
    spec = {"job_id": "preview-huge", "kind": "preview", "plan_id": None, "steps": [
        {"type": "unit_test", "name": "test_huge", "model": "jaffle.customers"}]}  # fmt: skip
    store = open_state(world.bot.url)
    try:
        JobWrites(spec, store).apply(  # type: ignore[arg-type]
            {
                "event": "write",
                "op": "save_result",
                "kind": "unit_test",
                "name": "test_huge",
                "passed": False,
                "payload": {"diff": "x" * (TEST_CHARS + 1)},
            }
        )
        assert [r.name for r in store.get_results(job_id="preview-huge")] == ["test_huge"]
    finally:
        store.close()
    tests = [t["name"] for t in _model(ui, "jaffle.customers")["tests"]]
    assert tests == ["test_customers_aggregates_orders"]
