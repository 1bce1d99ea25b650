"""config.yaml's before_all / after_all, as the loader keeps them, run on Spark as the apply
job's first and last steps (the sql step's handler, in-process)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.core.model.loader import load_project
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.steps.sql import run_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "before_after_all"


def test_the_statements_run_and_run_again(local_spark: SparkSession, tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "p")
    project = load_project(tmp_path / "p", use_cache=False)
    ctx = StepContext(job={"job_id": "t", "kind": "apply", "steps": []}, emit=lambda _e: None)
    try:
        for _ in range(2):  # IF NOT EXISTS: every job runs them, so a second run is a no-op
            run_sql(
                local_spark,
                {
                    "type": "sql",
                    "id": "before_all",  # the driver checks the project's statements again
                    "label": "b",
                    "statements": list(project.before_all),
                },
                ctx,
            )
            local_spark.sql("INSERT INTO ops.analytics VALUES ('t', '2024-01-01')")
            run_sql(
                local_spark,
                {
                    "type": "sql",
                    "id": "after_all",
                    "label": "a",
                    "statements": list(project.after_all),
                },
                ctx,
            )
        rows = local_spark.sql("SELECT eval_time FROM ops.latest_eval").collect()
        assert [r.eval_time for r in rows] == ["2024-01-01"]
        assert local_spark.table("ops.analytics").count() == 2
    finally:
        local_spark.sql("DROP SCHEMA IF EXISTS ops CASCADE")
