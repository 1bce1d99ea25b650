"""The apply job runs config.yaml's before_all / after_all statements first and last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.core import jobs, workflow
from sluice.core.model.definition import Project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.preview import preview_environment
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.spark.spec import JobSpec
from sluice.core.spark.submit import JobResult
from sluice.core.state import open_state
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
        prod_schemas=frozenset(),
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


class _Recorder:
    """A runner standing in for Spark: keeps the specs it gets, reports nothing written."""

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.specs.append(spec)
        return JobResult(spec["job_id"], {}, 0.1, None)


def _adopt(spec: JobSpec | dict[str, Any]) -> dict[str, bool]:
    return {s["model"]: s["adopt_unmarked"] for s in spec["steps"] if s["type"] == "build"}


def test_only_versions_state_records_a_build_of_may_adopt_an_unmarked_table(
    tmp_path: Path,
) -> None:
    # A table an earlier Sluice built (before it marked its tables) is adopted by the next
    # build: the service says so in the step, from the intervals state records of that
    # very version; any other version's build refuses an unmarked table.
    project = load(tmp_path / "p", BASIC)
    plan = plan_of(project)
    versions = {s.name: s.version for s in plan.snapshots}
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        store.add_intervals("s.a", versions["s.a"], [(0, END)])
        store.add_intervals("s.b", "another-version", [(0, END)])  # not the plan's
        recorded = jobs.recorded_builds(store, ((s.name, s.version) for s in plan.snapshots))
        assert recorded == {("s.a", versions["s.a"])}
        assert _adopt(job_of(project, plan)) == {"s.a": False, "s.b": False, "s.c": False}
        spec = jobs.apply_job(
            plan,
            audits=project.audits,
            project_dir=project.path,
            table_format="parquet",
            previous_versions=None,
            now=END,
            prod_schemas=frozenset(),
            recorded=recorded,
        )
        assert _adopt(spec) == {"s.a": True, "s.b": False, "s.c": False}
        # As the service applies a plan: the flag read from state when the job is made.
        runner = _Recorder()
        workflow.apply_plan(project, store, plan, runner, now=END)
        [applied] = runner.specs
        assert _adopt(applied) == {"s.a": True, "s.b": False, "s.c": False}
    finally:
        store.close()


def test_a_preview_reads_the_flag_from_state_too(tmp_path: Path) -> None:
    project = load(tmp_path / "p", BASIC)
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        plan = workflow.plan_environment(project, store, "pr_1", end=END, execution_time=END)
        version = plan.snapshot("s.b").version
        store.add_intervals("s.b", version, [(0, END)])
        runner = _Recorder()
        preview_environment(project, store, plan, runner, now=END)
        [spec] = runner.specs
        assert _adopt(spec) == {"s.a": False, "s.b": True, "s.c": False}
    finally:
        store.close()
