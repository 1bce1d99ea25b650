"""A pull request's table diffs with their example rows (issue 44, the plan page): the
result a PR's job stores (``JobResult`` of kind ``table_diff``, the form
``TableDiffResult.to_json`` gives) read back from the real state, its samples paginated on
``/api/v1/pulls/{number}/table-diffs/{model}`` and its page, bounded, escaped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sluice.core.state import JobResult, open_state
from sluice.core.tablediff.result import ColumnStats, Samples, TableDiffResult
from tests.helpers.web import KEY, NOW, WebWorld, web_world

MODEL = "jaffle.orders"
MARK = '<script>alert("row")</script>'
DIFFERING = 57  # more than a page (50) of the page's rows
LONG = "x" * 1000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("table-diffs"))
    store = open_state(made.bot.url)
    try:
        pr = store.get_environment("pr_7")
        assert pr is not None
        diff = TableDiffResult(
            name=MODEL,
            source="prod",
            target="pr_7",
            source_table="prod_orders",
            target_table="pr_orders",
            keys=("order_id",),
            decimals=3,
            tolerance=None,
            where=None,
            source_rows=100,
            target_rows=99,
            joined=99,
            source_only=1,
            target_only=0,
            differing_rows=DIFFERING,
            columns={"status": ColumnStats(42, DIFFERING), "amount": ColumnStats(99, 0)},
            samples=Samples(
                source_only=({"order_id": 5, "status": MARK, "amount": None},),
                differing=(
                    *(
                        {"order_id": n, "status": {"source": "placed", "target": f"{MARK}{n}"}}
                        for n in range(DIFFERING - 1)
                    ),
                    {"order_id": 999, "status": {"source": LONG, "target": None}},
                ),
            ),
        )
        store.save_results(
            [
                JobResult(
                    job_id="preview-pr_7-later",
                    plan_id=pr.plan_id,
                    kind="table_diff",
                    name=MODEL,
                    passed=False,
                    payload=dict(diff.to_json()),
                    created_ts=NOW + 1,
                )
            ]
        )
    finally:
        store.close()
    yield made
    made.close()


API = f"/api/v1/pulls/7/table-diffs/{MODEL}"
PAGE = f"/ui/pulls/7/table-diffs/{MODEL}"


def test_the_samples_are_the_stored_rows_a_page_at_a_time(ui: TestClient) -> None:
    first = ui.get(API, params={"limit": 20}).json()
    assert first["kind"] == "differing" and first["columns"] == ["order_id", "status"]
    assert first["diff"]["samples"] == {"differing": DIFFERING, "source_only": 1, "target_only": 0}
    assert first["diff"]["changed_columns"] == ["status"] and first["diff"]["keys"] == ["order_id"]
    rows = first["rows"]
    assert (rows["total"], rows["offset"], rows["limit"]) == (DIFFERING, 0, 20)
    assert [r["order_id"] for r in rows["items"]] == list(range(20))
    assert rows["items"][3]["status"] == {"source": "placed", "target": f"{MARK}3"}
    last = ui.get(API, params={"offset": 50, "limit": 20}).json()["rows"]["items"]
    assert [r["order_id"] for r in last] == [*range(50, DIFFERING - 1), 999]
    assert last[-1]["status"]["source"] == LONG  # the API gives a value whole
    only = ui.get(API, params={"kind": "source_only"}).json()
    assert only["columns"][0] == "order_id"  # the keys first
    assert sorted(only["columns"]) == ["amount", "order_id", "status"]
    assert only["rows"]["items"] == [{"order_id": 5, "status": MARK, "amount": None}]
    assert ui.get(API, params={"kind": "target_only"}).json()["rows"]["total"] == 0


def test_the_pull_request_page_links_to_the_samples(ui: TestClient) -> None:
    page = ui.get("/ui/pulls/7").text
    link = "/ui/pulls/7/table-diffs/jaffle.orders?repo=github%3Aocto%2Fwarehouse&amp;kind="
    assert f'{link}differing">{DIFFERING} differing</a>' in page
    assert f'{link}source_only">1 only in prod</a>' in page
    assert "only in pr_7</a>" not in page  # none kept
    # the diff run again: only its last result is shown, as the samples page reads it
    diffs = page[page.index('data-testid="table-diffs"') :]
    diffs = diffs[: diffs.index("</table>")]
    assert "10 → 99" not in diffs and "100 → 99" in diffs
    names = [d["name"] for d in ui.get("/api/v1/pulls/7").json()["table_diffs"]]
    assert names.count(MODEL) == 1 and len(names) == len(set(names)) == 4


def test_the_samples_page_is_paginated_and_escaped(ui: TestClient) -> None:
    html = ui.get(PAGE).text
    assert 'data-testid="samples"' in html and "<script>alert" not in html
    assert "<code>placed → &lt;script&gt;alert(&#34;row&#34;)&lt;/script&gt;7</code>" in html
    assert html.count("placed → ") == 50  # one page
    assert "1\u201350 of 57" in html  # the pager: 1-50 of 57
    assert "offset=50&amp;kind=differing" in html  # the next page keeps its kind
    rest = ui.get(PAGE, params={"offset": 50}).text
    assert rest.count("placed → ") == DIFFERING - 1 - 50 and "51\u201357 of 57" in rest
    assert "x" * 299 + "…" in rest and LONG not in rest  # a long value cut
    assert "→ NULL" in rest
    only = ui.get(PAGE, params={"kind": "source_only"}).text
    assert "<code>&lt;script&gt;alert(&#34;row&#34;)&lt;/script&gt;</code>" in only
    assert "<code>NULL</code>" in only


def test_bounds_and_what_is_not_found(ui: TestClient) -> None:
    for params in (
        {"limit": 201},
        {"limit": 0},
        {"offset": -1},
        {"offset": 1_000_001},
        {"kind": "both"},
    ):
        assert ui.get(API, params=params).status_code == 422, params
        if "limit" not in params:  # the page shows 50 rows: it has no limit
            assert ui.get(PAGE, params=params).status_code == 422, params
    for path in (API, PAGE):
        assert ui.get(path, params={"repo": "github:octo/other"}).status_code == 404, path
        assert ui.get(path, params={"repo": KEY}).status_code == 200, path
        assert ui.get(path.replace("/7/", "/8/")).status_code == 404, path
        assert ui.get(path.replace(MODEL, "jaffle.nothing")).status_code == 404, path
    hostile = ui.get("/ui/pulls/7/table-diffs/%3Cscript%3Ex")
    assert hostile.status_code == 404 and "<script>" not in hostile.text


def test_the_schema_lists_the_samples(ui: TestClient) -> None:
    schema = ui.get("/openapi.json").json()
    assert set(schema["paths"]["/api/v1/pulls/{number}/table-diffs/{model}"]) == {"get"}
    assert {"TableDiffSamples", "SampleCounts"} <= set(schema["components"]["schemas"])
