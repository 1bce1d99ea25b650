"""On Spark: a job whose views were made and whose record was not (the service lost
between the job's end and its commit, or a job cut inside its views step) leaves views in
``<schema>__<env>`` that no record names; the janitor drops them and their empty schema
once the plan is quiet, and leaves prod's views and another environment's alone (issue
45's crash trials). The in-process session's catalog is the real one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core import jobs, workflow
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner, run_recorded
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

END = to_ms("2024-01-03")
QUIET = 60_000
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n",
    "models/a.sql": "MODEL (name leak_s.a, kind FULL);\nSELECT 1 AS id\n",
    "models/b.sql": "MODEL (name leak_s.b, kind VIEW);\nSELECT id FROM leak_s.a\n",
}


def test_views_no_record_names_are_dropped_by_the_janitor(
    tmp_path: Path, local_spark: SparkSession, inprocess_paths: SparkPaths
) -> None:
    project = load(tmp_path / "p", FILES)
    runner = InProcessRunner(project.config.sluice.spark, inprocess_paths)
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        for env in ("prod", "dev"):
            plan = workflow.plan_environment(project, store, env, end=END, execution_time=END)
            workflow.apply_plan(project, store, plan, runner, now=END, keep=True)
        changed = load(
            tmp_path / "q",
            {**FILES, "models/a.sql": "MODEL (name leak_s.a, kind FULL);\nSELECT 2 AS id\n"},
        )
        plan = workflow.plan_environment(changed, store, "pr_3", end=END, execution_time=END)
        # As apply_plan does, up to the job's end: the plan recorded, the job run; the
        # record never committed.
        workflow.record_plan(store, plan, END)
        spec = jobs.apply_job(
            plan,
            audits=changed.audits,
            project_dir=changed.path,
            table_format="parquet",
            previous_versions=None,
            now=END,
            prod_schemas=jobs.prod_schemas(store),
        )
        run_recorded(runner, spec, state=store)
        assert store.get_environment("pr_3") is None
        assert local_spark.sql("SELECT id FROM leak_s__pr_3.a").collect()[0][0] == 2
        report = workflow.run_janitor(
            store, runner, now=END + QUIET, table_ttl_ms=10**12, quiet_ms=QUIET
        )
        assert report.environments == ("pr_3",)
        assert not local_spark.catalog.databaseExists("leak_s__pr_3")
        assert local_spark.sql("SELECT id FROM leak_s.a").collect()[0][0] == 1
        assert local_spark.sql("SELECT id FROM leak_s__dev.b").collect()[0][0] == 1
        assert {e.name for e in store.list_environments()} == {"prod", "dev"}
    finally:
        store.close()
