"""The queue's fairness (issue 45, point 2): promotions first, a slot kept for them, no
build behind a long backfill, repositories in turn, caps per repository and overall.

The rule is :mod:`sluice.bot.queue.fairness` (its examples run as doctests); here it is
held on the real queue, SQLite and PostgreSQL, by claiming and finishing jobs in a fixed
order and counting, for each job, what started before it and what it waited behind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import Event, ScheduledRunEvent, TagEvent, pr_key
from sluice.bot.present.metrics import JOB_CLASSES, Registry
from sluice.bot.queue.fairness import Caps, JobClass, Ready, Running, job_class, startable
from sluice.bot.queue.store import Job, JobQueue, NewJob
from sluice.bot.queue.worker import Worker
from sluice.core.errors import ConfigError

A, B = "github:acme/big", "github:acme/small"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    found: str = request.getfixturevalue("fresh_postgres_url")
    return found


@dataclass
class World:
    """A queue, a clock that ticks once per delivery, and what ran: the ids in the order
    they started, and for each job the running jobs it found when it was accepted."""

    queue: JobQueue
    now: float = 100.0
    started: list[int] = field(default_factory=list)
    running: dict[int, Job] = field(default_factory=dict)
    found_running: dict[int, set[int]] = field(default_factory=dict)
    waited_behind: dict[int, set[int]] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)

    def add(self, name: str, key: str, kind: str = "pull_request") -> int:
        self.now += 1
        job = NewJob(key=key, kind=kind, payload={"name": name}, head_sha=name)
        assert self.queue.accept(name, "github", kind, job, self.now)
        job_id = self.queue.delivery_job(name)
        assert job_id is not None
        self.found_running[job_id] = set(self.running)
        return job_id

    def claim_all(self) -> list[int]:
        """Claim until the queue gives nothing: the ids, in order."""
        got = []
        while (job := self.queue.claim(f"w{len(self.started)}", self.now)) is not None:
            got.append(job.id)
            self.started.append(job.id)
            self.running[job.id] = job
            # What it waited behind: the jobs running when it came that ended before it
            # started (each ended job freed the slot it took).
            self.waited_behind[job.id] = self.found_running.get(job.id, set()) & self.ended
        return got


@pytest.fixture
def world(url: str) -> Iterator[World]:
    queue = JobQueue(url, lease_seconds=600.0, caps=Caps(max_running=3))
    yield World(queue)
    queue.close()


def _finish(world: World, job_id: int) -> None:
    """End a running job (its worker's name is the claim's)."""
    record = world.queue.job(job_id)
    assert record is not None and record.worker is not None
    assert world.queue.finish(job_id, record.worker, now=world.now + 1)
    world.now += 1
    world.running.pop(job_id)
    world.ended.add(job_id)


def _oldest_running(world: World) -> int:
    """The running job that started first."""
    return next(job_id for job_id in world.started if job_id in world.running)


def test_a_promotion_and_a_small_pr_are_never_behind_a_flood_or_a_backfill(world: World) -> None:
    # acme/big's scheduled backfill, then twenty of its pull requests, all at once.
    backfill = world.add("run", f"{A}:prod", "run")
    flood = [world.add(f"big-{n}", f"{A}#{n}") for n in range(1, 21)]
    # Three slots, one kept for promotions: the backfill (the oldest) takes one build slot,
    # as it leaves the other to builds; the first build takes that one.
    assert world.claim_all() == [backfill, flood[0]]
    # acme/small's pull request and a merge into acme/small come after the flood.
    small = world.add("small-1", f"{B}#1")
    merge = world.add("merge", f"{B}:prod")
    # The merge starts at once, in the slot kept for it: behind no running build.
    assert world.claim_all() == [merge]
    assert world.waited_behind[merge] == set()
    # The first build to end lets acme/small's PR in, before the nineteen of acme/big's
    # that came before it: it waited behind that one running build, not the backfill.
    _finish(world, flood[0])
    assert world.claim_all() == [small]
    assert world.waited_behind[small] == {flood[0]}
    assert backfill in world.running
    # Then acme/big's builds go on, oldest first, in the slots builds have: never more
    # than two at once with the backfill (the third is kept), one background job at most.
    _finish(world, merge)
    order: list[int] = []
    while world.running:
        _finish(world, _oldest_running(world))
        order += world.claim_all()
        classes = [job_class(j.key, j.kind) for j in world.running.values()]
        assert classes.count(JobClass.BACKGROUND) <= 1
        assert len(world.running) <= 2
    assert order == flood[1:]
    assert world.started.index(small) < world.started.index(flood[1])


def test_a_stream_of_prs_cannot_hold_the_scheduled_run_off(world: World) -> None:
    first = [world.add(f"big-{n}", f"{A}#{n}") for n in (1, 2)]
    assert world.claim_all() == first  # both build slots taken
    backfill = world.add("run", f"{A}:prod", "run")
    later = [world.add(f"big-{n}", f"{A}#{n}") for n in range(3, 9)]
    # Builds accepted after it keep coming; the first slot that frees goes to the run,
    # since no build accepted before it waits; then builds take turns in the other slot.
    _finish(world, first[0])
    assert world.claim_all() == [backfill]
    _finish(world, first[1])
    assert world.claim_all() == [later[0]]
    _finish(world, later[0])
    assert world.claim_all() == [later[1]]
    assert backfill in world.running  # a long job: one slot, the other builds on


def test_repositories_take_turns(world: World) -> None:
    bigs = [world.add(f"big-{n}", f"{A}#{n}") for n in range(1, 6)]
    smalls = [world.add(f"small-{n}", f"{B}#{n}") for n in range(1, 3)]
    order = world.claim_all()
    while world.running:
        _finish(world, _oldest_running(world))
        order += world.claim_all()
    # acme/small's two PRs, accepted after all five of acme/big's, start second and fourth.
    assert order == [bigs[0], smalls[0], bigs[1], smalls[1], *bigs[2:]]


def test_a_repository_cap_leaves_slots_to_the_others(url: str) -> None:
    queue = JobQueue(url, lease_seconds=600.0, caps=Caps(max_running=4, per_repository=1))
    try:
        world = World(queue)
        bigs = [world.add(f"big-{n}", f"{A}#{n}") for n in range(1, 4)]
        merge = world.add("merge", f"{A}:prod")
        small = world.add("small-1", f"{B}#1")
        # The merge first (a promotion, not capped, not counted); then one of acme/big's
        # (the oldest: neither repository runs a build), acme/small's; no second of acme/big's.
        assert world.claim_all() == [merge, bigs[0], small]
        _finish(world, bigs[0])
        assert world.claim_all() == [bigs[1]]
    finally:
        queue.close()


def test_one_slot_serves_everything_in_turn(url: str) -> None:
    """With one slot none is kept: a promotion waits behind at most the one running."""
    queue = JobQueue(url, lease_seconds=600.0, caps=Caps(max_running=1))
    try:
        world = World(queue)
        build = world.add("big-1", f"{A}#1")
        later = world.add("big-2", f"{A}#2")
        assert world.claim_all() == [build]
        merge = world.add("merge", f"{A}:prod")
        assert world.claim_all() == []
        _finish(world, build)
        assert world.claim_all() == [merge]
        assert world.waited_behind[merge] == {build}
        _finish(world, merge)
        assert world.claim_all() == [later]
    finally:
        queue.close()


def test_without_caps_every_worker_may_build_but_one_background_job_at_a_time() -> None:
    ready = [
        Ready(1, f"{A}:prod", "run"),
        Ready(2, f"{B}:prod", "janitor"),
        Ready(3, f"{A}#1", "pull_request"),
        Ready(4, f"{B}:prod", "tag"),
    ]
    assert [j.id for j in startable(ready, [], Caps())] == [4, 1, 2, 3]
    running = [Running(f"{A}:prod", "run")]
    assert [j.id for j in startable(ready[1:], running, Caps())] == [4, 3]


def test_the_queue_caps_are_service_settings() -> None:
    settings = ServiceSettings(
        insecure_no_signature=True,
        queue_max_running="6",  # as the environment gives it
        queue_max_running_per_repository=2,
    )
    assert settings.queue_caps() == Caps(max_running=6, per_repository=2)
    assert "queue: at most 6 running, 2 per repository" in settings.summary()
    assert ServiceSettings(insecure_no_signature=True).queue_caps() == Caps()


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"queue_max_running": "many"}, "SLUICE_QUEUE_MAX_RUNNING is 'many': it should be a whole"),
        ({"queue_max_running": 0}, "SLUICE_QUEUE_MAX_RUNNING is '0'"),
        ({"queue_max_running_per_repository": "-1"}, "SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY is"),
        (
            {"queue_max_running": 2, "queue_max_running_per_repository": 3},
            "SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY (3) is more than SLUICE_QUEUE_MAX_RUNNING (2)",
        ),
    ],
)
def test_a_wrong_cap_says_which_setting_and_how_to_fix_it(
    given: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        ServiceSettings(insecure_no_signature=True, **given)  # type: ignore[arg-type]
    assert says in str(raised.value)
    assert raised.value.hint


def test_the_environment_names_the_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_QUEUE_MAX_RUNNING", "3")
    monkeypatch.setenv("SLUICE_QUEUE_MAX_RUNNING_PER_REPOSITORY", "1")
    caps = ServiceSettings(insecure_no_signature=True).queue_caps()
    assert caps == Caps(max_running=3, per_repository=1)


def test_each_class_s_wait_is_a_metric(tmp_path: Path) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}")
    metrics = Registry()
    worker = Worker(queue, handle=lambda _event: None, abandon=lambda *_: None, metrics=metrics)
    try:
        events: list[tuple[str, Event]] = [
            ("tag", TagEvent(forge="github", repo="acme/big", installation_id=None,
                               tag="v1", sha="a" * 40, source="push")),
            ("run", ScheduledRunEvent(forge="github", repo="acme/big", installation_id=None)),
        ]  # fmt: skip
        for name, event in events:
            job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
            assert queue.accept(name, "github", event.kind, job, 1.0)  # long ago
        assert worker.run_once() and worker.run_once()
    finally:
        queue.close()
    counts = {
        s.labels["class"]: s.value
        for family in text_string_to_metric_families(metrics.render())
        for s in family.samples
        if s.name == "sluice_queue_wait_seconds_count"
    }
    assert counts == {"promotion": 1.0, "background": 1.0}
    assert {c.label for c in JobClass} == set(JOB_CLASSES)
