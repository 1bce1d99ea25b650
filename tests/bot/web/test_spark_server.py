"""Each repository's warm Spark Connect server, where it is said: ``/healthz`` and
``/metrics`` (anyone who reaches the service) count the pool's servers by state and name no
root, repository or port; the web UI's jobs page and ``/api/v1/jobs`` show a repository's
own server (state, port on 127.0.0.1, jobs, idle since, why the pool stopped it) to who may
read that repository, and another root's never. Through the service's app on the module's
scripted world; the pool holds real ``ConnectServer`` objects whose process is a stand-in
Python child listening on loopback (no JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sluice.bot.entry import health
from sluice.bot.entry.app import create_app
from sluice.bot.web.reader import Reader
from sluice.core.config import SparkSettings
from sluice.core.spark import connect
from sluice.core.spark.session import SparkPaths
from tests.helpers.web import KEY, WebWorld

OTHER = "spark-repositories/github_mallory_other_0123456789abcdef0123"
"""Another repository's root (named as tenancy names them: after the repository)."""

_LISTEN = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\ntime.sleep(600)\n"  # fmt: skip


@pytest.fixture
def pool(
    world: WebWorld, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, connect.ConnectServer]]:
    """The owner's root's server running (a stand-in listening), another root's stopped
    by the pool for idleness, on a service in Spark Connect mode."""
    for name in ("_SERVERS", "_BUSY", "_USED", "_STOPPING", "_STOPPED"):
        monkeypatch.setattr(connect, name, {})
    monkeypatch.setitem(connect._POOL, "most", 4.0)
    monkeypatch.setitem(connect._POOL, "idle_s", 3600.0)
    monkeypatch.setattr(health, "_tools", lambda: None)
    work = (world.root / "work").resolve()
    servers = {}
    for name in (OTHER, "spark"):
        paths = SparkPaths(root=work / name, logs=work / "logs" / name.rsplit("/", 1)[-1])
        with connect.leased(SparkSettings(mode="connect"), paths) as server:
            servers[name] = server
            if name == "spark":  # the other, idle for an hour: stopped (this one held)
                assert connect.reap(now=time.monotonic() + 3601) == [work / OTHER]
    own = servers["spark"]
    port = connect.free_port()
    proc = subprocess.Popen([sys.executable, "-c", _LISTEN, str(port)], start_new_session=True)  # fmt: skip
    own._proc = proc
    own.port = port
    deadline = time.monotonic() + 30
    while not connect.listening("127.0.0.1", port):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield servers
    if proc.poll() is None:  # (the service's shutdown stops the pool's servers)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _service(world: WebWorld, *, public: bool = True) -> TestClient:
    settings = world.settings().model_copy(update={"ui_public": public, "spark_mode": "connect"})
    return TestClient(create_app(settings, start_workers=False))


def test_healthz_and_metrics_count_the_servers_and_name_none(
    world: WebWorld, pool: dict[str, connect.ConnectServer]
) -> None:
    with _service(world) as client:
        answer = client.get("/healthz")
        metrics = client.get("/metrics").text
    assert answer.status_code == 200
    spark = answer.json()["spark"]
    assert spark == {
        "mode": "connect",
        "ok": True,  # a server the pool stopped starts with its next job: not unhealthy
        "detail": "1 Spark Connect server(s) answer, 1 stopped (the next job of its "
        "repository starts it)",
        "servers": {"running": 1, "starting": 0, "busy": 0, "down": 0, "stopped": 1, "most": 4},
    }
    assert "sluice_spark_connect_servers_running 1.0" in metrics
    assert "sluice_spark_connect_servers_stopped 1.0" in metrics
    port = str(pool["spark"].port)
    for said in (answer.text, metrics):  # no root, repository, folder or port
        for secret in ("mallory", "octo", "spark-repositories", "github_", port, str(world.root)):
            assert secret not in said, secret


def test_a_died_server_is_unhealthy_until_its_next_job(
    world: WebWorld, pool: dict[str, connect.ConnectServer]
) -> None:
    own = pool["spark"]
    assert own._proc is not None
    os.killpg(own._proc.pid, signal.SIGKILL)
    own._proc.wait(30)
    with _service(world) as client:
        spark = client.get("/healthz").json()["spark"]
    assert spark["ok"] is False and spark["servers"]["down"] == 1
    assert spark["detail"] == "1 of the 2 Spark Connect servers do not answer (the next job of each one's repository starts it again)"  # fmt: skip


def test_the_jobs_page_shows_its_repository_s_own_server_to_its_readers(
    world: WebWorld, pool: dict[str, connect.ConnectServer]
) -> None:
    port = pool["spark"].port
    with _service(world) as client:
        server = client.get("/api/v1/jobs", params={"repo": KEY}).json()["spark_server"]
        page = client.get("/ui/jobs", params={"repo": KEY}).text
    assert server["state"] == "running" and server["port"] == port and server["jobs"] == 0
    assert server["idle_since"] <= time.time() and server["stopped_because"] is None
    assert f"running</span> on 127.0.0.1:{port}, idle since" in page
    # Never another root's (the other repository's server, stopped for idleness).
    assert "idle: the next job" not in page
    # Who may not read the repository sees nothing of it (no sign-in, not public: 403).
    with _service(world, public=False) as client:
        assert client.get("/api/v1/jobs", params={"repo": KEY}).status_code == 403
        assert "127.0.0.1" not in client.get("/ui/jobs", params={"repo": KEY}).text


def test_a_root_the_pool_stopped_says_why_on_its_page(
    world: WebWorld, pool: dict[str, connect.ConnectServer]
) -> None:
    """As its repository's readers see it (the reader of that root)."""
    work = (world.root / "work").resolve()
    reader = Reader(KEY, world.bot.url, queue=False, spark_root=work / OTHER)
    try:
        server = reader.spark_server()
    finally:
        reader.close()
    assert server is not None
    assert (server.state, server.port, server.stopped_because) == ("stopped", None, "idle")
    assert server.idle_since is not None
    # A root with no server in the pool: none said.
    reader = Reader(KEY, world.bot.url, queue=False, spark_root=work / "nothing")
    try:
        assert reader.spark_server() is None
    finally:
        reader.close()
