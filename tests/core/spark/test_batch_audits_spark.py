"""A backfill killed after some batches resumes with the rest only, each batch audited
right after it is written (issue 42, point 4), on a real (in-process) Spark.

The driver is "killed" as a lost driver is: its events stop at a chosen moment (here, the
log line saying batch 4 of 6 was written, before that batch's audits ran) and nothing it
would have reported after is applied. The unit tests of the spec and of the write checker
are test_batch_audits.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import jobs, workflow
from sluice.core.model.loader import load_project
from sluice.core.spark import driver
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner
from sluice.core.spark.writes import JobWrites
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DAY = 86_400_000
START, END = to_ms("2024-01-01"), to_ms("2024-01-07")  # six daily batches
EVENTS = "batch_kill.events"


def _project(root: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "audits").mkdir()
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    )
    (root / "models" / "raw.sql").write_text(
        "MODEL (name batch_kill.raw, kind FULL);\n"
        "SELECT CAST(id AS INT) AS id, DATE_ADD(DATE'2024-01-01', CAST(id % 6 AS INT)) AS ds "
        "FROM range(60)"
    )
    # `one_day` fails when the rows it reads span more than one day: it passes only if
    # it reads the batch's rows alone (the whole table spans six days).
    (root / "audits" / "one_day.sql").write_text(
        "AUDIT (name one_day);\n"
        "SELECT COUNT(DISTINCT ds) AS days FROM @this_model HAVING COUNT(DISTINCT ds) > 1"
    )
    (root / "models" / "events.sql").write_text(
        f"MODEL (\n  name {EVENTS},\n"
        "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),\n"
        "  audits (not_null(columns := id), one_day)\n);\n"
        "SELECT id, ds FROM batch_kill.raw WHERE ds BETWEEN @start_ds AND @end_ds"
    )
    return root


class Killed(BaseException):
    """The driver died (no step's error handling catches a BaseException)."""


def _paths(spark: SparkSession) -> SparkPaths:
    root = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")).parent
    return SparkPaths(root=root, logs=root / "logs")


def test_a_backfill_killed_after_three_batches_builds_only_the_other_three(
    tmp_path: Path, local_spark: SparkSession
) -> None:
    spark = local_spark
    root = _project(tmp_path / "project")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        workflow.record_plan(store, plan, END)
        spec = jobs.apply_job(
            plan,
            audits=project.audits,
            project_dir=project.path,
            table_format="parquet",
            previous_versions=None,
            now=END,
            prod_schemas=frozenset(),
        )
        events = next(s for s in spec["steps"] if s["type"] == "build" and s["model"] == EVENTS)
        key = (EVENTS, events["version"])
        assert len(events["batches"]) == 6
        writes = JobWrites(spec, store)
        dead = False

        def emit(event: dict[str, Any]) -> None:
            nonlocal dead
            if dead:
                raise Killed()
            if event.get("event") == "write":
                writes.apply(event)
            if event.get("message") == f"{EVENTS}: batch 4/6 written":
                dead = True  # batch 4 is in the table; its audits never run
                raise Killed()

        with pytest.raises(Killed):
            driver.run_job(spec, spark, emit)
        # Three batches written and audited, each by itself: recorded.
        first = [r for r in store.get_results(job_id=spec["job_id"]) if r.name.startswith(EVENTS)]
        assert sorted((r.name, tuple(r.payload["batch"]), r.passed) for r in first) == sorted(
            (f"{EVENTS}:{audit}", (START + d * DAY, START + (d + 1) * DAY), True)
            for audit in ("not_null", "one_day")
            for d in range(3)
        )
        assert store.get_intervals([key])[key] == [(START, START + 3 * DAY)]
        assert spark.sql(f"SELECT COUNT(DISTINCT ds) FROM {events['table']}").collect()[0][0] == 4

        # Run again: the plan has the three batches left, and only they are built.
        project = load_project(root, use_cache=False)
        again = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        [backfill] = [b for b in again.backfill if b.name == EVENTS]
        assert backfill.batches == tuple(
            (START + d * DAY, START + (d + 1) * DAY) for d in (3, 4, 5)
        )
        assert not [b for b in again.backfill if b.name == "batch_kill.raw"]  # built and kept
        seen: list[dict[str, Any]] = []
        runner = InProcessRunner(project.config.sluice.spark, _paths(spark), on_event=seen.append)
        result = workflow.apply_plan(project, store, again, runner, url=url, now=END + 1)
        assert result.tables_built == 1
        written = [
            e["message"]
            for e in seen
            if e.get("event") == "log" and "written" in str(e.get("message"))
        ]
        assert written == [f"{EVENTS}: batch {n}/3 written" for n in (1, 2, 3)]
        audited = [(e["name"], e["batch"][0]) for e in seen if e.get("op") == "save_result"]
        assert audited == [
            (f"{EVENTS}:{audit}", START + d * DAY)
            for d in (3, 4, 5)
            for audit in ("not_null", "one_day")
        ]
        assert store.get_intervals([key])[key] == [(START, END)]
        # Batch 4 was written twice, its rows once: six days, ten rows a day.
        rows = spark.sql(
            f"SELECT ds, COUNT(*) AS n FROM {EVENTS} GROUP BY ds ORDER BY ds"
        ).collect()
        assert [r["n"] for r in rows] == [10] * 6
    finally:
        store.close()
