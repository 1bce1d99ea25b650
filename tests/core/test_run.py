"""`sluice run` without Spark: what a scheduled run plans (exactly the due intervals, or
nothing), and that it refuses a checkout that is not what the environment runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.errors import PlanError
from sluice.core.state import open_state
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

START = to_ms("2024-01-01")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "models/raw.sql": "MODEL (name s.raw, kind FULL);\nSELECT 1 AS id, DATE '2024-01-01' AS ds\n",
    "models/events.sql": (
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT id, ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds\n"
    ),
}


@pytest.fixture
def store(tmp_path: Path) -> SqlStateStore:
    return open_state(f"sqlite:///{tmp_path / 'state.db'}")


def _applied(store: SqlStateStore, root: Path, at: int) -> None:
    """Prod applied at ``at``, as if its job built everything."""
    project = load(root, FILES)
    plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(store, plan, now=at)


def test_a_run_plans_exactly_the_due_intervals_and_then_nothing(
    store: SqlStateStore, tmp_path: Path
) -> None:
    _applied(store, tmp_path / "p", START + 3 * DAY_MS)
    project = load(tmp_path / "p", FILES)
    at = START + 5 * DAY_MS + 3_600_000  # two days later, one hour into the third
    plan = workflow.plan_run(project, store, "prod", now=at)
    assert not plan.has_changes
    due = {b.name: b.intervals for b in plan.backfill}
    day3, day4, day5 = (START + d * DAY_MS for d in (3, 4, 5))
    assert due["s.events"] == ((day3, day4), (day4, day5))  # complete days only
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    assert workflow.plan_run(project, store, "prod", now=at).backfill == ()
    # Missed schedules: one run catches every missed day up at once.
    late = workflow.plan_run(project, store, "prod", now=START + 30 * DAY_MS)
    assert len(dict((b.name, b.intervals) for b in late.backfill)["s.events"]) == 25


def test_a_run_refuses_a_checkout_that_is_not_what_the_environment_runs(
    store: SqlStateStore, tmp_path: Path
) -> None:
    with pytest.raises(PlanError, match="environment 'prod' does not exist"):
        workflow.plan_run(load(tmp_path / "p", FILES), store, "prod", now=START + DAY_MS)
    _applied(store, tmp_path / "p", START + 3 * DAY_MS)
    edited = {**FILES, "models/raw.sql": FILES["models/raw.sql"].replace("1 AS id", "2 AS id")}
    with pytest.raises(PlanError, match=r"not what prod runs: s\.events, s\.raw differ") as err:
        workflow.plan_run(load(tmp_path / "q", edited), store, "prod", now=START + 5 * DAY_MS)
    assert "apply this one first" in (err.value.hint or "")
