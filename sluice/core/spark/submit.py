"""Run a job spec: through ``spark-submit`` (the default) or in this process.

:class:`SubmitRunner` writes the spec next to the job's log, runs the driver program under
``spark-submit`` and follows its event lines on stdout. The exit code is the only reliable
failure signal in client mode; the events say which step failed and why, so the error a
user sees is the step's own error, not 170 lines of JVM log. :class:`InProcessRunner` calls
the same driver code on a local session, for quick runs and tests.

The driver runs SQL from pull requests, so it holds no credential able to change a gate
decision or another environment: the spec carries no state URL (a spec that does, or that
holds the value of one of our secret settings, is refused before anything starts), the
``spark-submit`` child gets an allow-listed environment (:func:`child_environment`) with a
home of its own, and every job has a time limit (``timeout``; the whole process group is
killed past it). What the driver wants kept in state arrives as ``write`` events, which
both runners hand, as they arrive, to one :class:`~sluice.core.spark.writes.JobWrites`
built from the spec: it refuses any write the spec did not ask for (and the job is
stopped) and applies the rest to the store given to :func:`run_recorded`.

A pull request's code runs in the driver and can print event lines too, so what a runner
believes and keeps of them is bounded (:class:`Received`): one ``job_done``, the last event
(one after it fails the job), with a result of every step; the first of each other outcome;
at most :data:`MAX_KEPT_EVENTS` events of :data:`MAX_KEPT_CHARS` characters besides; the
job stopped past :data:`MAX_REFUSED_LINES` lines refused or not needed; a log of at most
:data:`MAX_LOG_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol, cast
from urllib.parse import urlsplit

from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, ExecutionError, SluiceError
from sluice.core.sandbox import keep_from_children
from sluice.core.spark import cancel, confine, events, jvm
from sluice.core.spark.events import Event, JobDone
from sluice.core.spark.failures import archive_changed, job_failure, sandbox_refusal
from sluice.core.spark.results import StepResult
from sluice.core.spark.session import (
    SparkPaths,
    java_problem,
    local_session,
    metastore_lock,
    spark_conf,
)
from sluice.core.spark.spec import JobSpec, Step
from sluice.core.spark.writes import WRITE_EVENT, JobWrites
from sluice.core.state.coalesce import Coalesced
from sluice.core.state.store import StateStore

logger = logging.getLogger(__name__)

OnEvent = events.OnEvent

DRIVER = Path(__file__).with_name("driver.py")
CONNECT_TIMEOUT = 3.0
_TAIL_LINES = 400
_TAIL_CHARS = 4000  # of each line kept for the error message (the log keeps more)
_LINE_CHARS = 1024 * 1024  # the longest line of Spark's own output kept (stderr)
_SKIP_CHARS = 64 * 1024

# A job's time limit when the service sets none (seconds; a runner's ``timeout=None``
# means no limit). The service's setting is named in the error a user sees.
JOB_TIMEOUT_S = 2 * 60 * 60.0
TIMEOUT_SETTING = "SLUICE_JOB_TIMEOUT_SECONDS"

# The spark-submit child's environment is an allow-list, not ours: the driver it starts
# runs SQL from pull requests, and that SQL can read its process's environment
# (``reflect('java.lang.System', 'getenv')``). Ours holds the service's credentials
# (SLUICE_GITHUB_TOKEN, SLUICE_WEBHOOK_SECRET, SLUICE_DATABASE_URL with its password, the
# App's private key, a CI's GITHUB_TOKEN...), any of which could change a gate decision or
# another environment. So the child gets only what Spark and Java need to start: the
# search path, Java, locale and time zone, the temp dir, the loopback address, a Spark or
# Hadoop installation's configuration when set; plus what we set ourselves (below).
# Nothing else: no SLUICE_*, no forge or CI tokens, no JAVA_TOOL_OPTIONS, PYTHONPATH or
# SPARK_SUBMIT_OPTS of ours either (they could load code or leak settings).
CHILD_ENV_NAMES = frozenset(
    {
        "PATH",
        "JAVA_HOME",
        "LANG",
        "TZ",
        "TMPDIR",
        "SPARK_LOCAL_IP",
        "SPARK_HOME",
        "HADOOP_CONF_DIR",
        "YARN_CONF_DIR",
    }
)
CHILD_ENV_PREFIXES = ("LC_",)

# Settings whose values a job spec must never hold (the spec file is readable by the driver).
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PRIVATE|KEY|CREDENTIAL|DATABASE_URL|DSN", re.I)
_SECRET_MIN_LEN = 8

_JOB_STATE: ContextVar[StateStore | None] = ContextVar("sluice_job_state", default=None)


class JobProgress:
    """Which steps of one job its driver reported done (``step_done``, by index), kept
    whether the job then succeeds or fails: what a caller needs to know what a failed job
    had finished (a promotion whose time ran out after its views step swapped prod's views,
    :func:`sluice.core.workflow.apply_plan`). Believed as the driver's results are."""

    def __init__(self) -> None:
        self.done: set[int] = set()

    def finished(self, indexes: Iterable[int]) -> bool:
        """Whether every step of ``indexes`` was reported done (False when there are none)."""
        wanted = set(indexes)
        return bool(wanted) and wanted <= self.done


_JOB_PROGRESS: ContextVar[JobProgress | None] = ContextVar("sluice_job_progress", default=None)


@dataclass(frozen=True)
class JobResult:
    """What a finished job reported."""

    job_id: str
    results: dict[str, StepResult]
    """Each step's result by its id (its index, as text, unless the step names one)."""
    seconds: float
    log_path: Path | None
    events: list[Event] = field(default_factory=list)
    """Every event of the job, in the order received."""


class Runner(Protocol):
    """Runs one job spec to the end, or raises :class:`ExecutionError`.

    The driver's ``write`` events go, checked against the spec, to the store given to
    :func:`run_recorded` (with none, they are checked and dropped).
    """

    def run(self, spec: JobSpec) -> JobResult: ...


def run_recorded(
    runner: Runner,
    spec: JobSpec,
    *,
    state: StateStore | None,
    progress: JobProgress | None = None,
) -> JobResult:
    """Run ``spec`` on ``runner``; the writes its driver reports go to ``state`` as they
    arrive, each checked against ``spec`` (:class:`~sluice.core.spark.writes.JobWrites`),
    a transaction per second at most (:class:`~sluice.core.state.coalesce.Coalesced`), the
    last ones before this returns or raises. ``progress``: told each step the driver
    reports done, so that a caller knows what a job that failed had finished.

    The store is the operation's, the runner the project's (the service, the Action, the
    local CLI and tests build runners without one, and ``run(spec)`` stays the one
    contract of every runner), so it is handed over for this call only, in this thread.

    Raises:
        ExecutionError: as :meth:`Runner.run`; ``WriteRefused`` when the driver asked for
            a write the spec does not allow (the job is stopped).
    """
    cancel.check()  # stopped before its Spark work began: start none
    held = Coalesced(state) if state is not None else None
    # What the checker needs of a store is the four writes a Coalesced offers.
    token = _JOB_STATE.set(cast(StateStore, held))
    told = _JOB_PROGRESS.set(progress)
    try:
        result = runner.run(spec)
    except BaseException:
        if held is not None:
            try:
                held.flush()  # what the job finished before it failed is kept
            except SluiceError as exc:
                logger.warning("could not record a failed job's last writes: %s", exc)
        raise
    finally:
        _JOB_PROGRESS.reset(told)
        _JOB_STATE.reset(token)
    if held is not None:
        held.flush()
    return result


def child_environment(home: Path) -> dict[str, str]:
    """The environment of a ``spark-submit`` child: :data:`CHILD_ENV_NAMES` (and ``LC_*``)
    from ours, loopback unless set, this interpreter as PySpark's Python, unbuffered
    output (event lines must reach us as they happen), and ``home`` as its home, for the
    shell's ``HOME`` and the JVM's ``user.home`` (Spark's Ivy cache goes there: point
    ``spark.jars.ivy`` at a shared folder when jobs use ``spark.jars.packages``)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES)
    }
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONUNBUFFERED"] = "1"
    env["HOME"] = str(home)
    where = str(home)
    if re.search(r"[\s\"']", where):
        where = '"' + where.replace("\\", "\\\\").replace('"', '\\"') + '"'
    env["SPARK_SUBMIT_OPTS"] = f"-Duser.home={where}"  # the client-mode driver's JVM
    return env


def _secret_values() -> list[tuple[str, str]]:
    """(name, value) of our settings that look secret, and of the passwords in URLs."""
    found = []
    for name, value in sorted(os.environ.items()):
        if name in CHILD_ENV_NAMES or not _SECRET_NAME.search(name):
            continue
        if len(value) >= _SECRET_MIN_LEN:
            found.append((name, value))
        with contextlib.suppress(ValueError):
            password = urlsplit(value).password
            if password and len(password) >= _SECRET_MIN_LEN:
                found.append((f"the password in {name}", password))
    return found


def _job_id(spec: JobSpec) -> str:
    return str(spec.get("job_id") or uuid.uuid4().hex[:12])


def _refuse_spec(problem: str) -> ExecutionError:
    return ExecutionError(
        f"refused to start a Spark job: the job spec {problem}; the driver runs pull "
        "requests' SQL and may hold no credential",
        hint="this is a bug in the code that built the spec: the runner applies the "
        "driver's writes itself (run_recorded(runner, spec, state=store)); nothing was started",
    )


def _prepare(spec: JobSpec, settings: SparkSettings) -> tuple[JobSpec, JobWrites]:
    """The spec as the driver gets it (with its job id, and how many models it may build
    at once: ``settings.concurrent_tasks`` unless the spec says), and the checker of its
    writes.

    Raises:
        ExecutionError: the spec carries a state URL, or a value of a secret setting.
    """
    if spec.get("state_url"):
        raise _refuse_spec("carries a state URL (state_url)")
    spec = {**spec, "job_id": _job_id(spec)}
    spec.setdefault("concurrent_tasks", settings.concurrent_tasks)
    spec.pop("state_url", None)  # a falsy one (None, ""): not sent either
    text = json.dumps(spec, default=str)
    for name, value in _secret_values():
        if value in text or json.dumps(value)[1:-1] in text:
            raise _refuse_spec(f"holds the value of {name}")
    return spec, JobWrites(spec, _JOB_STATE.get())


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
    return jvm.spark_home() / "bin" / "spark-submit"


MAX_LOG_BYTES = 64 * 1024 * 1024
"""The most a job's log file keeps of its output (then one line saying what was dropped)."""


class _Log:
    """The job's log file, written from two reader threads.

    Line-buffered: the file shows the job as it runs (to whoever follows it), and a process
    killed mid-job (kill -9, the OOM killer) leaves every line it had read, not an empty
    file with the end of the story lost in a buffer.

    At most ``limit`` bytes (:data:`MAX_LOG_BYTES`): a driver printing without end cannot
    fill the service's disk. The first line that does not fit ends the file; when it is
    closed, one more line says how much was dropped. The last lines (:attr:`tail`, for a
    failure's message) are kept all the same.
    """

    def __init__(self, path: Path, limit: int | None = None) -> None:
        self.path = path
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self.limit = limit = MAX_LOG_BYTES if limit is None else limit
        self._left = limit
        self._dropped = [0, 0]  # lines, bytes
        self._lock = threading.Lock()
        self._file = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed in close()

    def write(self, line: str) -> None:
        text = line if line.endswith("\n") else line + "\n"
        size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        with self._lock:
            self.tail.append(line[:_TAIL_CHARS])
            if size <= self._left:
                self._file.write(text)
                self._left -= size
                return
            self._left = 0  # nothing after a gap: the file ends where the cut is
            self._dropped[0] += 1
            self._dropped[1] += size

    def close(self) -> None:
        with self._lock:
            lines, size = self._dropped
            if lines:
                self._file.write(
                    f"sluice: the job's log was cut here, at its limit of {self.limit} bytes: "
                    f"{lines} more line{'s' if lines != 1 else ''} ({size} bytes) of the job's "
                    "output were not kept\n"
                )
            self._file.close()


def _drain(stream: IO[str], log: _Log) -> None:
    for line, _ in _lines(stream, _LINE_CHARS):
        log.write(line)


def _lines(stream: IO[str], limit: int) -> Iterator[tuple[str, bool]]:
    """The lines of ``stream``, each with whether it is whole: a line longer than
    ``limit`` characters (its newline not counted) is cut there, and the rest of it
    skipped (a driver printing one endless line cannot fill this process's memory)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if line.endswith("\n") or len(line) <= limit:
            yield line, True
            continue
        rest = line
        while rest and not rest.endswith("\n"):  # skip the rest of the line
            rest = stream.readline(_SKIP_CHARS)
        yield line[:limit] + "\n", False


MAX_KEPT_EVENTS = 20_000
"""A job's events kept for its result and its failure's report (its outcome always is)."""
MAX_KEPT_CHARS = 64 * 1024 * 1024
"""The most characters of event lines a job keeps (its outcome besides)."""
MAX_REFUSED_LINES = 10_000
"""The event lines a job's driver may print that are refused or not needed (a failure
reported again) before the job is stopped."""
_LOGGED_REFUSALS = 20  # of a job's refused lines, noted in the service's log too
_OUTCOMES = frozenset({"step_failed", "job_done", "job_failed"})


class Received:
    """One job's events as its runner receives them from the driver.

    A pull request's code runs in the driver and may print event lines of its own, without
    end: what is kept of them is bounded. :attr:`events` holds the first
    :data:`MAX_KEPT_EVENTS` events whose lines add up to at most :data:`MAX_KEPT_CHARS`
    characters, and besides, however many came before, the first ``step_failed`` and
    ``job_failed`` and the job's one ``job_done`` (:attr:`done`; an event after it fails
    the job). Past :data:`MAX_REFUSED_LINES` lines refused or not needed, the job is
    stopped.

    Attributes:
        events: The events kept, in the order received.
        done: The job's ``job_done``, once the driver reported it.
        refused_done: Why the last ``job_done`` line refused was (None: none was).
    """

    def __init__(self, writes: JobWrites, log: _Log | None = None) -> None:
        self.writes = writes
        self.log = log
        self.events: list[Event] = []
        self.done: JobDone | None = None
        self.refused_done: str | None = None
        # The caller's (run_recorded's ``progress``), read in the thread that runs the job.
        self.progress = _JOB_PROGRESS.get()
        self._chars = 0
        self._outcomes: set[str] = set()
        self._refused = 0

    @property
    def job_id(self) -> str:
        return self.writes.job_id

    def keep(self, event: Event, chars: int) -> None:
        """Keep ``event`` (its line ``chars`` long) while within the bounds; an outcome
        of a kind not received yet in any case."""
        kind = event["event"]
        first = kind in _OUTCOMES and kind not in self._outcomes
        if kind in _OUTCOMES:
            self._outcomes.add(kind)
        within = len(self.events) < MAX_KEPT_EVENTS and self._chars + chars <= MAX_KEPT_CHARS
        if first or within:
            self.events.append(event)
            self._chars += chars

    def repeated(self, event: Event) -> bool:
        """Whether ``event`` is an outcome of a kind already received (a ``step_failed``
        again: builds running at once may fail together, a few)."""
        return event["event"] in _OUTCOMES and event["event"] in self._outcomes

    def note(self, text: str, chars: int) -> None:
        """``text`` into the job's log, and (the first few) into the service's."""
        if self.log is not None:
            self.log.write(text)
        if self._refused < _LOGGED_REFUSALS:
            logger.warning("job %s: %s (%d characters)", self.job_id, text, chars)
        elif self._refused == _LOGGED_REFUSALS:
            logger.warning("job %s: more refused event lines: only in the job's log", self.job_id)

    def count(self, what: str) -> None:
        """One more line refused or not needed (``what``: the last one, for the error).

        Raises:
            ExecutionError: past :data:`MAX_REFUSED_LINES` of them (the job is stopped).
        """
        self._refused += 1
        if self._refused <= MAX_REFUSED_LINES:
            return
        raise ExecutionError(
            f"Spark job {self.job_id} was stopped: its driver printed more than "
            f"{MAX_REFUSED_LINES} event lines the runner refused or did not need (the last: "
            f"{what})",
            hint="code the job runs (a pull request's SQL or Python) prints lines that look "
            "like Sluice's events (@@sluice ...); they are not believed. Remove that output "
            "and run again; the job's log names the lines refused",
        )


def _unbelieved(job_id: str, problem: str, log_path: Path | None) -> ExecutionError:
    """The error for a job whose driver ended well but whose report of its results (its
    ``job_done``) the runner refused (``problem``: why)."""
    where = f"; full log: {log_path}" if log_path is not None else ""
    return ExecutionError(
        f"Spark job {job_id} failed: the runner refused its driver's report of the job's "
        f"results: {problem}",
        hint="a driver that ran every step reports, last, one result of each, as its step "
        "asked; this report was not that (code the job runs may have printed one of its own; "
        f"else it is a bug in Sluice: report it with the job's log){where}",
    )


class _RunnerBase:
    """What both runners share: the Spark settings, the paths, where events go, the time
    limit, and the one way a driver's events are received (writes checked and applied).

    Args:
        timeout: Seconds a job may run (the Spark work, not the wait for the metastore);
            None: no limit.
    """

    def __init__(
        self,
        settings: SparkSettings,
        paths: SparkPaths,
        *,
        on_event: OnEvent | None = None,
        lock_timeout: float = 600,
        timeout: float | None = JOB_TIMEOUT_S,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"a job's time limit must be positive seconds or None, not {timeout}")
        self.settings = settings
        self.paths = paths
        self.on_event = on_event
        self.lock_timeout = lock_timeout
        self.timeout = timeout

    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _receive(self, event: Event, got: Received, chars: int = 0) -> None:
        """One event from the driver (``chars``: its line's length): kept as
        :class:`Received` bounds it (a PR's code can print event lines without end), a
        write checked and applied, then passed on; refused, failing the job, when the job
        already reported its end.

        Raises:
            ExecutionError: the event came after the job's ``job_done``, or was an outcome
                reported again once too often (:meth:`Received.count`); ``WriteRefused``:
                a write the spec does not allow (the job is stopped).
        """
        kind = event["event"]
        if got.done is not None:
            raise self._after_end(f"a {kind!r} event", got, chars)
        if got.repeated(event):
            got.count(f"a {kind!r} event again")
        got.keep(event, chars)
        if event["event"] == "write":
            got.writes.apply(event)
        elif event["event"] == "job_done":
            got.done = event
        elif event["event"] == "step_done" and got.progress is not None:
            got.progress.done.add(event["index"])
        self._emit(event)

    def _refused(self, line: str, problem: events.BadEvent, got: Received) -> None:
        """An event line of the driver's that is not one (:func:`events.decode` said why):
        noted in the job's log and ours, and otherwise ignored (a pull request's code can
        print to the driver's stdout too), but for a ``write``: the job is stopped, as for
        any write its spec does not allow.

        Raises:
            WriteRefused: the line was a ``write`` event.
            ExecutionError: one refused line too many (:meth:`Received.count`).
        """
        if problem.kind == WRITE_EVENT:
            got.writes.refuse(f"a write event the runner cannot read: {problem}")
        if problem.kind == "job_done":
            got.refused_done = str(problem)
        got.note(f"sluice: refused an event line of the Spark driver: {problem}", len(line))
        got.count(str(problem))

    def _after_end(self, what: str, got: Received, chars: int) -> ExecutionError:
        """The error for ``what`` (an event line) received after the job's ``job_done``,
        noted in the job's log: the driver reports its end once, last, so whatever prints
        after it (an ``atexit`` hook, a thread of a pull request's code) is not the
        driver, and the results it would replace are not believed either."""
        got.note(
            f"sluice: refused an event line of the Spark driver: {what} after the job's end "
            "(job_done); the job is failed",
            chars,
        )
        return ExecutionError(
            f"Spark job {got.job_id} failed: its driver printed {what} after reporting the "
            "job's end (job_done); the runner believes neither",
            hint="the driver reports its end once, as its last event: a line after it was "
            "printed by code the job runs (a pull request's Python: an atexit hook, a thread "
            "left running). Remove that output and run again",
        )

    def _timer(self, expire: Callable[[], None]) -> threading.Timer | None:
        if self.timeout is None:
            return None
        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        return timer

    def _timed_out(self, log_path: Path | None) -> ExecutionError:
        if cancel.reason() is not None:  # stopped on purpose, by the same kill
            return cancel.stopped()
        assert self.timeout is not None
        limit = int(self.timeout) if float(self.timeout).is_integer() else self.timeout
        where = f"; full log: {log_path}" if log_path is not None else ""
        return ExecutionError(
            f"the Spark job ran longer than its limit of {limit} s (set by the service: "
            f"{TIMEOUT_SETTING})",
            hint="the job was stopped; what it finished is kept, so running it again goes on "
            "from there. Make the job smaller (a shorter range with --start, fewer models "
            f"changed at once), or ask the service's operator to raise {TIMEOUT_SETTING}{where}",
        )


class SubmitRunner(_RunnerBase):
    """Runs jobs with ``spark-submit`` of the driver program, one process per job."""

    def command(
        self, spec_path: Path, job_id: str, kind: str, java_flags: list[str] | None = None
    ) -> list[str]:
        """The ``spark-submit`` command line for one job (``java_flags``: the driver
        JVM's, before the settings' own)."""
        cmd = [str(spark_submit_path()), "--master", self.settings.master]
        if self.settings.deploy_mode:
            cmd += ["--deploy-mode", self.settings.deploy_mode]
        conf = spark_conf(self.settings, self.paths)
        jvm.add_options(conf, " ".join(java_flags or ()))
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["--name", f"sluice-{kind}-{job_id}", str(DRIVER), str(spec_path)]
        return cmd

    def environment(self, home: Path | None = None) -> dict[str, str]:
        """The child's environment (:func:`child_environment`), with ``home`` as its home
        (default: a ``home`` folder under this runner's root)."""
        if home is None:
            home = self.paths.root / "home"
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return child_environment(home)

    def run(self, spec: JobSpec) -> JobResult:
        """Run ``spec``; its events go to ``on_event`` as they arrive, its writes to the
        store given to :func:`run_recorded`.

        Raises:
            ExecutionError: the spec carries a credential, Java is missing, the master is
                unreachable, the metastore is busy, the job ran past its time limit, the
                driver asked for a write its spec does not allow (``WriteRefused``), or the
                job failed (naming the step and its error).
        """
        spec, writes = _prepare(spec, self.settings)
        job_id = spec["job_id"]
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        # This run's own home, made afresh (a random part): two runs of one id never share
        # it. (Each Spark root's jobs have a logs folder of their own: Checkout.spark_at.)
        home = Path(
            tempfile.mkdtemp(prefix=f"{_safe(job_id)}.", suffix=".home", dir=self.paths.logs)
        )
        try:
            env = self.environment(home)
            self._preflight(spec, env)
            # The driver sees a project's Python sources alone, never its other files.
            spec = confine.python_sources(spec, home / "python")
            # The spec keeps its name beside the job's log (<id>.json: what the tools and
            # the chaos bench look for), written as a new file: whatever was at that path
            # (an earlier run's spec, a link) is removed first, never written through.
            spec_path = self.paths.logs / f"{_safe(job_id)}.json"
            with contextlib.suppress(FileNotFoundError):
                spec_path.unlink()
            text = json.dumps(spec, indent=1, default=str)
            confine.write_new(spec_path, text.encode("utf-8"))
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        log_path = self.paths.logs / f"{_safe(job_id)}.log"
        got = Received(writes)
        with self._hold(job_id), self._class_archive(env, spec) as archive:
            cmd = self.command(spec_path, job_id, str(spec.get("kind", "job")), archive.flags)
            launch = sandbox.wrap(cmd, self.profile(spec, spec_path, home, archive))
            cmd = launch.argv
            began = time.monotonic()
            home.mkdir(mode=0o700, exist_ok=True)
            code: int | None = None
            timed_out = False
            try:
                code, tail, timed_out = self._execute(
                    cmd, env, log_path, got, spec["steps"], fds=launch.fds
                )
                archive.clean = code == 0 and not timed_out
                # The sandbox did not start (bubblewrap said why), and the archive it was
                # to bind is no longer the file checked: asked while it is still held.
                refusal = sandbox_refusal(tail) if code != 0 and not got.events else None
                moved = refusal is not None and archive.changed()
            finally:
                try:
                    self._after(job_id, env, got.events, code, timed_out)
                finally:
                    shutil.rmtree(home, ignore_errors=True)
            seconds = time.monotonic() - began
        if timed_out:
            logger.info(
                "job %s stopped (%s); log: %s",
                job_id,
                cancel.reason() or f"past its limit of {self.timeout} s",
                log_path,
            )
            raise self._timed_out(log_path)
        done = got.done
        if moved:
            logger.warning("job %s: its sandbox did not start: %s", job_id, refusal)
            raise archive_changed(f"Spark job {job_id}", log_path)
        if code != 0 or done is None:
            logger.info("job %s failed with exit code %s; log: %s", job_id, code, log_path)
            if code == 0 and got.refused_done is not None:
                raise _unbelieved(job_id, got.refused_done, log_path)
            raise job_failure(job_id, got.events, exit_code=code, log_path=log_path, output=tail)
        logger.info("job %s done in %.1f s", job_id, seconds)
        return JobResult(job_id, dict(done["results"]), seconds, log_path, got.events)

    @contextlib.contextmanager
    def _class_archive(self, env: dict[str, str], spec: JobSpec) -> Iterator[jvm.ArchiveUse]:
        """The driver's class archive (:mod:`sluice.core.spark.jvm`); none for a driver
        that runs on the cluster (``deploy_mode: cluster``), whose JVM is not ours. In a
        sandbox only a job of prod (approved content) may write it; others map it."""
        archive = jvm.ClassArchive.for_spark(jvm.spark_home(), env, self.paths.class_archives)
        if archive is None or self.settings.deploy_mode == "cluster":
            yield jvm.ArchiveUse([])
            return
        conf = spark_conf(self.settings, self.paths)
        if sandbox.isolation() != "none" and spec.get("environment") != "prod":
            with archive.held(conf) as held:  # the checked file, bound by its descriptor
                yield held
            return
        with archive.use(conf) as use:
            use.folder = archive.folder
            yield use

    def profile(
        self, spec: JobSpec, spec_path: Path, home: Path, archive: jvm.ArchiveUse
    ) -> sandbox.Profile:
        """What the driver may see: its spec, the project's Python (when the job runs
        any), Java and Spark read-only; its home, the warehouse and the metastore
        writable; the class archive's folder only for a job that writes the archive (a
        job that maps it is shown the file checked and held open, never its path: a prod
        driver writes that folder); no network but its own loopback unless the master is
        remote."""
        read = [spec_path, *confine.spec_files(spec)]
        conf = spark_conf(self.settings, self.paths)
        files, folders = confine.service_paths(conf)
        read += files
        write = [home, self.paths.root, *folders]
        if archive.folder is not None:
            write.append(archive.folder)
        return sandbox.Profile(
            "driver",
            read=tuple(dict.fromkeys(read)),
            write=tuple(write),
            network="host" if confine.reaches_out(self.settings, conf) else "none",
            java=True,
            light=False,
            cwd=home,
            limits=confine.limits(conf),
            held=archive.binds,
        )

    def _preflight(self, spec: JobSpec, env: dict[str, str]) -> None:
        """Refuse early what would fail slowly: no Java, an unreachable master."""
        problem = java_problem(env)
        if problem is not None:
            raise problem
        check_master(self.settings)

    @contextlib.contextmanager
    def _hold(self, job_id: str) -> Iterator[None]:
        """Hold what the job needs to itself while it runs: the embedded metastore."""

        def waiting(message: str) -> None:
            self._emit({"event": "log", "message": message})

        with metastore_lock(
            self.settings, self.paths, job_id, timeout=self.lock_timeout, on_wait=waiting
        ):
            yield

    def _after(
        self,
        job_id: str,
        env: dict[str, str],
        seen: list[Event],
        code: int | None,
        timed_out: bool,
    ) -> None:
        """Once the child is gone (``code`` None: it was stopped by an error of ours)."""

    def _execute(
        self,
        cmd: list[str],
        env: dict[str, str],
        log_path: Path,
        got: Received,
        steps: Sequence[Step],
        fds: Sequence[int] = (),
    ) -> tuple[int, list[str], bool]:
        """Run ``cmd``, its events into ``got`` (the results they report checked against
        the job's ``steps``); (exit code, the output's last lines, whether it timed out).
        ``fds``: the descriptors its sandbox binds (:attr:`sandbox.Launch.fds`)."""
        logger.debug("running %s", " ".join(cmd))
        keep_from_children()
        log = _Log(log_path)
        got.log = log
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=env["HOME"],
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                pass_fds=tuple(fds),
                # Its own process group: the JVM starts the Python driver as a child, and
                # an interrupted job must take both down.
                start_new_session=True,
                # And if this process is killed outright (kill -9), the JVM goes too, so no
                # orphaned job keeps writing after the metastore lock is released.
                # It only calls prctl through a libc handle loaded beforehand: no locks.
                preexec_fn=sandbox.die_with_parent,  # noqa: PLW1509
            )
        except OSError as exc:
            log.close()
            raise ExecutionError(
                f"cannot run spark-submit ({cmd[0]}): {exc.strerror or exc}",
                hint="reinstall pyspark in this environment (pip install pyspark)",
            ) from exc
        assert proc.stdout is not None and proc.stderr is not None
        expired = threading.Event()

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        def expire() -> None:
            expired.set()
            kill()

        timer = self._timer(expire)
        forget = cancel.on_cancel(expire)  # a job stopped on purpose ends the same way
        # stderr carries ~170 JVM log lines per job: read it on its own thread so neither
        # pipe fills up and stalls the child.
        reader = threading.Thread(target=_drain, args=(proc.stderr, log), daemon=True)
        reader.start()
        try:
            for line, whole in _lines(proc.stdout, events.MAX_LINE_CHARS + len(events.PREFIX)):
                log.write(line)
                if got.done is not None and line.startswith(events.PREFIX):
                    raise self._after_end("an event line", got, len(line))
                try:
                    if not whole and line.startswith(events.PREFIX):
                        text = line[len(events.PREFIX) :]
                        raise events.too_long(text, events.MAX_LINE_CHARS)
                    event = events.decode(line.rstrip("\n"), steps)
                except events.BadEvent as problem:
                    self._refused(line, problem, got)
                    continue
                if event is not None:
                    self._receive(event, got, len(line))
            code = proc.wait()
            reader.join()
        except BaseException:
            # Ctrl-C, a failing on_event or a refused write: leave no JVM or Python
            # driver behind.
            kill()
            proc.wait()
            raise
        finally:
            forget()
            if timer is not None:
                timer.cancel()
            log.close()
        return code, list(log.tail), expired.is_set()


class InProcessRunner(_RunnerBase):
    """Runs jobs with the driver code on a local SparkSession in this process.

    Same contract as :class:`SubmitRunner`, writes through the same checks; past its time
    limit a job's Spark work is cancelled (Python code of a step cannot be stopped here).
    """

    def run(self, spec: JobSpec) -> JobResult:
        """Run ``spec`` in this process; same contract as :meth:`SubmitRunner.run`."""
        from sluice.core.spark import driver
        from sluice.core.spark.steps.context import spark_error

        spec, writes = _prepare(spec, self.settings)
        job_id = spec["job_id"]
        got = Received(writes)

        def emit(event: Event) -> None:
            self._receive(event, got)

        # The session holds the embedded metastore (its lock) until this process exits.
        spark = local_session(
            self.settings,
            self.paths,
            lock_timeout=self.lock_timeout,
            on_wait=lambda message: self._emit({"event": "log", "message": message}),
        )
        began = time.monotonic()
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            spark.sparkContext.cancelAllJobs()

        emit({"event": "job_start", "job_id": job_id, "steps": len(spec["steps"])})
        timer = self._timer(expire)
        forget = cancel.on_cancel(expire)
        try:
            results = driver.run_job(spec, spark, emit)
        except Exception as exc:
            if writes.refused is not None:
                raise writes.refused from None
            if expired.is_set():
                raise self._timed_out(None) from None
            if isinstance(exc, driver.StepFailed):
                raise job_failure(job_id, got.events) from None
            # As the driver does: an error outside any step.
            emit({"event": "job_failed", "error": spark_error(exc)})
            raise job_failure(job_id, got.events) from exc
        finally:
            forget()
            if timer is not None:
                timer.cancel()
        if writes.refused is not None:  # swallowed by a step's own error handling
            raise writes.refused
        if expired.is_set():
            raise self._timed_out(None)
        emit({"event": "job_done", "job_id": job_id, "results": results})
        return JobResult(job_id, results, time.monotonic() - began, None, got.events)
