"""Prod history's scheduled runs (issue 44): each run the service's schedule made of prod
(the real flow's scheduled run on the scripted warehouse, recorded in the state by
core/runs.py) on ``/api/v1/history/runs`` and the history page: when, how long, which
models and intervals, ok or failed (its error escaped); a run that found nothing due is
not listed; the history marks a run's plan as a run, not a promotion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.web import pages
from sluice.bot.web.standalone import ui_app
from sluice.core import rollback, runs, workflow
from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Script
from sluice.core.state import open_state
from sluice.core.timeutil import DAY_MS
from tests.helpers.web import (
    HEAD,
    KEY,
    ORDER_DAYS,
    WebWorld,
    chromium,
    scheduled_run,
    served,
    web_world,
)
from tests.security.github_bot import NOW, C, merged, review

LATER = NOW + 3 * DAY_MS + 3_600_000  # three days and an hour after prod was built
FAILURE = "AnalysisException: <b>boom</b> & <script>alert(3)</script>"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("runs"), models={"order_days.sql": ORDER_DAYS})
    scheduled_run(made, LATER)  # three days due: ok
    scheduled_run(made, LATER + 60_000)  # a minute later nothing is due: not recorded
    made.warehouse.script = Script(fail={"build *": FAILURE})
    with pytest.raises(SluiceError, match="AnalysisException"):
        scheduled_run(made, LATER + 2 * DAY_MS)  # two more days due: the job fails
    yield made
    made.close()


@pytest.fixture(scope="module")
def ui(world: WebWorld) -> Iterator[TestClient]:
    with TestClient(ui_app(world.ui_site())) as client:
        yield client


def _runs(ui: TestClient, **params: object) -> dict:  # type: ignore[type-arg]
    answer = ui.get("/api/v1/history/runs", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_the_api_lists_each_run_with_its_outcome(world: WebWorld, ui: TestClient) -> None:
    runs = _runs(ui)
    assert runs["total"] == 2  # the run with nothing due is not one
    failed, ok = runs["items"]  # newest first
    assert (ok["outcome"], failed["outcome"]) == ("ok", "failed")
    assert ok["at"] == LATER and failed["at"] == LATER + 2 * DAY_MS
    assert ok["error"] is None and "AnalysisException: <b>boom</b>" in failed["error"]
    for run in (ok, failed):
        assert run["environment"] == "prod" and run["plan_id"]
        assert run["started"] <= run["finished"] and run["seconds"] >= 0
        assert run["job_id"].startswith(f"apply-prod-{run['plan_id'][:12]}-")
    # what the warehouse was asked to build is what the record lists
    steps = [s for s in world.warehouse.jobs[-2]["steps"] if s["type"] == "build"]
    built = {s["model"]: s.get("intervals", []) for s in steps}
    models = {m["name"]: m for m in ok["models"]}
    assert set(models) <= set(built) and ok["models_total"] == len(ok["models"])
    orders = models["jaffle.order_days"]
    assert orders["intervals"] == 3 and orders["end"] - orders["start"] == 3 * DAY_MS
    assert ok["intervals"] == sum(m["intervals"] for m in ok["models"])
    assert ok["tables_built"] >= 1 and ok["spark_seconds"] is not None
    assert {m["name"]: m["intervals"] for m in failed["models"]}["jaffle.order_days"] == 2
    assert failed["tables_built"] == 0


def test_runs_are_paginated_and_bounded(ui: TestClient) -> None:
    first, second = _runs(ui, limit=1), _runs(ui, limit=1, offset=1)
    assert first["total"] == second["total"] == 2
    assert first["items"][0]["outcome"] == "failed" and second["items"][0]["outcome"] == "ok"
    for params in ({"limit": 201}, {"limit": 0}, {"offset": -1}):
        assert ui.get("/api/v1/history/runs", params=params).status_code == 422, params
    assert ui.get("/ui/history", params={"runs_offset": -1}).status_code == 422
    assert ui.get("/api/v1/history/runs", params={"repo": "github:octo/other"}).status_code == 404


def test_the_history_page_shows_the_runs_escaped(ui: TestClient) -> None:
    failed, ok = _runs(ui)["items"]
    page = ui.get("/ui/history", params={"repo": KEY})
    assert page.status_code == 200
    html = page.text
    runs = html[html.index('data-testid="runs"') :]
    assert runs.count('<td class="status ok">ok</td>') == 1
    assert runs.count('<td class="status failed">failed</td>') == 1
    for run in (ok, failed):  # each run's own count
        assert f"{run['intervals']} intervals in {run['models_total']} model" in runs
    assert "<code>jaffle.order_days</code>: " in runs
    assert "&lt;b&gt;boom&lt;/b&gt; &amp; &lt;script&gt;alert(3)&lt;/script&gt;" in runs
    assert "<script>alert(3)" not in html and "<b>boom" not in html


def test_the_history_marks_a_runs_plan_as_a_run(ui: TestClient) -> None:
    history = ui.get("/api/v1/history").json()["items"]
    kinds = [h["kind"] for h in history]
    assert kinds[0] == "run" and "promotion" in kinds[1:]  # the failed run never became prod's
    ok = _runs(ui)["items"][1]
    assert history[0]["plan_id"] == ok["plan_id"] and history[0]["changed"] == []


def test_the_schema_lists_the_runs(ui: TestClient) -> None:
    schema = ui.get("/openapi.json").json()
    assert set(schema["paths"]["/api/v1/history/runs"]) == {"get"}
    assert {"ScheduledRun", "RunModel"} <= set(schema["components"]["schemas"])


def test_a_person_opens_a_runs_models_in_the_browser(world: WebWorld) -> None:
    """In Chromium: the history's runs, a run's models opened (a details element, no
    script), the failed run's error as text; no console error."""
    problems: list[str] = []
    with served(ui_app(world.ui_site())) as origin, chromium() as browser:
        page = browser.new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        answer = page.goto(f"{origin}/ui/history")
        assert answer is not None and answer.status == 200
        runs = page.locator("[data-testid=runs] tbody tr")
        assert runs.count() == 2
        failed, ok = runs.nth(0), runs.nth(1)
        assert failed.locator("td.status").inner_text() == "failed"
        assert "<script>alert(3)</script>" in failed.locator("pre").inner_text()
        assert not ok.locator("ul.run-models").is_visible()
        ok.locator("summary").click()
        assert "jaffle.order_days" in ok.locator("ul.run-models").inner_text()
        page.close()
    assert problems == []


def test_the_page_lists_a_runs_first_models_and_counts_the_rest(
    ui: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "RUN_MODELS", 0)  # a run of more models than the page lists
    failed, ok = _runs(ui)["items"]
    html = ui.get("/ui/history").text
    for run in (ok, failed):
        assert f"<li>and {run['models_total']} more (the API lists up to 1,000)</li>" in html
    assert "<code>jaffle.order_days</code>: " not in html


def test_a_run_after_a_rollback_is_a_run_not_another_rollback(tmp_path: Path) -> None:
    """PR 7 promoted, then `sluice rollback prod`, then `sluice run prod` from the
    checkout prod runs again: the run points prod at the same tables as the rollback and
    as the first build, and the history calls it a run."""
    world = web_world(tmp_path, models={"order_days.sql": ORDER_DAYS})
    try:
        bot, github = world.bot, world.github
        github.add_review(7, "bob", "APPROVED", HEAD)
        bot.deliver("pull_request_review", review(7, "bob", HEAD, 1))
        merge = "e" * 40
        github.commit(merge, dict(github.files[HEAD]), parents=(C, HEAD), branch="main")
        github.close_pull(7, merged=True)
        bot.deliver("pull_request", merged(7, HEAD, merge))
        project = load_project(bot.root / f"tree-{C[:6]}", use_cache=False)
        store = open_state(bot.url)
        try:
            back = rollback.plan_rollback(store, PROD, now=NOW + 1)
            workflow.apply_plan(project, store, back.plan, world.warehouse.runner(), now=NOW + 1)
            with runs.recorded(store, PROD, now=LATER) as run:  # as `sluice run prod` does
                run.plan = workflow.plan_run(project, store, PROD, now=LATER)
                assert run.plan.backfill
                workflow.apply_plan(project, store, run.plan, world.warehouse.runner(), now=LATER)
        finally:
            store.close()
        with TestClient(ui_app(world.ui_site())) as client:
            history = client.get("/api/v1/history").json()["items"]
            [recorded] = client.get("/api/v1/history/runs").json()["items"]
    finally:
        world.close()
    assert [h["kind"] for h in history] == ["run", "rollback", "promotion", "promotion"]
    assert history[0]["plan_id"] == recorded["plan_id"] and recorded["outcome"] == "ok"
    assert history[2]["source"] == "pull request #7" and history[0]["source"] is None
