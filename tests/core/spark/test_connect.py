"""A warm Spark: the Spark Connect server manager and ConnectRunner on real Spark.

One server for the whole test session (``connect_server``, tests/conftest.py); each test
runs real jobs on it through a real child process. The test that kills the server runs
last and leaves it restarted.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.core.errors import DriverLost, ExecutionError
from sluice.core.spark.connect import BIND_ADDRESS, ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
NOW = to_ms("2018-05-01")


def _runner(server: ConnectServer, tmp_path: Path, **kwargs: Any) -> ConnectRunner:
    paths = SparkPaths(root=server.paths.root, logs=tmp_path / "logs")
    return ConnectRunner(server.settings, paths, server=server, **kwargs)


def _sql(job_id: str, *statements: str) -> dict[str, Any]:
    steps = [{"type": "sql", "label": f"{job_id} {i}", "statements": [s]}
             for i, s in enumerate(statements)]  # fmt: skip
    return {"job_id": job_id, "kind": "test", "steps": steps}


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (from /proc/net)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as handle:
            next(handle)
            for line in handle:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


def _other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent
            address: str = sock.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/net")
def test_the_server_listens_on_loopback_only(connect_server: ConnectServer) -> None:
    connect_server.endpoint()
    port = connect_server.port
    assert port is not None and connect_server.url == f"sc://localhost:{port}"
    # 127.0.0.1 in /proc/net's little-endian hex, as IPv4 or (Java's way) IPv4-mapped
    # IPv6 ::ffff:127.0.0.1; no wildcard socket.
    loopback = {"0100007F", "0000000000000000FFFF00000100007F"}
    listening = _listening_addresses(port)
    assert listening and listening <= loopback, listening
    other = _other_address()
    if other is not None:
        with pytest.raises(OSError), socket.create_connection((other, port), timeout=3):
            pass
    with socket.create_connection((BIND_ADDRESS, port), timeout=3):
        pass


def test_jobs_reuse_the_warm_server_and_sessions_do_not_leak(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    runner = _runner(connect_server, tmp_path)
    starts, pid = connect_server.starts, connect_server.pid
    first = runner.run(
        _sql(
            "warm-1",
            "CREATE DATABASE IF NOT EXISTS warm",
            "CREATE OR REPLACE TEMPORARY VIEW leaked AS SELECT 41 AS answer",
            "SET spark.sql.shuffle.partitions=7",
            "DROP TABLE IF EXISTS warm.numbers",
            "CREATE TABLE warm.numbers USING parquet AS SELECT id FROM range(3)",
            "SELECT COUNT(*) AS n, MAX(answer) AS a FROM warm.numbers, leaked",
        )
    )
    assert first.results["5"]["rows"] == [{"n": 3, "a": 41}]
    ready = [e for e in first.events if e["event"] == "session_ready"]
    assert ready and ready[0]["session_id"]
    # The next job: same server, a session of its own (the view and the SET are gone).
    second = runner.run(
        _sql(
            "warm-2",
            "SELECT COUNT(*) AS n FROM warm.numbers",
            "SHOW VIEWS LIKE 'leaked'",
            "SET spark.sql.shuffle.partitions",
        )
    )
    assert second.results["0"]["rows"] == [{"n": 3}]
    assert second.results["1"]["rows"] == []
    assert second.results["2"]["rows"][0]["value"] == "4"  # spark_conf's, not the first job's
    other = next(e for e in second.events if e["event"] == "session_ready")["session_id"]
    assert other != ready[0]["session_id"]
    assert (connect_server.starts, connect_server.pid) == (starts, pid)
    with pytest.raises(ExecutionError, match="TABLE_OR_VIEW_NOT_FOUND"):
        runner.run(_sql("warm-3", "SELECT * FROM leaked"))


def test_a_killed_child_is_driver_lost(connect_server: ConnectServer, tmp_path: Path) -> None:
    runner = _runner(connect_server, tmp_path)
    spec = _sql("lost-child", "SELECT java_method('java.lang.Thread', 'sleep', 600000L)")
    started = threading.Event()
    runner.on_event = lambda e: started.set() if e["event"] == "step_start" else None

    def kill_the_child() -> None:
        assert started.wait(300), "the step never started"
        mine = str(runner.paths.logs / "lost-child.json").encode()
        for pid in os.listdir("/proc"):
            try:
                args = Path("/proc", pid, "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue
            if b"--connect" in args and mine in args:
                os.kill(int(pid), signal.SIGKILL)
                return
        raise AssertionError("no job child found")

    killer = threading.Thread(target=kill_the_child, daemon=True)
    killer.start()
    began = time.monotonic()
    with pytest.raises(DriverLost, match="killed by signal 9 during step 'lost-child 0'"):
        runner.run(spec)
    killer.join(5)
    assert time.monotonic() - began < 300
    # The server is still up and serves the next job.
    assert connect_server.running()
    after = runner.run(_sql("after-lost", "SELECT 1 AS one"))
    assert after.results["0"]["rows"] == [{"one": 1}]


def test_a_job_past_its_limit_is_stopped_and_says_so(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    runner = _runner(connect_server, tmp_path, timeout=20)
    spec = _sql("too-long", "SELECT java_method('java.lang.Thread', 'sleep', 600000L)")
    began = time.monotonic()
    with pytest.raises(ExecutionError, match="ran longer than its limit of 20 s"):
        runner.run(spec)
    assert time.monotonic() - began < 120
    assert connect_server.running()


def test_a_server_killed_with_sigkill_is_started_again(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """Runs last in this module: it leaves the session's server restarted."""
    connect_server.endpoint()
    starts, pid = connect_server.starts, connect_server.pid
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while connect_server.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not connect_server.running()
    # The next job finds it gone, starts it again (the metastore lock passes on), and runs.
    result = _runner(connect_server, tmp_path).run(_sql("after-kill", "SELECT 2 AS two"))
    assert result.results["0"]["rows"] == [{"two": 2}]
    assert connect_server.starts == starts + 1 and connect_server.pid != pid
    assert connect_server.healthy()
