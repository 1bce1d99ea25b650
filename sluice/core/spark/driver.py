"""The Spark driver program: ``spark-submit driver.py JOB.json`` runs one job spec.

A job spec is a JSON object ``{"job_id", "kind", "steps": [...]}``; each step is
``{"type", "label", ...}`` and is run by the handler registered for its type. The driver
runs SQL from pull requests, so it holds no credential: it gets no state URL and opens no
state store, and its environment is an allow-list (:mod:`sluice.core.spark.submit`). It
reports through :mod:`sluice.core.spark.events` lines on stdout, progress and what it
computed alike: a batch's interval, an audit's, a unit test's or a table diff's result is
a ``write`` event, which the runner checks against the spec and applies to state
(:mod:`sluice.core.spark.writes`); the environment record is committed by the service
once the job has succeeded. It exits non-zero when a step fails. ``run_job`` is the same
code for ``--in-process`` runs; ``--connect`` runs it as a Spark Connect client
(:mod:`sluice.core.spark.connect`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sluice.core.spark import events, schedule
from sluice.core.spark.events import About, Event
from sluice.core.spark.results import StepResult, result_key
from sluice.core.spark.spec import JobSpec, Step
from sluice.core.spark.steps import statistics
from sluice.core.spark.steps.context import Handler, StepContext, spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Emit = Callable[[Event], None]


class StepFailed(Exception):
    """A step failed; the event naming it has been emitted."""

    def __init__(self, step: Step, message: str) -> None:
        super().__init__(f"{step.get('label', step.get('type'))}: {message}")
        self.step = step
        self.message = message


def handlers() -> dict[str, Handler]:
    """Every step type the driver knows (imported lazily: they need pyspark)."""
    from sluice.core.spark.steps import registry

    return registry.HANDLERS


def run_job(
    spec: JobSpec,
    spark: SparkSession,
    emit: Emit,
    *,
    table: Mapping[str, Handler] | None = None,
    measure: Callable[[SparkSession, StepContext], None] = statistics.record,
) -> dict[str, StepResult]:
    """Run the steps of ``spec`` with the handlers of ``table`` (default: every step type
    the driver knows), then ``measure`` the tables written (default: their sizes from
    Spark; :class:`~sluice.core.spark.scripted.ScriptedRunner` gives its own of both): independent models' builds at once (at most
    ``spec["concurrent_tasks"]``, each in a session of its own: :class:`_Sessions`), every
    other step alone, in the order :mod:`sluice.core.spark.schedule` gives; stop at the
    first failure (steps already running finish).

    ``emit`` is called from one thread at a time (each event whole, whatever thread sent
    it); the results come back in the order of the steps.

    Raises:
        StepFailed: naming the first step that failed, after emitting its ``step_failed``
            event (and any other running step's).
    """
    lock = threading.Lock()

    def whole(event: Event) -> None:
        with lock:
            emit(event)

    ctx = StepContext(job=spec, emit=whole)
    table = handlers() if table is None else table
    steps = spec["steps"]
    units = schedule.units(steps)
    limit = concurrency(spec)
    builds = sum(1 for unit in units if unit.model is not None)
    sessions = _Sessions(spark, whole) if limit > 1 and builds > 1 else None
    if sessions is not None and not sessions.usable():
        sessions = None  # it said why, in a log event: one model at a time

    def work(unit: schedule.Unit, slot: int) -> None:
        if sessions is None:
            for index in unit.steps:
                _run_step(index, steps[index], spark, ctx, table, None)
        elif unit.model is None:  # a step that runs alone, in the job's session
            sessions.catch_up()
            for index in unit.steps:
                _run_step(index, steps[index], spark, ctx, table, None)
            sessions.refresh()  # it may have changed the job's session
        else:
            session = sessions.worker(slot)
            try:
                for index in unit.steps:
                    _run_step(index, steps[index], session, ctx, table, slot)
            finally:
                name = str(dict(steps[unit.steps[0]]).get("table"))
                sessions.wrote(name, created=name in ctx.created)

    try:
        schedule.run(units, work, limit if sessions is not None else 1)
    finally:
        if sessions is not None:
            sessions.close()
        # Also after a failure: the tables built before it are kept, and reused.
        measure(spark, ctx)
    keys = [result_key(index, step) for index, step in enumerate(steps)]
    return {key: ctx.results[key] for key in keys if key in ctx.results}


def concurrency(spec: JobSpec) -> int:
    """How many models of ``spec`` may build at once (its ``concurrent_tasks``, bounded)."""
    asked = spec.get("concurrent_tasks", schedule.DEFAULT_LIMIT)
    if type(asked) is not int or asked < 1:
        raise ValueError(
            f"the job spec's concurrent_tasks is {asked!r}: it must be a whole number from 1 "
            f"to {schedule.MAX_LIMIT}"
        )
    return min(asked, schedule.MAX_LIMIT)


def _run_step(
    index: int,
    step: Step,
    spark: SparkSession,
    ctx: StepContext,
    table: Mapping[str, Handler],
    worker: int | None,
) -> None:
    """Run one step, its events around it (``worker``: the concurrent build slot running it)."""
    label = step.get("label", step["type"])
    fields: dict[str, Any] = dict(step)
    about: About = {}
    if "model" in fields:  # a build's, an audit's, a unit test's: whose the events are
        about["model"] = str(fields["model"])
    if "source" in fields:  # the model's file:line, for a failure's message
        about["source"] = str(fields["source"])
    if worker is not None:
        about["worker"] = worker
    ctx.emit({"event": "step_start", "index": index, "type": step["type"], "label": label, **about})
    began = time.monotonic()
    try:
        handler = table.get(step["type"])
        if handler is None:
            raise ValueError(f"the driver has no step of type {step['type']!r}")
        result = handler(spark, step, ctx)
    except Exception as exc:
        message = spark_error(exc)
        ctx.emit(
            {
                "event": "step_failed",
                "index": index,
                "type": step["type"],
                "label": label,
                "error": message,
                "error_class": exc.__class__.__name__,
                **about,
            }
        )
        raise StepFailed(step, message) from exc
    if result is not None:
        ctx.results[result_key(index, step)] = result
        if result["step"] == "unit_test":
            ctx.save_result("unit_test", result["name"], result["passed"], result)
    ctx.emit(
        {
            "event": "step_done",
            "index": index,
            "label": label,
            "seconds": round(time.monotonic() - began, 3),
            "result": result,
            **about,
        }
    )


class _Sessions:
    """The Spark sessions of concurrent builds: one per worker slot, each a copy of the
    job's session (its settings, temporary views and functions, current database) made
    when the slot first builds, and again after a step that ran alone (``before_all`` may
    set a setting). A model's ``session_properties`` and temporary views stay in its
    worker's session, so builds running at once cannot see each other's.

    On classic Spark each slot's builds go to a FAIR scheduler pool of its own
    (``sluice-<slot>``; ``spark.scheduler.mode`` is ``FAIR``: :func:`sluice.core.spark.
    session.spark_conf`), so a long build does not hold back the others' tasks. A Spark
    Connect session is a server-side session of its own (the client reports it with a
    ``session_opened`` event, so the runner can interrupt it as it does the job's); the
    server runs each session's operations on threads of its own.
    """

    def __init__(self, spark: SparkSession, emit: Emit) -> None:
        self.spark = spark
        self.emit = emit
        self.connect = type(spark).__module__.startswith("pyspark.sql.connect")
        self.generation = 0
        self._lock = threading.Lock()
        self._slots: dict[int, tuple[int, SparkSession]] = {}
        self._opened: list[SparkSession] = []
        self._written: list[str] = []

    def worker(self, slot: int) -> SparkSession:
        """The session of worker ``slot`` (called on that worker's thread)."""
        held = self._slots.get(slot)
        if held is not None and held[0] == self.generation:
            session = held[1]
        else:
            session = self._clone()
            self._slots[slot] = (self.generation, session)
        if not self.connect:
            # A local property of this thread (PySpark pins a JVM thread to it).
            session.sparkContext.setLocalProperty("spark.scheduler.pool", f"sluice-{slot}")
        return session

    def usable(self) -> bool:
        """Whether this Spark can copy the job's session (a Spark Connect server older
        than PySpark 4.3's cannot clone sessions); when not, says so in a log event."""
        try:
            self._clone()  # released with the others (made before the first steps, so
            # not a worker's: those are made after them)
        except Exception as exc:
            self.emit(
                {
                    "event": "log",
                    "message": "concurrent builds need a copy of the job's Spark session, "
                    f"which this Spark cannot make ({spark_error(exc).splitlines()[0]}): "
                    "building one model at a time",
                }
            )
            return False
        return True

    def wrote(self, table: str, created: bool) -> None:
        """A worker's session wrote ``table`` (``created``: the table is new, or a view).

        A Spark Connect job's session is the job's own, opened with it: it cannot hold a
        listing of a table this job created (the builds that create it run in workers), so
        that table needs no refresh, which on Connect is a call per table."""
        if created and self.connect:
            return
        with self._lock:
            self._written.append(table)

    def catch_up(self) -> None:
        """Make the job's session read the tables the workers wrote: a session keeps the
        file listing of a table it has read, and a write in another session does not
        update it (a read would then look for the files the write replaced). Done before
        a step that runs in the job's session, and at the job's end (an in-process
        session outlives the job)."""
        with self._lock:
            written, self._written = self._written, []
        if not written:
            return
        if not self.connect:
            try:
                # One call, no file listing: the job's session forgets every table it
                # resolved (refreshing each table would list its files: seconds for 50).
                self.spark._jsparkSession.sessionState().catalog().invalidateAllCachedTables()
                return
            except Exception:  # not a JVM session as expected: table by table
                pass
        for name in dict.fromkeys(written):
            try:
                self.spark.catalog.refreshTable(name)
            except Exception:  # a build that failed before creating its table
                continue

    def refresh(self) -> None:
        """The job's session may have changed: copy it again before the next build."""
        self.generation += 1

    def _clone(self) -> SparkSession:
        if self.connect:
            session: SparkSession = self.spark.cloneSession()  # type: ignore[attr-defined]
            opened: str = session.session_id  # type: ignore[attr-defined]
            self.emit({"event": "session_opened", "session_id": opened})
        else:
            from pyspark.sql import SparkSession

            jsession = self.spark._jsparkSession.cloneSession()
            session = SparkSession(self.spark.sparkContext, jsession)
        with self._lock:
            self._opened.append(session)
        return session

    def close(self) -> None:
        """Bring the job's session up to date (:meth:`catch_up`); release the Spark Connect
        sessions (a classic copy holds nothing to release)."""
        self.catch_up()
        if not self.connect:
            # A copy's work may have made it the active session, which the next job in this
            # process (in-process runs) would then take instead of the job's own.
            from pyspark.sql import SparkSession

            jvm = getattr(self.spark, "_jvm", None)
            if isinstance(self.spark, SparkSession) and jvm is not None:
                SparkSession._activeSession = self.spark
                jvm.SparkSession.setActiveSession(self.spark._jsparkSession)
                jvm.SparkSession.setDefaultSession(self.spark._jsparkSession)
            return
        for session in self._opened:
            try:
                session.stop()
            except Exception:  # best effort: the server ends idle sessions itself
                traceback.print_exc()


def _print(event: Event) -> None:
    print(events.encode(event), flush=True)


_RELAYS: list[Any] = []


def _reachable(remote: str) -> str:
    """``remote``, or, in a sandbox without network (``$SLUICE_CONNECT_RELAY`` names the
    socket the service relays to the server), the same URL on a port of this process's
    own loopback that relays to that socket (:mod:`sluice.core.spark.relay`)."""
    socket_path = os.environ.get("SLUICE_CONNECT_RELAY")
    if not socket_path:
        return remote
    from urllib.parse import urlsplit, urlunsplit

    from sluice.core.spark import relay

    inner = relay.tcp_to_unix(socket_path)
    _RELAYS.append(inner)  # lives as long as this process
    parts = urlsplit(remote)
    host = parts.hostname or "localhost"
    return urlunsplit(parts._replace(netloc=f"{host}:{inner.port}"))


def _connect_session(conf_path: str) -> SparkSession:
    """A new Spark Connect session on ``$SPARK_REMOTE`` (one per job: its temporary views
    and settings end with it), with the job's SQL settings from ``conf_path``. The server's
    token, when the URL has none, is ``$SPARK_CONNECT_AUTHENTICATE_TOKEN`` (the runner puts
    it in this process's environment only), which PySpark's client sends on every call."""
    from pyspark.sql import SparkSession

    with open(conf_path, encoding="utf-8") as handle:
        conf: dict[str, str] = json.load(handle)
    spark = SparkSession.builder.remote(_reachable(os.environ["SPARK_REMOTE"])).create()
    for key, value in conf.items():
        # The server's static settings (warehouse, catalog) were set when it started.
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    return spark


def main(argv: list[str]) -> int:
    """Entry point: ``driver.py JOB.json`` under spark-submit, or ``driver.py --connect
    JOB.json SESSION_CONF.json`` as a Spark Connect client of ``$SPARK_REMOTE``."""
    connect = len(argv) > 1 and argv[1] == "--connect"
    args = argv[2:] if connect else argv[1:]
    try:
        with open(args[0], encoding="utf-8") as handle:
            spec = json.load(handle)
        spec["steps"]
    except (IndexError, OSError, ValueError, KeyError) as exc:
        _print({"event": "job_failed", "error": f"cannot read the job spec: {exc}"})
        return events.BAD_SPEC
    from pyspark.sql import SparkSession

    _print({"event": "job_start", "job_id": spec.get("job_id"), "steps": len(spec["steps"])})
    ready: events.SessionReady = {"event": "session_ready"}
    if connect:
        try:
            spark = _connect_session(args[1])
        except Exception as exc:
            _print(
                {
                    "event": "job_failed",
                    "error": f"cannot open a Spark Connect session: {spark_error(exc)}",
                }
            )
            return 1
        # The runner interrupts this session's work if this process dies.
        ready["session_id"] = getattr(spark, "session_id", None)
    else:
        spark = SparkSession.builder.enableHiveSupport().getOrCreate()
        # After start-up (whose lines, the master's URL among them, stay in the log); a
        # Connect client has no SparkContext: the server's log level is its own.
        spark.sparkContext.setLogLevel("WARN")
    # Connect to the metastore now (the first catalog call boots it), so step timings
    # measure the steps, and a metastore problem is reported as such.
    spark.sql("SHOW DATABASES").collect()
    _print(ready)
    try:
        results = run_job(spec, spark, _print)
    except StepFailed:
        return events.STEP_FAILED
    except Exception as exc:  # a bug or an environment problem outside any step
        _print({"event": "job_failed", "error": spark_error(exc)})
        traceback.print_exc()
        return 1
    finally:
        spark.stop()
    _print({"event": "job_done", "job_id": spec.get("job_id"), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
