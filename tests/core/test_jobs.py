"""The apply job runs config.yaml's before_all / after_all statements first and last."""

from __future__ import annotations

from pathlib import Path

from sluice.core import jobs
from sluice.core.model.definition import Project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.spec import JobSpec
from sluice.core.timeutil import to_ms
from sluice.core.workflow import _needs_spark
from tests.core.helpers import BASIC, load

END = to_ms("2024-01-11")
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
    "before_all:\n  - CREATE SCHEMA IF NOT EXISTS ops\n"
    "  - CREATE TABLE IF NOT EXISTS ops.runs (id INT)\n"
    "after_all:\n  - CREATE VIEW IF NOT EXISTS ops.last AS SELECT 1 AS x\n"
)


def plan_of(project: Project, base: Plan | None = None) -> Plan:
    return build_plan(
        PlanRequest(
            environment="prod",
            models=project.models,
            fingerprints=fingerprint_models(project.models, project.audits),
            base={s.name: s for s in base.snapshots} if base else {},
            base_plan_id=base.plan_id if base else None,
            end=END,
            execution_time=END,
        )
    )


def job_of(project: Project, plan: Plan) -> JobSpec:
    return jobs.apply_job(
        plan,
        audits=project.audits,
        project_dir=project.path,
        table_format="parquet",
        previous_versions=None,
        now=END,
        before_all=project.before_all,
        after_all=project.after_all,
    )


def test_before_all_runs_first_and_after_all_last(tmp_path: Path) -> None:
    project = load(tmp_path, {**BASIC, "config.yaml": CONFIG})
    steps = job_of(project, plan_of(project))["steps"]
    assert steps[0] == {
        "type": "sql",
        "id": "before_all",
        "label": "run the project's before_all statements",
        "statements": [
            "CREATE SCHEMA IF NOT EXISTS ops",
            "CREATE TABLE IF NOT EXISTS ops.runs (id INT)",
        ],
    }
    assert steps[-1]["type"] == "sql" and steps[-1].get("id") == "after_all"
    assert [s["type"] for s in steps[1:-1]].count("build") == 3
    assert steps[-2]["type"] == "views"


def test_no_statements_no_steps(tmp_path: Path) -> None:
    project = load(tmp_path, BASIC)
    steps = job_of(project, plan_of(project))["steps"]
    assert not {s.get("id") for s in steps} & jobs.ALL_STEPS


def test_the_statements_alone_do_not_start_spark(tmp_path: Path) -> None:
    # A project without models: the job would hold only before_all, an empty views step
    # and after_all, so Spark is not started for them.
    project = load(tmp_path, {"config.yaml": CONFIG})
    spec = job_of(project, plan_of(project))
    assert [s.get("id", s["type"]) for s in spec["steps"]] == ["before_all", "views", "after_all"]
    assert not _needs_spark(spec)
    with_models = load(tmp_path / "2", {**BASIC, "config.yaml": CONFIG})
    assert _needs_spark(job_of(with_models, plan_of(with_models)))
