"""The durable job queue, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.queue.schema import QUEUE
from sluice.bot.queue.store import Delivery, Job, JobQueue, JobStatus, NewJob
from sluice.core.db import migrate as runner
from sluice.core.db.engine import create_state_engine
from sluice.core.state.migrations import MIGRATIONS as STATE_STEPS
from sluice.core.state.migrations import STATE
from sluice.core.state.sql import open_state
from tests.helpers import pre_runner
from tests.helpers.dbshape import declared, inspected, recorded

STATE_MIGRATIONS = [m.number for m in STATE_STEPS]

OpenQueue = Callable[..., JobQueue]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def queue_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty state database: a SQLite file (in a folder not yet made), then PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'nested' / 'state.db'}"
    url: str = request.getfixturevalue("fresh_postgres_url")
    return url


@pytest.fixture
def open_queue(queue_url: str) -> Iterator[OpenQueue]:
    """Opens queues on the test's database; closes them all afterwards."""
    opened: list[JobQueue] = []

    def open_(**options: Any) -> JobQueue:
        queue = JobQueue(queue_url, **options)
        opened.append(queue)
        return queue

    yield open_
    for queue in opened:
        queue.close()


@pytest.fixture
def queue(open_queue: OpenQueue) -> JobQueue:
    return open_queue(max_attempts=2, lease_seconds=10.0)


def pr_job(
    number: int, head: str | None = None, *, kind: str = "pull_request", **kw: Any
) -> NewJob:
    payload = {"number": number, "head_sha": head}
    return NewJob(key=f"github:o/r#{number}", kind=kind, payload=payload, head_sha=head, **kw)


def add(queue: JobQueue, delivery: str, job: NewJob, now: float = 100.0) -> int:
    assert queue.accept(delivery, "github", job.kind, job, now)
    job_id = queue.delivery_job(delivery)
    assert job_id is not None
    return job_id


def claim(queue: JobQueue, now: float = 200.0, worker: str = "w1") -> Job:
    job = queue.claim(worker, now)
    assert job is not None
    return job


def status(queue: JobQueue, job_id: int) -> JobStatus:
    record = queue.job(job_id)
    assert record is not None
    return record.status


def test_a_delivery_is_accepted_once(queue: JobQueue) -> None:
    job = pr_job(1, "a1")
    assert queue.accept("d-1", "github", "pull_request", job, 100.0)
    assert not queue.accept("d-1", "github", "pull_request", job, 101.0)
    assert queue.depth() == 1
    # A delivery that asks for no work is remembered too.
    assert queue.accept("d-2", "github", "issues", None, 100.0)
    assert not queue.accept("d-2", "github", "issues", None, 100.0)
    assert queue.delivery_job("d-2") is None
    assert queue.depth() == 1


def test_a_claimed_job_carries_what_was_enqueued(queue: JobQueue) -> None:
    job_id = add(queue, "d-1", pr_job(7, "abc"), now=100.25)
    job = claim(queue, now=200.0)
    assert job == Job(
        id=job_id,
        delivery_id="d-1",
        key="github:o/r#7",
        kind="pull_request",
        payload={"number": 7, "head_sha": "abc"},
        head_sha="abc",
        attempts=1,
        created_ts=100.25,
    )
    record = queue.job(job_id)
    assert record is not None
    assert (record.status, record.worker, record.lease_until) == ("running", "w1", 210.0)
    assert queue.job(job_id + 1000) is None


def test_a_payload_comes_back_as_it_went_in(queue: JobQueue) -> None:
    # What JSON allows and the fast path refuses (an integer beyond 64 bits, a lone
    # surrogate) and what it writes differently (text beyond ASCII, floats).
    for index, extra in enumerate(
        [{"text": "Zürich ✓ 表"}, {"big": 2**70}, {"lone": "\ud800"}, {"f": 0.1, "n": None}]
    ):
        job = pr_job(index + 1, "abc")
        payload = {**job.payload, **extra, "nested": {"b": [1, 2], "a": True}}
        job_id = add(queue, f"d-{index}", NewJob(job.key, job.kind, payload, job.head_sha))
        claimed = claim(queue, worker=f"w{index}")
        assert (claimed.id, claimed.payload) == (job_id, payload)


def test_one_job_per_key_at_a_time_oldest_first(queue: JobQueue) -> None:
    a1 = add(queue, "d-1", pr_job(1, "a1"))
    b1 = add(queue, "d-2", pr_job(2, "b1"))
    a2 = add(queue, "d-3", pr_job(1, "a2"))
    c1 = add(queue, "d-4", pr_job(3, "c1"))
    assert claim(queue).id == a1
    assert claim(queue, worker="w2").id == b1  # a2 waits for a1; other keys do not
    assert claim(queue, worker="w3").id == c1
    assert queue.claim("w4", 200.0) is None
    assert queue.finish(a1, "w1", now=300.0)
    assert claim(queue, worker="w4").id == a2
    assert queue.counts() == {
        "queued": 0,
        "running": 3,
        "done": 1,
        "failed": 0,
        "superseded": 0,
    }


def test_finish_marks_done_or_failed_and_checks_the_worker(queue: JobQueue) -> None:
    first = add(queue, "d-1", pr_job(1))
    second = add(queue, "d-2", pr_job(1))
    claim(queue)
    assert not queue.finish(first, "someone-else", now=300.0)
    assert status(queue, first) == "running"
    assert queue.finish(first, "w1", error="boom", now=300.0)
    record = queue.job(first)
    assert record is not None
    assert (record.status, record.error, record.finished_ts) == ("failed", "boom", 300.0)
    assert not queue.finish(first, "w1", now=301.0)  # only once
    assert claim(queue).id == second  # the key was freed
    assert queue.finish(second, "w1", now=302.0)
    assert status(queue, second) == "done"


def test_a_new_head_supersedes_queued_work_of_the_same_kind(queue: JobQueue) -> None:
    running = add(queue, "d-1", pr_job(1, "h1"))
    claim(queue)
    old = add(queue, "d-2", pr_job(1, "h2"))
    same_head = add(queue, "d-3", pr_job(1, "h3"))
    comment = add(queue, "d-4", pr_job(1, "h2", kind="comment"))
    other_pr = add(queue, "d-5", pr_job(2, "h2"))
    newest = add(queue, "d-6", pr_job(1, "h3", supersede=True))
    assert status(queue, old) == "superseded"
    assert status(queue, running) == "running"  # left to finish
    assert status(queue, same_head) == "queued"
    assert status(queue, comment) == "queued"
    assert status(queue, other_pr) == "queued"
    record = queue.job(old)
    assert record is not None
    assert record.error is not None and str(newest) in record.error
    queue.finish(running, "w1", now=300.0)
    assert [claim(queue).id for _ in range(2)] == [same_head, other_pr]


def test_an_expired_lease_is_recovered_until_attempts_run_out(queue: JobQueue) -> None:
    job_id = add(queue, "d-1", pr_job(1))
    later = add(queue, "d-2", pr_job(1))
    first = claim(queue, now=0.0)
    assert first.attempts == 1
    assert queue.recover(9.0) == []  # lease runs until 10.0
    assert status(queue, job_id) == "running"
    assert queue.recover(11.0) == []  # back in the queue: attempts remain
    assert status(queue, job_id) == "queued"
    assert not queue.finish(job_id, "w1", now=11.0)  # the dead worker's claim is void
    second = claim(queue, now=12.0, worker="w2")  # same job again, before the later one
    assert (second.id, second.attempts) == (job_id, 2)
    failed = queue.recover(30.0)
    assert [(j.id, j.attempts) for j in failed] == [(job_id, 2)]
    record = queue.job(job_id)
    assert record is not None
    assert record.status == "failed" and record.error is not None
    assert queue.recover(60.0) == []  # reported once
    assert claim(queue, now=31.0).id == later  # the key was freed


def test_a_heartbeat_extends_the_lease(queue: JobQueue) -> None:
    job_id = add(queue, "d-1", pr_job(1))
    claim(queue, now=0.0)
    assert queue.heartbeat(job_id, "w1", 8.0)  # lease now until 18.0
    assert not queue.heartbeat(job_id, "w2", 8.0)
    assert queue.recover(15.0) == []
    assert status(queue, job_id) == "running"
    record = queue.job(job_id)
    assert record is not None and record.lease_until == 18.0
    queue.recover(19.0)
    assert status(queue, job_id) == "queued"
    assert not queue.heartbeat(job_id, "w1", 19.0)  # lost: stop working on it


def test_retry_requeues_in_place_until_attempts_run_out(queue: JobQueue) -> None:
    job_id = add(queue, "d-1", pr_job(1))
    later = add(queue, "d-2", pr_job(1))
    claim(queue)
    assert queue.retry(job_id, "w1", "flaky", 201.0)
    record = queue.job(job_id)
    assert record is not None
    assert (record.status, record.error, record.worker) == ("queued", "flaky", None)
    again = claim(queue, worker="w2")
    assert (again.id, again.attempts) == (job_id, 2)
    assert not queue.retry(job_id, "w1", "not mine", 202.0)
    assert not queue.retry(job_id, "w2", "still broken", 202.0)
    record = queue.job(job_id)
    assert record is not None
    assert (record.status, record.error) == ("failed", "still broken")
    assert claim(queue).id == later


def test_depth_counts_and_oldest_wait(queue: JobQueue) -> None:
    assert (queue.depth(), queue.oldest_wait(100.0)) == (0, 0.0)
    add(queue, "d-1", pr_job(1), now=100.0)
    add(queue, "d-2", pr_job(2), now=105.0)
    assert queue.depth() == 2
    assert queue.oldest_wait(112.5) == 12.5
    claim(queue)
    assert queue.depth() == 1
    assert queue.oldest_wait(112.5) == 7.5
    assert queue.counts()["running"] == 1


def test_the_queue_shares_the_state_database(queue_url: str) -> None:
    """Opening the queue first must not make the state store refuse the database."""
    queue = JobQueue(queue_url)
    try:
        store = open_state(queue_url)
        store.close()
        again = JobQueue(queue_url)  # tables already there
        again.close()
    finally:
        queue.close()


def test_processes_starting_together_create_the_tables_once(queue_url: str) -> None:
    errors: list[BaseException] = []
    opened: list[JobQueue] = []
    lock = threading.Lock()

    def start() -> None:
        try:
            queue = JobQueue(queue_url)
        except BaseException as exc:
            errors.append(exc)
            return
        with lock:
            opened.append(queue)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for queue in opened:
        queue.close()
    assert errors == []
    assert len(opened) == 4
    engine = create_state_engine(queue_url)
    try:
        assert inspected(engine) == declared(
            engine.dialect, STATE.tables, QUEUE.tables, runner.metadata
        )
        assert recorded(engine) == {"state": STATE_MIGRATIONS, "queue": [1, 2, 3, 4]}
    finally:
        engine.dispose()


def test_queue_tables_made_before_the_migration_runner_are_adopted(queue_url: str) -> None:
    engine = create_state_engine(queue_url)
    try:
        with engine.begin() as conn:  # what JobQueue made before the runner
            pre_runner.state.create_all(conn)
            conn.execute(pre_runner.state.tables["sluice_schema_version"].insert(), {"version": 2})
            pre_runner.queue.create_all(conn)
            conn.exec_driver_sql(pre_runner.QUEUED_BY_KEY)
            conn.execute(
                pre_runner.queue.tables["sluice_deliveries"].insert(),
                {"delivery_id": "d-old", "forge": "github", "event": "push", "received_ts": 1},
            )
        queue = JobQueue(queue_url)
        try:
            assert not queue.accept("d-old", "github", "push", None, 2.0)  # still remembered
            assert queue.accept_many([Delivery("d-new", "github", "pr", pr_job(1, "a"), 3.0)])
            assert queue.depth() == 1
        finally:
            queue.close()
        assert inspected(engine) == declared(
            engine.dialect, STATE.tables, QUEUE.tables, runner.metadata
        )
        assert recorded(engine) == {"state": STATE_MIGRATIONS, "queue": [1, 2, 3, 4]}
    finally:
        engine.dispose()


def test_concurrent_claimers_run_each_job_once_and_keys_alone(open_queue: OpenQueue) -> None:
    hammer([open_queue()])


@pytest.mark.postgres
def test_service_processes_sharing_postgresql_run_each_job_once(fresh_postgres_url: str) -> None:
    """Two queues, two engines: as two service processes on one database."""
    pool = [JobQueue(fresh_postgres_url), JobQueue(fresh_postgres_url)]
    try:
        hammer(pool)
    finally:
        for queue in pool:
            queue.close()


def hammer(pool: list[JobQueue], total: int = 200, keys: int = 20, threads: int = 8) -> None:
    """``threads`` workers spread over ``pool`` claim and finish ``total`` jobs."""
    for i in range(total):
        # Runs of one key: a claimer ignoring keys would take neighbours of one key at once.
        job = NewJob(key=f"k{i // (total // keys)}", kind="pull_request", payload={"i": i})
        assert pool[0].accept(f"d-{i}", "github", "pull_request", job, 100.0 + i)

    lock = threading.Lock()
    running: set[str] = set()
    claimed: dict[str, list[int]] = {}
    done: list[int] = []
    errors: list[str | BaseException] = []
    deadline = time.monotonic() + 120  # a hang, not a speed limit (CI machines are loaded)

    def work(queue: JobQueue, name: str) -> None:
        try:
            while True:
                with lock:
                    if len(done) >= total or errors:
                        return
                if time.monotonic() > deadline:
                    errors.append(f"{name}: timed out")
                    return
                job = queue.claim(name, 1000.0)
                if job is None:
                    time.sleep(0.001)
                    continue
                with lock:
                    if job.key in running:
                        errors.append(f"two jobs of {job.key} running at once")
                    running.add(job.key)
                    claimed.setdefault(job.key, []).append(job.id)
                time.sleep(0.002)  # the job "runs": others claim meanwhile
                with lock:
                    running.discard(job.key)
                    done.append(job.id)
                if not queue.finish(job.id, name, now=1001.0):
                    errors.append(f"{name} could not finish job {job.id}")
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=work, args=(pool[t % len(pool)], f"w{t}")) for t in range(threads)
    ]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()

    assert errors == []
    assert sorted(done) == sorted(set(done)) and len(done) == total
    assert all(ids == sorted(ids) for ids in claimed.values())  # per key, oldest first
    assert pool[0].counts()["done"] == total
    assert pool[-1].depth() == 0


def test_accept_many_refuses_duplicates_within_and_across_batches(queue: JobQueue) -> None:
    batch = [("d-1", pr_job(1, "a")), ("d-2", pr_job(2, "b")), ("d-1", pr_job(1, "z")),
             ("d-3", None), ("d-4", pr_job(3, "c"))]  # fmt: skip
    got = queue.accept_many([Delivery(d, "github", "pull_request", j, 100.0) for d, j in batch])
    assert got == [True, True, False, True, True]
    again = [Delivery(d, "github", "pull_request", pr_job(9), 101.0) for d in ("d-2", "d-5")]
    assert queue.accept_many(again) == [False, True]
    assert queue.accept_many([]) == []
    assert queue.depth() == 4
    assert queue.delivery_job("d-3") is None
    ids = [queue.delivery_job(d) for d in ("d-1", "d-2", "d-4", "d-5")]
    assert all(i is not None for i in ids)
    assert ids == sorted(ids)  # job ids follow arrival order
    record = queue.job(ids[0] or 0)
    assert record is not None and record.job.head_sha == "a"  # the first copy's job


def _outcome(queue: JobQueue, deliveries: list[str]) -> list[tuple[str, str | None]]:
    """Each delivery's job status and error, job ids replaced by the delivery they came from."""
    names = {queue.delivery_job(d): d for d in deliveries}
    out = []
    for d in deliveries:
        record = queue.job(queue.delivery_job(d) or 0)
        assert record is not None
        error = record.error
        if error is not None:
            for job_id, name in names.items():
                error = error.replace(f"job {job_id} ", f"job {name} ")
        out.append((str(record.status), error))
    return out


def test_accept_many_supersedes_as_accepting_one_by_one(open_queue: OpenQueue) -> None:
    # The same deliveries, for PRs named differently, one by one and in one batch: the same
    # jobs end queued, running or superseded, by the same jobs.
    def deliveries(tag: str) -> list[Delivery]:
        def job(pr: int, head: str | None, kind: str = "pull_request", sup: bool = True) -> NewJob:
            return NewJob(key=f"{tag}#{pr}", kind=kind, payload={}, head_sha=head, supersede=sup)

        specs = [
            job(1, "h1"), job(1, "h2", sup=False), job(1, "h2", kind="comment", sup=False),
            job(2, "h1"), job(1, "h3"), job(1, "h3"), job(1, None), job(2, "h2"),
            job(1, "h4", kind="comment"), job(1, None), job(1, "h5"),
        ]  # fmt: skip
        return [Delivery(f"{tag}-{i}", "github", "pull_request", j, 100.0 + i)
                for i, j in enumerate(specs)]  # fmt: skip

    queue = open_queue()
    for tag, worker in (("one", "w1"), ("many", "w2")):
        for i, head in enumerate(["h0", "h3"]):
            job = NewJob(key=f"{tag}#1", kind="pull_request", payload={}, head_sha=head,
                         supersede=True)  # fmt: skip
            assert queue.accept(f"{tag}-pre{i}", "github", "pull_request", job, 50.0)
            if i == 0:  # running: left to finish
                assert claim(queue, worker=worker).delivery_id == f"{tag}-pre0"
    for d in deliveries("one"):
        assert queue.accept(d.delivery_id, d.forge, d.event, d.job, d.now)
    assert queue.accept_many(deliveries("many")) == [True] * 11
    names = [f"pre{i}" for i in range(2)] + [str(i) for i in range(11)]
    one = _outcome(queue, [f"one-{n}" for n in names])
    many = _outcome(queue, [f"many-{n}" for n in names])
    assert [(s, e and e.replace("one-", "")) for s, e in one] == [
        (s, e and e.replace("many-", "")) for s, e in many
    ]
    assert [s for s, _ in one].count("superseded") >= 5  # the case exercises supersede


def test_accept_many_on_concurrent_threads(open_queue: OpenQueue) -> None:
    queue = open_queue()
    got: list[list[bool]] = []
    errors: list[BaseException] = []

    def batch(t: int) -> None:
        names = [f"c-{(t * 5 + i) % 40}" for i in range(10)]  # overlapping ids across threads
        items = [Delivery(n, "github", "pull_request",
                          pr_job(int(n[2:]) % 3, n, supersede=True), 1.0)
                 for n in names]  # fmt: skip
        try:
            got.append(queue.accept_many(items))
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=batch, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(sum(g) for g in got) == 40  # each id stored once
    counts = queue.counts()
    assert counts["queued"] + counts["superseded"] == 40
    assert counts["queued"] == 3  # the newest job of each of the three PRs


def test_purge_forgets_old_finished_work_and_keeps_the_rest(queue: JobQueue) -> None:
    done = add(queue, "old-done", pr_job(1, "a"), now=100.0)
    queued = add(queue, "old-queued", pr_job(2, "b"), now=100.0)
    assert queue.accept("old-ignored", "github", "issues", None, 100.0)
    job = claim(queue, now=150.0)
    assert job.id == done
    assert queue.finish(done, "w1", now=160.0)
    fresh = add(queue, "fresh", pr_job(3, "c"), now=5000.0)
    assert queue.purge(now=5000.0, keep_seconds=1000.0) == (1, 2)
    assert queue.job(done) is None and queue.delivery_job("old-done") is None
    assert queue.delivery_job("old-ignored") is None
    # Still waiting: kept, however old, and so is its delivery (no double processing).
    assert status(queue, queued) == JobStatus.QUEUED and queue.delivery_job("old-queued") == queued
    assert status(queue, fresh) == JobStatus.QUEUED
    assert not queue.accept("old-queued", "github", "pull_request", pr_job(2, "b"), 5001.0)
    assert queue.purge(now=5000.0, keep_seconds=1000.0) == (0, 0)


def test_a_retried_job_waits_with_backoff_and_holds_its_key(open_queue: OpenQueue) -> None:
    from sluice.bot.queue.retry import RETRY_CAP_SECONDS, backoff

    queue = open_queue(max_attempts=4, retry_seconds=10.0)
    first = add(queue, "d1", pr_job(1, "a"))
    later = add(queue, "d2", pr_job(1, "b"))  # the same key, behind it
    other = add(queue, "d3", pr_job(2, "c"))
    assert claim(queue, now=200.0).id == first
    assert queue.retry(first, "w1", "GitHub unreachable", 200.0)
    # Neither the retried job nor the one behind it runs before the wait; another key does.
    assert claim(queue, now=200.1).id == other
    assert queue.claim("w2", 204.9) is None  # 10 s x [0.5, 1.5): at least 5 s
    job = queue.claim("w2", 215.0)  # at most 15 s
    assert job is not None and job.id == first and job.attempts == 2
    # The second failure waits twice as long: 20 s x [0.5, 1.5).
    assert queue.retry(first, "w2", "still down", 215.0)
    assert queue.claim("w3", 224.9) is None
    job = queue.claim("w3", 245.0)
    assert job is not None and job.id == first
    queue.finish(first, "w3", now=246.0)
    assert claim(queue, now=246.0).id == later
    # The wait doubles per attempt up to a cap, and jitter spreads it over [0.5, 1.5).
    assert backoff(10.0, 1, lambda: 0.5) == 10.0
    assert backoff(10.0, 3, lambda: 0.5) == 40.0
    assert backoff(10.0, 30, lambda: 0.0) == RETRY_CAP_SECONDS * 0.5
    assert backoff(0.0, 3) == 0.0  # retry_seconds 0: at once, as before


def test_a_queue_made_before_the_backoff_column_gets_it(queue_url: str) -> None:
    from sqlalchemy import inspect, text

    queue = JobQueue(queue_url)
    add(queue, "d1", pr_job(1, "a"))
    queue.close()
    engine = create_state_engine(queue_url)
    try:
        with engine.begin() as conn:  # as migration 2 left it
            conn.execute(text("ALTER TABLE sluice_jobs DROP COLUMN not_before"))
            conn.execute(text("DROP TABLE sluice_leases"))  # migration 4's
            conn.execute(
                text("DELETE FROM sluice_migrations WHERE track = 'queue' AND number >= 3")
            )
        queue = JobQueue(queue_url)
        try:
            assert claim(queue).attempts == 1  # the old row is still there and runs
        finally:
            queue.close()
        columns = {c["name"] for c in inspect(engine).get_columns("sluice_jobs")}
        assert "not_before" in columns
        assert recorded(engine)["queue"] == [1, 2, 3, 4]
    finally:
        engine.dispose()


def test_retry_backoff_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sluice.bot.entry.settings import ServiceSettings

    monkeypatch.delenv("SLUICE_RETRY_SECONDS", raising=False)
    assert ServiceSettings(workdir=tmp_path, webhook_secret="s").retry_seconds == 10.0
    monkeypatch.setenv("SLUICE_RETRY_SECONDS", "2.5")
    assert ServiceSettings(workdir=tmp_path, webhook_secret="s").retry_seconds == 2.5
    with pytest.raises(ValueError, match="retry_seconds must not be negative"):
        JobQueue(f"sqlite:///{tmp_path / 'q.db'}", retry_seconds=-1)


def test_a_repository_s_page_counts_its_own_jobs_alone(queue: JobQueue) -> None:
    """The web UI's list: a repository's keys (``#``, ``:prod``, ``@sha``, ``^branch``),
    exactly; never a repository whose name starts the same, nor one differing by case or
    holding a LIKE wildcard where the name has a letter."""
    repo = "github:octo/ware_house"
    keys = [f"{repo}#1", f"{repo}:prod", f"{repo}@{'a' * 40}", f"{repo}^main"]
    others = [f"{repo}-private#1", f"{repo}s:prod", "github:octo/wareXhouse#2"]
    others += ["GITHUB:OCTO/WARE_HOUSE#3", f"{repo}", f"{repo}/x#4"]
    for n, key in enumerate(keys + others):
        job = NewJob(key=key, kind="pull_request", payload={"n": n})
        assert queue.accept(f"d-{n}", "github", "pull_request", job, 100.0 + n)
    records, total = queue.page(repo, offset=0, limit=2)
    assert total == len(keys)
    assert [r.job.key for r in records] == [keys[3], keys[2]]  # newest first
    records, total = queue.page(repo, offset=2, limit=10)
    assert (total, [r.job.key for r in records]) == (len(keys), [keys[1], keys[0]])
    assert queue.page("github:octo/ware", offset=0, limit=10) == ([], 0)
