"""What a PR's environment holds and which range its diffs compare, on a first run and on
a re-run that has nothing left to build (real planner, real SQLite state)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.present.comment import plan_view
from sluice.core.errors import ConflictError, ExecutionError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.preview import diff_targets, held_ranges, preview_environment, prod_tables
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.submit import JobResult
from sluice.core.state import StateStore, open_state
from sluice.core.timeutil import to_ms
from sluice.core.workflow import commit_plan, plan_environment
from tests.core.helpers import load

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
MODEL = """
    MODEL (name s.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain [ds]);
    SELECT CAST('2024-01-01' AS DATE) AS ds, {n} AS n
"""
START, END = to_ms("2024-01-20"), to_ms("2024-02-01")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    state = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    prod = load(tmp_path / "prod", {"config.yaml": CONFIG, "models/daily.sql": MODEL.format(n=0)})
    commit_plan(state, plan_environment(prod, state, PROD, end=END, execution_time=END), now=END)
    yield state
    state.close()


@pytest.fixture
def prods(store: StateStore) -> dict[str, tuple[str, str]]:
    return prod_tables(store)


def _plan(tmp_path: Path, store: StateStore) -> Plan:
    """The PR: the model changed (directly modified), its recent days built."""
    project = load(tmp_path / "pr", {"config.yaml": CONFIG, "models/daily.sql": MODEL.format(n=1)})
    return plan_environment(project, store, "pr_7", start=START, end=END,
                            execution_time=END, against=PROD)  # fmt: skip


def test_a_first_run_holds_what_it_backfills(
    tmp_path: Path, store: StateStore, prods: dict[str, tuple[str, str]]
) -> None:
    plan = _plan(tmp_path, store)
    assert [(b.start, b.end) for b in plan.backfill] == [(START, END)]
    held = held_ranges(plan, store, prods)
    assert held == {"s.daily": ((START, END),)}
    [target] = diff_targets(plan, prods, cap=5, held=held)
    assert target.where == "ds >= '2024-01-20' AND ds < '2024-02-01'"
    [row] = plan_view(plan, held=held)["backfill"]
    assert row == {
        "model": "s.daily",
        "cell": "`s.daily`",  # the name as the comment's table shows it
        "range": "2024-01-20 .. 2024-01-31",
        "intervals": 12,
    }


def test_a_re_run_still_holds_and_compares_what_was_built(
    tmp_path: Path, store: StateStore, prods: dict[str, tuple[str, str]]
) -> None:
    version = _plan(tmp_path, store).snapshot("s.daily").version
    store.add_intervals("s.daily", version, [(START, END)])
    plan = _plan(tmp_path, store)
    assert plan.backfill == ()  # nothing left to build ...
    held = held_ranges(plan, store, prods)
    assert held == {"s.daily": ((START, END),)}  # ... yet the table holds these days
    [target] = diff_targets(plan, prods, cap=5, held=held)
    assert target.where == "ds >= '2024-01-20' AND ds < '2024-02-01'"
    view = plan_view(plan, held=held)
    assert view["backfill_title"] == f"Built in {plan.environment}"
    assert [r["range"] for r in view["backfill"]] == ["2024-01-20 .. 2024-01-31"]


def test_a_table_holding_two_ranges_compares_both(
    tmp_path: Path, store: StateStore, prods: dict[str, tuple[str, str]]
) -> None:
    version = _plan(tmp_path, store).snapshot("s.daily").version
    early = (to_ms("2024-01-01"), to_ms("2024-01-05"))  # built by another environment
    store.add_intervals("s.daily", version, [early])
    plan = _plan(tmp_path, store)
    held = held_ranges(plan, store, prods)
    assert held == {"s.daily": (early, (START, END))}
    [target] = diff_targets(plan, prods, cap=5, held=held)
    assert target.where == (
        "(ds >= '2024-01-01' AND ds < '2024-01-05') OR (ds >= '2024-01-20' AND ds < '2024-02-01')"
    )
    [row] = plan_view(plan, held=held)["backfill"]
    assert row["range"] == "2024-01-01 .. 2024-01-04, 2024-01-20 .. 2024-01-31"
    assert row["intervals"] == 4 + 12


def test_a_version_prod_uses_is_not_the_environments_own(
    tmp_path: Path, store: StateStore, prods: dict[str, tuple[str, str]]
) -> None:
    plan = _plan(tmp_path, store)
    version = plan.snapshot("s.daily").version
    store.add_intervals("s.daily", version, [(to_ms("2023-12-01"), END)])
    same = {"s.daily": ("t", version)}
    assert held_ranges(plan, store, same) == {}


class _Recorder:
    """A runner standing in for Spark: records the specs it gets; fails when told to."""

    def __init__(self, error: Exception | None = None) -> None:
        self.specs: list[dict[str, Any]] = []
        self.error = error

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.specs.append(spec)
        if self.error is not None:
            raise self.error
        return JobResult(spec["job_id"], {}, 0.1, None)


def _pr_project(tmp_path: Path) -> Project:
    return load(tmp_path / "pr", {"config.yaml": CONFIG, "models/daily.sql": MODEL.format(n=1)})


def test_a_preview_commits_its_environment_once_the_job_succeeded(
    tmp_path: Path, store: StateStore
) -> None:
    plan = _plan(tmp_path, store)
    runner = _Recorder()
    preview_environment(_pr_project(tmp_path), store, plan, runner, url="sqlite:///x.db", now=END)
    [spec] = runner.specs
    assert "state_url" not in spec and "sqlite:///x.db" not in json.dumps(spec)
    assert [s["type"] for s in spec["steps"]] == ["sql", "build", "views", "table_diff"]
    record = store.get_environment("pr_7")
    assert record is not None and record.plan_id == plan.plan_id


def test_a_failed_preview_commits_nothing(tmp_path: Path, store: StateStore) -> None:
    plan = _plan(tmp_path, store)
    runner = _Recorder(ExecutionError("Spark job failed at step 'table diff s.daily': boom"))
    with pytest.raises(ExecutionError, match="boom"):
        preview_environment(
            _pr_project(tmp_path), store, plan, runner, url="sqlite:///x.db", now=END
        )
    assert store.get_environment("pr_7") is None


def test_a_stale_preview_is_refused_before_its_job_starts(
    tmp_path: Path, store: StateStore
) -> None:
    plan = _plan(tmp_path, store)
    # Another push of the PR, applied first.
    pushed = load(tmp_path / "push", {"config.yaml": CONFIG, "models/daily.sql": MODEL.format(n=2)})
    moved = plan_environment(pushed, store, "pr_7", start=START, end=END, execution_time=END,
                             against=PROD)  # fmt: skip
    commit_plan(store, moved, now=END - 1)
    runner = _Recorder()
    with pytest.raises(ConflictError, match="environment 'pr_7' changed since this plan was made"):
        preview_environment(
            _pr_project(tmp_path), store, plan, runner, url="sqlite:///x.db", now=END
        )
    assert runner.specs == []
