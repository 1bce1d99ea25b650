"""Skipping a run's rebuild whose inputs did not change (sluice/core/skip.py), without
Spark: the rule, which models it may apply to, what a run plans (FULL and unique-key
models rebuilt on a new cron interval), the checks a run's job carries, the outcomes read
back, the explanation, and a driver that claims a skip the rule refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core import jobs, skip, workflow
from sluice.core.spark.results import BadResult, check
from sluice.core.state import open_state
from sluice.core.state.records import Seen
from sluice.core.state.sql import SqlStateStore
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

START = to_ms("2024-01-01")
FILES = {
    "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n",
    "external_models.yaml": "- name: raw.src\n  columns:\n    id: int\n    ds: date\n",
    "models/full.sql": "MODEL (name s.full, kind FULL);\nSELECT id, ds FROM s.v\n",
    "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id, ds FROM raw.src\n",
    "models/keyed.sql": (
        "MODEL (name s.keyed, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));\n"
        "SELECT id, ds FROM s.full\n"
    ),
    "models/clock.sql": "MODEL (name s.clock, kind FULL);\nSELECT id, current_date() AS d FROM s.full\n",
    "models/dated.sql": (
        "MODEL (name s.dated, kind FULL);\nSELECT id FROM s.full WHERE ds < @end_ds\n"
    ),
    "models/events.sql": (
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT id, ds FROM s.full WHERE ds BETWEEN @start_ds AND @end_ds\n"
    ),
}


@pytest.fixture
def store(tmp_path: Path) -> SqlStateStore:
    return open_state(f"sqlite:///{tmp_path / 'state.db'}")


def test_the_rule_skips_only_the_same_query_over_the_same_versions() -> None:
    last = Seen("k", {"a": "files:1", "b": "delta:4"}, 7)
    assert skip.decide("k", last, {"a": "files:1", "b": "delta:4"}).ran is False
    assert skip.decide("k", None, {"a": "files:1"}).code == "new"
    assert skip.decide("k2", last, {"a": "files:1", "b": "delta:4"}).code == "query"
    changed = skip.decide("k", last, {"a": "files:2", "b": "delta:4"})
    assert (changed.ran, changed.code, changed.changed) == (True, "input", ("a",))
    # An input it did not read before, or one gone, is a change; an unreadable one runs.
    assert skip.decide("k", last, {"a": "files:1"}).changed == ("b",)
    assert skip.decide("k", last, {**last.inputs, "c": "files:0"}).changed == ("c",)
    unknown = skip.decide("k", last, {"a": None, "b": "delta:4"})
    assert (unknown.ran, unknown.code) == (True, "unknown")
    # Unknown then and unknown now is not "unchanged": it still runs.
    assert skip.decide("k", Seen("k", {"a": None}, 7), {"a": None}).ran is True
    assert skip.decide("k", Seen("k", {}, 7), {}).ran is False  # SELECT 1: nothing to read


def test_a_run_rebuilds_full_and_unique_key_models_on_a_new_cron_interval(
    store: SqlStateStore, tmp_path: Path
) -> None:
    project = load(tmp_path / "p", FILES)
    at = START + 3 * DAY_MS
    plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(store, plan, now=at)
    # The same day: nothing is due; an apply's plan never rebuilds a built FULL table.
    assert workflow.plan_run(project, store, "prod", now=at + 3_600_000).backfill == ()
    later = START + 5 * DAY_MS
    applied = workflow.plan_environment(project, store, "prod", end=later, execution_time=later)
    assert [b.name for b in applied.backfill] == ["s.events"]
    run = workflow.plan_run(project, store, "prod", now=later)
    due = {b.name: b.intervals for b in run.backfill}
    day3, day5 = START + 3 * DAY_MS, START + 5 * DAY_MS
    assert due["s.full"] == due["s.keyed"] == due["s.clock"] == ((day3, day5),)
    assert len(due["s.events"]) == 2 and "s.v" not in due  # a view is never rebuilt


def test_a_runs_job_checks_the_models_that_may_be_skipped_and_says_why_not_others(
    store: SqlStateStore, tmp_path: Path
) -> None:
    project = load(tmp_path / "p", FILES)
    at = START + 3 * DAY_MS
    plan = workflow.plan_environment(project, store, "prod", end=at, execution_time=at)
    for backfill in plan.backfill:
        store.add_intervals(backfill.name, backfill.version, backfill.intervals)
    workflow.commit_plan(store, plan, now=at)
    run = workflow.plan_run(project, store, "prod", now=START + 5 * DAY_MS)
    snapshots = {s.name: s for s in run.snapshots}
    full = snapshots["s.full"]
    store.save_run_inputs({(full.name, full.version): Seen("old", {"raw.src": "files:1"}, 1)})
    spec = jobs.apply_job(
        run, audits=project.audits, project_dir=project.path, table_format="parquet",
        previous_versions=None, now=at, prod_schemas=(),
    )  # fmt: skip
    builds = [(s["model"], s["version"]) for s in spec["steps"] if s["type"] == "build"]
    always = skip.attach(run, spec["steps"], store.get_run_inputs(builds))
    checks = {s["model"]: s.get("skip") for s in spec["steps"] if s["type"] == "build"}
    # Through the view to the external table it reads; the last run's record attached.
    assert checks["s.full"] is not None and checks["s.full"]["inputs"] == ["raw.src"]
    assert checks["s.full"]["last"] == {"key": "old", "inputs": [["raw.src", "files:1"]], "at": 1}
    assert checks["s.keyed"] is not None and checks["s.keyed"]["inputs"] == [full.table]
    assert "last" not in checks["s.keyed"]
    assert checks["s.clock"] is None and "current_date()" in always["s.clock"]
    assert checks["s.events"] is None and "INCREMENTAL_BY_TIME_RANGE" in always["s.events"]
    # A query rendering the interval's dates differs each run: checked, never the same key.
    assert checks["s.dated"] is not None
    # What the driver reports comes back as the rule's decisions; those that ran recorded.
    index = {s.get("model"): i for i, s in enumerate(spec["steps"]) if s["type"] == "build"}
    step_full, step_keyed = spec["steps"][index["s.full"]], spec["steps"][index["s.keyed"]]
    results = {
        str(index["s.full"]): {
            "step": "build", "model": "s.full", "version": full.version, "table": full.table,
            "batches": 1, "skip": {"ran": True, "inputs": [["raw.src", "files:2"]]},
        },
        str(index["s.keyed"]): {
            "step": "build", "model": "s.keyed", "version": step_keyed["version"],
            "table": step_keyed["table"], "batches": 1,
            "skip": {"ran": True, "inputs": [[full.table, "files:3"]]},
        },
    }  # fmt: skip
    decided, seen = skip.outcomes(spec["steps"], results, 99)  # type: ignore[arg-type]
    assert decided["s.full"].code == "query" and decided["s.keyed"].code == "new"
    assert seen[("s.full", full.version)] == Seen(
        step_full["skip"]["key"], {"raw.src": "files:2"}, 99
    )
    lines = {line.name: line for line in skip.explain(run, decided, always)}
    assert lines["s.full"].outcome == "ran" and "query differs" in lines["s.full"].reason
    assert lines["s.v"].outcome == "nothing to run"
    assert lines["s.clock"].outcome == "ran" and "current_date()" in lines["s.clock"].reason
    assert "raw.src" not in lines  # external: never built


def test_a_driver_that_skips_what_changed_is_refused() -> None:
    step = {
        "type": "build", "label": "build s.full", "model": "s.full", "version": "v",
        "table": "t", "batches": [{"start": 0, "end": 1, "sql": "SELECT 1"}],
        "skip": {"key": "k", "inputs": ["raw.src"],
                 "last": {"key": "k", "inputs": [["raw.src", "files:1"]], "at": 1}},
    }  # fmt: skip
    result = {"step": "build", "model": "s.full", "version": "v", "table": "t", "batches": 0}
    honest = {**result, "skip": {"ran": False, "inputs": [["raw.src", "files:1"]]}}
    check(honest, 0, [step])  # type: ignore[arg-type, list-item]
    lying = {**result, "skip": {"ran": False, "inputs": [["raw.src", "files:2"]]}}
    with pytest.raises(BadResult, match="names ran False"):
        check(lying, 0, [step])  # type: ignore[arg-type, list-item]
    other = {**result, "skip": {"ran": False, "inputs": [["raw.other", "files:1"]]}}
    with pytest.raises(BadResult, match="names inputs"):
        check(other, 0, [step])  # type: ignore[arg-type, list-item]
