"""Crash faults: kill -9 the service or the Spark driver in the middle of a job, then count
what recovery lost, did twice or left inconsistent.

Usage: python bench/chaos.py [--trials 20] [--seed 1] [--scenario pr|promote|janitor ...]
                             [--fault service|driver|server|child|stop ...] [--out FILE]
                             [--minutes 0] [--at-step TYPE] [--mode submit|connect]
                             [--state sqlite|postgres] [--job-timeout SECONDS]
                             [--workdir DIR] [--keep] [--summary]

One world per run (in --workdir, a fresh temporary directory by default): the example
project's prod built on Spark, and the real service (``create_app`` on uvicorn, in its own
process: ``tests/helpers/service_child.py``) with a fake GitHub at the wire whose state lives
in a file, so it survives the kills. Spark runs through spark-submit
(``SLUICE_SPARK_MODE=submit``), or with ``--mode connect`` (the service's default) on the
service's warm Spark Connect server, each job a Python child with its own session. The
state is a SQLite file, or (``--state postgres``) a PostgreSQL 15 cluster of the run's own
(``tests/pgcluster.py``'s ``throwaway_postgres``, as the tests start it). Every trial reuses
the world: prod built once, one service and (connect mode) one warm server across trials,
each trial a new PR (or the promotion of one).

Scenarios, each on a pull request of its own whose commit adds a column holding the PR's
number to ``jaffle.customers`` (FULL) and ``jaffle.daily_revenue`` (incremental by time):

- ``pr``: a ``pull_request`` ``opened`` delivery; the fault hits the PR environment build.
- ``promote``: a PR an earlier trial built (else one opened and built first, no fault) is
  merged (``closed`` with ``merged: true``; no gate is configured, so nothing needs
  approving); the fault hits the promotion (prod's backfill of the new incremental
  version, the views swap, the record's commit).
- ``janitor``: a ``JanitorEvent`` is queued (as the worker's schedule does) when there are
  environments to drop: those earlier promotions invalidated, else the open PRs' (closed
  first), else a PR's opened and closed for the purpose; the fault hits the janitor
  dropping them.

Faults, at a moment drawn from the trial's seed:

- ``service``: kill -9 the service process while the job runs (uniformly over the job's
  expected duration), then start it again; the job's lease runs out and it is run again.
  The driver must die with the service (no orphan left writing).
- ``driver``: kill -9 the Spark driver of the job (the JVM spark-submit started, or the
  Python driver the JVM runs), either a random time after it started or a random moment
  after a randomly chosen step started (``--at-step views``: early in the step that swaps
  the views, i.e. inside the swap window); the worker must run the job again.
- ``server`` (``--mode connect``): kill -9 the service's Spark Connect server (its JVM)
  while the job runs, at a random moment or early in a random step (``--at-step build``:
  mid-build, ``--at-step views``: inside the views swap); the job must fail within
  seconds as lost (``detect_s``: the kill to its child's end) and the worker run it again
  on a server started anew.
- ``child`` (``--mode connect``): kill -9 the job's Python child (the Connect client);
  the server stays, and the worker runs the job again.
- ``stop`` (``--mode connect``): SIGSTOP the server's JVM and leave it stopped. With
  ``--job-timeout`` (the service's job time limit, short for the trial) the stop lands in
  the limit's last 28 s (if the child is expected to live that long), inside the watch's
  bound (30 s): the job must end within 10 s of its time limit (``late`` otherwise), as
  lost to its server (run again on a new one) or, out of time on its own, with its check
  saying so (``timed_out``), and then the next job (a new PR) must build. Without it, the
  stop lands at a random moment and the watch ends the job (``DriverLost``, run again).
- ``service`` works in both modes (in connect mode its server must die with it).

Then the queue is waited on until idle, and checked:

- lost deliveries: a delivery of the trial whose job is not ``done`` (or any job that
  ``failed``), or whose outcome on the forge is not a success;
- double-processed: a job that ran more often than its faults explain, or a second sticky
  comment, check run (per commit and name) or deployment record (per commit) on the forge;
- store/catalog mismatches: a physical table the state references (a live environment's, or
  one with recorded intervals) missing from the Spark catalog, a table in the catalog the
  state does not know, files in the warehouse that belong to no table of the catalog (what
  a killed create or drop leaves), an environment view missing, reading another table than the state
  says, or left over from an environment the state no longer has; after a promotion, prod
  must read the promoted PR's versions (its record and the marker columns of both models);
- duplicate rows: for every physical table of an incremental model, rows minus distinct
  grain values;
- half-promoted: after a promotion, a prod view reading another version than prod's
  record, or prod's two changed models at different PRs' versions.

With ``--mode connect`` the service's server holds the embedded metastore, so the checks
read the catalog through that server while it runs (``POST /_chaos/inspect`` of
``tests/helpers/service_child.py``: a Connect client child of the service's, with its
token), the queue idle; only when no server runs do they stop the service and read it
with spark-submit (each record's ``inspected`` says which). A trial used to stop and start
the service, its server and a spark-submit JVM for its checks (56-203 s a trial).

The promotion swap window is the duration of the promotion job's ``views`` step, which
re-points prod's views (``run_views`` in sluice/core/spark/steps/environment.py): readers
may see a mix of versions for at most that long. It is an upper bound (the step also checks
the plan is not stale and creates schemas), read from the ``step_done`` event in the job's
log.

Every trial appends one JSON line to --out (default /tmp/sluice-chaos/results.jsonl); a run
skips the trials already there (same seed, scenario, fault and index), so an interrupted
run resumes where it stopped, and --minutes stops starting trials after that much wall time.
The summary covers every trial in the file for the selected scenarios and faults; the exit
status is 1 when any of the counts that must be 0 is not.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import hmac
import io
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SCENARIOS = ("pr", "promote", "janitor")
FAULTS = ("service", "driver", "server", "child", "stop")
MODE_FAULTS = {"submit": ("service", "driver"), "connect": ("server", "child")}  # the defaults
ALLOWED = {"submit": ("service", "driver"), "connect": ("service", "server", "child", "stop")}
STATES = ("sqlite", "postgres")
OWNER = "octo/warehouse"
REALCASES = REPO / "tests" / "fixtures" / "webhooks"  # real webhook bodies (their README)
SECRET = "restart-test-secret"  # tests/helpers/service_child.py's
END = "2018-04-30"
DEFAULT_OUT = Path(tempfile.gettempdir()) / "sluice-chaos" / "results.jsonl"
JOB_TIMEOUT = 1200.0
# First guesses of how long a job runs (seconds), refined by what the trials measure.
GUESS = {"pr": 60.0, "promote": 45.0, "janitor": 25.0}
INCREMENTAL = ("INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY")
SPARK_SETTINGS = """project: jaffle
spark:
  conf:
    spark.sql.shuffle.partitions: '1'
"""
SERVICE_SPARK_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def _sha(prefix: str, number: int) -> str:
    return f"{prefix}{number:039x}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise AssertionError(f"{old!r} not in {path}")
    path.write_text(text.replace(old, new))


# --- processes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Driver:
    """A running Spark driver process of a world's job: the JVM or its Python driver."""

    pid: int
    kind: str  # "jvm" | "python"
    spec: Path  # the job spec, next to the job's log


def drivers(logs: Path, *, every: bool = False) -> list[Driver]:
    """The driver processes running jobs whose specs are under ``logs``: the JVM
    spark-submit became, and the Python driver it runs (``every``: also the wrapper
    scripts and the launcher that start the JVM, of kind "starter")."""
    found = []
    prefix = str(logs.resolve())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(entry.path, "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        spec = next((a for a in args if a.startswith(prefix) and a.endswith(".json")), None)
        if spec is None:
            continue
        program = Path(args[0]).name
        if (
            program == "java"
            and "org.apache.spark.deploy.SparkSubmit" in args[:-1]
            and ("org.apache.spark.launcher.Main" not in args)
        ):
            kind = "jvm"
        elif program.startswith("python") and any(a.endswith("driver.py") for a in args):
            kind = "python"
        elif every:
            kind = "starter"
        else:
            continue
        found.append(Driver(int(entry.name), kind, Path(spec)))
    return found


def server_jvms(root: Path) -> list[int]:
    """The JVMs of Spark Connect servers whose metastore is under ``root`` (a world's)."""
    from sluice.core.spark.connect import SERVER_CLASS

    found = []
    mark = str(root.resolve())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(entry.path, "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if (
            Path(args[0]).name == "java"
            and SERVER_CLASS in args
            and any(mark in a for a in args)
            and "org.apache.spark.launcher.Main" not in args
        ):
            found.append(int(entry.name))
    return found


def _alive(logs: Path, spec: Path) -> bool:
    """Whether any process still runs the job of ``spec`` (three looks: /proc reads fail
    for a moment while a process execs)."""
    for _ in range(3):
        if any(d.spec == spec for d in drivers(logs, every=True)):
            return True
        time.sleep(0.01)
    return False


def job_events(log: Path) -> list[dict[str, Any]]:
    """The ``@@sluice`` events of a job's log so far."""
    from sluice.core.spark import events

    if not log.exists():
        return []
    found = []
    for line in log.read_text(errors="replace").splitlines():
        event = events.decode(line)
        if event is not None:
            found.append(event)
    return found


def running_step(log: Path) -> dict[str, Any] | None:
    """The step a job's log says is running (started, not done), if any."""
    seen = job_events(log)
    done = {e.get("index") for e in seen if e.get("event") in ("step_done", "step_failed")}
    started = [e for e in seen if e.get("event") == "step_start" and e.get("index") not in done]
    return started[-1] if started else None


def moment(log: Path) -> tuple[str | None, str]:
    """Where a job's log says it is: the running step's label and type; else "startup"
    (no step started yet) or "between steps" (the last one finished: a step starting, the
    results being written, or the driver stopping)."""
    step = running_step(log)
    if step is not None:
        return step.get("label"), str(step.get("type"))
    started = any(e.get("event") == "step_start" for e in job_events(log))
    return None, "between steps" if started else "startup"


def views_seconds(log: Path) -> float | None:
    """How long a finished job's ``views`` step took (None: no such step, or unfinished)."""
    seen = job_events(log)
    if not any(e.get("event") == "job_done" for e in seen):
        return None
    index = next(
        (e["index"] for e in seen if e.get("event") == "step_start" and e.get("type") == "views"),
        None,
    )
    done = next(
        (e for e in seen if e.get("event") == "step_done" and e.get("index") == index), None
    )
    if index is None or done is None or not (done.get("result") or {}).get("swapped"):
        return None
    return float(done["seconds"])


# --- the world ---------------------------------------------------------------------------


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not after a fork


def _die_with_parent() -> None:
    """Run in the service's child process before exec: the kernel sends it SIGTERM when
    the bench dies, even by kill -9, so no service outlives the bench (Linux). Started
    from the main thread, whose exit is the process's."""
    _PRCTL(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


@dataclass
class World:
    """A warehouse with prod built, the service's state, the fake GitHub's state file."""

    root: Path
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None
    open_prs: list[int] = field(default_factory=list)  # built and not closed
    promoted: int | None = None  # the PR prod was last promoted to
    mode: str = "submit"  # how the service's jobs reach Spark (SLUICE_SPARK_MODE)
    state_url: str = ""  # the state's database ("": a SQLite file in root)
    job_timeout: float = 0.0  # the service's job time limit (0: its default)
    spares: list[int] = field(default_factory=list)  # prepared PRs no trial uses
    inspections: Counter[str] = field(default_factory=Counter)  # how the catalog was read
    mismatches_seen: set[str] = field(default_factory=set)  # found by earlier trials
    _queue: Any = None

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def logs(self) -> Path:
        """The service's Spark jobs' logs and specs (its own Spark root's folder)."""
        from sluice.bot.flow.checkout import Checkout

        return Checkout(self.work).spark.logs.resolve()

    @property
    def url(self) -> str:
        return self.state_url or f"sqlite:///{self.root / 'state.db'}"

    @property
    def state(self) -> str:
        return "postgres" if self.url.startswith("postgresql") else "sqlite"

    @property
    def trees(self) -> Path:
        return self.root / "trees"

    @property
    def forge_state(self) -> Path:
        return self.root / "github-state.json"

    @property
    def base(self) -> Path:
        return self.root / "base"

    @property
    def queue(self) -> Any:
        from sluice.bot.queue.store import JobQueue

        if self._queue is None:
            self._queue = JobQueue(self.url)
        return self._queue

    # -- setting up ------------------------------------------------------------------------

    def build_prod(self) -> None:
        """The example project (daily_revenue in 15-day batches) as prod, built on Spark."""
        from sluice.core import workflow
        from sluice.core.model.loader import load_project
        from sluice.core.state import open_state
        from sluice.core.timeutil import to_ms

        self.root.mkdir(parents=True, exist_ok=True)
        self.trees.mkdir(exist_ok=True)
        shutil.copytree(REPO / "examples" / "jaffle_shop", self.base,
                        ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
        _edit(self.base / "models" / "daily_revenue.sql", "batch_size 31", "batch_size 15")
        # Audits run per batch (issue 42): a 15-day batch past the last order has no rows,
        # which number_of_rows fails.
        _edit(self.base / "models" / "daily_revenue.sql",
              "  audits (number_of_rows(threshold := 1)),\n", "")  # fmt: skip
        # Spark time goes to what the faults hit (builds, backfills, swaps, drops): no unit
        # tests or table diffs in PR builds, and a JVM that compiles less (C1 only) for
        # these short jobs on a small machine.
        shutil.rmtree(self.base / "tests")
        _edit(self.base / "sluice.yaml", "project: jaffle\n", SPARK_SETTINGS)
        _edit(self.base / "sluice.yaml", "  backfill_days: 30\n",
              "  backfill_days: 30\n  diff_limit: 0\n")  # fmt: skip
        self.publish_prod_branch()
        project = load_project(self.base, use_cache=False)
        store = open_state(self.url)
        try:
            end = to_ms(END)
            plan = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
            workflow.apply_plan(project, store, plan, self.runner(), url=self.url, now=end)
        finally:
            store.close()

    def publish_prod_branch(self) -> None:
        """The fake GitHub's ``main``: the base project's commit, whose sluice.yaml holds
        the settings in force (a PR's own is never used)."""
        from tests.helpers.github_wire import FakeGitHub

        sha = _sha("c", 0)
        (self.trees / f"{sha}.tar.gz").write_bytes(_tarball(self.base, f"octo-warehouse-{sha[:7]}"))
        github = FakeGitHub(repo=OWNER, state_file=self.forge_state)
        github.refs["main"] = sha
        for ref in ("main", sha):
            github.publish(ref, self.base)
        github.save()

    def runner(self) -> Any:
        from sluice.core.model.loader import load_project
        from sluice.core.spark.session import SparkPaths
        from sluice.core.spark.submit import SubmitRunner

        project = load_project(self.base, use_cache=False)
        paths = SparkPaths(root=(self.work / "spark").resolve(), logs=self.logs)
        spark = project.config.sluice.spark
        conf = {**spark.conf, **SERVICE_SPARK_CONF}
        return SubmitRunner(spark.model_copy(update={"conf": conf}), paths)

    def prepare(self, number: int) -> None:
        """The commits of PR ``number``: its head, and the merge commit (same tree)."""
        src = self.root / "src" / str(number)
        if not src.exists():
            shutil.copytree(self.base, src)
            _edit(src / "models" / "customers.sql", "  c.last_name,\n",
                  f"  c.last_name,\n  {number} AS chaos_c,\n")  # fmt: skip
            _edit(src / "models" / "daily_revenue.sql", "  SUM(amount) AS revenue,\n",
                  f"  SUM(amount) AS revenue,\n  {number} AS chaos_r,\n")  # fmt: skip
        for sha in (_sha("a", number), _sha("b", number)):
            path = self.trees / f"{sha}.tar.gz"
            if not path.exists():
                path.write_bytes(_tarball(src, f"octo-warehouse-{sha[:7]}"))

    # -- the service -----------------------------------------------------------------------

    def start(self) -> None:
        import httpx

        args = [sys.executable, "-m", "tests.helpers.service_child", str(self.port), str(self.work),
                self.url, str(self.forge_state), str(self.trees)]  # fmt: skip
        # JVM options choose what runs: a service setting, never a repository's. Jobs run
        # through spark-submit, whose driver is the process the driver fault kills (a
        # Connect job's child and server: tests/core/spark/test_connect.py).
        env = {**os.environ, "SLUICE_SPARK_CONF": json.dumps(SERVICE_SPARK_CONF),
               "SLUICE_SPARK_MODE": self.mode}  # fmt: skip
        if self.job_timeout:
            env["SLUICE_JOB_TIMEOUT_SECONDS"] = f"{self.job_timeout:g}"
        if self.mode == "connect":
            # The checks read the catalog through the service's own server, while it runs
            # (tests/helpers/service_child.py): no job may start meanwhile, so the janitor
            # runs only when a trial queues it.
            env["CHAOS_INSPECT"] = "1"
            env["SLUICE_JANITOR_INTERVAL_SECONDS"] = "0"
        with open(self.root / "service.log", "ab") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                         env=env,
                                         preexec_fn=_die_with_parent)  # noqa: PLW1509  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError("the service did not start:\n" + self.service_log_tail())

    def stop(self) -> None:
        """Stop the service (gracefully; call it when the queue is idle)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        if self._queue is not None:
            self._queue.close()
            self._queue = None

    def service_log_tail(self, lines: int = 40) -> str:
        path = self.root / "service.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    # -- deliveries ------------------------------------------------------------------------

    def deliver(self, event: str, payload: dict[str, Any], delivery: str) -> int:
        """POST a signed delivery; the id of the job it queued."""
        import httpx

        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
                   "X-Hub-Signature-256": signature}  # fmt: skip
        response = httpx.post(f"http://127.0.0.1:{self.port}/webhooks/github", content=body,
                              headers=headers, timeout=30)  # fmt: skip
        if response.status_code != 202:
            raise RuntimeError(f"delivery {delivery}: {response.status_code} {response.text}")
        job = self.queue.delivery_job(delivery)
        if job is None:
            raise RuntimeError(f"delivery {delivery} was accepted without a job")
        return int(job)

    def queue_janitor(self, delivery: str) -> int:
        """Queue a janitor job as the worker's schedule does (a delivery of its own)."""
        from sluice.bot.events.neutral import JanitorEvent, pr_key
        from sluice.bot.queue.store import NewJob

        event = JanitorEvent(forge="github", repo=OWNER, installation_id=None)
        job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
        if not self.queue.accept(delivery, "github", "janitor", job, time.time()):
            raise RuntimeError(f"delivery {delivery} seen before")
        found = self.queue.delivery_job(delivery)
        assert found is not None
        return int(found)

    def job(self, job_id: int) -> Any:
        return self.queue.job(job_id)

    def wait_jobs(self, ids: list[int], timeout: float = JOB_TIMEOUT) -> None:
        """Until these jobs are finished and nothing else is queued or running."""
        deadline = time.monotonic() + timeout
        while True:
            records = [self.job(i) for i in ids]
            counts = self.queue.counts()
            if all(r is not None and r.status in ("done", "failed") for r in records) and (
                counts["queued"] == 0 and counts["running"] == 0
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs {ids} not finished: {counts}")
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError("the service died:\n" + self.service_log_tail())
            time.sleep(0.5)

    # -- reading -----------------------------------------------------------------------------

    def forge(self) -> dict[str, Any]:
        if not self.forge_state.exists():
            return {"comments": {}, "check_runs": {}, "deployments": []}
        data: dict[str, Any] = json.loads(self.forge_state.read_text())
        return data

    def invalidated(self) -> list[str]:
        """Environments waiting for the janitor."""
        from sluice.core.state import open_state

        store = open_state(self.url)
        try:
            return [e.name for e in store.list_environments() if e.invalidated]
        finally:
            store.close()

    def versions(self, environment: str) -> dict[str, str]:
        from sluice.core.state import open_state

        store = open_state(self.url)
        try:
            record = store.get_environment(environment)
        finally:
            store.close()
        return {} if record is None else {r.name: r.version for r in record.snapshots}


def _tarball(src: Path, prefix: str) -> bytes:
    """``src`` as GitHub serves a commit: a tar.gz with every file under ``prefix/``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(src.rglob("*")):
            if ".sluice" not in path.parts and "__pycache__" not in path.parts:
                tar.add(path, arcname=f"{prefix}/{path.relative_to(src)}", recursive=False)
    return buffer.getvalue()


def pull(number: int, action: str, **more: Any) -> dict[str, Any]:
    """The real ``pull_request`` payload GitHub sent (from the shared real cases), made
    PR ``number`` of the world's repository into ``main``."""
    from tests.helpers.cases import CASE_REPOSITORY_ID, load_case

    # The world's fake GitHub holds the repository of this id (jobs that carry none, as
    # the janitor's, ask GitHub what the id the name is bound to is named now).
    payload = load_case("github/pull_request/opened.payload.json")
    assert payload["repository"]["id"] == CASE_REPOSITORY_ID
    payload.pop("installation", None)
    payload.update(action=action, number=number)
    payload["repository"]["full_name"] = OWNER
    payload["pull_request"].update(number=number, **more)
    payload["pull_request"]["head"].update(sha=_sha("a", number), ref=f"chaos-{number}")
    payload["pull_request"]["base"]["ref"] = "main"
    payload["pull_request"]["user"]["login"] = "alice"
    return payload


# --- faults ------------------------------------------------------------------------------


@dataclass
class Fault:
    """What a fault did: whether it landed, where, and when."""

    injected: bool = False
    target: str = ""  # service | jvm | python
    step: str | None = None  # the Spark step running at the kill
    step_type: str | None = None  # its type, "startup" or "between steps"; None: no driver
    after: float = 0.0  # seconds into the job (service) or the driver (driver)
    orphans: int = 0  # driver processes that outlived a killed service
    note: str = ""  # how the moment was drawn, and why a fault did not land
    detect_s: float | None = None  # server faults: the kill to the end of the job's child
    bound_s: float | None = None  # stop: when the job had to end after it (the watch, the limit)
    pid: int | None = None  # the process signalled
    after_completion: bool = False  # a stop no job found: it landed after the job's work

    def to_json(self) -> dict[str, Any]:
        detect = None if self.detect_s is None else round(self.detect_s, 2)
        bound = None if self.bound_s is None else round(self.bound_s, 2)
        return {"injected": self.injected, "target": self.target, "step": self.step,
                "step_type": self.step_type, "after": round(self.after, 2),
                "orphans": self.orphans, "note": self.note, "detect_s": detect,
                "bound_s": bound, "after_completion": self.after_completion}  # fmt: skip


WAIT_S = 900.0
"""The longest the bench waits for anything a job or a process should do (every wait in it
is bounded: a stopped server that no job found must not hold the bench for ever)."""


def stopped(pid: int) -> bool:
    """Whether process ``pid`` exists and is stopped (SIGSTOP: state T in /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] in ("T", "t")


def wake_stopped(world: World) -> list[int]:
    """SIGCONT every stopped Spark Connect server JVM of ``world``; the pids woken."""
    woken = []
    for pid in server_jvms(world.work / "spark"):
        if stopped(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                woken.append(pid)
    return woken


def settle_stop(fault: Fault) -> None:
    """Once the job ended: a server ``fault`` stopped that is stopped still was found by no
    job (its watch or its time limit would have killed it), so the stop landed after the
    job's last call to the server, after its last step. Not a fault of the job's: it is
    reported as "fault landed after completion" (not landed) and the server woken, so that
    the checks and the next job use it rather than wait on it."""
    if fault.target != "stop" or fault.pid is None or not stopped(fault.pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(fault.pid, signal.SIGCONT)
    fault.injected, fault.after_completion = False, True
    fault.note += "; fault landed after completion (the server woken)"


def _wait_running(world: World, job_id: int, timeout: float = 600) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = world.job(job_id)
        if record is not None and record.status == "running":
            return True
        if record is not None and record.status in ("done", "failed"):
            return False
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} never started")


def _finished(world: World, job_id: int) -> bool:
    record = world.job(job_id)
    return record is not None and record.status in ("done", "failed")


def kill_service(world: World, job_id: int, rng: random.Random, expected: float) -> Fault:
    """kill -9 the service a random time into the job; start it again."""
    fault = Fault(target="service")
    delay = rng.uniform(0.0, 0.9 * expected)
    fault.note = f"{delay:.1f} s into the job"
    if not _wait_running(world, job_id):
        fault.note += ": the job finished before it was seen running"
        return fault
    began = time.monotonic()
    while time.monotonic() - began < delay and not _finished(world, job_id):
        time.sleep(0.05)
    if _finished(world, job_id):
        fault.note += ": the job finished first"
        return fault
    live = drivers(world.logs)
    where = moment(live[0].spec.with_suffix(".log")) if live else None
    world.kill()
    fault.injected, fault.after = True, time.monotonic() - began
    if where is not None:
        fault.step, fault.step_type = where
    # Its jobs' children, and (connect mode) its Spark Connect server, die with it.
    spark = world.work / "spark"

    def left() -> int:
        return len(drivers(world.logs)) + len(server_jvms(spark))

    deadline = time.monotonic() + 15
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    fault.orphans = left()
    world.start()
    return fault


def kill_driver(
    world: World,
    job_id: int,
    rng: random.Random,
    expected: float,
    at_step: str | None = None,
    targets: tuple[str, ...] = ("jvm", "python"),
) -> Fault:
    """kill -9 the job's Spark driver (JVM or Python; ``targets``: the Connect server's
    JVM, "server", or the job's Connect child, "python") at a random moment of its run;
    with ``at_step``, a random moment early in the first step of that type (``views``)."""
    fault = Fault(target=rng.choice(list(targets)))
    by_step = rng.random() < 0.5 or at_step is not None
    delay = rng.uniform(0.0, 0.9 * expected)
    if fault.target == "stop" and world.job_timeout and at_step is None:
        # Past the job's time limit: the stop lands in the limit's last 28 s, within the
        # watch's bound (connect.UNRESPONSIVE_S, 30 s), so that the limit ends the job;
        # no later than the child's expected life allows (when that is shorter than the
        # limit minus 28 s, the stop lands anywhere in it and the watch ends the job).
        low, high = max(2.0, world.job_timeout - 28.0), world.job_timeout - 3.0
        high = min(high, 0.9 * expected)
        by_step, delay = False, rng.uniform(low, high) if high > low else delay
    step_pick, step_delay = rng.random(), rng.uniform(0.0, 0.5 if at_step is None else 0.2)
    known = {d.spec for d in drivers(world.logs, every=True)}
    if not _wait_running(world, job_id):
        fault.note = "the job finished before it was seen running"
        return fault
    # The job's driver: the first one that starts while the job runs.
    spec = None
    deadline = time.monotonic() + WAIT_S
    while spec is None:
        fresh = [d for d in drivers(world.logs, every=True) if d.spec not in known]
        if fresh:
            spec = fresh[0].spec
        elif _finished(world, job_id):
            fault.note = "the job ran no Spark job"
            return fault
        elif time.monotonic() > deadline:
            fault.note = f"no driver of the job started within {WAIT_S:g} s"
            return fault
        else:
            time.sleep(0.02)
    log = spec.with_suffix(".log")
    began = time.monotonic()
    if by_step:
        steps = json.loads(spec.read_text())["steps"]
        index = min(int(step_pick * len(steps)), len(steps) - 1)
        if at_step is not None:
            index = next((i for i, t in enumerate(steps) if t["type"] == at_step), index)
        fault.note = f"step {index} of {len(steps)}, then {step_delay:.2f} s"
        while not any(
            e.get("event") == "step_start" and e.get("index") == index for e in job_events(log)
        ):
            if not _alive(world.logs, spec):
                fault.note += ": the driver ended first"
                return fault
            if time.monotonic() - began > WAIT_S:
                fault.note += f": the step did not start within {WAIT_S:g} s"
                return fault
            time.sleep(0.02)
        time.sleep(step_delay)
    else:
        fault.note = f"{delay:.1f} s after the driver started"
        while time.monotonic() - began < delay:
            if not _alive(world.logs, spec):
                fault.note += ": the driver ended first"
                return fault
            time.sleep(0.05)
    live = [d for d in drivers(world.logs) if d.spec == spec]
    if fault.target in ("server", "stop"):
        jvms = server_jvms(world.work / "spark")
        victim = Driver(jvms[0], fault.target, spec) if jvms and live else None
    else:
        victim = next((d for d in live if d.kind == fault.target), None)
        victim = victim or next((d for d in live if d.kind == "jvm"), None)
    if victim is None:
        fault.note += ": the driver ended first"
        return fault
    where = moment(log)
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim.pid, signal.SIGSTOP if victim.kind == "stop" else signal.SIGKILL)
        killed = time.monotonic()
        fault.injected, fault.target, fault.pid = True, victim.kind, victim.pid
        fault.after = killed - began
        fault.step, fault.step_type = where
        if victim.kind in ("server", "stop"):
            # How long the job's child waited on the dead (or stopped) server: the runner
            # stops it, at once when it died; when it stopped, after the watch's bound or
            # at the job's time limit, whichever is first.
            age = time.time() - spec.stat().st_mtime  # the child's, at the fault
            while _alive(world.logs, spec) and time.monotonic() - killed < WAIT_S:
                time.sleep(0.05)
            fault.detect_s = time.monotonic() - killed
            if victim.kind == "stop":
                from sluice.core.spark.connect import UNRESPONSIVE_S

                watch = UNRESPONSIVE_S + 8.0  # a probe every 3 s, each given 5 s
                limit = world.job_timeout - age if world.job_timeout else None
                fault.bound_s = watch if limit is None else min(watch, max(limit, 0.0))
                fault.note += f"; {age:.1f} s into the child" + (
                    "" if limit is None else f", {limit:.1f} s before its time limit"
                )
    return fault


# --- checks ------------------------------------------------------------------------------


def spark_inspect(world: World, queries: dict[str, str]) -> dict[str, Any]:
    """The Spark catalog (every schema's tables and view texts) and ``queries``' rows.

    In connect mode, through the service's running server (``/_chaos/inspect``: a Connect
    client child of the service's); when none runs (or in submit mode), from one
    spark-submit of this file with the world's Spark settings and metastore lock, the
    service (and its server, which holds the embedded metastore) stopped meanwhile."""
    if world.mode == "connect" and world.proc is not None:
        import httpx

        # A server left stopped would hold the inspection (and the bench) for good.
        wake_stopped(world)
        response = httpx.post(f"http://127.0.0.1:{world.port}/_chaos/inspect",
                              json={"queries": queries}, timeout=WAIT_S)  # fmt: skip
        if response.status_code == 200:
            world.inspections["live server"] += 1
            answer: dict[str, Any] = response.json()
            return answer
        if response.status_code != 404:
            raise RuntimeError(f"the catalog inspection failed: {response.text[-2000:]}")
        world.stop()
        try:
            return _submit_inspect(world, queries)
        finally:
            world.start()
    return _submit_inspect(world, queries)


def _submit_inspect(world: World, queries: dict[str, str]) -> dict[str, Any]:
    from sluice.core.spark import jvm
    from sluice.core.spark.session import metastore_lock, spark_conf
    from sluice.core.spark.submit import spark_submit_path

    world.inspections["spark-submit"] += 1
    runner = world.runner()
    request = world.root / "inspect.json"
    out = world.root / "inspect-out.json"
    request.write_text(json.dumps({"queries": queries}))
    out.unlink(missing_ok=True)
    cmd = [str(spark_submit_path()), "--master", runner.settings.master]
    conf = spark_conf(runner.settings, runner.paths)
    # The class archive the jobs' drivers map, when one was written: the inspection's
    # JVM loads the same classes of Spark and Hive, and starts in about half the time.
    jvm.map_existing(conf, dict(os.environ), runner.paths.class_archives)
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--name", "sluice-chaos-inspect", str(Path(__file__).resolve()), "--inspect",
            str(request), str(out)]  # fmt: skip
    with metastore_lock(runner.settings, runner.paths, "chaos-inspect", timeout=900):
        done = subprocess.run(cmd, env=runner.environment(), capture_output=True, text=True,
                              check=False, cwd=world.root, timeout=WAIT_S)  # fmt: skip
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"the catalog inspection failed ({done.returncode}):\n"
                           + "\n".join(done.stderr.splitlines()[-30:]))  # fmt: skip
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _inspect_main(request: str, out: str) -> None:
    """Under spark-submit: list the catalog, run the queries, write JSON to ``out``."""
    from tests.helpers.catalog_inspect import main as inspect_main

    inspect_main(request, out)


@dataclass
class Findings:
    mismatches: list[str] = field(default_factory=list)
    duplicates: int = 0
    duplicate_tables: list[str] = field(default_factory=list)
    half_promoted: int = 0  # prod's views at a mix of versions after a promotion


def check_store_and_catalog(world: World) -> Findings:
    """The state store against the Spark catalog, prod's markers, duplicate rows."""
    from sqlalchemy import select

    from sluice.core.db.engine import create_state_engine
    from sluice.core.snapshot.naming import PHYSICAL_PREFIX, physical_table, view_name
    from sluice.core.state import open_state, schema

    store = open_state(world.url)
    try:
        envs = store.list_environments()
        known = store.list_tables()
        intervals = store.get_intervals(known)
    finally:
        store.close()
    engine = create_state_engine(world.url)
    try:
        with engine.connect() as conn:  # every snapshot: its kind and grain
            rows = conn.execute(select(schema.snapshots.c.name, schema.snapshots.c.identifier))
            ids = [(r[0], r[1]) for r in rows]
    finally:
        engine.dispose()
    store = open_state(world.url)
    try:
        every = store.get_snapshots(ids)
    finally:
        store.close()
    kinds = {(s.name, s.version): s.payload["model"] for s in every.values()}
    physical: dict[tuple[str, str], str] = {}
    for (name, version), model in kinds.items():
        if model["kind"]["name"] != "EXTERNAL":
            physical[(name, version)] = physical_table(name, version)
    queries: dict[str, str] = {}
    for (name, version), model in kinds.items():
        grain = model.get("grain") or []
        if model["kind"]["name"] in INCREMENTAL and grain and intervals.get((name, version)):
            cols = ", ".join(f"`{g}`" for g in grain)
            queries[f"dup:{physical[(name, version)]}"] = (
                f"SELECT COUNT(*) - COUNT(DISTINCT {cols}) FROM {physical[(name, version)]}"
            )
    if world.promoted is not None:
        queries["prod:customers"] = "SELECT MIN(chaos_c), MAX(chaos_c) FROM jaffle.customers"
        queries["prod:daily_revenue"] = (
            "SELECT MIN(chaos_r), MAX(chaos_r) FROM jaffle.daily_revenue"
        )
    seen = spark_inspect(world, queries)
    catalog: dict[str, dict[str, Any]] = seen["catalog"]
    found = Findings()
    bad = found.mismatches

    def exists(qualified: str) -> dict[str, Any] | None:
        schema_name, table = qualified.lower().split(".", 1)
        entry: dict[str, Any] | None = catalog.get(schema_name, {}).get(table)
        return entry

    # Physical tables: referenced by a live environment, or holding recorded intervals.
    live = [e for e in envs if not e.invalidated]
    for env in envs:
        for ref in env.snapshots:
            table = physical.get((ref.name, ref.version))
            if table is not None and exists(table) is None:
                bad.append(f"{env.name}: {ref.name} reads {table}, which is not in the catalog")
    for key, spans in intervals.items():
        if spans and key in physical and exists(physical[key]) is None:
            bad.append(f"{physical[key]} has intervals in the state but is not in the catalog")
    wanted = {t.lower() for t in physical.values()}
    for schema_name, tables in catalog.items():
        if schema_name.startswith(PHYSICAL_PREFIX):
            for table in tables:
                if f"{schema_name}.{table}" not in wanted:
                    bad.append(f"{schema_name}.{table} is in the catalog but not in the state")
    # The warehouse's files: every table directory belongs to a table of the catalog.
    for folder in (world.work / "spark" / "warehouse").glob(f"{PHYSICAL_PREFIX}*.db"):
        schema_name = folder.name.removesuffix(".db")
        for path in folder.iterdir():
            owned = catalog.get(schema_name, {}).get(path.name)
            if path.is_dir() and not path.name.startswith((".", "_")) and owned is None:
                bad.append(f"{folder.name}/{path.name} holds files of no table in the catalog")
    # Views: each live environment's views read the tables its record names; no views of
    # environments the state does not have.
    expected_views: dict[str, str] = {}
    for env in live:
        for ref in env.snapshots:
            table = physical.get((ref.name, ref.version))
            if table is None:
                continue
            view = view_name(ref.name, env.name).lower()
            expected_views[view] = table.lower()
            entry = exists(view)
            if entry is None:
                bad.append(f"{env.name}: view {view} is missing")
            elif table.lower() not in str(entry.get("text") or "").lower():
                bad.append(f"{env.name}: view {view} does not read {table}")
    names = {e.name for e in envs}
    for schema_name, tables in catalog.items():
        if schema_name.startswith(PHYSICAL_PREFIX) or schema_name == "default":
            continue
        env_name = schema_name.split("__", 1)[1] if "__" in schema_name else "prod"
        for table, entry in tables.items():
            view = f"{schema_name}.{table}"
            if entry["type"] != "VIEW":
                bad.append(f"{view} is a {entry['type']} table among environment views")
            elif env_name not in names:
                bad.append(f"{view} belongs to environment {env_name}, which the state lacks")
            elif view not in expected_views and env_name in {e.name for e in live}:
                bad.append(f"{view} is not one of {env_name}'s models")
    answers = seen["queries"]
    if world.promoted is not None:
        for name in ("prod:customers", "prod:daily_revenue"):
            rows = answers.get(name)
            if not isinstance(rows, list) or rows[0] != [world.promoted, world.promoted]:
                bad.append(f"{name}: prod reads {rows}, not PR {world.promoted}'s version")
        marks = [answers.get(n) for n in ("prod:customers", "prod:daily_revenue")]
        if marks[0] != marks[1]:
            found.half_promoted += 1
    if any(m.startswith("prod: view ") for m in bad):
        found.half_promoted += 1
    for key, rows in answers.items():
        if not key.startswith("dup:"):
            continue
        if not isinstance(rows, list):
            bad.append(f"{key[4:]}: {rows}")
        elif rows[0][0]:
            found.duplicates += int(rows[0][0])
            found.duplicate_tables.append(key[4:])
    return found


def forge_doubles(forge: dict[str, Any]) -> set[str]:
    """Everything the fake GitHub holds twice: comments, check runs, deployments."""
    doubles: set[str] = set()
    issues = Counter(c["issue"] for c in forge["comments"].values())
    doubles |= {f"comments on #{n}: {k}" for n, k in issues.items() if k > 1}
    runs = Counter((r["head_sha"], r["name"]) for r in forge["check_runs"].values())
    doubles |= {f"check runs {name} on {sha[:8]}: {k}" for (sha, name), k in runs.items() if k > 1}
    deploys = Counter(d.get("ref") or d.get("sha") for d in forge.get("deployments", []))
    doubles |= {f"deployments of {str(sha)[:8]}: {k}" for sha, k in deploys.items() if k > 1}
    return doubles


def _checks_ok(forge: dict[str, Any], sha: str, names: tuple[str, ...]) -> list[str]:
    runs = {r["name"]: r for r in forge["check_runs"].values() if r["head_sha"] == sha}
    problems = []
    for name in names:
        run = runs.get(name)
        if run is None:
            problems.append(f"{name} missing on {sha[:8]}")
        elif run["status"] != "completed" or run.get("conclusion") != "success":
            output = run.get("output") or {}
            why = " ".join(str(output.get("summary") or "").split())[:300]  # what it said
            problems.append(
                f"{name} on {sha[:8]}: {run['status']}/{run.get('conclusion')}: "
                f"{output.get('title')}: {why}"
            )
    return problems


PR_CHECKS = ("sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval")
TIME_LIMIT_TEXT = "ran longer than its limit of"  # submit.SubmitRunner._timed_out's words
STOP_SLACK_S = 10.0  # seconds past its bound a job on a stopped server may take to end


def _told(forge: dict[str, Any], scenario: str, number: int, text: str) -> bool:
    """Whether the trial's failed check says ``text`` (a PR build's on its head, a
    promotion's deploy check on its merge commit)."""
    sha = _sha("a" if scenario == "pr" else "b", number)
    for run in forge["check_runs"].values():
        if run["head_sha"] == sha and run.get("conclusion") == "failure":
            output = run.get("output") or {}
            if text in f"{output.get('title')}\n{output.get('summary')}\n{output.get('text')}":
                return True
    return False


# --- trials ------------------------------------------------------------------------------


@dataclass
class Trial:
    scenario: str
    fault: str
    index: int
    seed: int
    number: int
    at_step: str | None = None  # driver faults: kill in the first step of this type


def trial_seed(seed: int, scenario: str, fault: str, index: int) -> int:
    return zlib.crc32(f"{seed}:{scenario}:{fault}:{index}".encode())


def _open_pr(world: World, number: int, tag: str) -> tuple[int, list[str]]:
    """Open PR ``number`` and wait for its build (no fault); its job and any problem."""
    job = world.deliver("pull_request", pull(number, "opened"), f"chaos-{tag}-open-{number}")
    world.wait_jobs([job])
    problems = _checks_ok(world.forge(), _sha("a", number), PR_CHECKS)
    if not problems:
        world.open_prs.append(number)
    return job, [f"setup: {p}" for p in problems]


def run_trial(world: World, trial: Trial, expected: dict[str, float]) -> dict[str, Any]:
    """One trial: the scenario's delivery, the fault, recovery, and the checks."""
    rng = random.Random(trial.seed)
    began = time.monotonic()
    tag = f"{trial.scenario}-{trial.fault}-{trial.index}-{trial.seed}"
    doubles_before = forge_doubles(world.forge())
    submits_before = world.inspections["spark-submit"]
    failed_before = world.queue.counts()["failed"]
    problems: list[str] = []
    logs_before = set(world.logs.glob("*.log")) if world.logs.exists() else set()
    n = trial.number
    setup: list[int] = []
    if trial.scenario == "pr":
        target = world.deliver("pull_request", pull(n, "opened"), f"chaos-{tag}-open-{n}")
    elif trial.scenario == "promote":
        if world.open_prs:  # a PR an earlier trial built: merge it
            n = world.open_prs.pop()
        else:
            job, more = _open_pr(world, n, tag)
            setup.append(job)
            problems += more
            if n in world.open_prs:
                world.open_prs.remove(n)
        pr_versions = world.versions(f"pr_{n}")
        merged = pull(n, "closed", merged=True, merge_commit_sha=_sha("b", n), state="closed")
        target = world.deliver("pull_request", merged, f"chaos-{tag}-merge-{n}")
    else:
        # Environments to drop: those promotions invalidated (prod shares their tables),
        # and the open PRs', closed now (tables of their own); when there are neither, a
        # PR's opened for the purpose and closed.
        if not world.invalidated() and not world.open_prs:
            job, more = _open_pr(world, n, tag)
            setup.append(job)
            problems += more
        for number in list(world.open_prs):
            closed = pull(number, "closed", merged=False, state="closed")
            setup.append(world.deliver("pull_request", closed, f"chaos-{tag}-close-{number}"))
            world.open_prs.remove(number)
        if setup:
            world.wait_jobs(setup)
        target = world.queue_janitor(f"chaos-{tag}-janitor")
    clock = time.monotonic()
    # The moment is drawn over the job's expected length (service), or its driver's.
    driver_key = f"{trial.scenario}/driver"
    expected.setdefault(driver_key, 0.7 * expected[trial.scenario])
    moment = expected[trial.scenario if trial.fault == "service" else driver_key]
    if trial.fault == "driver":
        fault = kill_driver(world, target, rng, moment, trial.at_step)
    elif trial.fault == "server":
        fault = kill_driver(world, target, rng, moment, trial.at_step, ("server",))
    elif trial.fault == "child":
        fault = kill_driver(world, target, rng, moment, trial.at_step, ("python",))
    elif trial.fault == "stop":
        fault = kill_driver(world, target, rng, moment, trial.at_step, ("stop",))
    else:
        fault = kill_service(world, target, rng, moment)
    try:
        world.wait_jobs([target])
    except TimeoutError as exc:  # bounded: the trial says so, and the next one runs
        problems.append(f"hung: {exc}")
        wake_stopped(world)
        with contextlib.suppress(TimeoutError):
            world.wait_jobs([target], timeout=WAIT_S)
    settle_stop(fault)
    record = world.job(target)
    took = time.monotonic() - clock
    # SIGSTOP: the job ended within seconds of the watch's bound or its time limit,
    # whichever came first, or it hung; at its time limit it ends told so, not retried.
    late = 0
    timed_out = trial.fault == "stop" and _told(world.forge(), trial.scenario, n, TIME_LIMIT_TEXT)
    bound = fault.bound_s
    if fault.detect_s is not None and bound is not None and fault.detect_s > bound + STOP_SLACK_S:
        late = 1
        problems.append(f"the job ended {fault.detect_s:.1f} s after its server stopped "
                        f"(bound {bound:.1f} s + {STOP_SLACK_S:g} s)")  # fmt: skip
    next_job: dict[str, Any] | None = None
    if timed_out:
        # The PR (or the deploy check) was told; prod is unchanged or whole; and the next
        # job runs (on a stopped server, which its own watch replaces): a PR built anew.
        spare = world.spares.pop(0)
        job, more = _open_pr(world, spare, tag)
        spare_record = world.job(job)
        next_job = {"pr": spare, "ok": not more,
                    "attempts": spare_record.job.attempts if spare_record else None,
                    "problems": more}  # fmt: skip
        setup.append(job)
        problems += more
    # Lost: a delivery whose job did not end done, or a failed job anywhere.
    lost = sum(1 for j in [*setup, target] if (r := world.job(j)) is None or r.status != "done")
    lost += max(0, world.queue.counts()["failed"] - failed_before - lost)
    # Twice: more attempts than the fault explains, or anything doubled on the forge.
    allowed = 2 if fault.injected else 1
    double = 0
    if record is not None and record.job.attempts > allowed:
        double += 1
        problems.append(f"job ran {record.job.attempts} times for {int(fault.injected)} fault")
    forge = world.forge()
    new_doubles = sorted(forge_doubles(forge) - doubles_before)
    double += len(new_doubles)
    problems += new_doubles
    # The outcome on the forge: what the delivery asked for was done.
    outcome: list[str] = []
    if timed_out:
        outcome = []  # told (above); the checks below find any half-promoted prod
    elif trial.scenario == "pr":
        outcome = _checks_ok(forge, _sha("a", n), PR_CHECKS)
        runs = {r["name"]: r for r in forge["check_runs"].values() if r["head_sha"] == _sha("a", n)}
        title = (runs.get("sluice/pr-environment", {}).get("output") or {}).get("title")
        if title == "This PR changes no model":  # a run again that found its own work
            outcome.append(f"sluice/pr-environment says {title!r}")
        bodies = [c["body"] for c in forge["comments"].values() if c["issue"] == n]
        built = "**This PR built** "  # the verdict's line once the environment is built
        if not any(built in b and f"`pr_{n}`" in b and "\n### ❌" not in b for b in bodies):
            outcome.append(f"the comment does not say pr_{n} was built")
        if not outcome:
            world.open_prs.append(n)
    elif trial.scenario == "promote":
        outcome = _checks_ok(forge, _sha("b", n), ("sluice/deploy",))
        deploys = [d for d in forge.get("deployments", []) if d.get("ref") == _sha("b", n)]
        states = [s.get("state") for s in deploys[-1]["statuses"]] if deploys else []
        if not states or states[-1] != "success":
            outcome.append(f"deployment of {_sha('b', n)[:8]}: {states}")
        if not outcome:
            world.promoted = n
        prod = world.versions("prod")
        moved = {k: v for k, v in pr_versions.items() if prod.get(k) != v}
        if moved:
            outcome.append(f"prod does not read PR {n}'s versions of {sorted(moved)}")
    else:
        left = world.invalidated()
        if left:
            outcome.append(f"invalidated environments left after the janitor: {left}")
    if outcome:
        lost += 1
        problems += outcome
    recovered = fault.injected and not outcome and record is not None and record.status == "done"
    recovered = recovered and not late and (next_job is None or next_job["ok"])
    found = check_store_and_catalog(world)
    # A mismatch stays in the catalog for the trials after the one that made it: each is
    # counted once, by the trial that found it first (the others list it as carried).
    carried = [m for m in found.mismatches if m in world.mismatches_seen]
    found.mismatches = [m for m in found.mismatches if m not in world.mismatches_seen]
    world.mismatches_seen.update(found.mismatches)
    problems += found.mismatches
    swaps = []
    if trial.scenario == "promote":
        for log in sorted(set(world.logs.glob("apply-prod-*.log")) - logs_before):
            seconds = views_seconds(log)
            if seconds is not None:
                swaps.append(seconds)
    if record is not None and record.finished_ts and record.started_ts:
        # The last attempt ran the whole job: a fair sample of its length, and its
        # driver's (from its spec, written at the start, to its log's last line).
        sample = record.finished_ts - record.started_ts
        expected[trial.scenario] = 0.5 * expected[trial.scenario] + 0.5 * sample
        prefix = {"pr": "preview-", "promote": "apply-prod-", "janitor": "janitor-"}
        for log in sorted(set(world.logs.glob(f"{prefix[trial.scenario]}*.log")) - logs_before):
            if any(e.get("event") == "job_done" for e in job_events(log)):
                lived = log.stat().st_mtime - log.with_suffix(".json").stat().st_mtime
                expected[driver_key] = 0.5 * expected[driver_key] + 0.5 * lived
    return {
        "scenario": trial.scenario, "fault": trial.fault, "index": trial.index,
        "seed": trial.seed, "pr": n, "fault_detail": fault.to_json(),
        "injected": fault.injected, "recovered": recovered, "lost": lost, "double": double,
        "mismatches": len(found.mismatches), "duplicates": found.duplicates,
        "half_promoted": found.half_promoted, "orphans": fault.orphans, "late": late,
        "after_completion": fault.after_completion, "timed_out": timed_out, "next_job": next_job, "state": world.state,
        "mismatches_carried": carried,
        "job_timeout": world.job_timeout or None,
        "inspected": "spark-submit" if world.inspections["spark-submit"] > submits_before
        else "live server",
        "attempts": record.job.attempts if record is not None else None,
        "status": str(record.status) if record is not None else None,
        "swap_s": swaps, "recovery_s": round(took, 1),
        "seconds": round(time.monotonic() - began, 1), "problems": problems,
    }  # fmt: skip


# --- the run -----------------------------------------------------------------------------


def load_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


def summary(records: list[dict[str, Any]]) -> tuple[str, bool]:
    """The figures, and whether every count that must be 0 is."""
    swaps = sorted(s for r in records for s in r.get("swap_s", []))
    keys = ("lost", "double", "mismatches", "duplicates", "half_promoted", "orphans", "late")
    totals = {k: sum(int(r.get(k) or 0) for r in records) for k in keys}
    lines = [
        f"trials:                   {len(records)}",
        f"faults injected:          {sum(1 for r in records if r['injected'])}",
        f"recovered:                {sum(1 for r in records if r['recovered'])}",
        f"lost deliveries:          {totals['lost']}",
        f"double-processed:         {totals['double']}",
        f"store/catalog mismatches: {totals['mismatches']}",
        f"duplicate rows:           {totals['duplicates']}",
        f"half-promoted prods:      {totals['half_promoted']}",
        f"orphan drivers:           {totals['orphans']}",
        f"hung on a stopped server: {totals['late']}",
        "fault landed after completion (a stop no job found; not counted as landed): "
        f"{sum(1 for r in records if r.get('after_completion'))}",
    ]
    detects = sorted(
        float(r["fault_detail"]["detect_s"])
        for r in records
        if r["fault_detail"].get("detect_s") is not None
    )
    if detects:
        lines.append(
            f"server killed -> its job's child stopped ({len(detects)} kills): "
            f"p50 {statistics.median(detects):.1f} s, max {max(detects):.1f} s"
        )
    stops = [r for r in records if r["fault"] == "stop" and r["injected"]]
    if stops:
        limit = sum(1 for r in stops if r.get("timed_out"))
        lines.append(
            f"server stopped: {len(stops)} stops, {limit} ended at the job's time limit (told, "
            f"the next job ran: {sum(1 for r in stops if (r.get('next_job') or {}).get('ok'))}), "
            f"{len(stops) - limit} by the watch; ended past their bound + {STOP_SLACK_S:g} s: "
            f"{totals['late']}"
        )
    if swaps:
        lines.append(
            f"swap window (prod views step, {len(swaps)} promotions): "
            f"max {max(swaps) * 1000:.0f} ms, p50 {statistics.median(swaps) * 1000:.0f} ms"
        )
    else:
        lines.append("swap window: no promotion finished")
    lines.append("")
    lines.append(f"{'scenario':<9} {'fault':<8} {'trials':>6} {'injected':>8} {'recovered':>9} "
                 f"{'bad':>4} {'where the kills landed (Spark step type: n)'}")  # fmt: skip
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["scenario"], r["fault"]), []).append(r)
    for (scenario, fault), group in sorted(groups.items()):
        bad = sum(int(r.get(k) or 0) for r in group for k in keys)
        steps = Counter(
            r["fault_detail"].get("step_type") or "no Spark job" for r in group if r["injected"]
        )
        where = ", ".join(f"{k}: {v}" for k, v in sorted(steps.items()))
        lines.append(f"{scenario:<9} {fault:<8} {len(group):>6} "
                     f"{sum(1 for r in group if r['injected']):>8} "
                     f"{sum(1 for r in group if r['recovered']):>9} {bad:>4} {where}")  # fmt: skip
    return "\n".join(lines), all(v == 0 for v in totals.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per scenario and fault")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--fault", action="append", choices=FAULTS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="start no trial after this much wall time (0: no limit)")  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--at-step", default=None, metavar="TYPE",
                        help="driver faults land early in the first step of this type "
                        "(views: inside the swap window)")  # fmt: skip
    parser.add_argument("--mode", choices=("submit", "connect"), default="submit",
                        help="how the service's jobs reach Spark (SLUICE_SPARK_MODE); faults "
                        "server and child need connect, service and driver submit")  # fmt: skip
    parser.add_argument("--state", choices=STATES, default="sqlite",
                        help="the service's state: a SQLite file, or a PostgreSQL 15 cluster "
                        "of its own (tests/pgcluster.py's throwaway_postgres)")  # fmt: skip
    parser.add_argument("--job-timeout", type=float, default=0.0, metavar="SECONDS",
                        help="the service's job time limit (SLUICE_JOB_TIMEOUT_SECONDS; 0: its "
                        "default); with --fault stop, the stop lands in its last 28 s")  # fmt: skip
    parser.add_argument("--summary", action="store_true", help="only print the summary")
    parser.add_argument("--inspect", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inspect:
        _inspect_main(*args.inspect)
        return 0
    scenarios = tuple(args.scenario or SCENARIOS)
    faults = tuple(args.fault or MODE_FAULTS[args.mode])
    wrong = [f for f in faults if f not in ALLOWED[args.mode]]
    if wrong:
        parser.error(f"--fault {wrong[0]} does not exist in --mode {args.mode}")

    def selected() -> list[dict[str, Any]]:
        return [
            r
            for r in load_records(args.out)
            if r["scenario"] in scenarios
            and r["fault"] in faults
            and r.get("run_seed") == args.seed
            and r.get("at_step") == args.at_step
            and r.get("mode", "submit") == args.mode
            and r.get("state", "sqlite") == args.state
            and (r.get("job_timeout") or 0.0) == args.job_timeout
        ]

    if args.summary:
        text, ok = summary(selected())
        print(text)
        return 0 if ok else 1
    done = {(r["scenario"], r["fault"], r["index"]) for r in selected()}
    todo = [
        Trial(s, f, i, trial_seed(args.seed, s, f, i), 0, args.at_step)
        for i in range(args.trials)
        for s in scenarios
        for f in faults
        if (s, f, i) not in done
    ]
    if todo:

        def stop(signum: int, _frame: object) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, stop)  # so the finally below stops the service too
        started = time.monotonic()
        root = args.workdir or Path(tempfile.mkdtemp(prefix="sluice-chaos-"))
        stack = contextlib.ExitStack()
        state_url = ""
        if args.state == "postgres":
            from tests.pgcluster import throwaway_postgres

            state_url = stack.enter_context(throwaway_postgres(prefix="sluice-chaos-pg-"))
        world = World(root.resolve(), mode=args.mode, state_url=state_url,
                      job_timeout=args.job_timeout)  # fmt: skip
        for ordinal, trial in enumerate(todo):
            trial.number = 10 + ordinal
        # PRs no trial opens: the next job after a job that hit its time limit.
        world.spares = [10 + len(todo) + i for i in range(len(todo))] if "stop" in faults else []
        args.out.parent.mkdir(parents=True, exist_ok=True)
        try:
            print(f"building prod in {root} ({args.state} state) ...", flush=True)
            world.build_prod()
            for number in [t.number for t in todo] + world.spares:
                world.prepare(number)
            world.start()
            expected = dict(GUESS)
            for trial in todo:
                if args.minutes and time.monotonic() - started > args.minutes * 60:
                    print(f"--minutes {args.minutes:g} reached: stopping", flush=True)
                    break
                record = run_trial(world, trial, expected)
                record["run_seed"], record["at_step"] = args.seed, args.at_step
                record["mode"] = args.mode
                record["job_timeout"] = args.job_timeout or None
                with args.out.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
                mark = (
                    "ok" if not record["problems"] else "PROBLEMS: " + "; ".join(record["problems"])
                )
                print(f"[{time.monotonic() - started:6.0f}s] {trial.scenario}/{trial.fault} "
                      f"#{trial.index} seed {trial.seed}: injected={record['injected']} "
                      f"at {record['fault_detail']['step_type'] or '-'} "
                      f"{record['seconds']:.0f}s {mark}", flush=True)  # fmt: skip
        finally:
            wake_stopped(world)  # a stopped server would hold the service's stop
            world.close()
            stack.close()
            if not args.keep and args.workdir is None:
                shutil.rmtree(root, ignore_errors=True)
    text, ok = summary(selected())
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
