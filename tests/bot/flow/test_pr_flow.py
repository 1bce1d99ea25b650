"""The PR flow end to end on real Spark: prod built, a PR opened, its environment built,
diffed and reported (a service killed mid-build is ``tests/reliability/test_crash.py``'s).

Spark runs through spark-submit, one job per event; GitHub is the fake at the wire
(PyGithub runs for real).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers.cases import load_case
from tests.helpers.github_service import Service, sign
from tests.helpers.github_wire import FakeGitHub, tarball

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
PR_SHA = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
BASE_SHA = "c3d4e5f60718293a4b5c6d7e8f901234567890ab"  # the prod branch (main)


@dataclass
class Prod:
    root: Path
    work: Path
    url: str
    trees: Path

    def runner(self, project: Any) -> SubmitRunner:
        paths = SparkPaths(
            root=(self.work / "spark").resolve(), logs=(self.work / "logs").resolve()
        )
        return SubmitRunner(project.config.sluice.spark, paths)

    def query(self, environment: str, sql: str) -> list[list[Any]]:
        project = load_project(self.root / "pr", use_cache=False)
        store = open_state(self.url)
        try:
            result = workflow.query_environment(
                project, store, environment, sql, self.runner(project), limit=100
            )
        finally:
            store.close()
        return [list(row) for row in result["rows"]]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Prod:
    root = tmp_path_factory.mktemp("flow")
    env = Prod(root, root / "work", f"sqlite:///{root / 'state.db'}", root / "trees")
    base = root / "base"
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", base, ignore=shutil.ignore_patterns(".sluice")
    )
    project = load_project(base, use_cache=False)
    store = open_state(env.url)
    try:
        end = to_ms("2018-04-30")
        plan = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
        workflow.apply_plan(project, store, plan, env.runner(project), url=env.url, now=end)
    finally:
        store.close()
    # The PR: one breaking edit (orders drops returned orders) and one non-breaking edit
    # (customers gets a new column).
    pr = root / "pr"
    shutil.copytree(base, pr)
    _edit(
        pr / "models" / "orders.sql",
        "  ON o.order_id = p.order_id",
        "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'",
    )
    _edit(
        pr / "models" / "customers.sql",
        "  c.last_name,\n",
        "  c.last_name,\n  UPPER(c.last_name) AS last_name_upper,\n",
    )
    env.trees.mkdir()
    (env.trees / f"{PR_SHA}.tar.gz").write_bytes(tarball(pr, f"octo-warehouse-{PR_SHA[:7]}"))
    return env


def _opened(number: int) -> dict[str, Any]:
    payload = load_case("github/pull_request/opened.payload.json")
    payload["number"] = number
    payload["pull_request"]["number"] = number
    payload["pull_request"]["head"]["sha"] = PR_SHA
    return payload


def _deliver_and_wait(service: Service, payload: dict[str, Any], delivery: str, sha: str) -> None:
    """Deliver a signed ``pull_request`` event; wait until its build reported on ``sha``."""
    body = json.dumps(payload).encode()
    answer = service.deliver("pull_request", body, delivery=delivery,
                             signature=sign(body, "flow-secret"))  # fmt: skip
    assert answer.status_code == 202
    checks = service.github.checks_on
    service.wait(lambda: checks(sha).get("sluice/approval", {}).get("status") == "completed",
                 timeout=900)  # fmt: skip


def test_a_pull_request_gets_its_environment_diff_comment_and_checks(prod: Prod) -> None:
    settings = ServiceSettings(
        webhook_secret="flow-secret", github_token="ghp_flowToken", workdir=prod.work,
        database_url=prod.url, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    github = FakeGitHub(trees={PR_SHA: (prod.trees / f"{PR_SHA}.tar.gz").read_bytes()})
    # The prod branch holds the project prod was built from: its config.yaml's `sluice:`
    # settings (30 days of backfill for a PR) are the ones in force, not the PR's.
    github.refs["main"] = BASE_SHA
    # ... and its Python (macros/, models/customer_segments.py), which the service runs only
    # as the prod branch has it (SLUICE_PROJECT_PYTHON=prod): the PR leaves it unchanged.
    github.publish("main", prod.root / "base")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        with TestClient(create_app(settings)) as client:
            service = Service(client, github, settings)
            _deliver_and_wait(service, _opened(2), "flow-1", PR_SHA)
            first = json.loads(json.dumps(github.comments_on(2)[0]))
    # (A push that edits no model is tests/bot/flow/test_scripted_flows.py's: the same
    # flow on the scripted runner, without a second Spark job here.)
    for line in ("| `jaffle.orders` | **breaking** | its SQL changed | 99 → 95 (-4) |",
                 "| `jaffle.customers` | non-breaking | its SQL changed, and it reads `jaffle.orders`",
                 "| `jaffle.daily_revenue` | breaking, downstream | reads `jaffle.orders`",
                 "| `jaffle.customer_segments` | breaking, downstream | reads `jaffle.orders` | 62 → 60 (-2), 2 differ |",
                 "#### `jaffle.orders`: prod → pr_2: 4 rows only in prod", "```diff", "```mermaid",
                 "- added last_name_upper string",
                 # What the first run built, still shown and still the range compared.
                 "| `jaffle.daily_revenue` | 2018-04-01 .. 2018-04-30 | 30 |",
                 "where `order_date >= '2018-04-01' AND order_date < '2018-05-01'`"):  # fmt: skip
        assert line in first["body"], line

    checks = github.checks_on(PR_SHA)
    assert {n: c["conclusion"] for n, c in checks.items()} == {
        "sluice/tests": "success", "sluice/pr-environment": "success", "sluice/prod-plan": "success",
        "sluice/approval": "success",
    }, checks["sluice/pr-environment"]["output"]  # fmt: skip
    assert checks["sluice/tests"]["output"]["title"] == "1 unit test passed"
    assert checks["sluice/pr-environment"]["history"] == ["queued", "in_progress", "completed"]
    comment = first  # the first build's comment, as it was then
    text = comment["body"]
    (prod.root / "comment.md").write_text(text)  # to read when an assertion fails
    # While the job ran, the comment showed progress rather than stale results.
    # (queued, then the build's progress once it ran past ten seconds; never "Starting
    # Spark" on its own: a quick build publishes only its result.)
    progress = [b for b in comment["bodies"] if "\n> ⏳ " in b]
    assert progress and "Fetching the project" in progress[0], comment["bodies"]
    assert not any("Starting Spark" in b for b in progress)
    headline = text.split("\n")[1]
    assert headline.startswith("### ") and "`jaffle`: " in headline
    assert "1 breaking change reaches 2 models" in headline  # daily_revenue, customer_segments
    assert "`sluice query pr_2 'SELECT * FROM jaffle__pr_2.orders LIMIT 10'`" in text
    assert (
        "Views of `pr_2`: `jaffle__pr_2.orders`, `jaffle__pr_2.customer_segments`, "
        "`jaffle__pr_2.daily_revenue`, `jaffle__pr_2.customers`" in text
    )
    assert "| `jaffle.orders` | **breaking** | its SQL changed | 99 → 95 (-4) |" in text
    assert "```diff" in text and "+  o.status <> 'returned'" in text
    assert "| `jaffle.daily_revenue` | 2018-04-01 .. 2018-04-30 | 30 |" in text  # the last 30 days
    assert "#### Table diffs against prod, biggest change first" in text
    assert "#### `jaffle.orders`: prod → pr_2: 4 rows only in prod" in text
    assert "| `jaffle.orders` | full refresh | \\- |" in text  # a FULL model has no date range
    assert "- added last_name_upper string" in text
    assert "where `order_date >= '2018-04-01' AND order_date < '2018-05-01'`" in text
    assert "| `sluice/tests` | success: 1 unit test passed |" in text
    assert "| `sluice/prod-plan` | success: Merging backfills 1 table in prod |" in text
    # What the diff reports is what the data says: the PR drops prod's returned orders.
    returned = prod.query("prod", "SELECT COUNT(*) FROM jaffle.orders WHERE status = 'returned'")[
        0
    ][0]
    assert "| only in this side | 4 | 0 |  |" in text and returned == 4
    assert prod.query("pr_2", "SELECT COUNT(*) FROM jaffle.orders WHERE status = 'returned'") == [
        [0]
    ]
    names = prod.query(
        "pr_2", "SELECT last_name, last_name_upper FROM jaffle.customers WHERE customer_id = 1"
    )
    assert names == [["P.", "P."]]
