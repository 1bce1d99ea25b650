"""The service's scheduled run of prod (SLUICE_RUN_INTERVAL_SECONDS): queued once per
period under the repository's prod key (so never beside a promotion), it processes exactly
the intervals due, nothing when none is, and a failure is reported. No Spark: the scripted
runner (sluice.core.spark.scripted) runs each job, its driver's writes checked and applied
as a real job's."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import responses

from sluice.bot.entry.app import forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import PullRequestEvent, ScheduledRunEvent, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.timeutil import DAY_MS
from tests.helpers.cases import CASE_REPOSITORY_ID, record_prod
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
MAIN = "d" * 40
NOW = 1_525_046_400_000  # 2018-04-30, where prod was built
REPORT_TO = 42


def built_by(warehouse: Warehouse, job: int) -> dict[str, list[list[int]]]:
    """Model -> the intervals job ``job`` of ``warehouse`` built."""
    steps = warehouse.jobs[job]["steps"]
    return {s["model"]: s.get("intervals", []) for s in steps if s["type"] == "build"}


@dataclass
class Service:
    github: FakeGitHub
    queue: JobQueue
    runner: Warehouse
    deps: Deps
    clock: list[int]

    def worker(self, run_seconds: float = 3600) -> Worker:
        return Worker(self.queue, **dispatch.bound(self.deps), run_seconds=run_seconds)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    main = tmp_path / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    revenue = main / "models" / "daily_revenue.sql"  # a model that goes on (no end date)
    revenue.write_text(revenue.read_text().replace("  end '2018-04-30',\n", ""))
    record_prod(main, url, NOW, commit=MAIN)  # prod was promoted from MAIN
    github = FakeGitHub(repo=OWNER)
    github.trees[MAIN] = tarball(main, f"octo-warehouse-{MAIN[:7]}")
    github.refs["main"] = MAIN
    github.publish("main", main)
    github.publish(MAIN, main)
    settings = ServiceSettings(
        webhook_secret="s", github_token="ghp_runToken", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    runner = Warehouse()  # the driver's writes reach state as a real job's do
    clock = [NOW + 3 * DAY_MS + 3_600_000]  # three days later
    deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=tmp_path / "work",
                     state_url=url, runner_for=runner.runner, clock=lambda: clock[0],
                     run_report_to=REPORT_TO)  # fmt: skip
    key = f"github:{OWNER}"
    deps.ledger.claim_name(key, CASE_REPOSITORY_ID, key, NOW)  # as its deliveries bound it
    deps.ledger.seen(key, None, NOW, sha=MAIN)
    queue = JobQueue(url, max_attempts=2)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        yield Service(github, queue, runner, deps, clock)
    deps.close()
    queue.close()


def test_a_run_processes_the_due_intervals_once_and_then_nothing(service: Service) -> None:
    worker = service.worker()
    assert worker.schedule(time.time()) == 1
    assert worker.schedule(time.time()) == 0  # one a period, however many workers ask
    assert worker.run_once()
    [job] = service.runner.jobs
    built = built_by(service.runner, 0)
    day = DAY_MS
    # The incremental model gets the three complete days since prod was built, nothing
    # before; the whole job is one Spark job.
    assert built["jaffle.daily_revenue"] == [[NOW, NOW + day], [NOW + day, NOW + 2 * day],
                                             [NOW + 2 * day, NOW + 3 * day]]  # fmt: skip
    assert job["kind"] == "apply"
    # The FULL models are rebuilt on their new day, each told to skip when nothing it reads
    # changed (the driver decides: sluice/core/spark/steps/build.py); the incremental one
    # computes its new days whatever.
    checks = {s["model"]: s.get("skip") for s in job["steps"] if s["type"] == "build"}
    assert checks["jaffle.orders"] is not None and checks["jaffle.customers"] is not None
    assert checks["jaffle.daily_revenue"] is None
    # Nothing new is due within the same day: the next run starts no Spark job.
    service.deps.ledger.seen(f"github:{OWNER}", None, NOW)  # (a later job of the repo)
    dispatch.handle(service.deps, ScheduledRunEvent("github", OWNER, None))
    assert len(service.runner.jobs) == 1
    # A service down for a week catches up in one run, not one per missed period.
    service.clock[0] += 7 * DAY_MS
    dispatch.handle(service.deps, ScheduledRunEvent("github", OWNER, None))
    assert len(service.runner.jobs) == 2
    assert len(built_by(service.runner, 1)["jaffle.daily_revenue"]) == 7


def test_a_failed_run_is_tried_again_then_reported_escaped(service: Service) -> None:
    service.runner.script = Script(fail={"build *": "AnalysisException: <b>x</b>"})
    worker = service.worker()
    assert worker.schedule(time.time()) == 1
    assert worker.run_once()  # attempt 1: back in the queue
    assert service.github.comments_on(REPORT_TO) == []
    assert worker.run_once()  # attempt 2 of 2: given up, reported
    [report] = service.github.comments_on(REPORT_TO)
    body = report["body"]
    assert "scheduled run of prod failed" in body
    # (a run rebuilds the FULL models too, on each new interval of their cron: the first
    # build fails)
    assert "at step 'build jaffle." in body and "`sluice run prod`" in body
    assert "<b>" not in body.split("```")[0]  # the error only inside the fence
    assert len(service.runner.jobs) == 2


def test_a_run_and_a_promotion_of_one_repository_never_overlap(service: Service) -> None:
    run = ScheduledRunEvent("github", OWNER, None)
    merge = PullRequestEvent(
        forge="github", repo=OWNER, installation_id=None, action="closed", number=7,
        head_sha="a" * 40, head_ref="x", base_ref="main", base_sha=MAIN, author="alice",
        draft=False, fork=False, merged=True, merge_sha="b" * 40,
    )  # fmt: skip
    assert pr_key(run) == pr_key(merge) == f"github:{OWNER}:prod"
    for delivery, event in (("run-1", run), ("merge-7", merge)):
        job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
        assert service.queue.accept(delivery, "github", event.kind, job, time.time())
    first = service.queue.claim("worker-a", time.time())
    assert first is not None and first.kind == "run"
    # While the run holds prod, another worker finds nothing to do: the promotion waits.
    assert service.queue.claim("worker-b", time.time()) is None
    service.queue.finish(first.id, "worker-a", now=time.time())
    second = service.queue.claim("worker-b", time.time())
    assert second is not None and second.kind == "pull_request"
    # And the reverse: a run queued while the promotion runs waits for it.
    job = NewJob(key=pr_key(run), kind=run.kind, payload=run.to_json())
    assert service.queue.accept("run-2", "github", "run", job, time.time())
    assert service.queue.claim("worker-a", time.time()) is None
    service.queue.finish(second.id, "worker-b", now=time.time())
    third = service.queue.claim("worker-a", time.time())
    assert third is not None and third.kind == "run"


def test_runs_are_off_unless_the_service_sets_an_interval(service: Service) -> None:
    assert service.worker(run_seconds=0).schedule(time.time()) == 0
    assert ServiceSettings(webhook_secret="s").run_interval_seconds == 0  # type: ignore[call-arg]
