"""The UI as a person uses it: Debian's Chromium (Playwright, no browser download) on
``sluice ui``'s app served by a real uvicorn on loopback, over a state with prod built and
pull request 7 built by the real flow (scripted runner, in-memory GitHub). Each page opens
without a console error (the Content-Security-Policy's refusals are console errors too),
nothing a person wrote runs as script, and a job's log is followed live to its end.
Slow: each module starts Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sluice.bot.web import logs
from sluice.bot.web.standalone import ui_app
from tests.helpers.web import TITLE, Watched, WebWorld, chromium, served, web_world

pytestmark = pytest.mark.slow

PAGES = {
    "/ui/environments": "Environments",
    "/ui/environments/pr_7": "Environment pr_7",
    "/ui/pulls": "Pull requests",
    "/ui/pulls/7": f"#7 {TITLE}",
    "/ui/plans/{plan}": "Plan ",
    "/ui/jobs": "Queue and jobs",
    "/ui/history": "Prod history",
    "/ui/models": "Models in prod",
    "/ui/models/jaffle.hostile": "Model jaffle.hostile",
    "/ui/environments/prod/intervals": "Intervals prod holds",
    "/ui/environments/pr_7/intervals?unit=day&until=2018-03-31": "Intervals pr_7 holds",
    "/ui/pulls/7/table-diffs/jaffle.orders": "Table diff of jaffle.orders",
}
JOB = "preview-pr_7-0123456789ab-1800000000000"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("browser"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def origin(world: WebWorld) -> Iterator[str]:
    with served(ui_app(world.ui_site())) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_every_page_opens_without_a_console_error_or_a_script_of_the_users(
    browser: Any, origin: str
) -> None:
    watched = Watched(browser)
    page = watched.page
    try:
        page.goto(f"{origin}/")
        assert page.url.startswith(f"{origin}/ui/environments")
        plan = page.get_attribute("a[href^='/ui/plans/']", "href")
        assert plan is not None
        plan_id = plan.split("/ui/plans/", 1)[1].split("?", 1)[0]
        for path, heading in PAGES.items():
            answer = page.goto(origin + path.format(plan=plan_id))
            assert answer is not None and answer.status == 200, path
            assert page.locator("h1").inner_text().startswith(heading.rstrip()), path
            assert page.locator("link[rel=stylesheet]").count() == 1
            # the stylesheet applied: the header is laid out as a flex row
            assert page.eval_on_selector("header", "e => getComputedStyle(e).display") == "flex"
        # a person follows the links from the environments to the PR, its plan, a model
        page.goto(f"{origin}/ui/environments")
        page.click("a[href^='/ui/pulls/7']")
        assert page.locator("[data-testid=title]").inner_text() == TITLE
        assert page.locator(".diff .add").count() >= 1
        page.click("nav >> text=Models")
        page.fill("input[name=q]", "segments")
        page.click("button[type=submit]")
        page.click("text=jaffle.customer_segments")
        assert "segment" in page.locator("[data-testid=columns]").inner_text()
    finally:
        watched.close()
    assert watched.problems == []


def test_a_jobs_log_is_followed_live_to_its_end(
    browser: Any, origin: str, world: WebWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each response follows a moment only: the page goes on through reconnections
    monkeypatch.setattr(logs, "SPAN", 0.3)
    world.logs.mkdir(parents=True, exist_ok=True)
    log = world.logs / f"{JOB}.log"
    log.write_text("the job started\n")
    watched = Watched(browser)
    page = watched.page
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/log?" in r.url else None)
    try:
        page.goto(f"{origin}/ui/jobs")
        page.click(f"text={JOB}")
        shown = page.locator("[data-testid=log]")
        shown.get_by_text("the job started").wait_for()
        assert page.locator("[data-testid=log-state]").inner_text() == "following…"
        while len(streams) < 3:  # it reconnected, twice, before the job writes again
            page.wait_for_event("request")
        # the job goes on writing while the page is open
        with log.open("a") as file:
            file.write("building jaffle.orders <b>bold?</b>\n")
            file.write(f'@@sluice {{"event": "job_done", "job_id": "{JOB}", "results": {{}}}}\n')
        page.wait_for_selector("[data-testid=log-state][data-ended=true]")
        lines = shown.inner_text().splitlines()
        assert len(lines) == 3  # each line once, across the reconnections
        assert lines[0] == "the job started"
        assert lines[1] == "building jaffle.orders <b>bold?</b>"  # text, not markup
        assert lines[2].startswith('@@sluice {"event": "job_done"')
        assert page.locator("[data-testid=log] b").count() == 0
        assert "ended" in page.locator("[data-testid=log-state]").inner_text()
    finally:
        watched.close()
    assert watched.problems == []
