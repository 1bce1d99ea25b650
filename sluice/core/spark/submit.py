"""Run a job spec: through ``spark-submit`` (the default) or in this process.

:class:`SubmitRunner` writes the spec next to the job's log, runs the driver program under
``spark-submit`` and follows its event lines on stdout. The exit code is the only reliable
failure signal in client mode; the events say which step failed and why, so the error a
user sees is the step's own error, not 170 lines of JVM log. :class:`InProcessRunner` calls
the same driver code on a local session, for quick runs and tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, ExecutionError
from sluice.core.spark import events
from sluice.core.spark.failures import job_failure
from sluice.core.spark.session import (
    SparkPaths,
    java_problem,
    local_session,
    metastore_lock,
    spark_conf,
)

logger = logging.getLogger(__name__)

OnEvent = Callable[[dict[str, Any]], None]

DRIVER = Path(__file__).with_name("driver.py")
CONNECT_TIMEOUT = 3.0
_TAIL_LINES = 400


@dataclass(frozen=True)
class JobResult:
    """What a finished job reported."""

    job_id: str
    results: dict[str, Any]
    seconds: float
    log_path: Path | None
    events: list[dict[str, Any]] = field(default_factory=list)


class Runner(Protocol):
    """Runs one job spec to the end, or raises :class:`ExecutionError`."""

    def run(self, spec: dict[str, Any]) -> JobResult: ...


def _job_id(spec: dict[str, Any]) -> str:
    return str(spec.get("job_id") or uuid.uuid4().hex[:12])


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``spark://h1:p1,h2:p2`` (standalone, maybe HA) as (host, port) pairs."""
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.strip().rpartition(":")
        if not host:
            host, port = port, "7077"
        try:
            addresses.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ConfigError(
                f"invalid Spark master URL '{master}': '{part}' is not host:port",
                hint="set sluice.spark.master in config.yaml to spark://host:port[,host:port]",
            ) from None
    return addresses


def check_master(settings: SparkSettings, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse a standalone master that accepts no connection (Spark would retry a minute)."""
    master = settings.master
    if settings.deploy_mode == "cluster" and (
        master.startswith("local") or master.startswith("spark://")
    ):
        raise ConfigError(
            f"sluice.spark.deploy_mode 'cluster' does not work with master '{master}': Spark "
            "runs Python drivers in cluster mode only on YARN and Kubernetes",
            hint="remove sluice.spark.deploy_mode from config.yaml (client mode is the default)",
        )
    if not master.startswith("spark://"):
        return
    addresses = _master_addresses(master)
    reasons = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise ExecutionError(
        f"Spark master {master} is not reachable ({'; '.join(reasons)})",
        hint="start the master, or fix sluice.spark.master in config.yaml "
        "(use local[*] to run on this machine)",
    )


# --- spark-submit ---------------------------------------------------------------------


def spark_submit_path() -> Path:
    """``bin/spark-submit`` of the installed PySpark (importing it starts no JVM)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


class _Log:
    """The job's log file, written from two reader threads.

    Line-buffered: the file shows the job as it runs (to whoever follows it), and a process
    killed mid-job (kill -9, the OOM killer) leaves every line it had read, not an empty
    file with the end of the story lost in a buffer.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self._file = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed in close()

    def write(self, line: str) -> None:
        with self._lock:
            self._file.write(line if line.endswith("\n") else line + "\n")
            self.tail.append(line)

    def close(self) -> None:
        self._file.close()


def _drain(stream: IO[str], log: _Log) -> None:
    for line in stream:
        log.write(line)


_PRCTL: Any = None
# Not on Linux: no prctl, and the process group still covers Ctrl-C.
with contextlib.suppress(OSError, AttributeError):
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL it when its parent dies."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _RunnerBase:
    """What both runners share: the Spark settings, the paths, where events go."""

    def __init__(
        self,
        settings: SparkSettings,
        paths: SparkPaths,
        *,
        on_event: OnEvent | None = None,
        lock_timeout: float = 600,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.on_event = on_event
        self.lock_timeout = lock_timeout

    def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event)


class SubmitRunner(_RunnerBase):
    """Runs jobs with ``spark-submit`` of the driver program, one process per job."""

    def command(self, spec_path: Path, job_id: str, kind: str) -> list[str]:
        """The ``spark-submit`` command line for one job."""
        cmd = [str(spark_submit_path()), "--master", self.settings.master]
        if self.settings.deploy_mode:
            cmd += ["--deploy-mode", self.settings.deploy_mode]
        for key, value in spark_conf(self.settings, self.paths).items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["--name", f"sluice-{kind}-{job_id}", str(DRIVER), str(spec_path)]
        return cmd

    def environment(self) -> dict[str, str]:
        """The child's environment: ours, on loopback, with this interpreter as Python."""
        env = dict(os.environ)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        # Event lines must reach us as they happen, not when a buffer fills.
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, spec: dict[str, Any]) -> JobResult:
        """Run ``spec``; its events go to ``on_event`` as they arrive.

        Raises:
            ExecutionError: Java is missing, the master is unreachable, the metastore is
                busy, or the job failed (naming the step and its error).
        """
        job_id = _job_id(spec)
        spec = {**spec, "job_id": job_id}
        env = self.environment()
        problem = java_problem(env)
        if problem is not None:
            raise problem
        check_master(self.settings)
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        spec_path = self.paths.logs / f"{_safe(job_id)}.json"
        spec_path.write_text(json.dumps(spec, indent=1, default=str), encoding="utf-8")
        log_path = self.paths.logs / f"{_safe(job_id)}.log"
        cmd = self.command(spec_path, job_id, str(spec.get("kind", "job")))

        def waiting(message: str) -> None:
            self._emit({"event": "log", "message": message})

        with metastore_lock(
            self.settings, self.paths, job_id, timeout=self.lock_timeout, on_wait=waiting
        ):
            began = time.monotonic()
            seen, code, tail = self._execute(cmd, env, log_path)
            seconds = time.monotonic() - began
        done = next((e for e in reversed(seen) if e.get("event") == "job_done"), None)
        if code != 0 or done is None:
            logger.info("job %s failed with exit code %s; log: %s", job_id, code, log_path)
            raise job_failure(job_id, seen, exit_code=code, log_path=log_path, output=tail)
        logger.info("job %s done in %.1f s", job_id, seconds)
        return JobResult(job_id, dict(done.get("results") or {}), seconds, log_path, seen)

    def _execute(
        self, cmd: list[str], env: dict[str, str], log_path: Path
    ) -> tuple[list[dict[str, Any]], int, list[str]]:
        logger.debug("running %s", " ".join(cmd))
        log = _Log(log_path)
        seen: list[dict[str, Any]] = []
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                # Its own process group: the JVM starts the Python driver as a child, and
                # an interrupted job must take both down.
                start_new_session=True,
                # And if this process is killed outright (kill -9), the JVM goes too, so no
                # orphaned job keeps writing after the metastore lock is released.
                # It only calls prctl through a libc handle loaded beforehand: no locks.
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        except OSError as exc:
            log.close()
            raise ExecutionError(
                f"cannot run spark-submit ({cmd[0]}): {exc.strerror or exc}",
                hint="reinstall pyspark in this environment (pip install pyspark)",
            ) from exc
        assert proc.stdout is not None and proc.stderr is not None
        # stderr carries ~170 JVM log lines per job: read it on its own thread so neither
        # pipe fills up and stalls the child.
        reader = threading.Thread(target=_drain, args=(proc.stderr, log), daemon=True)
        reader.start()
        try:
            for line in proc.stdout:
                log.write(line)
                event = events.decode(line.rstrip("\n"))
                if event is not None:
                    seen.append(event)
                    self._emit(event)
            code = proc.wait()
            reader.join()
        except BaseException:
            # Ctrl-C or a failing on_event: leave no JVM or Python driver behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            log.close()
        return seen, code, list(log.tail)


class InProcessRunner(_RunnerBase):
    """Runs jobs with the driver code on a local SparkSession in this process."""

    def run(self, spec: dict[str, Any]) -> JobResult:
        """Run ``spec`` in this process; same contract as :meth:`SubmitRunner.run`."""
        from sluice.core.spark import driver

        job_id = _job_id(spec)
        spec = {**spec, "job_id": job_id}
        seen: list[dict[str, Any]] = []

        def emit(event: dict[str, Any]) -> None:
            seen.append(event)
            self._emit(event)

        # The session holds the embedded metastore (its lock) until this process exits.
        spark = local_session(
            self.settings,
            self.paths,
            lock_timeout=self.lock_timeout,
            on_wait=lambda message: emit({"event": "log", "message": message}),
        )
        began = time.monotonic()
        emit({"event": "job_start", "job_id": job_id, "steps": len(spec["steps"])})
        try:
            results = driver.run_job(spec, spark, emit)
        except driver.StepFailed:
            raise job_failure(job_id, seen) from None
        except Exception as exc:  # as the driver does: an error outside any step
            emit({"event": "job_failed", "error": driver.spark_error(exc)})
            raise job_failure(job_id, seen) from exc
        emit({"event": "job_done", "job_id": job_id, "results": results})
        return JobResult(job_id, results, time.monotonic() - began, None, seen)
