"""The commit a plan's project came from (state migration 6): recorded by the promotion that
applies it, carried on by the plans that change no model (a scheduled run, a drift repair:
prod's models are still the promoted commit's), known by no other. Prod's service jobs
load prod's project there (sluice/bot/flow/drift_repair.py: ``promoted_project``).

The jobs run on the scripted runner (sluice/core/spark/scripted.py: the product's job specs,
write checks and records, no Spark).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from sluice.core.state.store import StateStore
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import BASIC, load

START = to_ms("2024-01-05")
C, D = "c" * 40, "d" * 40


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    opened = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield opened
    opened.close()


def _promote(store: StateStore, root: Path, files: dict[str, str], at: int, commit: str | None):
    project = load(root, files)
    plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
    workflow.apply_plan(project, store, plan, Warehouse().runner(), now=at, commit=commit)
    return project, plan


def test_a_promotion_records_its_commit_and_a_run_carries_it_on(
    tmp_path: Path, store: StateStore
) -> None:
    project, plan = _promote(store, tmp_path / "p", BASIC, START, C)
    assert workflow.plan_commit(store, "prod") == (plan.plan_id, C)
    # A scheduled run two days later changes no model: its plan keeps C, given no commit
    # (as the CLI's `sluice run` gives none).
    at = START + 2 * DAY_MS
    run = workflow.plan_run(project, store, "prod", now=at)
    assert run.backfill and run.plan_id != plan.plan_id
    workflow.apply_plan(project, store, run, Warehouse().runner(), now=at)
    assert workflow.plan_commit(store, "prod") == (run.plan_id, C)


def test_a_plan_changing_a_model_without_a_commit_records_none(
    tmp_path: Path, store: StateStore
) -> None:
    _promote(store, tmp_path / "p", BASIC, START, C)
    changed = {**BASIC, "models/a.sql": BASIC["models/a.sql"].replace("'x'", "'y'")}
    # (as `sluice apply prod` from a checkout: which commit it is, nobody recorded)
    _, plan = _promote(store, tmp_path / "q", changed, START + DAY_MS, None)
    assert plan.changes_models
    assert workflow.plan_commit(store, "prod") == (plan.plan_id, None)
    # ... and the next promotion records its own again.
    back = {**changed, "models/a.sql": BASIC["models/a.sql"]}
    _, again = _promote(store, tmp_path / "r", back, START + 2 * DAY_MS, D)
    assert workflow.plan_commit(store, "prod") == (again.plan_id, D)


def test_a_new_environment_from_prod_and_a_missing_one_know_no_commit(
    tmp_path: Path, store: StateStore
) -> None:
    project, _ = _promote(store, tmp_path / "p", BASIC, START, C)
    plan = workflow.plan_environment(project, store, "pr_7", end=START, execution_time=START)
    workflow.apply_plan(project, store, plan, Warehouse().runner(), now=START)
    assert workflow.plan_commit(store, "pr_7") == (plan.plan_id, None)  # not a promotion
    assert workflow.plan_commit(store, "pr_8") is None
