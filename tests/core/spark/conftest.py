"""Spark fixtures: shared metastore folders, an in-process session, a standalone cluster.

Derby admits one process at a time, so the session keeps two metastore roots apart:
``spark_dirs`` for jobs run through spark-submit (child processes, one at a time under the
metastore lock) and ``inprocess_paths`` for the in-process session, whose JVM holds its
metastore until the test process exits. Each root pays the ~15 s Derby schema creation
once per test session.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core.config import SparkSettings
from sluice.core.spark.session import SparkPaths, local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _free_ports(count: int) -> list[int]:
    """``count`` different free ports (held open together while chosen, so the kernel
    cannot hand the same one out twice: a worker's web UI on the master's port answers
    the master's ``/json/`` with its own HTML page)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@pytest.fixture(scope="session")
def spark_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Metastore + warehouse root shared by the session's spark-submit jobs."""
    return tmp_path_factory.mktemp("spark-submit-root")


@pytest.fixture(scope="session")
def inprocess_paths(tmp_path_factory: pytest.TempPathFactory) -> SparkPaths:
    """Paths of the in-process session: a root of its own (see the module docstring)."""
    root = tmp_path_factory.mktemp("spark-inprocess-root")
    return SparkPaths(root=root, logs=root / "logs")


@pytest.fixture(scope="session")
def local_spark(inprocess_paths: SparkPaths) -> Iterator[SparkSession]:
    """One in-process SparkSession (Hive catalog on Derby) for the whole test session."""
    spark = local_session(SparkSettings(master="local[2]"), inprocess_paths)
    yield spark
    spark.stop()


def _alive_workers(webui: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as response:
        try:
            state = json.load(response)
        except json.JSONDecodeError:  # a page of a UI still starting: not up yet
            return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real standalone master and one 2-core worker on loopback; yields the master URL."""
    base = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    port, webui, worker_ui = _free_ports(3)
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = str(_spark_class())
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = base / f"{name}.log"
        logs.append(log)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [spark_class, *args], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        procs.append(proc)
        return proc

    try:
        master = start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui),
        )  # fmt: skip
        worker = start(
            "worker", "org.apache.spark.deploy.worker.Worker", master_url,
            "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
            "--work-dir", str(base / "work"), "--webui-port", str(worker_ui),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            if master.poll() is not None or worker.poll() is not None:
                output = "\n".join(p.read_text(errors="replace")[-3000:] for p in logs)
                pytest.fail(f"the Spark master or worker exited early:\n{output}")
            try:
                if _alive_workers(webui) >= 1:
                    break
            except OSError:
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                pytest.fail(f"no Spark worker registered with {master_url} within 60 s")
            time.sleep(0.5)
        yield master_url
    finally:
        for proc in reversed(procs):
            _stop(proc)
