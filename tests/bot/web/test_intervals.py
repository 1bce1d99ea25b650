"""Prod history's intervals calendar (issue 44): the intervals each model of an
environment holds, read from the real state (prod built by the workflow on the scripted
warehouse, then gaps cut with the state's own writer), as spans and calendar cells, on
``/api/v1/environments/{name}/intervals`` and its page; paginated and bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sluice.bot.web.calendar import fill, window
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from sluice.core.timeutil import DAY_MS, to_ms
from tests.helpers.web import KEY, WebWorld, web_world

ORDERS = "jaffle.orders"
CUT = ("2018-02-01", "2018-02-03")  # two whole days
NOON = to_ms("2018-03-10") + DAY_MS // 2  # half a day


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("intervals"))
    store = open_state(made.bot.url)
    try:
        prod = store.get_environment(PROD)
        assert prod is not None
        [ref] = [r for r in prod.snapshots if r.name == ORDERS]
        store.remove_intervals(ORDERS, ref.version, to_ms(CUT[0]), to_ms(CUT[1]))
        store.remove_intervals(ORDERS, ref.version, to_ms("2018-03-10"), NOON)
    finally:
        store.close()
    yield made
    made.close()


def _calendar(ui: TestClient, **params: object) -> dict:  # type: ignore[type-arg]
    answer = ui.get(f"/api/v1/environments/{PROD}/intervals", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_the_calendar_shows_each_models_spans_and_its_gaps(ui: TestClient) -> None:
    calendar = _calendar(ui, unit="day", until="2018-03-31", limit=200)
    models = {m["name"]: m for m in calendar["models"]["items"]}
    orders = models[ORDERS]
    assert [(s["start_text"], s["end_text"]) for s in orders["spans"]] == [
        ("2018-01-01", "2018-02-01"),
        ("2018-02-03", "2018-03-10"),
        ("2018-03-10 12:00:00", "2027-01-15"),
    ]
    assert orders["spans_total"] == 3 and not orders["view"]
    days = {
        f"{c['group']}-{int(c['label']):02d}": state
        for c, state in zip(calendar["cells"], orders["cells"], strict=True)
    }
    assert len(days) == 92 and calendar["unit"] == "day"
    assert calendar["cells"][-1]["group"] == "2018-03" and calendar["cells"][-1]["label"] == "31"
    assert days["2017-12-31"] == "none"  # before its start
    assert days["2018-01-01"] == days["2018-01-31"] == days["2018-02-03"] == "full"
    assert days["2018-02-01"] == days["2018-02-02"] == "none"  # the gap cut
    assert days["2018-03-10"] == "part" and days["2018-03-11"] == "full"
    # a model built whole over the window, a view (built, no time range)
    assert set(models["jaffle.customers"]["cells"][2:]) == {"full"}
    assert models["jaffle.stg_orders"]["view"] and models["jaffle.stg_orders"]["spans"] == []
    # months: the cut months are part built, a window later is offered, an earlier one too
    months = _calendar(ui, unit="month", until="2018-04-30")
    orders = next(m for m in months["models"]["items"] if m["name"] == ORDERS)
    assert orders["cells"][-4:] == ["full", "part", "part", "full"]
    assert months["later"] is not None and months["earlier"] == "2014-04-30"


def test_auto_shows_months_for_years_of_intervals(ui: TestClient) -> None:
    calendar = _calendar(ui)
    assert calendar["unit"] == "month" and len(calendar["cells"]) == 48
    assert calendar["later"] is None  # it ends with the latest built interval


def test_models_are_paginated_and_bounded(ui: TestClient) -> None:
    everything = _calendar(ui, limit=200)["models"]
    first = _calendar(ui, limit=4)["models"]
    rest = _calendar(ui, limit=200, offset=4)["models"]
    assert everything["total"] == first["total"] == 11
    names = [m["name"] for m in everything["items"]]
    assert names == sorted(names) and len(names) == 11
    assert [m["name"] for m in first["items"] + rest["items"]] == names
    path = f"/api/v1/environments/{PROD}/intervals"
    for params in (
        {"limit": 201},
        {"limit": 0},
        {"offset": -1},
        {"offset": 1_000_001},
        {"unit": "week"},
        {"until": "2018-02-30"},
        {"until": "1969-12-31"},
        {"until": "9001-01-01"},
        {"until": "yesterday"},
    ):
        assert ui.get(path, params=params).status_code == 422, params
        if "limit" not in params:  # the page shows PER_PAGE models: it has no limit
            page = ui.get(f"/ui/environments/{PROD}/intervals", params=params)
            assert page.status_code == 422, params


def test_the_page_draws_the_calendar(ui: TestClient) -> None:
    page = ui.get(
        f"/ui/environments/{PROD}/intervals", params={"unit": "day", "until": "2018-03-31"}
    )
    assert page.status_code == 200
    html = page.text
    assert 'data-testid="calendar"' in html and "<script" not in html
    assert '<td class="cell none" title="2018-02-01: none">' in html
    assert '<td class="cell part" title="2018-03-10: part">' in html
    assert "2018-02-03 → 2018-03-10" in html
    assert "a view: built, it holds no time range" in html
    assert "unit=day&amp;until=2017-12-29" in html  # the window before, same unit
    assert "/ui/environments/prod/intervals" in ui.get("/ui/history").text


def test_another_repository_or_environment_is_not_found(ui: TestClient) -> None:
    other = {"repo": "github:octo/other"}
    for path in (f"/api/v1/environments/{PROD}/intervals", f"/ui/environments/{PROD}/intervals"):
        assert ui.get(path, params=other).status_code == 404, path
        assert ui.get(path, params={"repo": KEY}).status_code == 200, path
    for path in ("/api/v1/environments/pr_8/intervals", "/ui/environments/pr_8/intervals"):
        assert ui.get(path).status_code == 404, path
    hostile = ui.get("/ui/environments/%3Cscript%3Ex/intervals")
    assert hostile.status_code == 404 and "<script>" not in hostile.text


def test_the_schema_lists_the_calendar(ui: TestClient) -> None:
    schema = ui.get("/openapi.json").json()
    assert set(schema["paths"]["/api/v1/environments/{name}/intervals"]) == {"get"}
    assert {"IntervalCalendar", "ModelIntervals", "Span"} <= set(schema["components"]["schemas"])


def test_fill_over_cells_is_exact_at_their_edges() -> None:
    cells = window("day", 10 * DAY_MS - 1, count=3)  # days 7, 8 and 9 of the epoch
    assert fill([], cells) == ["none"] * 3
    assert fill([(7 * DAY_MS, 8 * DAY_MS)], cells) == ["full", "none", "none"]
    assert fill([(7 * DAY_MS, 8 * DAY_MS - 1)], cells) == ["part", "none", "none"]
    spans = [(8 * DAY_MS, 8 * DAY_MS + 5), (8 * DAY_MS + 5, 9 * DAY_MS), (9 * DAY_MS + 1, 10**15)]
    assert fill(spans, cells) == ["none", "full", "part"]
