"""The janitor drops the views a job cut short left with no record (issue 45's crash
trials: PR builds stopped between their views step and their record left ``<schema>__pr_N``
views no record named, for good once the PR was closed).

The plan is the intent: it is recorded, with its environment and versions, before the job
that makes its views starts. The janitor finds the plans of environments no record names,
once they are quiet (no job can still be making their views) and no running job builds
them, holds each such environment with an invalidated record of its own (a job that starts
then refuses to), drops the views its plans could have made, and marks those plans so it
does not visit them again. Never prod's, never an environment with a live record.

The jobs run on the scripted runner (sluice/core/spark/scripted.py: the product's specs,
records and drop step; its warehouse keeps the views); the cut is the driver lost in the
step after the views (the project's ``after_all``), as a kill there leaves it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.errors import ConflictError, DriverLost
from sluice.core.model.definition import Project
from sluice.core.preview import preview_environment
from sluice.core.snapshot.naming import PROD, view_name
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.state import open_state
from sluice.core.state.store import StateStore
from sluice.core.timeutil import to_ms
from tests.core.helpers import BASIC, load

END = to_ms("2024-01-11")
QUIET = 60_000
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    "after_all:\n  - CREATE VIEW IF NOT EXISTS ops.last AS SELECT 1 AS x\n"
)
AFTER_ALL = "run the project's after_all statements"
PR = "pr_7"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    opened = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened
    opened.close()


def _leak(tmp_path: Path, store: StateStore, warehouse: Warehouse) -> Project:
    """Prod built; PR 7's build cut after its views step, before its record."""
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    prod = workflow.plan_environment(project, store, PROD, end=END, execution_time=END)
    workflow.apply_plan(project, store, prod, warehouse.runner(), now=END)
    changed = load(
        tmp_path / "q",
        {
            **BASIC,
            "config.yaml": CONFIG,
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'y' AS name\n",
        },
    )
    plan = workflow.plan_environment(changed, store, PR, end=END, execution_time=END, against=PROD)
    warehouse.script = Script(lose=AFTER_ALL)
    with pytest.raises(DriverLost):
        preview_environment(changed, store, plan, warehouse.runner(), now=END)
    warehouse.script = Script()
    assert store.get_environment(PR) is None
    return project


def _pr_views(warehouse: Warehouse) -> list[str]:
    return sorted(v for v in warehouse.views if f"__{PR}." in v)


def test_views_no_record_names_are_dropped_once_quiet(tmp_path: Path, store: StateStore) -> None:
    warehouse = Warehouse()
    _leak(tmp_path, store, warehouse)
    leaked = _pr_views(warehouse)
    assert leaked == [view_name(m, PR) for m in ("s.a", "s.b", "s.c")]
    prod_views = {m: warehouse.reads(m) for m in ("s.a", "s.b", "s.c")}
    report = workflow.run_janitor(
        store, warehouse.runner(), now=END + QUIET, table_ttl_ms=10**12, quiet_ms=QUIET
    )
    assert report.environments == (PR,)
    assert _pr_views(warehouse) == []
    assert "s__pr_7" not in warehouse.schemas
    assert {m: warehouse.reads(m) for m in ("s.a", "s.b", "s.c")} == prod_views  # prod's kept
    assert store.get_environment(PR) is None  # the janitor's hold is gone with them
    # Its plan is marked: the next pass has nothing to do, and runs no job.
    jobs = len(warehouse.jobs)
    again = workflow.run_janitor(
        store, warehouse.runner(), now=END + 2 * QUIET, table_ttl_ms=10**12, quiet_ms=QUIET
    )
    assert again.environments == () and len(warehouse.jobs) == jobs


def test_views_of_a_plan_recorded_lately_or_of_a_running_build_are_left(
    tmp_path: Path, store: StateStore
) -> None:
    warehouse = Warehouse()
    _leak(tmp_path, store, warehouse)
    leaked = _pr_views(warehouse)
    # Recorded less than quiet_ms ago: its job may still be making them.
    early = workflow.run_janitor(
        store, warehouse.runner(), now=END + QUIET - 1, table_ttl_ms=10**12, quiet_ms=QUIET
    )
    assert early.environments == () and _pr_views(warehouse) == leaked
    # A job the queue says runs builds it: left, and no hold stays behind.
    asked: list[str] = []

    def busy(environment: str) -> bool:
        asked.append(environment)
        return environment == PR

    late = workflow.run_janitor(
        store,
        warehouse.runner(),
        now=END + QUIET,
        table_ttl_ms=10**12,
        quiet_ms=QUIET,
        busy=busy,
    )
    assert late.environments == () and _pr_views(warehouse) == leaked
    assert PR in asked
    assert store.get_environment(PR) is None
    # Once it is not running any more, they go.
    done = workflow.run_janitor(
        store, warehouse.runner(), now=END + QUIET, table_ttl_ms=10**12, quiet_ms=QUIET
    )
    assert done.environments == (PR,) and _pr_views(warehouse) == []


def test_a_live_environment_and_prod_keep_their_views(tmp_path: Path, store: StateStore) -> None:
    warehouse = Warehouse()
    project = load(tmp_path / "p", {**BASIC, "config.yaml": CONFIG})
    prod = workflow.plan_environment(project, store, PROD, end=END, execution_time=END)
    workflow.apply_plan(project, store, prod, warehouse.runner(), now=END)
    dev = workflow.plan_environment(project, store, "dev", end=END, execution_time=END)
    workflow.apply_plan(project, store, dev, warehouse.runner(), now=END, keep=True)
    views = dict(warehouse.views)
    report = workflow.run_janitor(
        store, warehouse.runner(), now=END + 10 * QUIET, table_ttl_ms=10**12, quiet_ms=QUIET
    )
    assert report.environments == ()
    assert warehouse.views == views


def test_a_job_refuses_to_start_on_an_environment_the_janitor_holds(
    tmp_path: Path, store: StateStore
) -> None:
    warehouse = Warehouse()
    project = _leak(tmp_path, store, warehouse)
    plan = workflow.plan_environment(project, store, PR, end=END, execution_time=END)
    hold = workflow.EnvironmentRecord(
        name=PR,
        snapshots=(),
        plan_id=f"{workflow.JANITOR_HOLDS}{END}",
        previous_plan_id=None,
        start=None,
        end=None,
        expiration_ts=None,
        invalidated=True,
        updated_ts=END,
    )
    store.update_environment(hold, expected_plan_id=None)
    again = workflow.plan_environment(project, store, PR, end=END, execution_time=END)
    for each in (plan, again):  # planned before the hold, or against it
        with pytest.raises(ConflictError, match="being cleared by the janitor"):
            workflow.apply_plan(project, store, each, warehouse.runner(), now=END)
