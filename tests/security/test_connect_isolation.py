"""Spark Connect mode keeps the trust rule: no service secret where a PR's code runs.

In ``spark.mode: connect`` a pull request's SQL runs in the Spark Connect server's JVM and
its Python in the job's child process: both get the allow-listed environment of
``child_environment`` (a home of their own, no ``SLUICE_*``, no token), whatever this
process holds. The probes are tests/helpers/isolation.py's, run through ConnectRunner.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from tests.helpers.isolation import PROBES, SECRETS, leaks

ALLOWED = {"PATH", "JAVA_HOME", "LANG", "TZ", "TMPDIR", "SPARK_LOCAL_IP", "SPARK_HOME",
           "HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
           "PYTHONUNBUFFERED", "HOME", "SPARK_SUBMIT_OPTS"}  # fmt: skip


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    return SECRETS


def test_the_job_child_gets_the_allow_list_and_the_endpoint_only(
    secrets: dict[str, str], tmp_path: Path
) -> None:
    remote = "sc://spark.internal:15002"
    paths = SparkPaths(root=tmp_path, logs=tmp_path / "logs")
    runner = ConnectRunner(SparkSettings(mode="connect", remote=remote), paths)
    env = runner.environment(tmp_path / "home")
    runner._preflight({"job_id": "j", "steps": []}, env)
    assert set(env) - ALLOWED - {"SPARK_REMOTE"} == {n for n in env if n.startswith("LC_")}
    assert env["SPARK_REMOTE"] == remote and "SPARK_SUBMIT_OPTS" not in env
    assert leaks(json.dumps(env)) == []
    command = runner.command(paths.logs / "j.json", "j", "test")
    assert command[:3] == [sys.executable, command[1], "--connect"]
    assert remote not in " ".join(command)  # not on a command line other users can read


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_prs_sql_finds_no_secret_in_the_connect_servers_environment(
    secrets: dict[str, str], connect_server: ConnectServer, tmp_path: Path
) -> None:
    connect_server.endpoint()
    assert connect_server.pid is not None
    # The server's own environment (its spark-submit launcher execs the JVM in place).
    server_env = _environ(connect_server.pid)
    # Besides the allow-list, only what Spark's launch scripts and the shell set.
    launcher = {"PWD", "OLDPWD", "SHLVL", "_", "PYTHONHASHSEED", "MALLOC_ARENA_MAX"}
    extra = set(server_env) - ALLOWED - launcher
    assert extra <= {n for n in server_env if n.startswith(("LC_", "SPARK_"))}, extra
    assert leaks(json.dumps(server_env)) == []
    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    seen: list[dict[str, Any]] = []
    runner = ConnectRunner(
        connect_server.settings, paths, server=connect_server, on_event=seen.append
    )
    steps = [{"type": "sql", "label": f"probe {i}", "statements": [sql]}
             for i, sql in enumerate(PROBES)]  # fmt: skip
    result = runner.run({"job_id": "probe-connect", "kind": "test", "steps": steps})
    rows = {key: value["rows"][0] for key, value in result.results.items()}
    everything = rows["0"]["everything"]
    assert "PATH=" in everything and "SPARK_LOCAL_IP=127.0.0.1" in everything
    assert {rows["1"][name.lower()] for name in SECRETS} == {"null"}
    assert {rows["2"][name.lower()] for name in SECRETS} == {"bnVsbA=="}
    assert "SLUICE_" not in everything and "GITHUB" not in everything
    # The JVM's home is the server's own folder, not the service's.
    assert rows["3"]["home"] != os.environ.get("HOME")
    assert Path(rows["3"]["home"]).is_relative_to(connect_server.paths.connect)
    # No substitution on the job's session either.
    assert rows["4"] == {"env_path": "${env:PATH}", "home_prop": "${system:user.home}",
                         "warehouse": "${spark.sql.warehouse.dir}"}  # fmt: skip
    assert result.log_path is not None
    for where, text in [("events", json.dumps(seen)), ("log", result.log_path.read_text())]:
        assert leaks(text) == [], f"{where} hold a secret"
