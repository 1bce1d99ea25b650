"""core/runs.py: a scheduled run's record (issue 44), as ``sluice run`` and the service
wrap their run in it: a run that had intervals due is recorded, and one that failed even
before it had a plan; a run with nothing due leaves no record. Real projects, plans and a
SQLite state; no Spark (tests/bot/web/test_runs.py runs the service's run on the scripted
warehouse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.core import runs, workflow
from sluice.core.cli import cli
from sluice.core.errors import PlanError
from sluice.core.state import JobResult, open_state
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

START = to_ms("2024-01-01")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "models/events.sql": (
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT 1 AS id, DATE '2024-01-01' AS ds\n"
    ),
}


@pytest.fixture
def store(tmp_path: Path) -> SqlStateStore:
    made = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    project = load(tmp_path / "p", FILES)
    at = START + 3 * DAY_MS
    plan = workflow.plan_environment(project, made, "prod", end=at, execution_time=at)
    for backfill in plan.backfill:
        made.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(made, plan, now=at)
    return made


def test_a_run_with_intervals_due_is_recorded_and_one_with_none_is_not(
    store: SqlStateStore, tmp_path: Path
) -> None:
    project = load(tmp_path / "p", FILES)
    at = START + 5 * DAY_MS
    clock = iter([1_000, 4_500])
    with runs.recorded(store, "prod", now=at, clock=lambda: next(clock)) as run:
        run.plan = workflow.plan_run(project, store, "prod", now=at)
        run.tables_built = 1
    due = run.plan
    with runs.recorded(store, "prod", now=START + 3 * DAY_MS) as run:  # nothing due then
        run.plan = workflow.plan_run(project, store, "prod", now=START + 3 * DAY_MS)
        assert not run.plan.backfill
    found, total = runs.recorded_runs(store, "prod", offset=0, limit=10)
    assert total == 1
    [only] = found
    assert only.ok and only.plan_id == due.plan_id
    payload = only.payload
    assert (payload["started"], payload["finished"], payload["at"]) == (1_000, 4_500, at)
    assert payload["models"] == [
        {
            "name": "s.events",
            "version": payload["models"][0]["version"],
            "start": START + 3 * DAY_MS,
            "end": START + 5 * DAY_MS,
            "intervals": 2,
        }
    ]
    assert payload["intervals"] == 2 and payload["error"] is None
    assert runs.recorded_runs(store, "pr_1", offset=0, limit=10) == ([], 0)


def test_a_run_that_fails_before_its_plan_is_recorded_failed(
    store: SqlStateStore, tmp_path: Path
) -> None:
    changed = {**FILES, "models/events.sql": FILES["models/events.sql"].replace("1 AS", "2 AS")}
    project = load(tmp_path / "q", changed)
    with (
        pytest.raises(PlanError),
        runs.recorded(
            store, "prod", now=START + 5 * DAY_MS, scrub=lambda t: t.replace("s.events", "***")
        ) as run,
    ):
        run.plan = workflow.plan_run(project, store, "prod", now=START + 5 * DAY_MS)
    [failed], total = runs.recorded_runs(store, "prod", offset=0, limit=10)
    assert total == 1 and not failed.ok and failed.plan_id is None
    assert "is not what prod runs" in failed.payload["error"]
    assert "s.events" not in failed.payload["error"]  # through the scrubber
    assert failed.payload["models"] == [] and failed.job_id.startswith("run-prod-")


def test_sluice_run_records_a_run_it_refuses_and_not_one_with_nothing_due(
    store: SqlStateStore, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    at = "2024-01-04"  # nothing due after prod's build at START + 3 days
    done = CliRunner().invoke(cli, ["run", "prod", "--project", str(tmp_path / "p"),
                                    "--state", url, "--at", at])  # fmt: skip
    assert done.exit_code == 0 and "up to date" in done.output, done.output
    assert runs.recorded_runs(store, "prod", offset=0, limit=10)[1] == 0
    changed = {**FILES, "models/events.sql": FILES["models/events.sql"].replace("1 AS", "3 AS")}
    load(tmp_path / "r", changed)
    refused = CliRunner().invoke(cli, ["run", "prod", "--project", str(tmp_path / "r"),
                                       "--state", url, "--at", "2024-01-06"])  # fmt: skip
    assert refused.exit_code != 0 and "is not what prod runs" in refused.output
    [failed], total = runs.recorded_runs(store, "prod", offset=0, limit=10)
    assert total == 1 and not failed.ok and "is not what prod runs" in failed.payload["error"]
    assert failed.payload["at"] == to_ms("2024-01-06")


def test_results_are_paged_newest_first_by_kind_name_and_size(state_url: str) -> None:
    store = open_state(state_url)
    try:
        rows = [
            JobResult(f"j{i}", None, kind, name, True, {"i": i, "pad": "x" * (i * 10)}, i)
            for i, (kind, name) in enumerate(
                [
                    ("run", "prod"),
                    ("run", "pr_1"),
                    ("audit", "prod"),
                    ("run", "prod"),
                    ("unit_test", "t"),
                    ("run", "prod"),
                ]
            )
        ]
        store.save_results(rows)
        found, total = store.get_results_page("run", "prod", offset=0, limit=2)
        assert total == 3 and [r.payload["i"] for r in found] == [5, 3]
        found, total = store.get_results_page("run", "prod", offset=2, limit=2)
        assert total == 3 and [r.payload["i"] for r in found] == [0]
        found, total = store.get_results_page("run", None, offset=0, limit=10)
        assert total == 4 and [r.name for r in found] == ["prod", "prod", "pr_1", "prod"]
        # only payloads of at most 40 characters of JSON: i=0 and i=1 ({"i":0,"pad":""}...)
        found, total = store.get_results_page("run", None, offset=0, limit=10, max_chars=40)
        assert [r.payload["i"] for r in found] == [1, 0] and total == 2
    finally:
        store.close()
