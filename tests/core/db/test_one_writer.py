"""SQLite state under many writers at once: none fails "database is locked" while the
writers of the process, taking turns, get the lock within the wait (issue 45, point 3).

SQLite's own wait for its write lock is a poll (sleeps of up to 100 ms, first come not
first served): with many writers one can lose every round and fail after the busy
timeout, which the queue's and the ledger's stress tests met on a loaded machine. The
writers of one process now queue for the database in the process, first come first
served (``OneWriter``). The waits are shortened here (1 s) so that the test is short; the
writers hold the lock as long as a loaded machine makes them (``bench/sqlite_writers.py``
measures the real waits).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sluice.bot.flow.ledger import Ledger
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.core.db import engine
from sluice.core.db.engine import OneWriter
from sluice.core.errors import StateError

WRITERS = 16
ROUNDS = 8
HOLD_S = 0.01  # each write transaction keeps the lock this long


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_SQLITE_BUSY_TIMEOUT_MS", 1000)
    monkeypatch.setattr(engine, "WRITER_WAIT_S", 1.0)


def test_many_writers_of_the_queue_and_the_ledger_none_locked_out(
    tmp_path: Path, short_waits: None
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    queue, ledger = JobQueue(url), Ledger(url)
    errors: list[str] = []
    start = threading.Barrier(WRITERS)

    def writer(t: int) -> None:
        start.wait()
        for i in range(ROUNDS):
            try:
                with queue.together("hold the lock"):
                    queue.depth()
                    time.sleep(HOLD_S)
                job = NewJob(key=f"github:o/r#{t}", kind="pull_request", payload={"i": i})
                queue.accept(f"d-{t}-{i}", "github", "pull_request", job, 100.0 + i)
                with ledger.together("hold the lock"):
                    ledger.record_pr_head("github:o/r", t, f"{i:040x}", i, i)
                    time.sleep(HOLD_S)
            except StateError as exc:
                errors.append(str(exc))

    try:
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert queue.depth() == WRITERS * ROUNDS
        assert all(ledger.pr_head("github:o/r", t) == (f"{ROUNDS - 1:040x}", ROUNDS - 1)
                   for t in range(WRITERS))  # fmt: skip
    finally:
        queue.close()
        ledger.close()


def test_a_writer_waiting_past_its_turn_is_told_to_use_postgresql(
    tmp_path: Path, short_waits: None
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    queue = JobQueue(url)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with queue.together("hold the lock"):
            queue.depth()
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(StateError) as caught:
            queue.accept("d-1", "github", "pull_request", None, 100.0)
        assert "database is locked" in str(caught.value)
        assert "PostgreSQL" in str(caught.value) and "SLUICE_DATABASE_URL" in str(caught.value)
    finally:
        release.set()
        thread.join()
    # Released, the next writer gets in; the one that gave up left no place in the line.
    assert queue.accept("d-2", "github", "pull_request", None, 101.0)
    queue.close()


def test_turns_are_first_come_first_served() -> None:
    writer = OneWriter()
    assert writer.acquire(1.0)
    order: list[int] = []
    waiting = []
    for n in range(5):
        thread = threading.Thread(target=lambda n=n: (writer.acquire(5.0), order.append(n),
                                                      writer.release()))  # fmt: skip
        thread.start()
        waiting.append(thread)
        while len(writer._waiting) < n + 1:  # in the line before the next comes
            time.sleep(0.001)
    writer.release()
    for thread in waiting:
        thread.join()
    assert order == [0, 1, 2, 3, 4]
    # One that gave up leaves the line: the turn is not handed to it later.
    assert writer.acquire(1.0)
    gave_up: list[bool] = []
    thread = threading.Thread(target=lambda: gave_up.append(writer.acquire(0.05)))
    thread.start()
    thread.join()
    assert gave_up == [False] and not writer._waiting
    writer.release()
    assert writer.acquire(0.05)
    writer.release()


def test_a_writer_whose_connection_is_invalidated_hands_over(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    queue = JobQueue(url)
    try:
        with pytest.raises(RuntimeError), queue.together("hold the lock"):
            queue.depth()
            queue._shared.conn.invalidate()  # as a connection error does
            raise RuntimeError("the transaction ends with its connection gone")
        # The next writer gets in at once (it would wait its 5 s and fail otherwise).
        assert queue.accept("d-1", "github", "pull_request", None, 100.0)
        assert OneWriter.of(str((tmp_path / "state.db").resolve())).owner is None
    finally:
        queue.close()
