"""``/api/v1`` on the real service (``create_app``, its lifespan run by the TestClient),
over a state with prod built and pull request 7 built by the real flow (scripted runner,
in-memory GitHub): each answer says what the state, ledger and queue hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.flow.audit import Entry
from sluice.bot.flow.checkout import Checkout
from sluice.bot.queue.schema import NewJob
from sluice.bot.queue.store import JobQueue
from sluice.bot.web.standalone import ui_app
from sluice.core import rollback, workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from tests.helpers.web import HEAD, KEY, NOW, SQL_MARK, TITLE, WebWorld, web_world
from tests.security.github_bot import C, merged, review

MERGE = "e" * 40


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("web"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def api(world: WebWorld) -> Iterator[TestClient]:
    with TestClient(world.service()) as client:
        yield client


def test_the_schema_lists_every_endpoint_and_its_models(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/environments",
        "/api/v1/pulls/{number}",
        "/api/v1/jobs",
        "/api/v1/history",
        "/api/v1/models/{name}",
        "/api/v1/jobs/{job_id}/log",
        "/api/v1/audit",
    ):
        assert set(paths[path]) == {"get"}, path
    assert {
        "Environment",
        "PullRequestView",
        "PlanView",
        "QueueJob",
        "HistoryEntry",
        "ModelView",
        "AuditRow",
    } <= set(schema["components"]["schemas"])
    assert not any(p.startswith("/ui") for p in paths)  # pages are not API


def test_environments_list_prod_and_the_pull_requests(api: TestClient) -> None:
    page = api.get("/api/v1/environments").json()
    assert [(e["name"], e["kind"], e["pull_request"]) for e in page["items"]] == [
        ("prod", "prod", None),
        ("pr_7", "pr", 7),
    ]
    assert page["total"] == 2
    pr = page["items"][1]
    assert pr["status"] == "active" and pr["expires"] > NOW and pr["created"] == NOW
    assert page["items"][0]["own_bytes"] is None  # prod shares with nobody it is compared to
    one = api.get("/api/v1/environments/pr_7").json()
    versions = {v["name"]: v["version"] for v in one["versions"]}
    prod = {
        v["name"]: v["version"] for v in api.get("/api/v1/environments/prod").json()["versions"]
    }
    assert versions["jaffle.orders"] != prod["jaffle.orders"]  # the PR's change
    assert versions["jaffle.stg_orders"] == prod["jaffle.stg_orders"]
    own = {v["name"]: v for v in one["versions"] if v["own"]}
    assert "jaffle.orders" in own and "jaffle.stg_orders" not in own
    assert own["jaffle.orders"]["rows"] == 99  # the table the PR's job measured
    assert one["own_bytes"] == sum(v["bytes"] or 0 for v in own.values()) > 0
    assert one["own_bytes"] == pr["own_bytes"]  # the list says as much
    # filters: by state, by repository
    assert api.get("/api/v1/environments", params={"status": "expired"}).json()["total"] == 0
    assert api.get("/api/v1/environments", params={"repo": KEY}).json()["total"] == 2
    assert api.get("/api/v1/environments", params={"status": "nonsense"}).status_code == 422


def test_paginated_lists_hold_to_offset_and_limit(api: TestClient) -> None:
    first = api.get("/api/v1/environments", params={"limit": 1}).json()
    second = api.get("/api/v1/environments", params={"limit": 1, "offset": 1}).json()
    assert [e["name"] for e in first["items"] + second["items"]] == ["prod", "pr_7"]
    assert api.get("/api/v1/models", params={"limit": 500}).status_code == 422
    models = api.get("/api/v1/models", params={"q": "ORDERS"}).json()
    assert {m["name"] for m in models["items"]} == {
        "jaffle.orders",
        "jaffle.raw_orders",
        "jaffle.stg_orders",
    }


def test_a_pull_requests_plan_says_what_changed_and_why(api: TestClient) -> None:
    pr = api.get("/api/v1/pulls/7").json()
    plan = pr["plan"]
    [direct] = plan["directly_modified"]
    assert direct["name"] == "jaffle.orders" and direct["category"] == "breaking"
    assert SQL_MARK in direct["diff"]  # the whole diff, as the planner made it
    indirect = {c["name"]: c for c in plan["indirectly_modified"]}
    assert indirect and all(c["why"] == ["jaffle.orders"] for c in indirect.values())
    assert [b["model"] for b in plan["backfill"]]
    assert pr["builds"] == [
        {"sha": HEAD, "fingerprint": pr["builds"][0]["fingerprint"], "created": NOW}
    ]
    # no title or checks from a hosted forge until sign-in reads them as the user
    assert pr["title"] == "" and pr["checks"] == []
    approvals = pr["approvals"]
    assert approvals["owners_of_changes"] == {"jaffle.orders": "finance"}
    assert approvals["clicks"] == []
    diffs = {d["name"]: d for d in pr["table_diffs"]}
    assert diffs["jaffle.orders"]["identical"] is False
    assert diffs["jaffle.customers"]["identical"] is True
    assert pr["audits"] and all(a["passed"] for a in pr["audits"])
    # the same plan by its id
    assert api.get(f"/api/v1/plans/{plan['plan_id']}").json() == plan


def test_the_ui_site_adds_the_forges_title_and_checks(world: WebWorld) -> None:
    with TestClient(ui_app(world.ui_site())) as client:
        pr = client.get("/api/v1/pulls/7").json()
    assert pr["title"] == TITLE
    checks = {c["name"]: c for c in pr["checks"]}
    assert checks["sluice/pr-environment"]["conclusion"] == "success"
    assert pr["approvals"]["check"]["name"] == "sluice/approval"
    assert pr["approvals"]["check"]["conclusion"] != "success"  # bob has not approved


def test_prod_history_and_models(api: TestClient) -> None:
    history = api.get("/api/v1/history").json()
    [built] = history["items"]
    assert built["kind"] == "promotion" and "jaffle.orders" in built["added"]
    model = api.get("/api/v1/models/jaffle.customer_segments").json()
    assert model["kind"] == "FULL" and model["owner"] == "marketing"
    assert ("segment", "STRING") in {(c["name"], c["type"]) for c in model["columns"]}
    assert model["path"] == "models/customer_segments.py"  # not the checkout's host path
    assert api.get("/api/v1/models/jaffle.nothing").status_code == 404


def test_the_queue_shows_waiting_and_retrying_jobs_with_reason_and_next_try(
    world: WebWorld, api: TestClient
) -> None:
    queue = JobQueue(world.bot.url, max_attempts=5, retry_seconds=60)
    try:
        job = NewJob(key=f"{KEY}#7", kind="pull_request", payload={"repo": "x"}, head_sha=HEAD)
        queue.accept("d-web-1", "github", "pull_request", job, 1000.0)
        other = NewJob(
            key="github:octo/warehouse2#7", kind="pull_request", payload={}, head_sha=HEAD
        )
        queue.accept("d-web-2", "github", "pull_request", other, 1000.0)
        claimed = queue.claim("w1", 1001.0)
        assert claimed is not None and claimed.key == f"{KEY}#7"
        queue.retry(claimed.id, "w1", "the forge answered 502", 1002.0)
    finally:
        queue.close()
    listed = api.get("/api/v1/jobs").json()["queue"]
    [retrying] = listed["items"]  # octo/warehouse2's job is not this repository's
    assert retrying["status"] == "retrying"
    assert retrying["error"] == "the forge answered 502" and retrying["next_try"] > 1002.0
    assert api.get(f"/api/v1/jobs/queue/{retrying['id']}").json() == retrying
    assert api.get(f"/api/v1/jobs/queue/{retrying['id'] + 1}").status_code == 404


def test_a_jobs_log_streams_its_lines_and_ends(world: WebWorld, api: TestClient) -> None:
    logs = Checkout(world.root / "work").spark.logs  # the repository's jobs' own folder
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "preview-pr_7-abc-1.log").write_text(
        "starting\n<b>not html</b>\n"
        '@@sluice {"event": "job_done", "job_id": "preview-pr_7-abc-1", "results": {}}\n'
        "after the end\n"
    )
    listed = api.get("/api/v1/jobs").json()["logs"]
    assert [j["job_id"] for j in listed["items"]] == ["preview-pr_7-abc-1"]
    with api.stream("GET", "/api/v1/jobs/preview-pr_7-abc-1/log") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = "".join(response.iter_text())
    events = body.split("\n\n")
    assert events[:4] == [
        "retry: 500",
        "id: 9\ndata: starting",
        "id: 25\ndata: <b>not html</b>",
        'id: 103\ndata: @@sluice {"event": "job_done", "job_id": "preview-pr_7-abc-1", '
        '"results": {}}',
    ]
    assert events[4].startswith("event: end\n") and "after the end" not in body
    # a browser reconnecting goes on from the last line it had
    headers = {"Last-Event-ID": "9"}
    with api.stream("GET", "/api/v1/jobs/preview-pr_7-abc-1/log", headers=headers) as again:
        resumed = "".join(again.iter_text()).split("\n\n")
    assert resumed[1] == "id: 25\ndata: <b>not html</b>"
    assert api.get("/api/v1/jobs/..%2Fstate.db/log").status_code == 404
    assert api.get("/api/v1/jobs/nothing/log").status_code == 404


def test_a_service_without_ui_public_shows_nothing(world: WebWorld, tmp_path: Path) -> None:
    with TestClient(world.service(public=False)) as client:
        for path in ("/api/v1/environments", "/api/v1/pulls/7"):
            answer = client.get(path)
            assert answer.status_code == 403, path
            assert "SLUICE_UI_PUBLIC" in answer.text
        assert client.get("/api/v1/repositories").json() == []


def test_prod_history_says_which_pull_request_a_promotion_came_from_and_who_approved(
    tmp_path: Path,
) -> None:
    world = web_world(tmp_path)
    try:
        bot, github = world.bot, world.github
        github.add_review(7, "bob", "APPROVED", HEAD)
        bot.deliver("pull_request_review", review(7, "bob", HEAD, 1))
        github.commit(MERGE, dict(github.files[HEAD]), parents=(C, HEAD), branch="main")
        github.close_pull(7, merged=True)
        bot.deliver("pull_request", merged(7, HEAD, MERGE))
        with TestClient(world.service()) as client:
            history = client.get("/api/v1/history").json()["items"]
            # then `sluice rollback prod`: back to the plan before the promotion
            project = load_project(bot.root / f"tree-{HEAD[:6]}", use_cache=False)
            store = open_state(bot.url)
            try:
                back = rollback.plan_rollback(store, PROD, now=NOW + 1)
                workflow.apply_plan(
                    project, store, back.plan, world.warehouse.runner(), now=NOW + 1
                )
            finally:
                store.close()
            after = client.get("/api/v1/history").json()["items"]
    finally:
        world.close()
    promoted, built = history
    assert promoted["kind"] == "promotion" and "jaffle.orders" in promoted["changed"]
    assert promoted["source"] == "pull request #7" and promoted["by"] == "bob"
    assert built["source"] is None and built["by"] is None  # applied with the CLI
    assert [h["kind"] for h in after] == ["rollback", "promotion", "promotion"]
    assert after[0]["source"] is None and after[0]["created"] == NOW + 1


def test_the_audit_log_is_the_repositorys_newest_first_and_paginated(
    world: WebWorld, api: TestClient
) -> None:
    ledger = world.bot.ledger
    plan = world.bot.ledger.plans(KEY, 7)[HEAD]
    ledger.append(Entry(NOW, KEY, "approval", "sluice", "passed", "#7", plan, detail="by bob"))
    ledger.append(Entry(NOW + 1, KEY, "refusal", "eve", "not a writer", "#7", detail="x"))
    ledger.append(Entry(NOW + 2, "github:some/other", "rollback", "bob", "rolled back", "#1"))
    answer = api.get("/api/v1/audit", params={"limit": 1}).json()
    # PR 7's build left its gate waiting (no row); the approval, then the refusal; not the
    # other repository's.
    assert answer["total"] == 2 and answer["limit"] == 1
    [newest] = answer["items"]
    assert (newest["kind"], newest["actor"], newest["ref"]) == ("refusal", "eve", "#7")
    [gate] = api.get("/api/v1/audit", params={"offset": 1, "limit": 1}).json()["items"]
    assert (gate["kind"], gate["actor"], gate["outcome"]) == ("approval", "sluice", "passed")
    assert gate["plan_id"] == plan
    assert api.get("/api/v1/audit", params={"repo": "github:some/other"}).status_code == 404
    assert api.get("/api/v1/audit", params={"limit": 201}).status_code == 422
