"""The service's warm Spark Connect servers, one per Spark root (per repository when they
are kept apart), bounded (:func:`sluice.core.spark.connect.configure_pool`): at most N at
once, the least recently used one no job holds stopped for a new root, a job waiting when
every one runs a job, idle ones stopped. Servers here are stand-ins (no JVM): what is
checked is which are made, held and stopped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.spark import connect
from sluice.core.spark.session import SparkPaths

SETTINGS = SparkSettings(mode="connect")


class _Server:
    def __init__(self, _settings: SparkSettings, paths: SparkPaths) -> None:
        self.root = paths.root
        self.stopped = 0

    def stop(self, timeout: float = 30.0) -> None:
        self.stopped += 1


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, SparkPaths]]:
    monkeypatch.setattr(connect, "ConnectServer", _Server)
    for name in ("_SERVERS", "_BUSY", "_USED", "_STOPPING", "_STOPPED"):
        monkeypatch.setattr(connect, name, {})
    monkeypatch.setitem(connect._POOL, "most", 2.0)
    monkeypatch.setitem(connect._POOL, "idle_s", 0.0)
    yield {n: SparkPaths(root=tmp_path / n, logs=tmp_path / "logs") for n in ("a", "b", "c")}


def _running() -> set[str]:
    return {root.name for root in connect._SERVERS}


def test_past_the_bound_the_least_recently_used_idle_server_is_stopped(
    pool: dict[str, SparkPaths],
) -> None:
    with connect.leased(SETTINGS, pool["a"]) as a:
        pass
    with connect.leased(SETTINGS, pool["b"]):
        pass
    with connect.leased(SETTINGS, pool["a"]) as again:  # a: used last now
        assert again is a
    with connect.leased(SETTINGS, pool["c"]):
        assert _running() == {"a", "c"}  # b, the least recently used, made way
    assert a.stopped == 0  # type: ignore[attr-defined]


def test_a_server_running_a_job_is_never_stopped_for_another_root(
    pool: dict[str, SparkPaths],
) -> None:
    with connect.leased(SETTINGS, pool["a"]) as a:
        with connect.leased(SETTINGS, pool["b"]):
            pass  # b idle, a busy: c takes b's place, never a's
        with connect.leased(SETTINGS, pool["c"]):
            assert _running() == {"a", "c"}
        assert a.stopped == 0  # type: ignore[attr-defined]


def test_when_every_server_runs_a_job_another_root_s_job_waits(
    pool: dict[str, SparkPaths],
) -> None:
    told: list[str] = []
    holding, release, got = threading.Event(), threading.Event(), threading.Event()

    def job(name: str) -> None:
        with connect.leased(SETTINGS, pool[name]):
            holding.set()
            release.wait(60)

    a = threading.Thread(target=job, args=("a",))
    a.start()
    assert holding.wait(60)
    holding.clear()
    b = threading.Thread(target=job, args=("b",))
    b.start()
    assert holding.wait(60)  # a and b run jobs: the bound is reached

    # With no time to wait, c's job is refused, saying what to raise.
    refused = pytest.raises(ExecutionError, match="SLUICE_SPARK_CONNECT_SERVERS")
    with refused, connect.leased(SETTINGS, pool["c"], timeout=0, on_wait=told.append):
        pass
    assert told and "waiting for a Spark Connect server" in told[0]

    def waiter() -> None:
        with connect.leased(SETTINGS, pool["c"], timeout=120):
            got.set()

    c = threading.Thread(target=waiter)
    c.start()
    assert not got.wait(0.5)  # still waiting: both servers run jobs
    release.set()  # a's and b's jobs end: c gets a server
    assert got.wait(60)
    for thread in (a, b, c):
        thread.join(60)
    assert "c" in _running() and len(_running()) == 2


def test_idle_servers_are_stopped_and_busy_ones_kept(pool: dict[str, SparkPaths]) -> None:
    connect._POOL["idle_s"] = 600.0
    with connect.leased(SETTINGS, pool["a"]) as a:
        pass
    with connect.leased(SETTINGS, pool["b"]) as b:
        last = connect._USED[pool["b"].root.resolve()]
        assert connect.reap(now=last + 10_000) == [pool["a"].root.resolve()]
        assert a.stopped == 1 and b.stopped == 0  # type: ignore[attr-defined]
    assert connect.reap(now=last + 599) == []  # b: idle, not for long
    assert connect.reap(now=connect._USED[pool["b"].root.resolve()] + 600) == [
        pool["b"].root.resolve()
    ]
    assert _running() == set()
    connect._POOL["idle_s"] = 0.0
    with connect.leased(SETTINGS, pool["a"]):
        pass
    assert connect.reap(now=10**12) == []  # 0: never stopped for idleness
