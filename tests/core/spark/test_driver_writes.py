"""The driver's writes reach state through the service side, the same way for both runners.

One PR preview of the example project (unit tests, builds, audits, views) run through
spark-submit and in this process, each against a state store of its own: the driver
reports intervals and results as ``write`` events, the runner checks and applies them, and
both stores end up the same, with the environment's record committed by the service.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.core import workflow
from sluice.core.config import SparkSettings
from sluice.core.model.loader import load_project
from sluice.core.preview import preview_environment
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import InProcessRunner, Runner, SubmitRunner
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
END = to_ms("2018-05-01")


def _project(dest: Path, schema: str) -> Path:
    """The example project (models, seeds, audits, a unit test, Python) in its own schema."""
    shutil.copytree(REPO / "examples" / "jaffle_shop", dest,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    for path in [*dest.rglob("*.sql"), *dest.rglob("*.yaml"), *dest.rglob("*.py")]:
        path.write_text(path.read_text().replace("jaffle.", f"{schema}."))
    return dest


def _preview(root: Path, runner: Runner, url: str) -> dict[str, Any]:
    """Preview pr_1 from scratch; what the job did, and what state holds afterwards."""
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_1", end=END, execution_time=END)
        result = preview_environment(project, store, plan, runner, url=url, now=END)
        assert result.job is not None
        intervals = store.get_intervals((s.name, s.version) for s in plan.snapshots)
        stored = store.get_results(job_id=result.job.job_id)
        record = store.get_environment("pr_1")
    finally:
        store.close()
    writes = [e for e in result.job.events if e["event"] == "write"]
    return {
        "plan": plan.plan_id,
        "tests": [(t["name"], t["passed"]) for t in result.tests],
        "intervals": intervals,
        "results": sorted(
            (r.job_id, r.plan_id, r.kind, r.name, r.passed, json.dumps(r.payload, sort_keys=True))
            for r in stored
        ),
        "record": record,
        "writes": sorted(json.dumps(w, sort_keys=True) for w in writes),
        "log": result.job.log_path,
    }


def test_both_runners_apply_the_same_writes_to_state(
    tmp_path: Path, spark_dirs: Path, local_spark: SparkSession, inprocess_paths: SparkPaths
) -> None:
    root = _project(tmp_path / "p", "wsame")
    settings = SparkSettings(master="local[2]")
    submitted = _preview(root, SubmitRunner(settings, SparkPaths(spark_dirs, tmp_path / "logs")),
                         f"sqlite:///{tmp_path / 'submit.db'}")  # fmt: skip
    in_process = _preview(root, InProcessRunner(settings, inprocess_paths),
                          f"sqlite:///{tmp_path / 'in-process.db'}")  # fmt: skip
    for key in ("plan", "tests", "intervals", "results", "record", "writes"):
        assert submitted[key] == in_process[key], key
    # What was applied: every model version's intervals (views: their marker), every audit
    # and the unit test, and the record the service committed after the job.
    assert submitted["tests"] == [("test_customers_aggregates_orders", True)]
    assert len(submitted["intervals"]) == 10
    kinds = [r[2] for r in submitted["results"]]
    assert kinds.count("unit_test") == 1 and kinds.count("audit") >= 5
    assert all(r[1] == submitted["plan"] for r in submitted["results"])
    assert submitted["record"] is not None and submitted["record"].plan_id == submitted["plan"]
    # The driver of the spark-submit run got no state URL.
    spec = json.loads(submitted["log"].with_suffix(".json").read_text())
    assert "state_url" not in spec and "submit.db" not in json.dumps(spec)
