"""How a Connect job's runner, and a developer server's keeper, tell a server that died or
stopped answering (no Spark: sockets that answer, refuse or stay silent, and fake servers).

The same on real Spark, with a server killed and one stopped: test_connect_lost.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from sluice.core.spark import dev_server
from sluice.core.spark.connect import ConnectServer, ServerWatch, probe


@pytest.fixture
def silent() -> Iterator[int]:
    """A port whose connections the kernel takes and nobody answers (a stopped JVM's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.fixture
def answering() -> Iterator[int]:
    """A port that answers an HTTP/2 start with a SETTINGS frame, as a gRPC server does."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.recv(64)
                conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(sock.getsockname()[1])
    done.set()
    thread.join(5)
    sock.close()


@pytest.fixture
def closed() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once it is closed


def test_probe_tells_answering_silent_and_gone(answering: int, silent: int, closed: int) -> None:
    assert probe("127.0.0.1", answering, 2) == "answers"
    assert probe("127.0.0.1", silent, 0.3) == "silent"
    assert probe("127.0.0.1", closed, 0.3) == "refused"
    # behind TLS, a taken connection is all that is asked
    assert probe("127.0.0.1", silent, 0.3, tls=True) == "answers"


class FakeServer:
    """What ServerWatch and the keeper use of a ConnectServer."""

    def __init__(self, port: int, pid: int = 4242) -> None:
        self.port: int | None = port
        self.pid: int | None = pid
        self.died: str | None = None
        self.killed: list[int] = []
        self.starts = 0

    def gone(self, pid: int) -> str | None:
        return self.died

    def kill(self, pid: int) -> None:
        self.killed.append(pid)
        self.died = "killed"

    def running(self) -> bool:
        return self.died is None

    def endpoint(self) -> str:
        self.starts += 1
        self.died = None
        return f"sc://localhost:{self.port}"


def _watch(url: str, server: FakeServer | None = None, **kwargs: Any) -> ServerWatch:
    kwargs.setdefault("probe_every", 0.0)
    return ServerWatch(
        url, server=cast(ConnectServer, server), pid=server.pid if server else None, **kwargs
    )


def test_our_server_exiting_is_seen_without_asking_it(answering: int) -> None:
    server = FakeServer(answering)
    watch = _watch(f"sc://localhost:{answering}", server, probe_every=3600)
    assert watch.check() is None
    server.died = "died (pid 4242: killed by signal 9)"
    assert watch.check() == "died (pid 4242: killed by signal 9)"
    assert watch.gone_now() == "died (pid 4242: killed by signal 9)"


def test_a_server_whose_port_refuses_twice_is_gone(closed: int, answering: int) -> None:
    # a developer's server, restarted by its keeper on another port: only the URL is known
    watch = _watch(f"sc://localhost:{closed}")
    assert watch.check() is None  # once may be a moment
    watch._next_probe = 0.0
    assert watch.check() == f"died (127.0.0.1:{closed} takes no connections)"
    assert watch.gone_now() == f"died (127.0.0.1:{closed} takes no connections)"
    assert _watch(f"sc://localhost:{answering}").gone_now() is None


def test_a_silent_server_is_lost_only_past_the_bound_and_ours_is_killed(silent: int) -> None:
    server = FakeServer(silent)
    watch = _watch(f"sc://localhost:{silent}", server, bound=0.6, probe_timeout=0.2)
    assert watch.check() is None  # silent, not yet for long
    assert server.killed == []
    lost = None
    for _ in range(20):
        lost = watch.check()
        if lost is not None:
            break
    assert lost is not None and lost.startswith("stopped answering (no answer for ")
    assert server.killed == [4242]
    # not ours (spark.remote): never killed, only reported
    # (its first look may already report: the silence is counted from before the probe's
    # 0.2 s, so under load the 0.3 s bound can pass within that one look)
    other = _watch(f"sc://localhost:{silent}", bound=0.3, probe_timeout=0.2)
    for _ in range(20):
        if other.check() is not None:
            break
    else:
        raise AssertionError("a silent remote server was never reported")


def test_the_keeper_restarts_a_server_that_stopped_answering(silent: int) -> None:
    server = FakeServer(silent)
    stop = threading.Event()
    restarts: list[int] = []

    def restarted() -> None:
        restarts.append(server.starts)
        stop.set()

    keeper = threading.Thread(
        target=dev_server.keep,
        args=(cast(ConnectServer, server), stop, restarted),
        kwargs={"every": 0.05, "bound": 0.5},
    )
    keeper.start()
    keeper.join(30)
    stop.set()
    assert not keeper.is_alive()
    assert server.killed == [4242] and restarts == [1]


def test_the_keeper_leaves_an_answering_server_alone(answering: int) -> None:
    server = FakeServer(answering)
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    dev_server.keep(cast(ConnectServer, server), stop, lambda: None, every=0.05, bound=0.2)
    assert server.killed == [] and server.starts == 0


def test_a_killed_server_is_not_running_while_it_takes_its_time_to_exit(
    silent: int, tmp_path: Any
) -> None:
    # A JVM killed with SIGKILL can keep its port open for a moment (its threads exit one by
    # one; the sandbox exits after): CI once saw the next job connect to the dying server.
    # Here the "server" is a process outside its own group, so the kill's killpg misses it
    # and it stays alive, with its port listening: killed is still not running.
    from sluice.core.config import SparkSettings
    from sluice.core.spark.session import SparkPaths

    server = ConnectServer(SparkSettings(), SparkPaths(root=tmp_path, logs=tmp_path / "logs"))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        server._proc, server.port = proc, silent
        assert server.running()  # alive, its port takes connections
        server.kill(proc.pid)
        assert proc.poll() is None  # not yet gone
        assert not server.running()
        server.kill(proc.pid + 1)  # another pid's kill changes nothing
        assert not server.running()
    finally:
        server._proc = None
        proc.kill()
        proc.wait()
