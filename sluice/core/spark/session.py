"""The Spark configuration of every Sluice job, in one place, and the metastore lock.

Both ways of running a job use what is built here: ``spark-submit`` passes
:func:`spark_conf` as ``--conf`` flags, and ``--in-process`` runs build a
:func:`local_session` from the same dictionary, so a job sees the same catalog, warehouse
and settings either way.

The embedded metastore is a Derby database, which admits one process at a time (a second
one fails after about 20 s with "Another instance of Derby may have already booted the
database"). :func:`metastore_lock` serializes the processes that use it with an ``flock``
on a file next to it; the kernel releases the lock when its holder dies, so a killed job
never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.spark import jvm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

SPARK_DIR_ENV = "SLUICE_SPARK_DIR"
LOCK_FILE = "sluice-spark.lock"
CLUSTER_DOCS = "the README's section on Spark clusters and a shared metastore"

# Settings that mean the user runs their own metastore (Hive service or a database):
# Sluice then neither configures Derby nor serializes jobs.
_METASTORE_KEYS = (
    "spark.hadoop.javax.jdo.option.ConnectionURL",
    "spark.hadoop.hive.metastore.uris",
    "spark.hive.metastore.uris",
)
_METASTORE_PREFIX = "spark.sql.hive.metastore."


@dataclass(frozen=True)
class SparkPaths:
    """Where the embedded metastore, the warehouse and the job logs live.

    Attributes:
        root: Holds the warehouse, the Derby metastore and the lock file.
        logs: One ``<job_id>.json`` (spec) and ``<job_id>.log`` (output) per job.
    """

    root: Path
    logs: Path
    class_archives: Path | None = None
    """Where this root's drivers keep their JVM class archive (:mod:`.jvm`); None: the
    machine's cache. A service keeping repositories apart gives each repository's root
    its own, so no repository's prod job writes an archive another's JVMs map."""

    @classmethod
    def for_project(cls, project_dir: Path) -> SparkPaths:
        """The defaults under ``<project>/.sluice``; ``$SLUICE_SPARK_DIR`` moves the root
        (tests and CI point many projects at one metastore that way)."""
        project = project_dir.resolve()
        override = os.environ.get(SPARK_DIR_ENV)
        root = Path(override).resolve() if override else project / ".sluice" / "spark"
        return cls(root=root, logs=project / ".sluice" / "logs")

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def metastore(self) -> Path:
        return self.root / "metastore_db"

    @property
    def service(self) -> Path:
        """The service's own files for this root, beside it, never inside it: a sandboxed
        Spark process writes the root (and could leave a link where the service would
        follow it): the metastore lock, the Connect server's folder."""
        return self.root.with_name(f"{self.root.name}.sluice")

    @property
    def lock_file(self) -> Path:
        return self.service / LOCK_FILE

    @property
    def connect(self) -> Path:
        """The Connect server's folder: its log, homes, ``sluice spark start``'s record."""
        return self.service / "connect"


def uses_embedded_metastore(settings: SparkSettings) -> bool:
    """True unless the user configured a metastore of their own (or no Hive catalog)."""
    conf = settings.conf
    if conf.get("spark.sql.catalogImplementation", "hive") != "hive":
        return False
    return not any(key in _METASTORE_KEYS or key.startswith(_METASTORE_PREFIX) for key in conf)


def spark_conf(settings: SparkSettings, paths: SparkPaths) -> dict[str, str]:
    """The Spark settings of every Sluice job; the user's ``spark.conf`` wins over ours."""
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(paths.warehouse.resolve()),
    }
    if uses_embedded_metastore(settings):
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={paths.metastore.resolve()};create=true"
        )
        # Without a system home Derby writes derby.log into whatever the cwd is.
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={paths.root.resolve()}"
    conf.update(
        {
            "spark.sql.sources.partitionOverwriteMode": "dynamic",
            # The default 200 partitions cost seconds per shuffle on a 2-core machine.
            "spark.sql.shuffle.partitions": "4",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            # Models of one job build at once (sluice.core.spark.schedule), each thread's
            # Spark jobs in a pool of its own: a long build does not starve the others.
            "spark.scheduler.mode": "FAIR",
            # The driver imports sluice, so Python must be this interpreter (and its venv).
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
        }
    )
    user = dict(settings.conf)
    java_opts = user.get("spark.driver.extraJavaOptions")
    derby_opts = conf.get("spark.driver.extraJavaOptions")
    if java_opts is not None and derby_opts and "-Dderby.system.home" not in java_opts:
        # The user's JVM flags (GC, memory) do not mean they want derby.log in the cwd.
        user["spark.driver.extraJavaOptions"] = f"{derby_opts} {java_opts}"
    conf.update(user)
    jvm.add_options(conf, jvm.operator_options())
    # Spark pastes ${env:X}, ${system:x} and ${spark.*} into SQL text before parsing it
    # (string literals too): a query, a --where or a model would read the driver's
    # environment and settings. Sluice's SQL never uses substitution, so none is allowed.
    conf["spark.sql.variable.substitute"] = "false"
    return conf


def _start_jvm(conf: dict[str, str], master: str, name: str) -> None:
    """Start this process's Spark JVM in a session of its own, as every ``spark-submit``
    child is (``start_new_session``).

    On Linux with autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) the
    CPU is shared fairly between sessions, then between the processes of each: a JVM
    left in the caller's session (PySpark's default) shares that session's share with
    everything else running in it (a test run's workers, a benchmark's load), and under
    load an in-process job took several times as long as the same job through
    spark-submit (issue 21: 3.6x; a fixed piece of work beside three busy loops of its
    session: 4.7x). PySpark still ends the JVM when this process goes (its stdin closes).
    Nothing happens when a JVM is already running (or PySpark runs under spark-submit).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    settings = SparkConf(loadDefaults=False).setMaster(master).setAppName(name)
    for key, value in conf.items():
        settings.set(key, value)
    gateway = launch_gateway(settings, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)


def java_problem(env: dict[str, str] | None = None) -> ExecutionError | None:
    """Why Spark could not start a JVM in ``env`` (default: ours), or None when it can.

    ``spark-class`` runs ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` from
    PATH; a broken JAVA_HOME is reported even when PATH has a java, because spark-class
    would not fall back to it.
    """
    env = dict(os.environ) if env is None else env
    hint = "install a JRE 17 (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return None
        return ExecutionError(
            f"Java not found: Spark needs a Java 17 runtime, and JAVA_HOME={home} has no bin/java",
            hint=f"point JAVA_HOME at a Java 17 installation, or unset it to use java from PATH; {hint}",
        )
    if shutil.which("java", path=env.get("PATH", os.defpath)):
        return None
    return ExecutionError("Java not found: Spark needs a Java 17 runtime", hint=hint)


# --- the metastore lock -------------------------------------------------------------


class MetastoreLock:
    """An exclusive ``flock`` on ``<root>.sluice/sluice-spark.lock``, naming its holder."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle: IO[str] | None = handle

    def release(self) -> None:
        if self._handle is not None:
            # Closing the descriptor drops the flock; the holder text is left for no one.
            self._handle.close()
            self._handle = None


def _holder(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        data = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def acquire_metastore_lock(
    paths: SparkPaths,
    job_id: str,
    *,
    timeout: float,
    owner: str = "job",
    on_wait: Callable[[str], None] | None = None,
) -> MetastoreLock:
    """Take the embedded metastore for this process, waiting up to ``timeout`` seconds.

    Args:
        paths: Whose metastore.
        job_id: Written into the lock file so a waiting job can say whom it waits for.
        timeout: Seconds to wait for another holder.
        owner: ``"job"`` (one spark-submit) or ``"session"`` (an in-process JVM, which
            keeps Derby booted until this process exits).
        on_wait: Called once with a message when the lock is busy.

    Raises:
        ExecutionError: the metastore stayed busy, or this very process's in-process
            session holds it (waiting for ourselves would never end).
    """
    paths.lock_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = paths.lock_file
    # Not "w": truncating before the lock is ours would erase the holder's name. Never
    # through a link (O_NOFOLLOW): the file is the service's, whoever else writes nearby.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    handle = open(fd, "a+", encoding="utf-8")  # noqa: SIM115 - kept open while held
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                handle.close()
                raise
        holder = _holder(handle)
        who = f"job {holder.get('job_id', '?')} (pid {holder.get('pid', '?')})"
        if holder.get("pid") == os.getpid() and holder.get("owner") == "session":
            handle.close()
            raise ExecutionError(
                f"the embedded Spark metastore at {paths.root} is held by this process's "
                f"in-process Spark session ({who}); Derby admits one process at a time",
                hint="run all jobs of this process in-process, or use a separate "
                f"metastore directory (${SPARK_DIR_ENV}) for spark-submit jobs",
            )
        if time.monotonic() >= deadline:
            handle.close()
            raise ExecutionError(
                f"the embedded Spark metastore is busy: {who} is using it",
                hint=f"wait for that job to finish and retry, or configure a shared metastore "
                f"so jobs can run side by side (see {CLUSTER_DOCS}); lock file: {path}",
            )
        if not told:
            told = True
            message = f"waiting for the embedded Spark metastore: {who} is using it"
            logger.info(message)
            if on_wait is not None:
                on_wait(message)
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "job_id": job_id, "owner": owner}))
    handle.flush()
    return MetastoreLock(path, handle)


@contextlib.contextmanager
def metastore_lock(
    settings: SparkSettings,
    paths: SparkPaths,
    job_id: str,
    *,
    timeout: float,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the embedded metastore for one job (nothing to hold with the user's own)."""
    if not uses_embedded_metastore(settings):
        yield
        return
    lock = acquire_metastore_lock(paths, job_id, timeout=timeout, on_wait=on_wait)
    try:
        yield
    finally:
        lock.release()


# --- in-process sessions ------------------------------------------------------------

# Locks held for the life of this process: an in-process JVM keeps Derby booted until the
# process exits (stopping the session does not shut the embedded database down).
_SESSION_LOCKS: dict[Path, MetastoreLock] = {}
_SESSION_GUARD = threading.Lock()


def local_session(
    settings: SparkSettings,
    paths: SparkPaths,
    *,
    lock_timeout: float = 600,
    on_wait: Callable[[str], None] | None = None,
) -> SparkSession:
    """A SparkSession in this process with :func:`spark_conf` and Hive support.

    Reuses the active session when there is one (a test session or a long CLI command
    then starts one JVM, not one per job). With the embedded metastore, takes the metastore
    lock for the rest of this process's life before starting the JVM.

    Raises:
        ExecutionError: Java is missing, or another process holds the embedded metastore.
    """
    from pyspark.sql import SparkSession

    conf = spark_conf(settings, paths)
    with _SESSION_GUARD:
        active = SparkSession.getActiveSession()
        if active is not None:
            used = str(active.conf.get("spark.sql.warehouse.dir", "")).removeprefix("file:")
            if not used or Path(used).resolve() != paths.warehouse.resolve():
                logger.warning(
                    "reusing the active SparkSession, whose warehouse is %s, not %s",
                    used,
                    conf["spark.sql.warehouse.dir"],
                )
            return active
        problem = java_problem()
        if problem is not None:
            raise problem
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        master = settings.master
        if not master.startswith("local"):
            logger.info(
                "running in-process on local[*]: master %s needs spark-submit "
                "(drop --in-process to use it)",
                master,
            )
            master = "local[*]"
        root = paths.root.resolve()
        if uses_embedded_metastore(settings) and root not in _SESSION_LOCKS:
            _SESSION_LOCKS[root] = acquire_metastore_lock(
                paths,
                f"in-process-{os.getpid()}",
                timeout=lock_timeout,
                owner="session",
                on_wait=on_wait,
            )
        paths.warehouse.mkdir(parents=True, exist_ok=True)
        jvm.map_existing(conf, dict(os.environ))
        _start_jvm(conf, master, "sluice-in-process")
        builder = SparkSession.builder.master(master).appName("sluice-in-process")
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.enableHiveSupport().getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        return session
