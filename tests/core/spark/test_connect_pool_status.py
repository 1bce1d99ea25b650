"""What the Spark Connect servers' pool says of each root's server
(:func:`sluice.core.spark.connect.pool_status`, what ``/healthz`` counts and the UI's jobs
page shows): running, starting, down, stopped by the pool and why, its port, its jobs and
since when it is idle; read without starting anything. No JVM: each server's process is a
stand-in Python child, in a session of its own as a server's is, that opens (or not) a
port on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark import connect
from sluice.core.spark.session import SparkPaths

SETTINGS = SparkSettings(mode="connect")

# Listens on the port it is given once told to (a file appears), then waits to be killed.
_FAKE_SERVER = """
import os, socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.05)
sock = socket.socket()
sock.bind(("127.0.0.1", port))
sock.listen()
open(go + ".listening", "w").close()
time.sleep(600)
"""


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, SparkPaths]]:
    for name in ("_SERVERS", "_BUSY", "_USED", "_STOPPING", "_STOPPED"):
        monkeypatch.setattr(connect, name, {})
    monkeypatch.setitem(connect._POOL, "most", 2.0)
    monkeypatch.setitem(connect._POOL, "idle_s", 0.0)
    roots = {n: SparkPaths(root=tmp_path / n, logs=tmp_path / "logs") for n in "abc"}
    yield roots
    for server in list(connect._SERVERS.values()):
        server.stop(timeout=5)


def _fake_process(server: connect.ConnectServer, go: Path) -> subprocess.Popen[bytes]:
    """Give ``server`` a stand-in process that listens on its port once ``go`` exists."""
    port = connect.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE_SERVER, str(port), str(go)], start_new_session=True
    )
    server._proc, server.port = proc, port
    return proc


def _status(root: SparkPaths) -> connect.PooledServer:
    [found] = [s for s in connect.pool_status() if s.root == root.root.resolve()]
    return found


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_server_s_life_as_the_pool_reports_it(
    pool: dict[str, SparkPaths], tmp_path: Path
) -> None:
    assert connect.pool_status() == []
    before = time.time()
    with connect.leased(SETTINGS, pool["a"]) as server:
        # Made for a job, not started yet (a job starts it: never the pool's reader).
        assert _status(pool["a"]) == connect.PooledServer(
            pool["a"].root.resolve(), "not started", None, 1, None
        )
        go = tmp_path / "go"
        proc = _fake_process(server, go)
        starting = _status(pool["a"])
        assert (starting.state, starting.port, starting.jobs) == ("starting", server.port, 1)
        go.touch()
        _wait_for(tmp_path / "go.listening")
        running = _status(pool["a"])
        assert (running.state, running.port, running.idle_since) == ("running", server.port, None)
    idle = _status(pool["a"])
    assert idle.state == "running" and idle.jobs == 0
    assert idle.idle_since is not None and before <= idle.idle_since <= time.time()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    down = _status(pool["a"])
    assert (down.state, down.port, down.jobs) == ("down", None, 0)
    assert server.starts == 0  # reading the pool started nothing


def test_a_server_killed_for_not_answering_is_down_before_its_process_exits(
    pool: dict[str, SparkPaths], tmp_path: Path
) -> None:
    with connect.leased(SETTINGS, pool["a"]) as server:
        proc = _fake_process(server, tmp_path / "go")
        server._killed = proc.pid  # as kill() marks it, its SIGKILL not delivered yet
        assert _status(pool["a"]).state == "down"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def test_servers_the_pool_stopped_say_why_and_since_when_until_a_job_starts_one(
    pool: dict[str, SparkPaths], tmp_path: Path
) -> None:
    with connect.leased(SETTINGS, pool["a"]):
        pass
    with connect.leased(SETTINGS, pool["b"]):
        pass
    used_a = _status(pool["a"]).idle_since
    with connect.leased(SETTINGS, pool["c"]):  # at most 2: a, the least recently used, goes
        a = _status(pool["a"])
        assert (a.state, a.stopped_because, a.port, a.jobs) == (
            "stopped", "least recently used", None, 0
        )  # fmt: skip
        assert a.idle_since == pytest.approx(used_a, abs=1.0)  # its last job, not its stop
        assert _status(pool["c"]).jobs == 1
    connect._POOL["idle_s"] = 60.0
    assert connect.reap(now=time.monotonic() + 61) == [pool["b"].root.resolve(),
                                                        pool["c"].root.resolve()]  # fmt: skip
    assert {s.root.name: (s.state, s.stopped_because) for s in connect.pool_status()} == {
        "a": ("stopped", "least recently used"),
        "b": ("stopped", "idle"),
        "c": ("stopped", "idle"),
    }
    # One root's alone (a repository's jobs page asks for its own).
    [b] = connect.pool_status(root=pool["b"].root.resolve())
    assert (b.root.name, b.state, b.stopped_because) == ("b", "stopped", "idle")
    with connect.leased(SETTINGS, pool["b"]):  # its next job: made again, no longer stopped
        assert _status(pool["b"]).state == "not started"
    connect.stop_all()
    assert connect.pool_status() == []
