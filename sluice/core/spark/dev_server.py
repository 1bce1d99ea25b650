"""A developer's warm Spark: ``sluice spark start|stop|status`` and the CLI finding it.

On a developer machine every ``sluice`` command would pay a Spark start (a JVM, a
SparkSession, the metastore). ``sluice spark start`` leaves a Spark Connect server running
for a project (a :class:`~sluice.core.spark.connect.ConnectServer` kept by a small
detached Python process, the *keeper*, which holds the embedded metastore's lock, restarts
the server when it dies and stops it on SIGTERM); every later CLI command on that project
finds it (:func:`running`) and runs its jobs as Spark Connect clients of it.

The keeper writes ``<spark root>/connect/dev-server.json`` once the server answered a
``SELECT 1``: the keeper's pid, the ``sc://`` URL, the server's token (a client without it
is refused), when it started and a digest of the Spark settings it was started with. The
record is the developer's alone: mode 0600, in a 0700 folder, and a record another user
could have written or could read is not used. A command uses the server only while that
process lives, the port answers and the project's Spark settings still have that digest (a
server started before ``config.yaml``'s ``sluice.spark`` changed is ignored, with a warning
saying how to restart it). The token goes from the record to the job's child in its
environment; it is never printed (``sluice spark status --json`` has no token). This is a developer's convenience; the service keeps its own server
(``SLUICE_SPARK_MODE=connect``) and never looks for this one.

>>> import tempfile
>>> paths = SparkPaths.for_project(Path(tempfile.mkdtemp()))
>>> status(SparkSettings(), paths).running
False
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.spark.connect import (
    BIND_ADDRESS,
    CLIENT_HOST,
    START_TIMEOUT_S,
    UNRESPONSIVE_S,
    ConnectServer,
    listening,
    probe,
)
from sluice.core.spark.session import SparkPaths, spark_conf

logger = logging.getLogger(__name__)

STATE_NAME = "dev-server.json"
KEEPER_LOG = "keeper.log"
_WATCH_S = 5.0  # how often the keeper checks that its server still runs


@dataclass(frozen=True)
class Status:
    """What :func:`status` found. ``url`` is set only when the server may be used."""

    running: bool
    url: str | None = None
    pid: int | None = None
    started: str | None = None
    problem: str | None = None


def _state_path(paths: SparkPaths) -> Path:
    return paths.connect / STATE_NAME


def settings_digest(settings: SparkSettings, paths: SparkPaths) -> str:
    """A digest of what the server's JVM was started with (master and Spark conf)."""
    conf = sorted(spark_conf(settings, paths).items())
    text = json.dumps([settings.master, conf], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a keeper (``sluice ... spark start --foreground``) that still runs:
    a recycled pid of another program is not one, and is never signalled."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False  # gone, or another user's process: not a keeper of ours
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): the pid is all there is to go by
    return b"--foreground" in argv and b"spark" in argv


def status(settings: SparkSettings, paths: SparkPaths) -> Status:
    """Whether a developer server runs for ``paths`` and may serve ``settings``' jobs."""
    return _read(settings, paths)[0]


def _private(path: Path) -> str | None:
    """Why the record at ``path`` is not the user's alone (None: it is ours, 0600-like)."""
    info = path.stat()
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user"
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return f"{path} is open to other users"
    return None


def _read(settings: SparkSettings, paths: SparkPaths) -> tuple[Status, str | None]:
    """:func:`status`, and the server's token when it may be used."""
    path = _state_path(paths)
    try:
        problem = _private(path)
        data = json.loads(path.read_text(encoding="utf-8"))
        pid, port = int(data["pid"]), int(data["port"])
        token = data["token"]
        if not isinstance(token, str) or not token:
            raise TypeError("no token")
    except FileNotFoundError:
        return Status(False), None
    except (OSError, ValueError, KeyError, TypeError):
        return Status(False, problem=f"{path} is unreadable; `sluice spark stop` removes it"), None
    if problem is not None:
        # Another user could have chosen its port (and read its token): not used.
        return Status(False, pid=pid, problem=f"{problem}; `sluice spark stop` removes it"), None
    # The URL is made here, never read: a record is a file in the project's folder, and
    # whatever it says, a command connects to this machine's loopback only.
    url = f"sc://{CLIENT_HOST}:{port}"
    if not _alive(pid) or not 0 < port < 65536 or not listening(BIND_ADDRESS, port):
        return Status(False, pid=pid, problem="the server recorded there has stopped"), None
    started = str(data.get("started", ""))
    if data.get("settings") != settings_digest(settings, paths):
        return Status(
            True,
            pid=pid,
            started=started,
            problem=(
                "it was started with other Spark settings than config.yaml's sluice.spark "
                "now has; restart it: sluice spark stop && sluice spark start"
            ),
        ), None
    return Status(True, url=url, pid=pid, started=started), token


def connection(settings: SparkSettings, paths: SparkPaths) -> tuple[str, str] | None:
    """The ``sc://`` URL and token of a usable developer server for ``paths``, else None
    (a server started with other settings is named in a warning and not used)."""
    found, token = _read(settings, paths)
    if found.running and found.url is None:
        logger.warning("not using the Spark Connect server (pid %s): %s", found.pid, found.problem)
    if found.url is None or token is None:
        return None
    return found.url, token


def running(settings: SparkSettings, paths: SparkPaths) -> str | None:
    """The ``sc://`` URL of a usable developer server for ``paths``, else None."""
    found = connection(settings, paths)
    return None if found is None else found[0]


def serve(settings: SparkSettings, paths: SparkPaths) -> None:
    """Be the keeper, in this process, until SIGTERM or SIGINT: start the server, record
    it, restart it when it dies, stop it and remove the record at the end.

    Raises:
        ExecutionError: a server already runs for this project, or it did not start.
    """
    found = status(settings, paths)
    if found.running:
        raise ExecutionError(
            f"a Spark Connect server already runs for this project (pid {found.pid})",
            hint="sluice spark status shows it; sluice spark stop ends it",
        )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    server = ConnectServer(settings, paths)
    record = _state_path(paths)
    try:
        url = server.endpoint()
        _write_record(record, settings, paths, server)
        logger.info("Spark Connect server ready on %s (keeper pid %s)", url, os.getpid())
        keep(server, stop, lambda: _write_record(record, settings, paths, server))
    finally:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def keep(
    server: ConnectServer,
    stop: threading.Event,
    restarted: Callable[[], None],
    *,
    every: float = _WATCH_S,
    bound: float = UNRESPONSIVE_S,
) -> None:
    """Until ``stop``: every ``every`` seconds, start ``server`` again when it died, or when
    it stopped answering (:func:`~sluice.core.spark.connect.probe`) for ``bound`` seconds (a
    stopped or hung JVM: killed first); ``restarted`` after each start."""
    silent_since: float | None = None
    while not stop.wait(every):
        if server.running() and server.port is not None:
            if probe(BIND_ADDRESS, server.port, min(5.0, bound)) != "silent":
                silent_since = None
                continue
            now = time.monotonic()
            silent_since = silent_since if silent_since is not None else now
            if now - silent_since < bound or server.pid is None:
                continue
            server.kill(server.pid)
            deadline = time.monotonic() + 10
            while server.running() and time.monotonic() < deadline:
                time.sleep(0.1)
        silent_since = None
        server.endpoint()  # logs that it died and starts it again
        restarted()


def _write_record(
    record: Path, settings: SparkSettings, paths: SparkPaths, server: ConnectServer
) -> None:
    data = {
        "pid": os.getpid(),
        "server_pid": server.pid,
        "url": server.url,
        "port": server.port,
        "token": server.token,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "settings": settings_digest(settings, paths),
        "log": str(server.log_path),
    }
    # Readable by this user only, from its first byte (the folder is 0700 too: the
    # server made it so).
    tmp = record.with_suffix(".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    tmp.replace(record)  # a reader sees the old record or the new one, never half


def start(
    project_dir: Path,
    settings: SparkSettings,
    paths: SparkPaths,
    *,
    timeout: float = START_TIMEOUT_S,
) -> Status:
    """Start a detached keeper (``sluice spark start --foreground``) and wait until its
    server answers.

    Raises:
        ExecutionError: one runs already, or the keeper exited or did not get ready in
            ``timeout`` seconds (the end of its log is quoted).
    """
    found = status(settings, paths)
    if found.running:
        raise ExecutionError(
            f"a Spark Connect server already runs for this project (pid {found.pid}, "
            f"started {found.started})",
            hint="sluice spark stop ends it",
        )
    folder = paths.connect
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    log_path = folder / KEEPER_LOG
    cmd = [
        sys.executable,
        "-m",
        "sluice",
        "-v",
        "spark",
        "start",
        "--foreground",
        "--project",
        str(project_dir),
    ]
    with open(log_path, "ab") as log:
        keeper = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in the terminal's group: Ctrl-C there leaves it
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = status(settings, paths)
        if found.url is not None and found.pid == keeper.pid:
            return found
        if keeper.poll() is not None:
            raise ExecutionError(
                f"the Spark Connect server did not start (exit code {keeper.returncode}):\n"
                + _tail(log_path),
                hint=f"its log: {log_path}",
            )
        time.sleep(0.5)
    os.killpg(keeper.pid, signal.SIGTERM)
    raise ExecutionError(
        f"the Spark Connect server did not get ready within {timeout:.0f} s:\n" + _tail(log_path),
        hint=f"its log: {log_path}",
    )


def stop_server(settings: SparkSettings, paths: SparkPaths, *, timeout: float = 60.0) -> Status:
    """Stop the developer server of ``paths`` (SIGTERM to its keeper, which stops the
    JVM and frees the metastore) and return what ran; not running is not an error."""
    found = status(settings, paths)
    record = _state_path(paths)
    if found.pid is None or not _alive(found.pid):
        with contextlib.suppress(FileNotFoundError):
            record.unlink()  # a stale record of a keeper that is gone
        return found
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(found.pid):
        raise ExecutionError(
            f"the Spark Connect server's keeper (pid {found.pid}) did not stop within "
            f"{timeout:.0f} s",
            hint=f"kill {found.pid}",
        )
    return found


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
