"""The web UI's refusals (issue 44): user text (a PR's title, a model's description, SQL)
shown escaped on every page; another repository's ids not found; the read-only API
refusing any other method than GET; the service showing nothing without
SLUICE_UI_PUBLIC (sign-in comes later)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sluice.bot.web.standalone import ui_app
from tests.helpers.web import OWNER_MARK, SQL_MARK, TITLE, WebWorld, web_world

PAGES = (
    "/ui/environments",
    "/ui/environments/pr_7",
    "/ui/pulls",
    "/ui/pulls/7",
    "/ui/plans/{plan}",
    "/ui/jobs",
    "/ui/history",
    "/ui/models",
    "/ui/models/jaffle.hostile",
    "/ui/environments/pr_7/intervals",
    "/ui/pulls/7/table-diffs/jaffle.orders",
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("hostile-web"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def ui(world: WebWorld) -> Iterator[TestClient]:
    with TestClient(ui_app(world.ui_site())) as client:
        yield client


def _plan(ui: TestClient) -> str:
    return str(ui.get("/api/v1/environments/pr_7").json()["plan_id"])


def test_user_text_is_escaped_on_every_page(ui: TestClient) -> None:
    plan = _plan(ui)
    shown: dict[str, str] = {}
    for path in PAGES:
        page = ui.get(path.format(plan=plan))
        assert page.status_code == 200, path
        # the only script element of any page is Sluice's own file
        scripts = re.findall(r"<script\b[^>]*>", page.text, flags=re.IGNORECASE)
        assert set(scripts) <= {'<script src="/ui/static/log.js">'}, path
        shown[path] = page.text
    title = "&lt;script&gt;alert(&#34;title&#34;)&lt;/script&gt; Drop returned orders"
    for path in ("/ui/environments", "/ui/pulls", "/ui/pulls/7"):
        assert title in shown[path], path
    sql = SQL_MARK.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
    assert sql in shown["/ui/pulls/7"] and sql in shown["/ui/plans/{plan}"]
    described = OWNER_MARK.replace("<", "&lt;").replace(">", "&gt;")
    assert described in shown["/ui/models/jaffle.hostile"]
    assert described in shown["/ui/models"]
    assert TITLE not in "".join(shown.values())


def test_another_repositorys_ids_are_not_found(ui: TestClient) -> None:
    plan = _plan(ui)
    other = {"repo": "github:octo/other"}
    for path in (
        "/api/v1/environments",
        "/api/v1/environments/prod",
        f"/api/v1/plans/{plan}",
        "/api/v1/pulls/7",
        "/api/v1/jobs",
        "/api/v1/history",
        "/api/v1/history/runs",
        "/api/v1/models/jaffle.orders",
        "/api/v1/environments/prod/intervals",
        "/api/v1/pulls/7/table-diffs/jaffle.orders",
        "/ui/environments/prod/intervals",
        "/ui/pulls/7/table-diffs/jaffle.orders",
        "/ui/pulls/7",
        f"/ui/plans/{plan}",
        "/api/v1/lineage",
        "/ui/lineage",
    ):
        assert ui.get(path, params=other).status_code == 404, path
    for path, asked in (
        ("/api/v1/lineage", {"plan": plan, "focus": "jaffle.orders"}),
        ("/api/v1/lineage/columns", {"model": "jaffle.orders", "column": "status"}),
        ("/ui/lineage", {"plan": plan}),
    ):
        assert ui.get(path, params={**other, **asked}).status_code == 404, path
    # and this repository's ids that are not its own
    assert ui.get("/api/v1/pulls/8").status_code == 404
    assert ui.get("/api/v1/plans/" + "0" * 32).status_code == 404
    assert ui.get("/api/v1/environments/pr_8").status_code == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_the_api_and_the_pages_refuse_anything_but_get(ui: TestClient, method: str) -> None:
    for path in (
        "/api/v1/environments",
        "/api/v1/pulls/7",
        "/api/v1/jobs/x/log",
        "/ui/environments",
        "/ui/pulls/7",
        "/api/v1/lineage",
        "/api/v1/lineage/columns",
        "/ui/lineage",
    ):
        assert ui.request(method, path).status_code == 405, (method, path)


def test_a_log_outside_the_logs_folder_is_not_found(world: WebWorld, ui: TestClient) -> None:
    (world.logs.parent / "secret.log").write_text("not a job's\n")
    for job in ("..%2Fsecret", "%2E%2E%2Fsecret", "../secret", ".hidden", "a b"):
        assert ui.get(f"/api/v1/jobs/{job}/log").status_code == 404, job
        assert ui.get(f"/ui/jobs/{job}").status_code == 404, job


def test_the_service_shows_nothing_without_ui_public(world: WebWorld) -> None:
    with TestClient(world.service(public=False)) as client:
        for path in ("/api/v1/environments", "/api/v1/pulls/7", "/ui/environments", "/ui/pulls/7"):
            answer = client.get(path)
            assert answer.status_code == 403, path
            assert TITLE not in answer.text and "jaffle" not in answer.text
