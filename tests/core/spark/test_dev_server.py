"""``sluice spark start|stop|status``: a developer's warm Spark that later commands find.

The record and the rules for using it are checked with fake keepers (no Spark); one test
starts the real server through the CLI and runs ``apply`` and ``query`` on it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.config import SparkSettings
from sluice.core.spark import dev_server
from sluice.core.spark.connect import ConnectRunner
from sluice.core.spark.session import SparkPaths, acquire_metastore_lock
from sluice.core.spark.submit import InProcessRunner
from tests.core.helpers import load

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
ONE = (
    "MODEL (name devsrv.one, kind FULL);\nSELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)\n"
)


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections (what a running server's port does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def keeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line reads like a keeper's (``spark start --foreground``)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "spark", "start", "--foreground"]
    )
    # until the child has exec'd, its command line is still this test process's
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 30
    while b"--foreground" not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


TOKEN = "dev-token-" + "z" * 33


def _record(paths: SparkPaths, pid: int, port: int, settings: SparkSettings) -> Path:
    path = paths.connect / dev_server.STATE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "pid": pid, "url": f"sc://localhost:{port}", "port": port, "started": "now",
        "token": TOKEN, "settings": dev_server.settings_digest(settings, paths),
    }))  # fmt: skip
    path.chmod(0o600)  # the keeper's mode: a record others may read is not used
    return path


def test_no_record_is_not_running_and_stop_says_so(tmp_path: Path) -> None:
    paths = SparkPaths.for_project(tmp_path)
    assert dev_server.status(SparkSettings(), paths) == dev_server.Status(False)
    assert dev_server.stop_server(SparkSettings(), paths).running is False


def test_a_live_keeper_on_a_listening_port_is_used_by_the_cli_runner(
    tmp_path: Path, listening: int, keeper: subprocess.Popen[bytes]
) -> None:
    project = load(tmp_path / "p", {"config.yaml": CONFIG, "models/one.sql": ONE})
    settings = project.config.sluice.spark
    paths = SparkPaths.for_project(Path(project.path))
    _record(paths, keeper.pid, listening, settings)
    found = dev_server.status(settings, paths)
    assert found.running and found.url == f"sc://localhost:{listening}"
    runner = workflow.make_runner(project)
    assert isinstance(runner, ConnectRunner)
    assert runner.settings.remote == found.url and runner.endpoint() == found.url
    # the record's token goes to the job's child's environment (and nowhere else)
    assert runner.connection() == (found.url, TOKEN)
    env = runner.environment(tmp_path / "home")
    runner._preflight({"job_id": "j", "steps": []}, env)
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == TOKEN and TOKEN not in str(found)
    # --in-process is the user's explicit choice and wins
    assert isinstance(workflow.make_runner(project, in_process=True), InProcessRunner)
    # stop signals the keeper and waits for it
    stopped = dev_server.stop_server(settings, paths)
    assert stopped.pid == keeper.pid
    assert keeper.wait(10) == -signal.SIGTERM


def test_a_record_cannot_point_commands_off_this_machine(
    tmp_path: Path, listening: int, keeper: subprocess.Popen[bytes]
) -> None:
    paths = SparkPaths.for_project(tmp_path)
    path = _record(paths, keeper.pid, listening, SparkSettings())
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "url": "sc://collector.example:15002/;token=x"}))
    assert dev_server.running(SparkSettings(), paths) == f"sc://localhost:{listening}"
    path.write_text(json.dumps({**data, "port": 70000}))
    assert dev_server.running(SparkSettings(), paths) is None


def test_a_dead_keeper_or_a_closed_port_is_not_used_and_stop_clears_the_record(
    tmp_path: Path, listening: int, keeper: subprocess.Popen[bytes]
) -> None:
    paths = SparkPaths.for_project(tmp_path)
    settings = SparkSettings()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = int(sock.getsockname()[1])
    record = _record(paths, keeper.pid, closed, settings)
    assert dev_server.status(settings, paths).url is None
    keeper.kill()
    keeper.wait()
    _record(paths, keeper.pid, listening, settings)
    found = dev_server.status(settings, paths)
    assert not found.running and found.problem == "the server recorded there has stopped"
    assert dev_server.running(settings, paths) is None
    dev_server.stop_server(settings, paths)
    assert not record.exists()


def test_a_recycled_pid_of_another_program_is_never_signalled(
    tmp_path: Path, listening: int
) -> None:
    paths = SparkPaths.for_project(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        _record(paths, other.pid, listening, SparkSettings())
        assert dev_server.status(SparkSettings(), paths).running is False
        dev_server.stop_server(SparkSettings(), paths)
        time.sleep(0.3)
        assert other.poll() is None  # still running: not ours to stop
    finally:
        other.kill()
        other.wait()


def test_a_server_started_with_other_spark_settings_is_named_and_not_used(
    tmp_path: Path, listening: int, keeper: subprocess.Popen[bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    paths = SparkPaths.for_project(tmp_path)
    _record(paths, keeper.pid, listening, SparkSettings())
    now = SparkSettings(conf={"spark.sql.shuffle.partitions": "7"})
    found = dev_server.status(now, paths)
    assert found.running and found.url is None
    assert "sluice spark stop && sluice spark start" in str(found.problem)
    assert dev_server.running(now, paths) is None
    assert "not using the Spark Connect server" in caplog.text


def test_an_unreadable_record_says_how_to_clear_it(tmp_path: Path) -> None:
    paths = SparkPaths.for_project(tmp_path)
    path = paths.connect / dev_server.STATE_NAME
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    found = dev_server.status(SparkSettings(), paths)
    assert not found.running and "sluice spark stop" in str(found.problem)
    dev_server.stop_server(SparkSettings(), paths)
    assert not path.exists()


def _sluice(*args: str, project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([sys.executable, "-m", "sluice", *args, "--project", str(project)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip


@pytest.mark.spark
def test_start_then_apply_and_query_run_on_the_warm_server_and_stop_frees_the_metastore(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    settings = load(project, {"config.yaml": CONFIG, "models/one.sql": ONE}).config.sluice.spark
    paths = SparkPaths.for_project(project)
    started = _sluice("spark", "start", project=project)
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        url = started.stdout.split("running on ")[1].split()[0]
        record_path = paths.connect / dev_server.STATE_NAME
        record = json.loads(record_path.read_text())
        server_pid, token = int(record["server_pid"]), str(record["token"])
        # the token: in the record, which is the developer's alone, and printed nowhere
        assert (record_path.stat().st_mode & 0o777, record_path.parent.stat().st_mode & 0o777) == (
            0o600,
            0o700,
        )
        assert len(token) >= 40 and token not in started.stdout + started.stderr
        again = _sluice("spark", "start", project=project)
        assert again.returncode == 1 and "already runs for this project" in again.stderr
        status = _sluice("spark", "status", "--json", project=project)
        assert json.loads(status.stdout)["url"] == url and token not in status.stdout
        for log in ("keeper.log", "server.log"):
            assert token not in (paths.connect / log).read_text(errors="replace")
        # apply and query: jobs of the warm server (the metastore lock is the keeper's, so
        # a spark-submit job could not have run), said in the verbose log
        applied = subprocess.run(
            [sys.executable, "-m", "sluice", "-v", "apply", "--project", str(project),
             "--end", "2024-01-02"],
            capture_output=True, text=True, timeout=600, check=False,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert f"running on the Spark Connect server {url}" in applied.stderr
        query = _sluice(
            "query", "prod", "SELECT name FROM devsrv.one WHERE id = 2", project=project
        )
        assert query.returncode == 0, query.stderr
        assert "│ b " in query.stdout
        # the server's JVM dies: its keeper starts another, and commands find it
        os.kill(server_pid, signal.SIGKILL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            record = json.loads((paths.connect / dev_server.STATE_NAME).read_text())
            if record["server_pid"] != server_pid and dev_server.running(settings, paths):
                break
            time.sleep(1)
        else:
            pytest.fail("the keeper did not start the server again within 300 s")
        restarted = int(record["server_pid"])
        query = _sluice("query", "prod", "SELECT COUNT(*) AS n FROM devsrv.one", project=project)
        assert query.returncode == 0, query.stderr
        assert "│ 2 " in query.stdout
        server_pid = restarted
    finally:
        stopped = _sluice("spark", "stop", project=project)
    assert stopped.returncode == 0 and "stopped the Spark Connect server" in stopped.stdout
    after = _sluice("spark", "status", project=project)
    assert after.returncode == 1 and "not running" in after.stdout
    acquire_metastore_lock(paths, "probe", timeout=5).release()  # the keeper let go
    with pytest.raises(ProcessLookupError):  # and the server's JVM is gone with it
        os.kill(server_pid, 0)
