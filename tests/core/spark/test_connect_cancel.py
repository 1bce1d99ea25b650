"""A Connect job stopped on purpose (a newer head superseded it, issue 45, point 2) ends
as ``JobCancelled`` mid-backfill, keeps what it finished and marks nothing else built;
applying again finishes it on the same server.

Real Spark (the session's Connect server): the stop comes from the job's own events,
after its second batch is written, so the order is fixed without a clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.core import workflow
from sluice.core.errors import JobCancelled
from sluice.core.model.loader import load_project
from sluice.core.spark import cancel
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers.batched import six_batches

pytestmark = pytest.mark.spark

DAY = 86_400_000
START, END = to_ms("2024-01-01"), to_ms("2024-01-07")  # six daily batches
EVENTS = "stopped.events"


def test_a_stopped_connect_job_keeps_what_it_finished_and_marks_nothing_else_built(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    connect_server.endpoint()
    server_pid = connect_server.pid
    root = six_batches(tmp_path / "project", "stopped")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = open_state(url)
    stop = cancel.Cancel()

    def stop_after_batch_two(event: dict[str, Any]) -> None:
        if event.get("message") == f"{EVENTS}: batch 2/6 written":
            stop.cancel("superseded by job 2 (head bbb)")

    paths = SparkPaths(root=connect_server.paths.root, logs=tmp_path / "logs")
    try:
        project = load_project(root, use_cache=False)
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        runner = ConnectRunner(
            connect_server.settings, paths, server=connect_server, timeout=3600.0,
            on_event=stop_after_batch_two,
        )  # fmt: skip
        with cancel.scope(stop), pytest.raises(JobCancelled) as caught:
            workflow.apply_plan(project, store, plan, runner, url=url, now=END)
        assert stop.reason is not None, "the build never wrote its second batch"
        assert caught.value.message == "the job was stopped: superseded by job 2 (head bbb)"
        # Batches finished before the stop are kept; not all six; prod not pointed anywhere.
        # The stop came on batch 2's "written" line, before its audits ran and its
        # intervals were reported: batch 2 is kept or not by a race (CI saw both), batch 1
        # always.
        version = next(s.version for s in plan.snapshots if s.name == EVENTS)
        key = (EVENTS, version)
        [(first, last)] = store.get_intervals([key])[key]
        assert first == START and START + DAY <= last < END
        assert store.get_environment("prod") is None
        # The server was not touched (the job's session interrupted, the JVM kept).
        assert connect_server.pid == server_pid

        # Applying again, on the same server: the missing batches only, no day twice.
        again = workflow.plan_environment(
            load_project(root, use_cache=False), store, "prod", end=END, execution_time=END
        )
        [backfill] = [b for b in again.backfill if b.name == EVENTS]
        assert backfill.batches[0][0] == last
        rerun = ConnectRunner(connect_server.settings, paths, server=connect_server)
        workflow.apply_plan(project, store, again, rerun, url=url, now=END + 1)
        assert store.get_intervals([key])[key] == [(START, END)]
        assert connect_server.pid == server_pid
    finally:
        store.close()
    count = (
        f"SELECT ds, COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM {EVENTS} GROUP BY ds ORDER BY ds"
    )
    step: Any = {"type": "sql", "label": "counts", "statements": [count]}
    counts = rerun.run({"job_id": "stopped-counts", "kind": "test", "steps": [step]})
    rows: Any = counts.results["0"]["rows"]  # type: ignore[typeddict-item]
    assert [(r["n"], r["ids"]) for r in rows] == [(10, 10)] * 6
