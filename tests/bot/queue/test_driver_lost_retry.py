"""A job whose Spark driver was killed is run again by the worker, and a promotion run again
reports on the deployment record it opened (no second record, none left in progress).

Found by bench/chaos.py (kill -9 of the driver, or of the service, during a PR build or a
promotion): the bot reported a killed driver as a failed build or a failed promotion
("prod is unchanged", while prod's views were half swapped) and never retried; and a
promotion run again after a crash opened a second deployment record, leaving the first
"in progress" for ever. No Spark here: the runner loses its driver on the first jobs.
"""

from __future__ import annotations

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
from sluice.bot.events.neutral import PullRequestEvent, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.errors import DriverLost
from sluice.core.spark.submit import JobResult
from tests.helpers.cases import record_prod
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
HEAD, MERGE = "a" * 40, "b" * 40
NOW = 1_525_046_400_000  # 2018-04-30


class Flaky:
    """A runner whose first ``lost`` jobs lose their driver; later jobs succeed (no Spark)."""

    def __init__(self, lost: int) -> None:
        self.lost = lost
        self.jobs: list[str] = []

    def __call__(self, *_args: Any) -> Flaky:  # Context.runner_for
        return self

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.jobs.append(spec["job_id"])
        if len(self.jobs) <= self.lost:
            raise DriverLost("Spark job failed: the driver was killed by signal 9")
        return JobResult(spec["job_id"], {}, 0.1, None)


@dataclass
class Bot:
    github: FakeGitHub
    queue: JobQueue
    worker: Worker
    runner: Flaky
    deps: Deps

    def job(self, event: PullRequestEvent, delivery: str) -> int:
        job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
        assert self.queue.accept(delivery, "github", "pull_request", job, time.time())
        found = self.queue.delivery_job(delivery)
        assert found is not None
        return found


@pytest.fixture
def bot(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Bot]:
    lost: int = request.param
    url = f"sqlite:///{tmp_path / 'state.db'}"
    main = tmp_path / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    record_prod(main, url, NOW)
    change = tmp_path / "change"
    shutil.copytree(main, change)
    customers = change / "models" / "customers.sql"
    customers.write_text(
        customers.read_text().replace("  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    )
    github = FakeGitHub(repo=OWNER)
    for sha in (HEAD, MERGE):
        github.trees[sha] = tarball(change, f"octo-warehouse-{sha[:7]}")
    settings = ServiceSettings(
        webhook_secret="s", github_token="ghp_retryToken", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    runner = Flaky(lost)
    deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=tmp_path / "work",
                     state_url=url, runner_for=runner, clock=lambda: NOW)  # fmt: skip
    queue = JobQueue(url, max_attempts=3)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        yield Bot(github, queue, Worker(queue, **dispatch.bound(deps)), runner, deps)
    deps.close()
    queue.close()


def _event(action: str, merged: bool = False) -> PullRequestEvent:
    return PullRequestEvent(
        forge="github", repo=OWNER, installation_id=None, action=action, number=7,
        head_sha=HEAD, head_ref="change", base_ref="main", base_sha="c" * 40, author="alice",
        draft=False, fork=False, merged=merged, merge_sha=MERGE if merged else None,
    )  # fmt: skip


@pytest.mark.parametrize("bot", [1], indirect=True)
def test_a_pr_build_whose_driver_was_lost_is_run_again_not_reported_failed(bot: Bot) -> None:
    job = bot.job(_event("opened"), "open-7")
    assert bot.worker.run_once()
    record = bot.queue.job(job)
    assert record is not None and record.status == "queued" and record.job.attempts == 1
    assert "killed by signal 9" in (record.error or "")
    # Nothing concluded: the checks wait for the next attempt.
    assert {c["status"] for c in bot.github.checks_on(HEAD).values()} == {"in_progress"}
    assert bot.worker.run_once()
    record = bot.queue.job(job)
    assert record is not None and record.status == "done" and record.job.attempts == 2
    checks = bot.github.checks_on(HEAD)
    assert checks["sluice/pr-environment"]["conclusion"] == "success", checks
    assert checks["sluice/pr-environment"]["output"]["title"].startswith("pr_7: ")
    assert len(bot.github.comments_on(7)) == 1
    assert len(bot.runner.jobs) == 2


@pytest.mark.parametrize("bot", [1], indirect=True)
def test_a_promotion_run_again_keeps_its_one_deployment_record(bot: Bot) -> None:
    job = bot.job(_event("closed", merged=True), "merge-7")
    assert bot.worker.run_once()
    record = bot.queue.job(job)
    assert record is not None and record.status == "queued"
    assert bot.github.checks_on(MERGE)["sluice/deploy"]["status"] == "in_progress"
    assert bot.worker.run_once()
    record = bot.queue.job(job)
    assert record is not None and record.status == "done" and record.job.attempts == 2
    deploy = bot.github.checks_on(MERGE)["sluice/deploy"]
    assert deploy["conclusion"] == "success", deploy["output"]
    [deployment] = bot.github.deployments
    assert [s["state"] for s in deployment["statuses"]] == ["in_progress", "in_progress", "success"]
    assert bot.deps.ledger.deployment(f"github:{OWNER}", MERGE, "prod") is None


@pytest.mark.parametrize("bot", [3], indirect=True)
def test_a_promotion_lost_on_every_attempt_closes_its_deployment_record(bot: Bot) -> None:
    job = bot.job(_event("closed", merged=True), "merge-7")
    for _ in range(3):
        assert bot.worker.run_once()
    record = bot.queue.job(job)
    assert record is not None and record.status == "failed" and record.job.attempts == 3
    deploy = bot.github.checks_on(MERGE)["sluice/deploy"]
    assert deploy["conclusion"] == "failure"
    assert deploy["output"]["title"] == "The promotion job failed on every attempt"
    [deployment] = bot.github.deployments
    assert [s["state"] for s in deployment["statuses"]][-1] == "failure"
    assert bot.deps.ledger.deployment(f"github:{OWNER}", MERGE, "prod") is None
