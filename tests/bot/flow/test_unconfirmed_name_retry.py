"""A job that says no repository id (here the scheduled drift check) under a name bound to
a forge id runs only once the forge says that id's repository has the name now
(dispatch._still_named). When the forge fails answering (an error, not an answer), the job
is tried again by the queue with its backoff, like any job a forge error stopped, rather
than dropped until the next period; a "no such repository" answer stays a refusal, and a
job given up on posts nothing under the unconfirmed name.

Through the real queue (SQLite), its worker, the flow bound as the service binds it, and
the drift-repair world (tests/helpers/repair_red_team.py: the in-memory GitHub, the ledger,
the scripted warehouse).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from sluice.bot.events.neutral import DriftCheckEvent, Event, pr_key
from sluice.bot.flow import dispatch
from sluice.bot.forge.base import ForgeError
from sluice.bot.present import checks
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.repair_red_team import HOSTILE, KEY, ONE, OWNER, C, RepairWorld


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepairWorld]:
    """Prod at C, its name bound to its forge id by a first drift check (the forge names
    the repository so, made before the service's records); then a view redefined by hand,
    which the next drift check reports."""
    made = RepairWorld(tmp_path, ONE)
    try:
        made.check()
        assert made.ledger.name_binding(KEY) == (KEY, CASE_REPOSITORY_ID)
        assert made.drift().conclusion == "success"
        made.warehouse.views["jaffle.customers"] = HOSTILE
        yield made
    finally:
        made.close()


def _queued(tmp_path: Path, attempts: int = 3) -> JobQueue:
    """The scheduled drift check of OWNER, queued by name alone (no id), as the scheduler
    queues it; failed attempts wait no time."""
    queue = JobQueue(f"sqlite:///{tmp_path / 'queue.db'}", max_attempts=attempts,
                     retry_seconds=0)  # fmt: skip
    event = DriftCheckEvent("github", OWNER, None)
    job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
    assert queue.accept("drift-1", "github", event.kind, job, time.time())
    return queue


def _worker(world: RepairWorld, queue: JobQueue, given_up: list[str]) -> Worker:
    bound = dispatch.bound(world.deps)

    def abandon(event: Event, why: str) -> None:
        given_up.append(why)
        bound["abandon"](event, why)

    return Worker(queue, handle=bound["handle"], abandon=abandon)


def _failing(world: RepairWorld, monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """GitHub fails the first ``times`` times it is asked which repository an id is."""
    asked: list[int] = []
    answer = world.github.repository_of

    def flaky(repo_id: int) -> str | None:
        asked.append(repo_id)
        if len(asked) <= times:
            raise ForgeError(f"GitHub answered 502 reading the name of repository {repo_id}")
        return answer(repo_id)

    monkeypatch.setattr(world.github, "repository_of", flaky)
    return asked


def test_a_forge_error_confirming_the_name_is_retried_by_the_queue(
    world: RepairWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _failing(world, monkeypatch, times=1)
    queue, given_up = _queued(tmp_path), []
    worker = _worker(world, queue, given_up)
    try:
        assert worker.run_once()  # the forge fails: nothing run, the job goes back
        assert asked == [CASE_REPOSITORY_ID]
        assert world.drift().conclusion == "success", "a check ran on an unconfirmed name"
        assert worker.run_once(), "the job was dropped, not tried again"
        assert asked == [CASE_REPOSITORY_ID] * 2
        drifted = world.github.checks[world.github.refs["main"]][checks.DRIFT]
        assert drifted.conclusion == "failure", drifted  # the drift check ran this time
        assert not worker.run_once() and given_up == []
    finally:
        queue.close()


def test_a_forge_that_says_no_such_repository_is_still_a_refusal(
    world: RepairWorld, tmp_path: Path
) -> None:
    del world.github.repositories[CASE_REPOSITORY_ID]  # unknown to the forge now
    queue, given_up = _queued(tmp_path), []
    worker = _worker(world, queue, given_up)
    try:
        assert worker.run_once()
        assert not worker.run_once(), "a refusal was retried"
        assert world.drift().conclusion == "success" and given_up == []
    finally:
        queue.close()


def test_a_job_given_up_on_posts_nothing_under_a_name_never_confirmed(
    world: RepairWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _failing(world, monkeypatch, times=99)
    queue, given_up = _queued(tmp_path, attempts=2), []
    worker = _worker(world, queue, given_up)
    since = len(world.github.calls)
    try:
        assert worker.run_once() and worker.run_once()
        assert not worker.run_once()
    finally:
        queue.close()
    [why] = given_up
    assert "could not say which repository id" in why and "did not start" in why, why
    assert len(asked) == 3  # each attempt, then the give-up's own question
    assert world.github.writes(since) == [], "posted under an unconfirmed name"
    assert world.drift().conclusion == "success"


def test_a_forge_error_naming_a_name_bound_to_no_id_is_retried_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name with records but bound to no id (dispatch._unbound_still_named): the forge
    asked which repository has the name fails once; the job is tried again, and then
    asks again (what the answer decides is tested with the names' red team)."""
    world = RepairWorld(tmp_path, ONE)
    engine = create_engine(world.url)  # the binding removed, as an operator removes it
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM sluice_repositories WHERE name = :name"),
                     {"name": KEY.casefold()})  # fmt: skip
    engine.dispose()
    answer, asked = world.github.identity, []

    def flaky(repo_id: int | None = None) -> object:
        asked.append(repo_id)
        if len(asked) == 1:
            raise ForgeError("GitHub answered 502 reading repository octo/warehouse")
        return answer(repo_id)

    monkeypatch.setattr(world.github, "identity", flaky)
    queue, given_up = _queued(tmp_path), []
    worker = _worker(world, queue, given_up)
    try:
        assert world.ledger.name_binding(KEY) is None
        assert worker.run_once()
        assert asked == [None] and checks.DRIFT not in world.github.checks.get(C, {})
        assert worker.run_once(), "the job was dropped, not tried again"
        assert asked == [None, None]
        assert not worker.run_once() and given_up == []
    finally:
        queue.close()
        world.close()
