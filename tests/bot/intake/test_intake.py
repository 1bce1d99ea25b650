"""Group commit of webhook deliveries (the intake), on SQLite and on a real PostgreSQL.

Failures are real: a trigger in the database refuses chosen deliveries, another
connection holds SQLite's write lock, or the PostgreSQL database is dropped.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, make_url, text

from sluice.bot.intake.group_commit import Intake, IntakeClosed
from sluice.bot.queue.store import Delivery, JobQueue, NewJob
from sluice.core.db import engine
from sluice.core.errors import StateError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def queue_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    url: str = request.getfixturevalue("fresh_postgres_url")
    return url


@pytest.fixture
def queue(queue_url: str) -> Iterator[JobQueue]:
    queue = JobQueue(queue_url)
    yield queue
    queue.close()


class LoopIntake:
    """An intake on an event loop in a thread of its own, for tests that hand it deliveries
    from plain threads (the service's requests hand them over on the loop itself)."""

    def __init__(self, queue: JobQueue) -> None:
        self.intake = Intake(queue)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def start(self) -> None:
        async def start() -> None:
            self.intake.start()

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(timeout=30)

    def submit(self, item: Delivery) -> Future[bool]:
        """Hand over a delivery; the future resolves after its commit (in submission order)."""
        return asyncio.run_coroutine_threadsafe(self.intake.accept(item), self.loop)

    def stop(self, timeout: float = 30, *, keep_loop: bool = False) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.intake.stop(), self.loop).result(timeout)
        finally:
            if not keep_loop:
                self.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture
def intake(queue: JobQueue) -> Iterator[LoopIntake]:
    intake = LoopIntake(queue)
    intake.start()
    yield intake
    intake.stop(timeout=30)


def delivery(name: str, pr: int = 1, head: str | None = "h1", now: float = 100.0) -> Delivery:
    job = NewJob(key=f"github:o/r#{pr}", kind="pull_request", payload={"pr": pr, "name": name},
                 head_sha=head, supersede=True)  # fmt: skip
    return Delivery(name, "github", "pull_request", job, now)


def refuse(url: str, where: str) -> None:
    """Make the database itself refuse inserts of deliveries ``where`` (an SQL condition)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.execute(text(
                    "CREATE TRIGGER refuse BEFORE INSERT ON sluice_deliveries "
                    f"WHEN {where.replace('delivery_id', 'NEW.delivery_id')} "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"
                ))  # fmt: skip
            else:
                conn.execute(text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    f"IF {where.replace('delivery_id', 'NEW.delivery_id')} THEN "
                    "RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$"
                ))  # fmt: skip
                conn.execute(text(
                    "CREATE TRIGGER refuse BEFORE INSERT ON sluice_deliveries "
                    "FOR EACH ROW EXECUTE FUNCTION refuse()"
                ))  # fmt: skip
    finally:
        engine.dispose()


def test_many_concurrent_deliveries_share_transactions_and_get_their_answers(
    queue: JobQueue, intake: LoopIntake
) -> None:
    # 40 threads each send 10 deliveries; every fifth id is sent twice (a redelivery).
    answers: dict[str, list[bool]] = {}
    lock = threading.Lock()
    start = threading.Barrier(40)

    def sender(t: int) -> None:
        start.wait()
        for i in range(10):
            name = f"d-{t}-{i}" if i % 5 else f"d-{t}-0"
            fresh = intake.submit(delivery(name, pr=t % 7 + 1, head=name)).result(timeout=60)
            with lock:
                answers.setdefault(name, []).append(fresh)

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 40 * 9
    for name, got in answers.items():
        assert sorted(got, reverse=True) == ([True, False] if name.endswith("-0") else [True])
        assert queue.delivery_job(name) is not None
    assert intake.intake.largest_batch > 1  # deliveries waiting together: one transaction
    assert intake.intake.transactions < 400
    # Each PR's jobs superseded each other: one queued job per PR is left.
    assert queue.counts()["queued"] == 7
    assert queue.counts()["superseded"] == 40 * 9 - 7


def test_asyncio_requests_wait_for_the_commit(queue: JobQueue) -> None:
    async def send() -> list[bool]:
        intake = Intake(queue)
        intake.start()
        names = [f"a-{i % 30}" for i in range(60)]  # each id twice
        try:
            return await asyncio.gather(*(intake.accept(delivery(n, head=n)) for n in names))
        finally:
            await intake.stop()

    got = asyncio.run(send())
    assert got[:30] == [True] * 30 and got[30:] == [False] * 30
    assert all(queue.delivery_job(f"a-{i}") is not None for i in range(30))


def test_a_refused_delivery_fails_alone(queue_url: str, queue: JobQueue) -> None:
    refuse(queue_url, "delivery_id = 'poison'")
    intake = LoopIntake(queue)
    # Submitted before the writer starts, so that they surely share one transaction.
    futures = [intake.submit(delivery(n, pr=i, head=n)) for i, n in
               enumerate(["ok-1", "poison", "ok-2", "ok-1"])]  # fmt: skip
    intake.start()
    try:
        assert futures[0].result(timeout=60) is True
        with pytest.raises(StateError, match="refused by the test trigger"):
            futures[1].result(timeout=60)
        assert futures[2].result(timeout=60) is True
        assert futures[3].result(timeout=60) is False  # the second copy of ok-1
    finally:
        intake.stop(timeout=30)
    assert queue.delivery_job("ok-1") is not None and queue.delivery_job("ok-2") is not None
    assert queue.delivery_job("poison") is None
    assert queue.counts()["queued"] == 2


def test_a_failing_transaction_answers_every_waiter(queue_url: str, queue: JobQueue) -> None:
    refuse(queue_url, "delivery_id LIKE 'x-%'")
    intake = LoopIntake(queue)
    futures = [intake.submit(delivery(f"x-{i}", pr=i)) for i in range(20)]
    intake.start()
    try:
        for future in futures:
            with pytest.raises(StateError, match="refused by the test trigger"):
                future.result(timeout=60)
        # The intake keeps going.
        assert intake.submit(delivery("fine")).result(timeout=60) is True
    finally:
        intake.stop(timeout=30)
    assert queue.counts()["queued"] == 1


def test_a_locked_sqlite_database_fails_the_batch_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy timeout of 1 s instead of 5: one wait takes 1 s, one per delivery would take 10.
    monkeypatch.setattr(engine, "_SQLITE_BUSY_TIMEOUT_MS", 1000)
    path = tmp_path / "state.db"
    queue = JobQueue(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    intake = LoopIntake(queue)
    futures = [intake.submit(delivery(f"l-{i}", pr=i)) for i in range(10)]
    began = time.monotonic()
    intake.start()
    try:
        for future in futures:
            with pytest.raises(StateError, match="locked"):
                future.result(timeout=60)
        # One wait for the lock (the busy timeout), not one per delivery.
        assert time.monotonic() - began < 8
        holder.execute("ROLLBACK")
        assert intake.submit(delivery("l-0")).result(timeout=60) is True
    finally:
        intake.stop(timeout=30)
        holder.close()
        queue.close()


@pytest.fixture
def pg_intake(fresh_postgres_url: str) -> Iterator[LoopIntake]:
    """A started intake on a PostgreSQL database of its own, which the test may drop."""
    queue = JobQueue(fresh_postgres_url)
    intake = LoopIntake(queue)
    intake.start()
    yield intake
    intake.stop(timeout=30)
    queue.close()


def as_admin(url: str, run: Callable[[Connection], None]) -> None:
    """``run`` on an autocommit connection to the server of ``url``."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            run(conn)
    finally:
        admin.dispose()


@pytest.mark.postgres
def test_a_dropped_postgresql_database_fails_the_waiters(
    fresh_postgres_url: str, pg_intake: LoopIntake
) -> None:
    assert pg_intake.submit(delivery("before")).result(timeout=60) is True
    url = make_url(fresh_postgres_url)
    as_admin(
        url.set(database="postgres").render_as_string(hide_password=False),
        lambda conn: conn.execute(text(f'DROP DATABASE "{url.database}" WITH (FORCE)')),
    )
    for future in [pg_intake.submit(delivery(f"after-{i}", pr=i)) for i in range(10)]:
        with pytest.raises(StateError):
            future.result(timeout=60)


def test_stop_stores_what_waits_then_refuses(queue: JobQueue) -> None:
    intake = LoopIntake(queue)
    intake.start()
    futures = [intake.submit(delivery(f"s-{i}", pr=i)) for i in range(25)]
    intake.stop(timeout=30, keep_loop=True)
    assert all(future.result(timeout=0) for future in futures)  # answered before stop returned
    with pytest.raises(IntakeClosed):
        intake.submit(delivery("late")).result(timeout=10)
    intake.close()
    assert queue.delivery_job("late") is None


def test_stop_without_start_fails_the_waiters(queue: JobQueue) -> None:
    intake = LoopIntake(queue)
    future = intake.submit(delivery("never"))
    intake.stop()
    with pytest.raises(IntakeClosed):
        future.result(timeout=10)


@pytest.mark.postgres
def test_a_connection_closed_by_the_server_is_replaced(
    fresh_postgres_url: str, pg_intake: LoopIntake
) -> None:
    assert pg_intake.submit(delivery("first")).result(timeout=60) is True
    # The server ends every other session on the database: the intake's pooled connection
    # is dead, which it learns only when it uses it next.
    ended: list[int] = []

    def end_sessions(conn: Connection) -> None:
        others = conn.execute(text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )).scalars().all()  # fmt: skip
        for pid in others:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        ended.extend(others)

    as_admin(fresh_postgres_url, end_sessions)
    assert ended
    assert pg_intake.submit(delivery("second", pr=2)).result(timeout=60) is True
    assert pg_intake.intake.queue.delivery_job("second") is not None
