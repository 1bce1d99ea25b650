"""The lineage page as a person uses it, on a generated project of 1,000 models (plus its
ten external tables): Debian's Chromium (Playwright, no browser download) on ``sluice
ui``'s app served by a real uvicorn on loopback. The whole graph is drawn and laid out,
a model is searched and focused on, its hidden neighbours expanded and collapsed, a
column picked and followed upstream and downstream, with the plan of ``pr_1`` colouring
the nodes: all without a console error (a refusal of the Content-Security-Policy is one).
Slow: it starts Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sluice.bot.web.standalone import ui_app
from tests.helpers.lineage_world import HOSTILE, LineageWorld, lineage_world
from tests.helpers.web import Watched, chromium, served

pytestmark = pytest.mark.slow

MODELS = 1000
ALL = MODELS + 10 + 1  # the generated models, their ten external tables, hostile.marker
READY = "[data-testid=lineage-graph][data-ready=true]"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> LineageWorld:
    return lineage_world(tmp_path_factory.mktemp("lineage"), MODELS)


@pytest.fixture(scope="module")
def origin(world: LineageWorld) -> Iterator[str]:
    with served(ui_app(world.site())) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def shown(page: Any) -> int:
    return int(page.get_attribute("[data-testid=lineage-graph]", "data-shown"))


def test_a_thousand_models_are_searched_focused_and_a_column_followed(
    browser: Any, origin: str, world: LineageWorld
) -> None:
    watched = Watched(browser)
    page = watched.page
    try:
        page.goto(f"{origin}/ui/lineage?plan={world.plan_id}")
        page.wait_for_selector(READY, timeout=30_000)
        assert shown(page) == ALL  # the whole graph, laid out
        assert f"of {ALL} models" in page.inner_text("[data-testid=lineage-state]")
        # search by part of a name: the matches are listed, one is chosen
        page.fill("[data-testid=lineage-search]", "model_6")
        page.click("[data-testid=lineage-focus]")
        matches = page.locator("[data-testid=lineage-matches] button")
        assert matches.count() > 10
        page.click(f"[data-testid=lineage-matches] button:text-is('{world.changed}')")
        page.wait_for_selector(READY)
        focused = shown(page)
        assert 1 < focused < 200  # two steps either way
        assert world.changed in page.inner_text("[data-testid=lineage-panel] h2")
        assert "breaking" in page.inner_text("[data-testid=lineage-panel]")  # pr_1's change
        # expand the focus: its hidden neighbours come in; collapse its downstream: they go
        page.click("[data-testid=lineage-expand]")
        page.wait_for_selector(READY)
        assert shown(page) >= focused
        page.click("[data-testid=lineage-collapse-down]")
        page.wait_for_selector(READY)
        assert shown(page) < focused
        # pick a column: where it comes from, what it reaches
        page.click("[data-testid=lineage-columns] button:text-is('v0')")
        page.wait_for_selector("[data-testid=lineage-column][data-ready=true]")
        upstream = page.inner_text("[data-testid=lineage-upstream]")
        downstream = page.inner_text("[data-testid=lineage-downstream]")
        assert ".v0" in upstream and "raw.source_" in upstream  # to the external tables
        assert "layer_" in downstream and "none" not in downstream
        page.wait_for_selector(READY)
        # a column named like an HTML tag is a column name, shown as text
        page.fill("[data-testid=lineage-search]", "hostile.marker")
        page.keyboard.press("Enter")
        page.wait_for_selector(READY)
        page.get_by_role("button", name=HOSTILE, exact=True).click()
        page.wait_for_selector("[data-testid=lineage-column][data-ready=true]")
        assert "layer_0.model_0" in page.inner_text("[data-testid=lineage-upstream]")
        assert page.locator("[data-testid=lineage-panel] img").count() == 0
    finally:
        watched.close()
    assert watched.problems == []
