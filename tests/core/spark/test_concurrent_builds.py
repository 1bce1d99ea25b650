"""Concurrent builds on real Spark, in-process and through Spark Connect.

Two independent Python models (``s.left``, ``s.right``) each wait in their function on
one ``threading.Barrier`` of the project's own module: with ``together: 2`` they only get
past it if both build at the same time (else the barrier breaks after a minute and the
build fails), which proves the overlap without a timing threshold. Their child
``s.joined`` (audited) reads both; ``s.solo`` is independent. The same project built one
model at a time (``together: 1``) must leave the same rows, intervals and audit results:
in process both builds run and each leaves ``EXPECTED``; through Spark Connect only the
concurrent one runs (one model at a time there is every other Connect test's path) and it
must leave ``EXPECTED`` too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

NOW = to_ms("2024-01-03")
# What the project leaves, built one model at a time or concurrently: each table's rows,
# its filled intervals, the audit's result.
EXPECTED_ROWS = {
    "left": [(i, "left") for i in range(3)],
    "right": [(i, "right") for i in range(4)],
    "joined": [(i, "left", "right") for i in range(3)],
    "solo": [(i, i * 2) for i in range(5)],
}
EXPECTED = {
    "intervals": {f"s.{name}": [(to_ms("2024-01-01"), NOW)] for name in EXPECTED_ROWS},
    "audits": {"s.joined:not_null": True},
}

SYNC = '''"""Meet at a barrier: both callers pass only when both wait at the same time."""
import threading

_LOCK = threading.Lock()
_BARRIERS = {}


def together(name, parties):
    with _LOCK:
        barrier = _BARRIERS.get((name, parties))
        if barrier is None:
            barrier = _BARRIERS[(name, parties)] = threading.Barrier(parties, timeout=60)
    barrier.wait()
'''

PYTHON_MODEL = """from sqlmesh import ExecutionContext, model


@model("s.{name}", kind="FULL", columns={{"id": "int", "side": "string"}})
def execute(context: ExecutionContext, start, end, execution_time, **kwargs):
    import sync

    sync.together("pair", int(context.var("together", 1)))
    return context.spark.createDataFrame(
        [(i, "{name}") for i in range({rows})], "id int, side string"
    )
"""


def project(root: Path, together: int) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
        f"variables:\n  together: {together}\n"
    )
    (root / "sync.py").write_text(SYNC)
    for name, rows in (("left", 3), ("right", 4)):
        (root / "models" / f"{name}.py").write_text(PYTHON_MODEL.format(name=name, rows=rows))
    (root / "models" / "joined.sql").write_text(
        "MODEL (name s.joined, kind FULL, audits (not_null(columns := (id))));\n"
        "SELECT l.id, l.side AS l_side, r.side AS r_side\n"
        "FROM s.left AS l FULL OUTER JOIN s.right AS r ON l.id = r.id\n"
        "WHERE l.id IS NOT NULL"
    )
    (root / "models" / "solo.sql").write_text(
        "MODEL (name s.solo, kind FULL);\nSELECT id, id * 2 AS twice FROM RANGE(5) AS t(id)"
    )
    return root


def apply(root: Path, runner_for: Any, tasks: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Apply prod with ``tasks`` concurrent builds; (the job's events, what it left)."""
    project_ = load_project(root, use_cache=False)
    url = f"sqlite:///{root / 'state.db'}"
    store = open_state(url)
    events: list[dict[str, Any]] = []
    try:
        settings = project_.config.sluice.spark.model_copy(update={"concurrent_tasks": tasks})
        runner = runner_for(settings, events.append)
        plan = workflow.plan_environment(project_, store, "prod", end=NOW, execution_time=NOW)
        result = workflow.apply_plan(project_, store, plan, runner, url=url, now=NOW)
        assert result.tables_built + result.model_views == 4
        record = store.get_environment("prod")
        assert record is not None
        keys = [(r.name, r.version) for r in record.snapshots]
        intervals = {name: spans for (name, _), spans in store.get_intervals(keys).items()}
        audits = {r.name: r.passed for r in store.get_results(plan_id=record.plan_id)}
    finally:
        store.close()
    return events, {"intervals": intervals, "audits": audits}


def overlapped(events: list[dict[str, Any]], first: str, second: str) -> bool:
    """Whether each of the two builds started before the other was done (event order)."""
    at = {(e["event"], e.get("label")): i for i, e in enumerate(events)}
    a, b = f"build {first}", f"build {second}"
    return (
        at[("step_start", a)] < at[("step_done", b)]
        and at[("step_start", b)] < at[("step_done", a)]
    )


def check(tmp_path: Path, runner_for: Any, read: Any, *, sequential: bool) -> list[dict[str, Any]]:
    """Build the project one model at a time (if ``sequential``), then four at a time;
    each must leave ``EXPECTED``. The concurrent build's events."""
    if sequential:
        events_one, left_one = apply(project(tmp_path / "one", together=1), runner_for, 1)
        assert not overlapped(events_one, "s.left", "s.right")
        assert not any("worker" in e for e in events_one)
        assert left_one == EXPECTED
        assert read() == EXPECTED_ROWS

    concurrent = project(tmp_path / "four", together=2)
    events_four, left_four = apply(concurrent, runner_for, 4)
    assert overlapped(events_four, "s.left", "s.right")
    workers = {e["model"]: e["worker"] for e in events_four if e["event"] == "step_start" and e.get("type") == "build"}  # fmt: skip
    assert workers["s.left"] != workers["s.right"]
    at = {(e["event"], e.get("label")): i for i, e in enumerate(events_four)}
    for parent in ("build s.left", "build s.right"):
        assert at[("step_done", parent)] < at[("step_start", "build s.joined")]
    assert left_four == EXPECTED
    assert read() == EXPECTED_ROWS
    return events_four


def test_independent_models_build_at_once_in_process(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    warehouse = Path(local_spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    paths = SparkPaths(root=warehouse.parent, logs=tmp_path / "logs")

    def runner_for(settings: Any, on_event: Any) -> InProcessRunner:
        return InProcessRunner(settings, paths, on_event=on_event)

    def read() -> dict[str, list[Any]]:
        return {
            name: sorted(tuple(r) for r in local_spark.table(f"s.{name}").collect())
            for name in ("left", "right", "joined", "solo")
        }

    check(tmp_path, runner_for, read, sequential=True)
    assert local_spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"


def test_the_in_process_jvm_runs_in_a_session_of_its_own(local_spark: SparkSession) -> None:
    # As spark-submit children do: else, with Linux's autogroup scheduling, it shares the
    # CPU share of the caller's session with everything else in it (session._start_jvm).
    import os

    from pyspark import SparkContext

    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    assert proc.poll() is None
    assert os.getsid(proc.pid) == proc.pid != os.getsid(0)


def test_independent_models_build_at_once_through_spark_connect(
    tmp_path: Path, connect_server: ConnectServer
) -> None:
    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    made: list[ConnectRunner] = []

    def runner_for(settings: Any, on_event: Any) -> ConnectRunner:
        runner = ConnectRunner(
            settings.model_copy(update={"mode": "connect"}),
            paths,
            server=connect_server,
            on_event=on_event,
        )
        made.append(runner)
        return runner

    def read() -> dict[str, list[Any]]:
        runner = made[-1]
        steps = [
            {"type": "query", "label": name, "id": name, "sql": f"SELECT * FROM s.{name}", "limit": 100}
            for name in ("left", "right", "joined", "solo")
        ]  # fmt: skip
        found = runner.run({"job_id": f"read-{len(made)}", "kind": "query", "steps": steps})  # type: ignore[typeddict-item]
        return {name: sorted(map(tuple, found.results[name]["rows"])) for name in found.results}

    events = check(tmp_path, runner_for, read, sequential=False)
    # The concurrent builds' sessions were reported (the runner interrupts them too if the
    # child dies), each other than the jobs' own.
    ready = {e["session_id"] for e in events if e["event"] == "session_ready"}
    opened = {e["session_id"] for e in events if e["event"] == "session_opened"}
    assert len(opened) >= 2 and not ready & opened
