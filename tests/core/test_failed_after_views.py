"""A job that fails after its views step (issue 45's crash trials): the views already read
the plan's versions, so the environment's record is committed to the plan all the same and
the failure is raised as FailedAfterViews; before the fix a promotion out of time after
prod's views swap said "Promotion failed; prod is unchanged" with prod's views swapped and
its record not, and a PR build left views no record named.

The jobs run on the scripted runner (sluice/core/spark/scripted.py: the product's job
specs, write checks and records, no Spark); the step after the views is the project's
``after_all`` statements, failing as Spark would report, or the driver lost there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.errors import DriverLost, ExecutionError, FailedAfterViews
from sluice.core.preview import preview_environment
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.state import open_state
from sluice.core.state.store import StateStore
from sluice.core.timeutil import to_ms
from tests.core.helpers import BASIC, load

END = to_ms("2024-01-11")
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    "after_all:\n  - CREATE VIEW IF NOT EXISTS ops.last AS SELECT 1 AS x\n"
)
AFTER_ALL = "run the project's after_all statements"
BUILD_B = "build s.b*"
ERROR = "AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] ops is gone"


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    opened = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened  # type: ignore[misc]
    opened.close()


def test_a_promotion_failing_after_its_views_swap_commits_prod_to_the_plan(
    tmp_path: Path, store: StateStore
) -> None:
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
    warehouse = Warehouse(Script(fail={AFTER_ALL: ERROR}))
    with pytest.raises(FailedAfterViews) as failed:
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=END)
    # prod's views read the plan's tables, and its record says so: all new, not half.
    record = store.get_environment("prod")
    assert record is not None and record.plan_id == plan.plan_id
    for snapshot in plan.snapshots:
        assert warehouse.reads(snapshot.name) == snapshot.table, snapshot.name
    assert "ops is gone" in failed.value.message
    assert "record was committed to that plan" in failed.value.message
    assert isinstance(failed.value, ExecutionError)  # callers that knew only that still do


def test_a_promotion_failing_before_its_views_leaves_prod_as_it_was(
    tmp_path: Path, store: StateStore
) -> None:
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
    warehouse = Warehouse(Script(fail={BUILD_B: ERROR}))
    with pytest.raises(ExecutionError) as failed:
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=END)
    assert not isinstance(failed.value, FailedAfterViews)
    assert store.get_environment("prod") is None
    assert warehouse.reads("s.a") is None  # no view was made


def test_a_driver_lost_after_the_views_is_run_again_not_committed(
    tmp_path: Path, store: StateStore
) -> None:
    # Lost, the job is run again by its caller (the worker), which re-plans against the
    # unchanged record and finishes: the record is not committed here.
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
    warehouse = Warehouse(Script(lose=AFTER_ALL))
    with pytest.raises(DriverLost):
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=END)
    assert store.get_environment("prod") is None


def test_a_pr_build_failing_after_its_views_records_its_environment(
    tmp_path: Path, store: StateStore
) -> None:
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    prod = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
    workflow.apply_plan(project, store, prod, Warehouse(Script()).runner(), now=END)
    changed = load(
        tmp_path / "q",
        {
            **BASIC,
            "config.yaml": CONFIG,
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'y' AS name\n",
        },
    )
    plan = workflow.plan_environment(
        changed, store, "pr_7", end=END, execution_time=END, against="prod"
    )
    warehouse = Warehouse(Script(fail={AFTER_ALL: ERROR}))
    with pytest.raises(FailedAfterViews):
        preview_environment(changed, store, plan, warehouse.runner(), now=END)
    record = store.get_environment("pr_7")
    assert record is not None and record.plan_id == plan.plan_id
    assert {r.name for r in record.snapshots} == {"s.a", "s.b", "s.c"}
