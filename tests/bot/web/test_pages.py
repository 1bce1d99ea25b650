"""The UI's pages on ``sluice ui``'s app (the forge's titles and checks shown), over a
state with prod built and pull request 7 built by the real flow: each page renders what
the API says, through one layout, with Sluice's own files only."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers.web import KEY, WebWorld

PAGES = (
    "/ui/environments",
    "/ui/environments/pr_7",
    "/ui/pulls",
    "/ui/pulls/7",
    "/ui/jobs",
    "/ui/history",
    "/ui/models",
    "/ui/models/jaffle.orders",
    "/ui/lineage",
    "/ui/audit",
)


@pytest.mark.parametrize("path", PAGES)
def test_each_page_renders_in_the_layout_with_only_sluices_own_files(
    ui: TestClient, path: str
) -> None:
    page = ui.get(path)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert '<link rel="stylesheet" href="/ui/static/ui.css">' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN, no outside
    assert ui.get("/ui/static/ui.css").status_code == 200


def test_the_index_leads_to_the_environments(ui: TestClient) -> None:
    answer = ui.get("/", follow_redirects=True)
    assert answer.url.path == "/ui/environments"
    assert "pr_7" in answer.text and "prod" in answer.text


def test_the_pull_requests_page_shows_its_plan_checks_and_builds(ui: TestClient) -> None:
    page = ui.get("/ui/pulls/7", params={"repo": KEY}).text
    assert "breaking (direct)" in page and "reached by <code>jaffle.orders</code>" in page
    # the SQL diff side by side: the new line on the right, nothing beside it on the left
    assert '<td class="gap"><pre></pre></td>' in page
    assert '<td class="add"><pre>WHERE' in page
    assert "sluice/pr-environment" in page and "sluice/approval" in page
    assert "a1a1a1a1a1a1" in page  # the build on its head
    assert 'data-testid="table-diffs"' in page and '<td colspan="5">identical</td>' in page
    assert 'data-testid="audits"' in page


def test_an_environment_page_says_which_tables_are_its_own_and_their_size(
    ui: TestClient,
) -> None:
    page = ui.get("/ui/environments/pr_7").text
    assert "Its own tables:" in page and "its own" in page and "prod&#39;s" in page


def test_the_environment_filter_and_the_model_search(ui: TestClient) -> None:
    expired = ui.get("/ui/environments", params={"status": "expired"}).text
    assert "No environment is expired." in expired
    found = ui.get("/ui/models", params={"q": "segments"}).text
    assert "jaffle.customer_segments" in found and "jaffle.orders" not in found


def test_a_jobs_page_follows_its_log_by_its_stream(world: WebWorld, ui: TestClient) -> None:
    world.logs.mkdir(parents=True, exist_ok=True)
    (world.logs / "apply-prod-1.log").write_text("one line\n")
    page = ui.get("/ui/jobs/apply-prod-1").text
    assert 'data-stream="/api/v1/jobs/apply-prod-1/log?repo=github%3Aocto%2Fwarehouse"' in page
    assert '<script src="/ui/static/log.js"></script>' in page
    assert "apply-prod-1" in ui.get("/ui/jobs").text
    assert ui.get("/ui/jobs/nothing").status_code == 404


def test_the_audit_page_shows_stored_text_escaped(world: WebWorld, ui: TestClient) -> None:
    # Someone without write permission comments a command: the refusal's row holds their
    # login and command line, which the page shows as text.
    token = "ghp_" + "Q" * 36
    body = f'/sluice deploy <script>alert("audit")</script> & <b>bold</b>\x1b[31m {token}'
    world.bot.say(7, "<i>eve</i>", body, 901)
    page = ui.get("/ui/audit", params={"repo": KEY}).text
    assert "&lt;script&gt;alert(&#34;audit&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold" in page
    assert "&lt;i&gt;eve&lt;/i&gt;" in page and "not a writer" in page
    assert "<script>alert" not in page and "<i>eve" not in page
    assert token not in page and "\x1b" not in page and "[31m ***" in page
    assert 'data-testid="audit"' in page
