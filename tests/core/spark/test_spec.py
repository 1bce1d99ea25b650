"""The job contract (sluice/core/spark/spec.py) is what the producers emit: every job and
step they make for the example project has exactly the keys its TypedDict declares, with
values of the declared kind, and the driver has a TypedDict for every step type it runs.

No Spark here: the producers are pure, and the runner the workflow hands its jobs to is a
stand-in that keeps them.
"""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from sluice.core import jobs, skip, workflow
from sluice.core.drift.catalog import inspect_step
from sluice.core.drift.recorded import gather
from sluice.core.model.loader import load_project
from sluice.core.preview import preview_environment
from sluice.core.spark import spec
from sluice.core.spark.submit import JobResult
from sluice.core.state import open_state
from sluice.core.tablediff.result import DiffOptions, TableDiffError
from sluice.core.timeutil import to_ms

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "jaffle_shop"
# Its SCD type 2 models: the build step's `scd` key.
SCD = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects" / "scd_type_2"
END = to_ms("2018-05-01")


def step_types() -> dict[str, Any]:
    """Step type -> its TypedDict, read from the ``type`` literal of each ``Step`` member."""
    found = {}
    for member in get_args(spec.Step):
        (name,) = get_args(get_type_hints(member)["type"])
        assert name not in found, f"two TypedDicts for step type {name!r}"
        found[name] = member
    return found


def problems(value: Any, hint: Any, where: str) -> list[str]:
    """How ``value`` differs from ``hint``: keys of TypedDicts (nested ones too), and the
    kind of str, int, bool, None, literal and list values; ``Any`` is not checked."""
    if hint is Any:
        return []
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        required, optional = hint.__required_keys__, hint.__optional_keys__
        found = [f"{where}: no {key!r}" for key in sorted(required - value.keys())]
        found += [
            f"{where}: {key!r} is not declared in {hint.__name__}"
            for key in sorted(value.keys() - required - optional)
        ]
        hints = get_type_hints(hint)
        for key in sorted(value.keys() & hints.keys()):
            found += problems(value[key], hints[key], f"{where}.{key}")
        return found
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        members = get_args(hint)
        if value is None and type(None) in members:
            return []
        if isinstance(value, dict) and all(is_typeddict(m) for m in members):  # a Step
            kinds = {get_args(get_type_hints(m)["type"])[0]: m for m in members}
            if value.get("type") not in kinds:
                return [f"{where}: no step type {value.get('type')!r}"]
            return problems(value, kinds[value["type"]], where)
        tried = [problems(value, m, where) for m in members if m is not type(None)]
        return [] if any(not t for t in tried) else [p for t in tried for p in t]
    if origin is Literal:
        return [] if value in get_args(hint) else [f"{where}: {value!r} is not {hint}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{where}: {value!r} is not an object"]
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if hint in (str, int, bool):
        # JSON's true is no number: a bool where an int is declared is wrong.
        if isinstance(value, hint) and not (isinstance(value, bool) and hint is not bool):
            return []
        return [f"{where}: {value!r} is not {hint.__name__}"]
    raise AssertionError(f"{where}: the test does not know how to check {hint!r}")


class _Recorder:
    """A runner that keeps each spec and answers as if the driver had refused the work: a
    table diff refused, unit tests passed, a query without rows."""

    def __init__(self) -> None:
        self.specs: list[Any] = []

    def run(self, job: Any) -> JobResult:
        self.specs.append(job)
        answers: dict[str, Any] = {
            "table_diff": {"step": "table_diff", "error": {"message": "stand-in", "hint": None}},
            "query": {"step": "query", "columns": [], "types": [], "rows": []},
        }
        results = {}
        for index, step in enumerate(job["steps"]):
            answer = answers.get(step["type"])
            if step["type"] == "unit_test":
                answer = {"step": "unit_test", "name": step["name"], "passed": True,
                          "diff": "", "notes": []}  # fmt: skip
            if answer is not None:
                results[step.get("id", str(index))] = answer
        return JobResult(job["job_id"], results, 0.0, None)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """The jobs the producers make for the example project: apply (as apply_plan makes
    it), unit tests, a query, a preview, a table diff, a janitor run; and the apply of
    the scd_type_2 fixture project."""
    project = load_project(EXAMPLE, use_cache=False)
    runner = _Recorder()
    state = open_state(f"sqlite:///{tmp_path_factory.mktemp('spec') / 'state.db'}")
    try:
        plan = workflow.plan_environment(project, state, "prod", end=END, execution_time=END)
        restate = {name: [(plan.start or 0, plan.end)] for name in plan.restated}
        apply = jobs.apply_job(
            plan,
            audits=project.audits,
            project_dir=project.path,
            table_format=project.config.sluice.spark.table_format,
            previous_versions=None,
            now=END,
            prod_schemas=frozenset(),
            restate_ranges=restate,
        )
        workflow.commit_plan(state, plan, now=END)  # prod exists: it can be queried
        # A scheduled run a day on: its rebuilds that may be skipped carry their check.
        later = END + 86_400_000
        run_plan = workflow.plan_run(project, state, "prod", now=later)
        run = jobs.apply_job(
            run_plan,
            audits=project.audits,
            project_dir=project.path,
            table_format=project.config.sluice.spark.table_format,
            previous_versions=None,
            now=later,
            prod_schemas=frozenset(),
        )
        skip.attach(run_plan, run["steps"], {})
        drift: Any = {"job_id": "drift-prod", "kind": "drift",
                      "steps": [inspect_step(gather(state, "prod"))]}  # fmt: skip
        workflow.run_unit_tests(project, runner, pattern=None, now=END)
        sql = "SELECT * FROM jaffle.orders"
        workflow.query_environment(project, state, "prod", sql, runner, limit=10)
        pr = workflow.plan_environment(project, state, "pr_1", end=END, execution_time=END)
        preview_environment(project, state, pr, runner, now=END)
        with pytest.raises(TableDiffError, match="stand-in"):
            workflow.table_diff(
                state,
                runner,
                source="jaffle.orders",
                target="jaffle__pr_1.orders",
                options=DiffOptions(on=("order_id",)),
                now=END,
            )
    finally:
        state.close()
    janitor = jobs.janitor_job([], {}, [("jaffle.orders", "1234")], END)
    assert [job["kind"] for job in runner.specs] == ["test", "query", "preview", "table_diff"]
    scd = load_project(SCD, use_cache=False)
    scd_state = open_state(f"sqlite:///{tmp_path_factory.mktemp('spec') / 'scd.db'}")
    try:
        scd_plan = workflow.plan_environment(scd, scd_state, "prod", end=END, execution_time=END)
    finally:
        scd_state.close()
    scd_apply = jobs.apply_job(
        scd_plan,
        audits=scd.audits,
        project_dir=scd.path,
        table_format="parquet",
        previous_versions=None,
        now=END,
        prod_schemas=frozenset(),
    )
    return [apply, janitor, *runner.specs, scd_apply, drift, run]


def test_every_job_and_step_has_the_keys_its_typeddict_declares(emitted: list[Any]) -> None:
    found = [p for i, job in enumerate(emitted) for p in problems(job, spec.JobSpec, f"job{i}")]
    assert found == []


def test_the_example_exercises_every_step_type_and_optional_key(emitted: list[Any]) -> None:
    steps = [step for job in emitted for step in job["steps"]]
    assert {step["type"] for step in steps} == set(step_types())
    builds = [step for step in steps if step["type"] == "build"]
    # A SEED model, a VIEW model, a backfilled one and a Python one (customer_segments):
    # each optional key of a build.
    assert {key for step in builds for key in step} >= spec.BuildStep.__optional_keys__ - {"id"}
    assert {"environment", "plan_id", "base_plan_id"} <= emitted[0].keys()
    assert any("id" in step for step in steps)  # the preview names its steps' results


def test_every_step_type_the_driver_runs_has_a_typeddict() -> None:
    from sluice.core.spark.steps import registry  # imports no pyspark

    assert set(registry.HANDLERS) == set(step_types())
    # Each handler takes the TypedDict of the type it is registered for (the registry's
    # Handler type takes Any, so mypy does not check this pairing).
    annotations = {
        kind: inspect.signature(handler).parameters["step"].annotation
        for kind, handler in registry.HANDLERS.items()
    }
    declared = {k: a if isinstance(a, str) else a.__name__ for k, a in annotations.items()}
    assert declared == {kind: cls.__name__ for kind, cls in step_types().items()}


def test_the_check_finds_missing_undeclared_and_mistyped_keys() -> None:
    step = {"type": "query", "label": "query", "sql": "SELECT 1", "limit": 10}
    assert problems(step, spec.Step, "s") == []
    assert problems({**step, "id": "q"}, spec.Step, "s") == []
    assert problems({k: v for k, v in step.items() if k != "sql"}, spec.Step, "s") == [
        "s: no 'sql'"
    ]
    assert problems({**step, "rows": 1}, spec.Step, "s") == [
        "s: 'rows' is not declared in QueryStep"
    ]
    assert problems({**step, "limit": "10"}, spec.Step, "s") == ["s.limit: '10' is not int"]
    assert problems({**step, "type": "nope"}, spec.Step, "s") == ["s: no step type 'nope'"]
    batch: dict[str, Any] = {"start": 0, "end": 1, "sql": None, "rows": []}
    assert problems(batch, spec.BuildBatch, "b") == ["b: 'rows' is not declared in BuildBatch"]


def test_not_required_keys_are_optional_at_runtime() -> None:
    # spec.py has no `from __future__ import annotations`, which would hide NotRequired
    # from TypedDict on Python 3.11 and make every key required.
    assert spec.BuildStep.__optional_keys__ == {
        "id", "seed", "view_sql", "intervals", "python", "scd", "parents", "adopt_unmarked",
        "source", "skip",
    }  # fmt: skip
    assert spec.SqlStep.__optional_keys__ == {"id", "limit"}
    assert spec.JobSpec.__required_keys__ == {"job_id", "kind", "steps"}
