"""A push that supersedes a building head stops the old build (issue 45, point 2).

The worker runs a PR build whose Spark job (the scripted runner) holds in its first build
step until the job is stopped; a push of a newer head is accepted by the same queue. The
old build must end superseded, its Spark job stopped by the runner (not at a time limit:
the scripted runner has none, and the worker's poll for other processes' deliveries is
set to an hour, so only the push's own wake-up can stop it), the PR told on the old head's
checks, the environment untouched; then the new head builds. Also: a real child process
(a spark-submit stand-in) is killed by the same stop."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import responses

from sluice.bot.entry.app import forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import PullRequestEvent, pr_key, supersedes
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.present import checks
from sluice.bot.queue.store import JobQueue, JobStatus, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.config import SparkSettings
from sluice.core.errors import JobCancelled
from sluice.core.spark import cancel
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import Received, SubmitRunner, child_environment
from sluice.core.spark.writes import JobWrites
from sluice.core.state import open_state
from tests.helpers.cases import record_prod
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
OLD, NEW = "a" * 40, "d" * 40
NOW = 1_525_046_400_000  # 2018-04-30
SAFETY_S = 120.0  # a thread that never ends fails the test (a safety net, not a timing)


@dataclass
class Bot:
    github: FakeGitHub
    queue: JobQueue
    worker: Worker
    warehouse: Warehouse
    deps: Deps
    url: str

    def push(self, head: str, delivery: str, action: str, via: JobQueue | None = None) -> int:
        event = PullRequestEvent(
            forge="github", repo=OWNER, installation_id=None, action=action, number=7,
            head_sha=head, head_ref="change", base_ref="main", base_sha="c" * 40,
            author="alice", draft=False, fork=False, merged=False, merge_sha=None,
        )  # fmt: skip
        job = NewJob(
            key=pr_key(event), kind=event.kind, payload=event.to_json(), head_sha=head,
            supersede=supersedes(event),
        )  # fmt: skip
        queue = via or self.queue
        assert queue.accept(delivery, "github", "pull_request", job, time.time())
        found = queue.delivery_job(delivery)
        assert found is not None
        return found


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    main = tmp_path / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    record_prod(main, url, NOW)
    github = FakeGitHub(repo=OWNER)
    for sha, column in ((OLD, "1 AS one"), (NEW, "2 AS two")):
        change = tmp_path / sha[:4]
        shutil.copytree(main, change)
        customers = change / "models" / "customers.sql"
        customers.write_text(
            customers.read_text().replace("  c.last_name,\n", f"  c.last_name,\n  {column},\n")
        )
        github.trees[sha] = tarball(change, f"octo-warehouse-{sha[:7]}")
    settings = ServiceSettings(
        webhook_secret="s", github_token="ghp_cancelToken", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
    )  # fmt: skip
    warehouse = Warehouse(Script(hold="build *"))
    deps = make_deps(project_python="on", forge_for=forge_factory(settings), workdir=tmp_path / "work",
                     state_url=url, runner_for=warehouse.runner, clock=lambda: NOW)  # fmt: skip
    queue = JobQueue(url, max_attempts=3)
    # Other processes' deliveries would be found within the hour: only this process's
    # wake-up can stop the build within the test.
    worker = Worker(queue, **dispatch.bound(deps), cancel_poll_seconds=3600.0)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        yield Bot(github, queue, worker, warehouse, deps, url)
    deps.close()
    queue.close()


def test_a_push_stops_the_build_of_the_head_it_supersedes(bot: Bot) -> None:
    old = bot.push(OLD, "open-7", "opened")
    running = threading.Thread(target=bot.worker.run_once)
    running.start()
    while running.is_alive() and not bot.warehouse.holding.wait(0.05):
        pass
    assert bot.warehouse.holding.is_set(), "the old head's build never reached Spark"
    # The build holds inside its Spark job; the push arrives.
    new = bot.push(NEW, "push-7", "synchronize")
    running.join(SAFETY_S)
    assert not running.is_alive(), "the old head's build was not stopped"

    record = bot.queue.job(old)
    assert record is not None and record.status == JobStatus.SUPERSEDED
    assert record.error == f"superseded by job {new} (head {NEW})"
    assert record.job.attempts == 1  # not retried, not given up
    # The old head's checks say what happened; none is left in progress.
    told = bot.github.checks_on(OLD)
    for name in checks.PR_CHECKS:
        assert told[name]["conclusion"] == "cancelled", told[name]
        assert told[name]["output"]["title"] == checks.BUILD_SUPERSEDED
        assert f"head {NEW}" in told[name]["output"]["summary"]
    # Its environment is as it was: no record, no view; its table not marked built.
    [job] = bot.warehouse.jobs
    assert not bot.warehouse.views
    store = open_state(bot.url)
    try:
        assert store.get_environment("pr_7") is None
        [build] = [s for s in job["steps"] if s["type"] == "build"][:1]
        key = (str(build["model"]), str(build["version"]))
        assert not store.get_intervals([key]).get(key)
    finally:
        store.close()

    # The newer head builds, to the end (its Spark job holds no more), in the one comment.
    bot.warehouse.script = Script()
    assert bot.worker.run_once()
    record = bot.queue.job(new)
    assert record is not None and record.status == JobStatus.DONE
    assert bot.github.checks_on(NEW)["sluice/pr-environment"]["conclusion"] == "success"
    assert len(bot.github.comments_on(7)) == 1


def test_a_push_another_process_accepted_stops_the_build_at_the_next_look(bot: Bot) -> None:
    """Another service process's intake (another queue on the same database) wakes no
    worker here: the worker's own look for a newer head, every ``cancel_poll_seconds``,
    finds it."""
    bot.worker.cancel_poll = 0.05
    old = bot.push(OLD, "open-7", "opened")
    running = threading.Thread(target=bot.worker.run_once)
    running.start()
    while running.is_alive() and not bot.warehouse.holding.wait(0.05):
        pass
    assert bot.warehouse.holding.is_set()
    other = JobQueue(bot.url)
    try:
        new = bot.push(NEW, "push-7", "synchronize", via=other)
    finally:
        other.close()
    running.join(SAFETY_S)
    assert not running.is_alive(), "the old head's build was not stopped"
    record = bot.queue.job(old)
    assert record is not None and record.status == JobStatus.SUPERSEDED
    assert record.error == f"superseded by job {new} (head {NEW})"


def test_a_build_is_not_stopped_by_a_later_event_of_the_same_head(bot: Bot) -> None:
    bot.push(OLD, "open-7", "opened")
    bot.warehouse.script = Script()  # no step holds
    later = bot.push(OLD, "ready-7", "ready_for_review")  # same head: supersedes nothing
    assert bot.worker.run_once() and bot.worker.run_once()
    assert {r.status for r in (bot.queue.job(later),) if r} == {JobStatus.DONE}
    assert bot.github.checks_on(OLD)["sluice/pr-environment"]["conclusion"] == "success"


def test_a_stopped_job_kills_its_driver_process(tmp_path: Path) -> None:
    """The runner's own stop, on a real child process (a stand-in for spark-submit: no
    Spark), as the time limit's: the whole process group is killed, the error says why."""
    paths = SparkPaths(root=tmp_path, logs=tmp_path / "logs")
    runner = SubmitRunner(SparkSettings(), paths, timeout=3600.0)
    home = tmp_path / "home"
    home.mkdir()
    env = child_environment(home)
    started = tmp_path / "started"
    spec = {"job_id": "j", "kind": "apply", "steps": []}
    got = Received(JobWrites(spec, None))  # type: ignore[arg-type]
    stop = cancel.Cancel()
    outcome: list[object] = []

    def run() -> None:
        with cancel.scope(stop):
            cmd = ["sh", "-c", f"touch {started}; sleep 3600 & wait"]
            code, _tail, stopped = runner._execute(cmd, env, tmp_path / "j.log", got, [])
            outcome.extend([code, stopped, runner._timed_out(None)])

    thread = threading.Thread(target=run)
    thread.start()
    while not started.exists() and thread.is_alive():
        thread.join(0.05)
    stop.cancel("superseded by job 9 (head d)")
    thread.join(SAFETY_S)
    assert not thread.is_alive()
    code, stopped, error = outcome
    assert code == -9 and stopped is True
    assert isinstance(error, JobCancelled)
    assert error.message == "the job was stopped: superseded by job 9 (head d)"
