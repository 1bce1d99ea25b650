"""A warm Spark: a Spark Connect server kept running by the service, and jobs run on it.

``spark.mode: connect`` (a service setting) runs each job as a short-lived Python child
process (no JVM of its own) that opens one Spark Connect session on a server and runs the
same driver code as ``spark-submit`` does (:mod:`sluice.core.spark.driver`), reporting
through the same event lines. The JVM, the SparkSession and the metastore connection stay
up between jobs, so a job pays a Python start and a session, not a Spark start.

The server is either the user's (``spark.remote``: an ``sc://`` endpoint, used as is) or,
on the embedded default, one this module starts with ``spark-submit`` of PySpark's bundled
``SparkConnectServer``, with the same :func:`~sluice.core.spark.session.spark_conf` as a
``spark-submit`` job, bound to 127.0.0.1 on a free port, health-checked with a
``SELECT 1`` from a client, restarted when it died, stopped cleanly. It takes only clients
that send the token it was started with: a new random one per start, handed to the server
and to each job's child in their environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``), never
on a command line, in a file or in a log line. Derby admits one
process at a time: the server's owner holds the metastore lock while the server runs.

Trust (docs/security.md): the pull requests' SQL runs in the server's JVM and their
Python in the job's child, so both get the allow-listed environment of
:func:`~sluice.core.spark.submit.child_environment`, homes of their own, and no secret;
this process is made non-dumpable before starting either. One Connect session per job: a
job's temporary views and ``SET``\\ s end with it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import DriverLost, ExecutionError
from sluice.core.spark import cancel, confine, jvm, relay
from sluice.core.spark.events import Event
from sluice.core.spark.failures import archive_changed, sandbox_refusal, server_lost
from sluice.core.spark.session import (
    MetastoreLock,
    SparkPaths,
    acquire_metastore_lock,
    java_problem,
    spark_conf,
    uses_embedded_metastore,
)
from sluice.core.spark.spec import JobSpec
from sluice.core.spark.submit import (
    DRIVER,
    JobResult,
    SubmitRunner,
    _job_id,
    _safe,
    child_environment,
    spark_submit_path,
)

logger = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
BIND_ADDRESS = "127.0.0.1"
REMOTE_ENV = "SPARK_REMOTE"  # how the job's child gets the endpoint (not its command line)
RELAY_ENV = "SLUICE_CONNECT_RELAY"  # the socket a sandboxed child reaches its server by
# The server's token: Spark's server reads it from its environment (or its
# spark.connect.authenticate.token, which would be on the command line), and PySpark's
# client sends it as a bearer token when the URL has none.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
# The host in our servers' URLs. PySpark sends a token without TLS only to the host named
# "localhost", through gRPC's local credentials, which also refuse a peer that is not a
# loopback address; to any other host it requires TLS, which the server does not speak.
CLIENT_HOST = "localhost"
START_TIMEOUT_S = 300.0
_HEALTH_TIMEOUT_S = 120.0
# A job's server that takes connections and answers none (a stopped or hung JVM) for this
# long fails the job as DriverLost (and ours is killed, to start again for the next job). A
# server that is gone (its process exited, its port closed) fails it within seconds.
UNRESPONSIVE_S = 30.0
WATCH_EVERY_S = 1.0  # how often a job's runner looks at its server
_PROBE_EVERY_S = 3.0  # how often it asks the server to answer (an HTTP/2 handshake)
_PROBE_TIMEOUT_S = 5.0
# The start of an HTTP/2 connection (RFC 9113, 3.4): the client's preface and an empty
# SETTINGS frame, which a gRPC server (Netty, in its own threads) answers with its SETTINGS.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])

# A client's SELECT 1, in a child process: the Connect client switches PySpark in its
# process to Connect mode for good (an environment variable), and the service process
# must stay as it is.
_HEALTH = """
import os, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).create()
try:
    assert spark.sql("SELECT 1 AS one").collect()[0][0] == 1
finally:
    spark.stop()
"""

# Stops what a job left running on the server when its child died or ran out of time:
# killing a Connect client does not stop its session's Spark work.
_INTERRUPT = """
import os
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
spark.interruptAll()
spark.stop()
"""


def free_port(host: str = BIND_ADDRESS) -> int:
    """A TCP port nobody listens on at ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def listening(host: str, port: int) -> bool:
    """Whether ``host:port`` takes a TCP connection (within a second)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


Answer = Literal["answers", "refused", "silent"]


def probe(host: str, port: int, timeout: float = _PROBE_TIMEOUT_S, *, tls: bool = False) -> Answer:
    """Whether a Spark Connect server at ``host:port`` answers, without a client or a
    token: "answers" (its gRPC server replied to an HTTP/2 connection's start), "refused"
    (nothing listens: the server is gone) or "silent" (the connection was taken, or not,
    but nothing answered within ``timeout``: a stopped or hung JVM, whose kernel still
    queues connections). ``tls``: a server behind TLS, where a taken connection is all
    that is asked. Cheap (no Python child, no session): a runner asks it every few seconds
    while a job runs."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "silent"
    with sock:
        if tls:
            return "answers"
        try:
            sock.settimeout(timeout)
            sock.sendall(_H2_PREFACE)
            reply = sock.recv(9)  # the server's first frame header
        except ConnectionResetError:
            return "refused"
        except OSError:
            return "silent"
    return "answers" if reply else "refused"


def _client_env(url: str, home: Path, token: str | None) -> dict[str, str]:
    env = child_environment(home)
    env[REMOTE_ENV] = url
    if token is not None:
        env[TOKEN_ENV] = token
    return env


def _client_script(script: str, url: str, timeout: float, token: str | None) -> str | None:
    """Run a Connect client snippet in a child of the service's own; None when it worked,
    else its error.

    The child is not sandboxed (it holds the server's token), so nothing a sandbox can
    write reaches it: Python in isolated mode (``-I``: no working folder, ``PYTHON*``
    variables or user site on ``sys.path``), its working folder and home a fresh private
    folder of its own, removed after."""
    sandbox.keep_from_children()
    with tempfile.TemporaryDirectory(prefix="sluice-client-") as private:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", script],
                env=_client_env(url, Path(private), token),
                cwd=private,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"no answer within {timeout:.0f} s"
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return "\n".join(lines[-5:]) or f"exit code {done.returncode}"


def health_check(
    url: str, timeout: float = _HEALTH_TIMEOUT_S, *, token: str | None = None
) -> str | None:
    """A client's ``SELECT 1`` on ``url`` (sending ``token``): None when it answered, else
    why not."""
    return _client_script(_HEALTH, url, timeout, token)


def interrupt_session(
    url: str, session_id: str, timeout: float = 60.0, *, token: str | None = None
) -> None:
    """Interrupt every operation of one Connect session, and release it (best effort)."""
    problem = _client_script(
        _INTERRUPT, f"{url.rstrip('/')}/;session_id={session_id}", timeout, token
    )
    if problem is not None:
        logger.info("could not interrupt Connect session %s: %s", session_id, problem)


class ConnectServer:
    """A Spark Connect server on this machine, started and kept running on demand.

    :meth:`endpoint` starts it (or starts it again when it died) and returns its
    ``sc://`` URL (:meth:`connection`: with the token its clients must send); :meth:`stop`
    ends it. Thread-safe. With the embedded metastore, the
    server's owner (this object, in this process) holds the metastore lock while it runs:
    ``spark-submit`` jobs on the same root wait for it, as they wait for each other.

    Args:
        settings: The service's Spark settings (master and ``conf``, as a job gets them).
        paths: The metastore, warehouse and the server's folder (``<root>/connect``).
        start_timeout: Seconds the server may take to answer a first ``SELECT 1``.
        lock_timeout: Seconds to wait for the metastore lock.
    """

    def __init__(
        self,
        settings: SparkSettings,
        paths: SparkPaths,
        *,
        start_timeout: float = START_TIMEOUT_S,
        lock_timeout: float = 600.0,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.start_timeout = start_timeout
        self.lock_timeout = lock_timeout
        self.starts = 0  # how many times a server process was started
        self.port: int | None = None
        self._token: str | None = None  # this start's; a client without it is refused
        self._proc: subprocess.Popen[bytes] | None = None
        self._killed: int | None = None  # the pid :meth:`kill` killed (it may still exit)
        self._lock: MetastoreLock | None = None
        self._guard = threading.RLock()

    @property
    def folder(self) -> Path:
        return self.paths.connect

    @property
    def log_path(self) -> Path:
        return self.folder / "server.log"

    @property
    def url(self) -> str:
        if self.port is None:
            raise ExecutionError("the Spark Connect server is not running")
        return f"sc://{CLIENT_HOST}:{self.port}"

    @property
    def token(self) -> str:
        """The token the running server takes (a new one each start; never log it)."""
        if self._token is None:
            raise ExecutionError("the Spark Connect server is not running")
        return self._token

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def gone(self, pid: int) -> str | None:
        """Why the server started as ``pid`` is no longer running (None: it is): it
        exited (how), or was stopped or replaced by a start since."""
        proc = self._proc
        if proc is None or proc.pid != pid:
            return f"(pid {pid}) was stopped, and another started since"
        code = proc.poll()
        if code is None:
            return None
        # The server runs in a sandbox (bubblewrap) that exits as its JVM does: 128 + N
        # when a signal N killed the JVM, as a shell reports it.
        if code < 0:
            return f"died (pid {pid}: killed by signal {-code})"
        if 128 < code < 128 + 65:
            return f"died (pid {pid}: killed by signal {code - 128})"
        return f"died (pid {pid}: exit code {code})"

    def kill(self, pid: int) -> None:
        """Kill the server started as ``pid`` (SIGKILL to its process group: the JVM and
        its sandbox), if it is still this server's; the next :meth:`endpoint` starts a new
        one. For a server that stopped answering: a stopped JVM takes no SIGTERM."""
        proc = self._proc
        if proc is not None and proc.pid == pid and proc.poll() is None:
            logger.warning(
                "killing the Spark Connect server (pid %s): it stopped answering; log: %s",
                pid,
                self.log_path,
            )
            # Killed, it is done for, though its JVM's threads and the sandbox may take a
            # moment to exit and its port to close: the next job must not connect to it.
            self._killed = pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def running(self) -> bool:
        """Whether the server process is alive (and not killed) and its port takes
        connections."""
        proc = self._proc
        if proc is None or proc.poll() is not None or self.port is None:
            return False
        if proc.pid == self._killed:
            return False
        return listening(BIND_ADDRESS, self.port)

    def endpoint(self) -> str:
        """The server's URL, starting it first when it is not running (or died).

        Raises:
            ExecutionError: Java is missing, the metastore is busy, or the server did not
                answer a ``SELECT 1`` within ``start_timeout`` (its log is named).
        """
        with self._guard:
            if self.running():
                return self.url
            if self._proc is not None:
                logger.warning(
                    "the Spark Connect server (pid %s) is gone; starting it again; log: %s",
                    self._proc.pid,
                    self.log_path,
                )
                self._end()
            self._start()
            return self.url

    def connection(self) -> tuple[str, str]:
        """The server's URL and token, of the same start (starting it as :meth:`endpoint`)."""
        with self._guard:
            return self.endpoint(), self.token

    def healthy(self) -> bool:
        """A client's ``SELECT 1`` on the server answered."""
        if not self.running():
            return False
        return health_check(self.url, token=self._token) is None

    def command(
        self, port: int, env: dict[str, str] | None = None, archive: jvm.ArchiveUse | None = None
    ) -> list[str]:
        """The ``spark-submit`` command line of the server (``archive``: the class archive
        its sandbox shows, :meth:`_archive`; else ``env``: the one it starts with, whose
        Java maps the drivers' class archive if there is one)."""
        conf = spark_conf(self.settings, self.paths)
        if archive is not None:
            jvm.add_options(conf, " ".join(archive.flags))
        elif env is not None:
            jvm.map_existing(conf, env, self.paths.class_archives)
        conf["spark.connect.grpc.binding.address"] = BIND_ADDRESS
        conf["spark.connect.grpc.binding.port"] = str(port)
        # A job whose client died leaves its operations detached: stop them soon.
        conf.setdefault("spark.connect.execute.manager.detachedTimeout", "60s")
        if self.settings.master.startswith("local"):
            # The JVM's other ports (its RPC and block transfers, on 127.0.0.1) take only
            # peers that know the secret Spark makes for a local master at start.
            conf.setdefault("spark.authenticate", "true")
        # Its log lives as long as the service: start-up at INFO, then warnings only.
        conf.setdefault("spark.log.level", "WARN")
        cmd = [str(spark_submit_path()), "--master", self.settings.master]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["--name", "sluice-connect-server", "--class", SERVER_CLASS, "spark-internal"]
        return cmd

    def _start(self) -> None:
        # The server's log, homes and (sluice spark start's) record are its user's only,
        # in a real folder: never through a link, wherever that would lead.
        if self.folder.is_symlink():
            raise ExecutionError(
                f"{self.folder} is a link, not the Spark Connect server's folder",
                hint="remove the link (Sluice makes the folder itself); no sandboxed process "
                "can write there, so find out who made it",
            )
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.chmod(0o700)
        home = self.folder / "home"
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = child_environment(home)
        env["SPARK_LOCAL_IP"] = BIND_ADDRESS
        self._token = env[TOKEN_ENV] = secrets.token_urlsafe(32)
        problem = java_problem(env)
        if problem is not None:
            raise problem
        if uses_embedded_metastore(self.settings):
            self._lock = acquire_metastore_lock(
                self.paths, "spark-connect-server", timeout=self.lock_timeout, owner="server"
            )
        self.paths.warehouse.mkdir(parents=True, exist_ok=True)
        try:
            self.port = free_port()
            with self._archive(env) as archive:
                launch = sandbox.wrap(
                    self.command(self.port, env, archive), self.profile(home, archive)
                )
                sandbox.keep_from_children()
                began = self.log_path.stat().st_size if self.log_path.exists() else 0
                self._proc = self._spawn(launch.argv, env, launch.fds)
                self.starts += 1
                logger.info(
                    "started a Spark Connect server on %s (pid %s); log: %s",
                    self.url,
                    self._proc.pid,
                    self.log_path,
                )
                # Held until it answers: an archive no longer the file checked is told
                # apart from other failures while its descriptor is still open.
                self._await_ready(archive, began)
        except BaseException:
            self._end()
            raise

    @contextlib.contextmanager
    def _archive(self, env: dict[str, str]) -> Iterator[jvm.ArchiveUse]:
        """The class archive the server maps, held open while it starts (none when the
        cache is off or Java is missing; a cluster's JVMs are not ours either way)."""
        archive = jvm.ClassArchive.for_spark(jvm.spark_home(), env, self.paths.class_archives)
        if archive is None:
            yield jvm.ArchiveUse([])
            return
        with archive.held(spark_conf(self.settings, self.paths)) as use:
            yield use

    def profile(self, home: Path, archive: jvm.ArchiveUse | None = None) -> sandbox.Profile:
        """The server's sandbox: Java, Spark and Python read-only, and the class archive
        it maps (``archive``: the file checked and held open, bound by its descriptor,
        never its path: a prod driver writes that folder, and a link renamed there after
        the check would be bound); its home, the warehouse and the metastore writable;
        the host's network, where it listens on loopback and asks every client for its
        token."""
        conf = spark_conf(self.settings, self.paths)
        files, folders = confine.service_paths(conf)
        return sandbox.Profile(
            "connect-server",
            read=tuple(files),
            write=(home, self.paths.root, *folders),
            network="host",
            java=True,
            light=False,
            cwd=home,
            limits=confine.limits(conf),
            held=archive.binds if archive is not None else (),
        )

    def _spawn(
        self, cmd: list[str], env: dict[str, str], fds: tuple[int, ...] = ()
    ) -> subprocess.Popen[bytes]:
        """Start the server from a thread that lives as long as it does.

        Linux sends the parent-death signal when the *thread* that started a child ends,
        so the server is started, and waited for, by a thread of its own: it dies with
        this process, never with a short-lived worker thread that happened to start it.
        """
        started = threading.Event()
        box: dict[str, Any] = {}
        self.folder.mkdir(parents=True, exist_ok=True)

        def keeper() -> None:
            try:
                with open(self.log_path, "ab") as log:
                    box["proc"] = subprocess.Popen(
                        cmd,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        cwd=env["HOME"],
                        start_new_session=True,
                        pass_fds=fds,  # what its sandbox binds (the class archive)
                        preexec_fn=sandbox.die_with_parent,  # noqa: PLW1509 - prctl only
                    )
            except BaseException as exc:
                box["error"] = exc
                return
            finally:
                started.set()
            box["proc"].wait()

        threading.Thread(target=keeper, name="sluice-connect-server", daemon=True).start()
        started.wait()
        if "error" in box:
            exc = box["error"]
            raise ExecutionError(
                f"cannot start the Spark Connect server ({cmd[0]}): {exc}",
                hint="reinstall pyspark in this environment",
            ) from exc
        proc: subprocess.Popen[bytes] = box["proc"]
        return proc

    def _await_ready(self, archive: jvm.ArchiveUse | None = None, began: int = 0) -> None:
        assert self._proc is not None and self.port is not None
        deadline = time.monotonic() + self.start_timeout
        while not listening(BIND_ADDRESS, self.port):
            if self._proc.poll() is not None:
                self._archive_changed(archive, began)
                raise self._failed(f"it exited with code {self._proc.returncode}")
            if time.monotonic() > deadline:
                raise self._failed(f"it did not listen within {self.start_timeout:.0f} s")
            time.sleep(0.25)
        left = max(10.0, deadline - time.monotonic())
        problem = health_check(self.url, left, token=self._token)
        if problem is not None:
            raise self._failed(f"a SELECT 1 failed: {problem}")

    def _archive_changed(self, archive: jvm.ArchiveUse | None, began: int) -> None:
        """Raise :func:`archive_changed` when the server's sandbox did not start (its log
        since ``began`` holds bubblewrap's line) and the class archive it was to bind,
        still held, is no longer the file at its path."""
        if archive is None or not archive.changed():
            return
        try:
            with open(self.log_path, "rb") as log:
                log.seek(began)
                lines = log.read(64 * 1024).decode("utf-8", "replace").splitlines()
        except OSError:
            return
        refusal = sandbox_refusal(lines)
        if refusal is not None:
            logger.warning("the Spark Connect server's sandbox did not start: %s", refusal)
            raise archive_changed("the Spark Connect server", self.log_path)

    def _failed(self, why: str) -> ExecutionError:
        return ExecutionError(
            f"the Spark Connect server did not start: {why}",
            hint=f"see its log: {self.log_path}",
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL past ``timeout``) and free the metastore."""
        with self._guard:
            self._end(timeout)

    def _end(self, timeout: float = 30.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc is not None:
            # The JVM's children (Python workers) are in its group: none may outlive it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.port = None
        self._token = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


# --- one server per metastore root, for the life of this process ---------------------
#
# A service that keeps repositories apart has one root per repository, so one warm server
# (one JVM, its driver memory) per repository: :func:`configure_pool` bounds how many run
# at once (the least recently used idle one is stopped for a new one; when every one is
# running a job, a job of another root waits for one to finish) and stops those idle for
# a while (:func:`reap`, every few seconds on a thread of its own).

_SERVERS: dict[Path, ConnectServer] = {}
_SERVERS_GUARD = threading.Lock()
_FREED = threading.Condition(_SERVERS_GUARD)  # a job ended, or a server was stopped
_BUSY: dict[Path, int] = {}  # root -> jobs running on its server now
_USED: dict[Path, float] = {}  # root -> when a job last began or ended there (monotonic)
_STOPPING: dict[Path, ConnectServer] = {}  # taken out, being stopped: they still count
# Roots whose server the pool stopped (why, when a job last ran there, monotonic), until
# one of their jobs starts it again: what /healthz and the UI say of them. As many as roots.
_STOPPED: dict[Path, tuple[str, float]] = {}
_POOL = {"most": 0.0, "idle_s": 0.0}  # 0: no bound, never idle

ServerState = Literal["running", "starting", "down", "not started", "stopping", "stopped"]


@dataclass(frozen=True)
class PooledServer:
    """What :func:`pool_status` says of one root's server (read without starting one)."""

    root: Path
    state: ServerState
    """``running`` (its process lives and its port takes a connection), ``starting`` (it
    lives, its port not open yet), ``down`` (it died or was killed: the next job of its root
    starts it again), ``not started`` (no job started it yet, or its start failed),
    ``stopping``, ``stopped`` (by the pool: :attr:`stopped_because`; the next job of its
    root starts it again)."""
    port: int | None
    """Its port on 127.0.0.1 while it runs or starts."""
    jobs: int
    """Jobs running on it now."""
    idle_since: float | None
    """When its last job ended (seconds since the epoch); None while a job runs there."""
    stopped_because: str | None = None
    """``idle`` (no job for SLUICE_SPARK_CONNECT_IDLE_MINUTES) or ``least recently used``
    (another root's job needed its place: SLUICE_SPARK_CONNECT_SERVERS)."""


def _state_of(server: ConnectServer) -> ServerState:
    """``server``'s state, without its lock (held through a start of minutes): a TCP
    connect to loopback at most."""
    pid = server.pid
    if pid is None:
        return "not started"
    if server.gone(pid) is not None:
        return "down"
    if server.running():
        return "running"
    return "down" if pid == server._killed else "starting"  # killed, not yet exited


def pool_status(now: float | None = None, *, root: Path | None = None) -> list[PooledServer]:
    """Every root's server this process's pool holds, is stopping or stopped, by root
    (``root``: that root's alone): what it is doing, its port, its jobs and since when it
    is idle. Cheap: it starts nothing, takes no server's lock, and connects to each live
    server's port once."""
    mono = time.monotonic()
    wall = time.time() if now is None else now

    def since(used: float | None) -> float | None:
        return None if used is None else wall - (mono - used)

    def wanted(r: Path) -> bool:
        return root is None or r == root

    with _SERVERS_GUARD:
        held = [(r, s, _BUSY.get(r, 0), _USED.get(r)) for r, s in _SERVERS.items() if wanted(r)]
        stopping = [r for r in _STOPPING if wanted(r)]
        stopped = {r: why for r, why in _STOPPED.items() if wanted(r)}
    found = []
    for at, server, jobs, used in held:
        state = _state_of(server)
        port = server.port if state in ("running", "starting") else None
        found.append(PooledServer(at, state, port, jobs, None if jobs else since(used)))
    found += [PooledServer(r, "stopping", None, 0, None) for r in stopping if r not in stopped]
    for at, (why, used) in stopped.items():
        found.append(PooledServer(at, "stopped", None, 0, since(used), why))
    return sorted(found, key=lambda s: str(s.root))


def configure_pool(most: int | None, idle_minutes: float) -> None:
    """Bound this process's servers: at most ``most`` running at once (None: no bound),
    each stopped once no job ran on it for ``idle_minutes`` (0: never)."""
    with _SERVERS_GUARD:
        _POOL["most"] = float(most or 0)
        _POOL["idle_s"] = max(0.0, idle_minutes) * 60.0
    if idle_minutes > 0:
        _start_reaper()


def pool_bound() -> int:
    """How many servers may run at once (SLUICE_SPARK_CONNECT_SERVERS; 0: no bound)."""
    return int(_POOL["most"])


def shared_server(settings: SparkSettings, paths: SparkPaths) -> ConnectServer:
    """This process's server for ``paths.root`` (made on first use, stopped at exit)."""
    root = paths.root.resolve()
    with _SERVERS_GUARD:
        server = _SERVERS.get(root)
        if server is None:
            server = _SERVERS[root] = ConnectServer(settings, paths)
            _USED[root] = time.monotonic()
            _STOPPED.pop(root, None)
        return server


@contextlib.contextmanager
def leased(
    settings: SparkSettings,
    paths: SparkPaths,
    *,
    timeout: float = 600.0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[ConnectServer]:
    """This process's server for ``paths.root``, held for one job: it is neither stopped
    for another root nor for idleness while held. Past the pool's bound, the least recently
    used server no job holds is stopped first; when every one is held, this waits (saying
    so once through ``on_wait``) for one to be let go.

    Raises:
        ExecutionError: no server was let go within ``timeout`` seconds.
    """
    root = paths.root.resolve()
    deadline = time.monotonic() + timeout
    told = False
    with _FREED:
        while True:
            server = _SERVERS.get(root)
            most = int(_POOL["most"])
            if server is None and (not most or len(_SERVERS) + len(_STOPPING) < most):
                server = _SERVERS[root] = ConnectServer(settings, paths)
                _STOPPED.pop(root, None)
            if server is not None:
                _BUSY[root] = _BUSY.get(root, 0) + 1
                _USED[root] = time.monotonic()
                break
            idle = [r for r in _SERVERS if not _BUSY.get(r)]
            if idle:
                oldest = min(idle, key=lambda r: _USED.get(r, 0.0))
                logger.info(
                    "stopping the Spark Connect server of %s, the least recently used: at "
                    "most %s run at once (SLUICE_SPARK_CONNECT_SERVERS)",
                    oldest,
                    most,
                )
                _stop_outside(oldest, "least recently used")
                continue
            if not told and on_wait is not None:
                on_wait(
                    f"waiting for a Spark Connect server: all {most} running ones "
                    "(SLUICE_SPARK_CONNECT_SERVERS) are running jobs"
                )
                told = True
            left = deadline - time.monotonic()
            if left <= 0:
                raise ExecutionError(
                    f"no Spark Connect server came free within {timeout:.0f} s: all {most} "
                    "that may run at once were running jobs of other roots",
                    hint="raise SLUICE_SPARK_CONNECT_SERVERS (each server holds its "
                    "driver's memory), or lower SLUICE_QUEUE_MAX_RUNNING",
                )
            _FREED.wait(min(left, 5.0))
    try:
        yield server
    finally:
        with _FREED:
            if _BUSY.get(root):
                _BUSY[root] -= 1
            _USED[root] = time.monotonic()
            _FREED.notify_all()


def _stop_outside(root: Path, why: str) -> None:
    """Stop ``root``'s server (``why``: :attr:`PooledServer.stopped_because`), with
    :data:`_FREED` held on entry and on return (released while the server stops, which may
    take seconds); it counts until it stopped."""
    server = _STOPPING[root] = _SERVERS.pop(root)
    _STOPPED[root] = (why, _USED.pop(root, time.monotonic()))
    _BUSY.pop(root, None)
    _FREED.release()
    try:
        server.stop()
    finally:
        _FREED.acquire()
        _STOPPING.pop(root, None)
        _FREED.notify_all()


def reap(now: float | None = None) -> list[Path]:
    """Stop the servers no job held for the pool's idle time (none when it has none);
    their roots. A later job of such a root starts its server again."""
    now = time.monotonic() if now is None else now
    stopped = []
    with _FREED:
        idle_s = _POOL["idle_s"]
        if not idle_s:
            return []
        for root in list(_SERVERS):
            # (Still there: another thread may have stopped it while this one waited.)
            if root in _SERVERS and not _BUSY.get(root) and now - _USED.get(root, now) >= idle_s:
                logger.info(
                    "stopping the Spark Connect server of %s: no job for %.0f minutes",
                    root,
                    idle_s / 60,
                )
                _stop_outside(root, "idle")
                stopped.append(root)
    return stopped


_REAPER: list[threading.Thread] = []


def _start_reaper() -> None:
    with _SERVERS_GUARD:
        if _REAPER and _REAPER[0].is_alive():
            return

        def loop() -> None:
            while True:
                time.sleep(max(1.0, min(60.0, _POOL["idle_s"] / 4 or 60.0)))
                try:
                    reap()
                except Exception:  # the next round tries again
                    logger.exception("stopping idle Spark Connect servers failed")

        thread = threading.Thread(target=loop, name="sluice-connect-reaper", daemon=True)
        _REAPER[:] = [thread]
        thread.start()


@atexit.register
def stop_all() -> None:
    """Stop every server :func:`shared_server` made."""
    with _SERVERS_GUARD:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
        _BUSY.clear()
        _USED.clear()
        _STOPPED.clear()
    for server in servers:
        server.stop()


# --- watching a job's server ------------------------------------------------------------


class ServerWatch:
    """Whether the server a job runs on is still the one it started on, and answers.

    A Connect client whose server died does not fail: it retries for about ten minutes
    (PySpark's default retry policy), and a stopped server keeps it waiting for good. So
    the runner asks this, every :data:`WATCH_EVERY_S`, while the job's child runs:
    :meth:`check` returns why the job must stop, or None. Our own server (``server`` and
    the ``pid`` the job started on): gone when its process exited or was replaced. Any
    server: gone when its port refuses connections twice running (a developer's server
    restarted by its keeper listens on another port); stopped answering when :func:`probe`
    got no answer for ``bound`` seconds, and then, when it is ours, it is killed so that
    the next job starts a new one.
    """

    def __init__(
        self,
        url: str,
        *,
        server: ConnectServer | None = None,
        pid: int | None = None,
        bound: float = UNRESPONSIVE_S,
        probe_every: float = _PROBE_EVERY_S,
        probe_timeout: float = _PROBE_TIMEOUT_S,
    ) -> None:
        parts = urlsplit(url)
        self.host = BIND_ADDRESS if parts.hostname in (None, CLIENT_HOST) else parts.hostname
        self.port = parts.port or 15002  # Spark Connect's default port
        self.tls = "use_ssl=true" in parts.path.lower()
        self.server = server
        self.pid = pid
        self.bound = bound
        self.probe_every = probe_every
        self.probe_timeout = min(probe_timeout, bound)
        self._next_probe = time.monotonic() + probe_every
        self._silent_since: float | None = None
        self._refused = 0

    @property
    def ours(self) -> bool:
        return self.server is not None and self.pid is not None

    def check(self) -> str | None:
        """Why the job cannot go on ("died (...)", "stopped answering (...)"), or None."""
        if self.server is not None and self.pid is not None:
            gone = self.server.gone(self.pid)
            if gone is not None:
                return gone
        now = time.monotonic()
        if now < self._next_probe:
            return None
        self._next_probe = now + self.probe_every
        answer = probe(self.host, self.port, self.probe_timeout, tls=self.tls)
        if answer == "answers":
            self._silent_since, self._refused = None, 0
            return None
        if answer == "refused":
            self._refused += 1
            if self._refused >= 2:
                return f"died ({self.host}:{self.port} takes no connections)"
            self._next_probe = time.monotonic() + WATCH_EVERY_S  # look again soon
            return None
        self._refused = 0
        if self._silent_since is None:
            self._silent_since = now
        silent = time.monotonic() - self._silent_since
        if silent < self.bound:
            return None
        if self.server is not None and self.pid is not None:
            self.server.kill(self.pid)
        return f"stopped answering (no answer for {silent:.0f} s, its limit {self.bound:g} s)"

    def silent_now(self) -> bool:
        """Whether the server takes connections and answers none, asked once, now (a
        stopped or hung JVM)."""
        return probe(self.host, self.port, self.probe_timeout, tls=self.tls) == "silent"

    def gone_now(self) -> str | None:
        """For a job that failed on its own: whether its server had died under it (its
        process exited, or its port refuses), asked once, now."""
        if self.server is not None and self.pid is not None:
            gone = self.server.gone(self.pid)
            if gone is not None:
                return gone
        if probe(self.host, self.port, self.probe_timeout, tls=self.tls) == "refused":
            return f"died ({self.host}:{self.port} takes no connections)"
        return None


class _Watched(threading.Timer):
    """The job's time limit and its server's watch, on one thread: ``expire`` (which kills
    the job's child) when the limit passes or ``watch`` finds the server lost (``lost``
    then says why). Started and cancelled where the runner starts and cancels its timer."""

    def __init__(self, limit: float | None, expire: Callable[[], None], watch: ServerWatch) -> None:
        super().__init__(limit or 0.0, expire)
        self.daemon = True
        self.limit = limit
        self.watch = watch
        self.lost: str | None = None

    def run(self) -> None:
        began = time.monotonic()
        while not self.finished.wait(WATCH_EVERY_S):
            if self.limit is not None and time.monotonic() - began >= self.limit:
                break
            try:
                lost = self.watch.check()
            except Exception:  # a bug here must not stop the job's time limit
                logger.exception("watching the Spark Connect server failed")
                continue
            if lost is not None and not self.finished.is_set():
                self.lost = lost
                logger.warning("the Spark Connect server %s: stopping its job", lost)
                break
        if not self.finished.is_set():
            self.function()


# --- the runner --------------------------------------------------------------------------


class ConnectRunner(SubmitRunner):
    """Runs each job as a Python child that is a Spark Connect client of a warm server.

    Same contract as :class:`~sluice.core.spark.submit.SubmitRunner` (``run(spec)``, the
    same events, writes checked the same way, the time limit, ``DriverLost`` for a child
    killed by a signal). The endpoint is ``settings.remote`` when set (with ``token``, if
    given, sent as its token: a developer's server), else ``server``'s with its token (by
    default this process's :func:`shared_server` for ``paths``). The child gets the token in
    its environment only.
    """

    def __init__(
        self,
        settings: SparkSettings,
        paths: SparkPaths,
        *,
        server: ConnectServer | None = None,
        token: str | None = None,
        unresponsive_after: float = UNRESPONSIVE_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(settings, paths, **kwargs)
        if not unresponsive_after > 0:
            raise ValueError(
                f"unresponsive_after must be positive seconds, not {unresponsive_after}"
            )
        self.server = server
        self._given = server is not None  # else this process's pooled server of the root
        self.unresponsive_after = unresponsive_after
        self._remote_token = token
        self._relays: dict[str, tuple[Path, relay.Relay]] = {}
        self._relays_lock = threading.Lock()
        # The logs folder is every repository's runners': their jobs' ids may be the same.
        self._unique = secrets.token_hex(6)
        # The job this thread runs: its server's watch, and what it was stopped for (a
        # runner may run jobs on several threads at once).
        self._job = threading.local()

    def run(self, spec: JobSpec) -> JobResult:
        """As :meth:`SubmitRunner.run`, and ``DriverLost`` within seconds when the server
        dies under the job (within :attr:`unresponsive_after` seconds when it stops
        answering), saying so, never a wait for the time limit."""
        self._job.watch = self._job.timer = self._job.seen = self._job.silent = None
        spec = {**spec, "job_id": _job_id(spec)}
        if self.settings.remote or self._given:
            return self._run(spec)

        # The root's server, held while the job runs (never stopped under it for another).
        def waiting(message: str) -> None:
            self._emit({"event": "log", "message": message})

        with leased(self.settings, self.paths, timeout=self.lock_timeout, on_wait=waiting) as held:
            self.server = held
            return self._run(spec)

    def _run(self, spec: JobSpec) -> JobResult:
        try:
            return super().run(spec)
        except DriverLost:
            raise
        except ExecutionError as exc:
            # A child that failed on its own because its server died (a call the client
            # does not retry): the job is as lost as if the watch had stopped it.
            # (Not one that ran out of time on a silent server, which _after then killed.)
            watch: ServerWatch | None = self._job.watch
            mine = self._job.silent is not None
            gone = watch.gone_now() if watch is not None and not mine else None
            if gone is None:
                raise
            raise self._lost(gone, self.paths.logs / f"{_safe(spec['job_id'])}.log") from exc
        finally:
            self._job.watch = self._job.timer = self._job.seen = self._job.silent = None

    def _lost(self, why: str, log_path: Path | None) -> DriverLost:
        watch: ServerWatch | None = self._job.watch
        ours = watch is not None and watch.ours
        return server_lost(
            why,
            list(self._job.seen or []),
            restarted=ours,
            server_log=self.server.log_path if ours and self.server is not None else None,
            log_path=log_path,
        )

    def _timer(self, expire: Callable[[], None]) -> threading.Timer | None:
        # The time limit's timer is the one place the runner hands out the callback that
        # kills the job's child: the server's watch rides on it.
        watch: ServerWatch | None = self._job.watch
        if watch is None:
            return super()._timer(expire)
        timer = _Watched(self.timeout, expire, watch)
        self._job.timer = timer
        timer.start()
        return timer

    def _timed_out(self, log_path: Path | None) -> ExecutionError:
        timer: _Watched | None = self._job.timer
        if timer is not None and timer.lost is not None:
            return self._lost(timer.lost, log_path)
        silent: str | None = self._job.silent
        if silent is None or cancel.reason() is not None:
            return super()._timed_out(log_path)
        # Lost to its server, as the watch would have said a little later: run again (a
        # promotion whose views were swapped before the stop then finishes its record).
        return self._lost(silent, log_path)

    def endpoint(self) -> str:
        """The ``sc://`` URL jobs connect to (starting the local server if need be)."""
        if self.settings.remote:
            return self.settings.remote
        if self.server is None:
            self.server = shared_server(self.settings, self.paths)
        return self.server.endpoint()

    def connection(self) -> tuple[str, str | None]:
        """The endpoint and the token its clients send (None: the URL's own, if any)."""
        if self.settings.remote:
            return self.settings.remote, self._remote_token
        if self.server is None:
            self.server = shared_server(self.settings, self.paths)
        return self.server.connection()

    def command(
        self, spec_path: Path, job_id: str, kind: str, java_flags: list[str] | None = None
    ) -> list[str]:
        """The child's command line: this Python running the driver in Connect mode (no
        JVM: ``java_flags`` are the server's business)."""
        conf = self._conf_path(job_id)
        return [sys.executable, str(DRIVER), "--connect", str(spec_path), str(conf)]

    @contextlib.contextmanager
    def _class_archive(
        self, env: dict[str, str], spec: JobSpec | None = None
    ) -> Iterator[jvm.ArchiveUse]:
        yield jvm.ArchiveUse([])  # the job's child starts no JVM

    def _conf_path(self, job_id: str) -> Path:
        return self.paths.logs / f"{_safe(job_id)}.{self._unique}.session.json"

    def profile(
        self, spec: JobSpec, spec_path: Path, home: Path, archive: jvm.ArchiveUse
    ) -> sandbox.Profile:
        """The job child's sandbox: its spec, session settings and the files the spec
        names read-only, its home writable; no warehouse, no metastore. No network when
        the server is ours: only the socket :mod:`.relay` forwards to the server's port
        (which asks the token only the child's environment holds); the host's network
        for a server of the user's (``spark.remote``)."""
        read = [spec_path, self._conf_path(spec["job_id"]), *confine.spec_files(spec)]
        with self._relays_lock:
            relayed = self._relays.get(spec["job_id"])
        if relayed is not None:
            read.append(relayed[0])
        return sandbox.Profile(
            "connect-job",
            read=tuple(dict.fromkeys(read)),
            write=(home,),
            network="none" if relayed is not None else "host",
            light=False,
            cwd=home,
            limits=confine.limits(spark_conf(self.settings, self.paths)),
        )

    def environment(self, home: Path | None = None) -> dict[str, str]:
        """:func:`~sluice.core.spark.submit.child_environment` (no JVM in this child)."""
        env = super().environment(home)
        env.pop("SPARK_SUBMIT_OPTS", None)
        return env

    def _preflight(self, spec: JobSpec, env: dict[str, str]) -> None:
        env[REMOTE_ENV], token = self.connection()
        if token is not None:
            env[TOKEN_ENV] = token
        ours = self.server if not self.settings.remote else None
        self._job.watch = ServerWatch(
            env[REMOTE_ENV],
            server=ours,
            pid=ours.pid if ours is not None else None,
            bound=self.unresponsive_after,
        )
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        # The session's SQL settings: the server was started with the service's, and a
        # job sets its project's (tuning included) on its own session.
        conf = {
            key: value
            for key, value in spark_conf(self.settings, self.paths).items()
            if key.startswith("spark.sql.")
        }
        conf_path = self._conf_path(spec["job_id"])
        with contextlib.suppress(FileNotFoundError):
            conf_path.unlink()  # a run of the same id before, stopped before its end
        confine.write_new(conf_path, json.dumps(conf).encode("utf-8"))
        port = urlsplit(env[REMOTE_ENV]).port
        if not self.settings.remote and port is not None and sandbox.isolation() == "bwrap":
            # Our own server: the child gets no network, only a socket relayed to its port.
            folder = Path(tempfile.mkdtemp(prefix="sluice-relay-"))
            path = folder / "spark.sock"
            with self._relays_lock:
                self._relays[spec["job_id"]] = (
                    folder,
                    relay.unix_to_tcp(str(path), (BIND_ADDRESS, port)),
                )
            env[RELAY_ENV] = str(path)

    @contextlib.contextmanager
    def _hold(self, job_id: str) -> Iterator[None]:
        yield  # the server holds the metastore, not the job

    def _after(
        self,
        job_id: str,
        env: dict[str, str],
        seen: list[Event],
        code: int | None,
        timed_out: bool,
    ) -> None:
        with contextlib.suppress(OSError):
            self._conf_path(job_id).unlink()
        with self._relays_lock:
            relayed = self._relays.pop(job_id, None)
        if relayed is not None:
            relayed[1].close()
            shutil.rmtree(relayed[0], ignore_errors=True)
        self._job.seen = seen
        if code is not None and code >= 0 and not timed_out:
            return
        timer: _Watched | None = self._job.timer
        if timer is not None and timer.lost is not None:
            return  # the server is gone (or killed): nothing of the job's runs there
        watch: ServerWatch | None = self._job.watch
        if watch is not None and watch.silent_now():
            # Out of time (or stopped) on a server that answers nothing, stopped or hung:
            # an interrupt would wait on it in vain. Ours is killed, so that the next job
            # starts a new one at once (not after its own watch's bound, and retried).
            if watch.ours and watch.server is not None and watch.pid is not None:
                watch.server.kill(watch.pid)
            limit = f"{self.timeout:g} s" if self.timeout is not None else "its end"
            self._job.silent = f"stopped answering (no answer at the job's time limit of {limit})"
            logger.warning("job %s ended on a server that answers nothing: %s", job_id,
                           self._job.silent)  # fmt: skip
            return
        # Killed, out of time or stopped by us: the server still runs what the child asked.
        # The job's session, and those its concurrent builds opened.
        sessions = [
            e.get("session_id")
            for e in seen
            if e["event"] == "session_ready" or e["event"] == "session_opened"
        ]
        for session in sessions:
            if session:
                interrupt_session(env[REMOTE_ENV], session, token=env.get(TOKEN_ENV))


def make_runner(settings: SparkSettings, paths: SparkPaths, **kwargs: Any) -> SubmitRunner:
    """The runner ``settings.mode`` names: ``submit`` (one ``spark-submit`` per job) or
    ``connect`` (a child per job on a warm Spark Connect server)."""
    if settings.mode == "connect":
        return ConnectRunner(settings, paths, **kwargs)
    return SubmitRunner(settings, paths, **kwargs)
