"""The service's scheduled drift check of prod (SLUICE_DRIFT_INTERVAL_SECONDS, issue 47):
queued once per period under the prod key, read-only, its outcome the ``sluice/drift``
check of the prod branch's head (GitHub and GitLab at the wire), the ``sluice_drift_*``
metrics and a ``drift`` chat notice, once per distinct drift. What the catalog says is
someone else's text: escaped wherever it goes. No Spark: the scripted runner's warehouse
is prod's catalog (sluice.core.spark.scripted), changed by hand here."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.entry.app import forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import DriftCheckEvent, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.forge.chat import Channels, Route, Sender, Target
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.present import checks, notify_text
from sluice.bot.present.metrics import Registry
from sluice.bot.queue.store import JobQueue
from sluice.bot.queue.worker import Worker
from sluice.core import workflow
from sluice.core.drift.compare import Difference, DriftReport
from sluice.core.model.loader import load_project
from sluice.core.spark.scripted import Table, Warehouse
from sluice.core.state import open_state
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.github_wire import FakeGitHub, tarball
from tests.helpers.gitlab_wire import FakeGitLab

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
MAIN = "d" * 40
NOW = 1_525_046_400_000  # 2018-04-30
SLACK = "https://hooks.slack.com/services/T0/B0/s3cretSlack"
HOSTILE = "SELECT '</details><img src=x onerror=1> @org/team [x](http://evil)' AS id"


@dataclass
class Service:
    github: FakeGitHub
    queue: JobQueue
    warehouse: Warehouse
    deps: Deps
    mock: responses.RequestsMock

    def check(self) -> None:
        dispatch.handle(self.deps, DriftCheckEvent("github", OWNER, None))

    def status(self) -> dict[str, Any]:
        return self.github.checks_on(MAIN)[checks.DRIFT]

    def metric(self, line: str) -> float | None:
        assert self.deps.metrics is not None
        found = [r for r in self.deps.metrics.render().splitlines() if r.startswith(line + " ")]
        return float(found[0].split()[-1]) if found else None

    def slack(self) -> list[str]:
        return [
            json.loads(c.request.body or b"{}")["blocks"][0]["text"]["text"]
            for c in self.mock.calls
            if c.request.url == SLACK
        ]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    main = tmp_path / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    warehouse = Warehouse()
    project = load_project(main, use_cache=False)
    store = open_state(url)
    try:  # prod built on the scripted warehouse: its views and tables are prod's catalog
        plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW)
    finally:
        store.close()
    github = FakeGitHub(repo=OWNER)
    github.trees[MAIN] = tarball(main, f"octo-warehouse-{MAIN[:7]}")
    github.refs["main"] = MAIN
    github.publish("main", main)
    github.publish(MAIN, main)
    settings = ServiceSettings(
        webhook_secret="s", github_token="ghp_driftToken", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    slack = Target("slack", SLACK, frozenset({notify_text.DRIFT}), name="slack #1 of octo/*")
    deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=tmp_path / "work",
                     state_url=url, runner_for=warehouse.runner, clock=lambda: NOW + 3_600_000,
                     chat=Channels((Route("octo/*", (slack,)),), Sender(sleep=lambda _s: None)),
                     metrics=Registry())  # fmt: skip
    key = f"github:{OWNER}"
    deps.ledger.claim_name(key, CASE_REPOSITORY_ID, key, NOW)  # as its deliveries bound it
    deps.ledger.seen(key, None, NOW, sha=MAIN)
    queue = JobQueue(url, max_attempts=2)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(SLACK, body="ok")
        github.install(mock)
        yield Service(github, queue, warehouse, deps, mock)
    deps.close()
    queue.close()


def test_checks_are_scheduled_under_the_prod_key_only_when_the_service_sets_a_period(
    service: Service,
) -> None:
    assert ServiceSettings(webhook_secret="s").drift_interval_seconds == 0  # type: ignore[call-arg]
    bound = dispatch.bound(service.deps)
    assert Worker(service.queue, **bound).schedule(time.time()) == 0  # off by default
    worker = Worker(service.queue, **bound, drift_seconds=3600)
    assert worker.schedule(time.time()) == 1
    assert worker.schedule(time.time()) == 0  # once a period
    event = DriftCheckEvent("github", OWNER, None)
    assert pr_key(event) == f"github:{OWNER}:prod"  # never beside a promotion
    assert worker.run_once()
    assert service.status()["conclusion"] == "success"


def test_a_clean_prod_is_a_green_check_and_a_zero(service: Service) -> None:
    jobs = len(service.warehouse.jobs)
    service.check()
    status = service.status()
    assert (status["status"], status["conclusion"]) == ("completed", "success")
    assert status["output"]["title"] == "No drift: prod is as Sluice recorded it"
    assert service.warehouse.jobs[jobs]["kind"] == "drift"  # one read-only job
    assert [s["type"] for s in service.warehouse.jobs[jobs]["steps"]] == ["inspect"]
    assert service.metric('sluice_drift_models{repository="github:octo/warehouse"}') == 0.0
    assert service.metric('sluice_drift_checks_total{outcome="clean"}') == 1.0
    assert service.slack() == []


def test_drift_fails_the_check_escaped_counts_and_is_told_once(service: Service) -> None:
    warehouse = service.warehouse
    orders = next(t for t, v in warehouse.tables.items() if v.model == "jaffle.orders")
    warehouse.tables[orders] = Table("jaffle.orders", warehouse.tables[orders].version, 3)
    warehouse.views["jaffle.customers"] = HOSTILE  # redefined by someone outside Sluice
    del warehouse.views["jaffle.stg_orders"]
    service.check()
    status = service.status()
    assert status["conclusion"] == "failure"
    assert status["output"]["title"] == ("Drift: 3 models of prod differ from what Sluice recorded")
    text = status["output"]["text"]
    assert "`jaffle.orders` | data: " in text and "| view_missing: " in text
    # The catalog's text is shown, never rendered: no tag, no mention, no link.
    assert "<img" not in text and "</details>" not in text
    assert "@org/team" not in text and "](http://evil)" not in text
    assert "&lt;img src=x onerror=1&gt;" in text
    assert service.metric('sluice_drift_models{repository="github:octo/warehouse"}') == 3.0
    assert service.metric('sluice_drift_checks_total{outcome="drift"}') == 1.0
    [told] = service.slack()
    assert "Prod differs from what Sluice recorded" in told
    assert "jaffle.customers:view_changed" in told and "<img" not in told
    service.check()  # the same drift again: the check again, no second notice
    assert len(service.slack()) == 1
    assert service.metric('sluice_drift_checks_total{outcome="drift"}') == 2.0


def test_a_check_that_cannot_run_is_not_green(service: Service) -> None:
    from sluice.core.spark.scripted import Script

    service.warehouse.script = Script(fail={"read *": "AnalysisException: <b>metastore</b> down"})
    service.check()
    status = service.status()
    assert status["conclusion"] == "failure"
    assert status["output"]["title"] == "Sluice could not check prod for drift"
    assert "<b>metastore</b>" in status["output"]["summary"].split("```")[1]  # fenced only
    assert service.metric('sluice_drift_checks_total{outcome="failed"}') == 1.0


def test_gitlab_gets_the_drift_status_at_the_wire() -> None:
    sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    report = DriftReport(
        "prod", "p" * 32, NOW, 9,
        (Difference("s.a", "s.a", "view_changed", HOSTILE, None, "repoint"),),
    )  # fmt: skip
    fake = FakeGitLab()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        forge = GitLabForge(gitlab_client("https://gitlab.example.com", "glpat-" + "T0ken" * 4), "data/warehouse")  # fmt: skip
        forge.set_check(sha, checks.drift_result(report))
        forge.set_check(sha, checks.drift_result(DriftReport("prod", "p" * 32, NOW, 9, ())))
    failed, clean = fake.statuses
    assert (failed["sha"], failed["name"], failed["state"]) == (sha, "sluice/drift", "failed")
    # A GitLab status shows its title only: the service's words, no catalog text.
    assert failed["description"] == "Drift: 1 model of prod differs from what Sluice recorded"
    assert (clean["name"], clean["state"]) == ("sluice/drift", "success")
