"""Audits per batch (issue 42, point 4), as SQLMesh runs them: the spec and the write
checker (no Spark; the real-Spark kill and resume is test_batch_audits_spark.py).

A table's build batch carries its audits, rendered with the batch's times (an
INCREMENTAL_BY_TIME_RANGE model's ``@this_model`` holds the batch's rows only); a batch's
intervals are recorded once that batch's blocking audits passed, never another batch's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlglot

from sluice.core import jobs
from sluice.core.errors import ExecutionError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import VIEW_MARKER
from sluice.core.spark.render import batch_rows
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.spark.spec import BuildStep, JobSpec
from sluice.core.spark.submit import run_recorded
from sluice.core.spark.writes import JobWrites, WriteRefused
from sluice.core.state import open_state
from sluice.core.state.store import StateStore
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

DAY = 86_400_000
START = to_ms("2024-01-01")
END = to_ms("2024-01-04")  # three daily batches
FILES = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
    """,
    "models/events.sql": """
        MODEL (
          name s.events,
          kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
          audits (not_null(columns := id), accepted_range_non_blocking(column := id, min_v := 0))
        );
        SELECT id, ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds
    """,
    "models/raw.sql": """
        MODEL (name s.raw, kind FULL, audits (not_null(columns := id)));
        SELECT 1 AS id, DATE'2024-01-01' AS ds
    """,
    "models/shown.sql": """
        MODEL (name s.shown, kind VIEW, audits (not_null(columns := id)));
        SELECT id FROM s.raw
    """,
}


def _job(tmp_path: Path) -> tuple[Project, JobSpec]:
    project = load(tmp_path, FILES)
    plan = plan_of(project, end=END)
    spec = jobs.apply_job(
        plan,
        audits=project.audits,
        project_dir=project.path,
        table_format="parquet",
        previous_versions=None,
        now=END,
        prod_schemas=frozenset(),
    )
    return project, spec


def _builds(spec: JobSpec) -> dict[str, BuildStep]:
    return {s["model"]: s for s in spec["steps"] if s["type"] == "build"}


def test_each_batch_carries_its_audits_rendered_for_its_range(tmp_path: Path) -> None:
    _, spec = _job(tmp_path)
    events = _builds(spec)["s.events"]
    assert [(b["start"], b["end"]) for b in events["batches"]] == [
        (START, START + DAY),
        (START + DAY, START + 2 * DAY),
        (START + 2 * DAY, END),
    ]
    for batch in events["batches"]:
        audits = batch.get("audits", [])
        assert [(a["audit"], a["blocking"], a["batch"]) for a in audits] == [
            ("not_null", True, [batch["start"], batch["end"]]),
            ("accepted_range", False, [batch["start"], batch["end"]]),
        ]
        # The audit reads the batch's rows of the table alone: its bounds, no other day's.
        sql = audits[0]["sql"]
        low, high = f"'{_ts(batch['start'])}'", f"'{_ts(batch['end'])}'"
        assert f"`ds` >= {low}" in sql and f"`ds` < {high}" in sql
        assert events["table"] in sql
    # The FULL model's one batch is audited over its whole table, as before.
    [raw] = _builds(spec)["s.raw"]["batches"]
    [check] = raw.get("audits", [])
    assert check["batch"] == [raw["start"], raw["end"]] and "`ds` >=" not in check["sql"]
    # A VIEW model has no batch: its audit is a step of its own after the view, for the
    # whole build; no audit of a table is such a step any more.
    loose = [s for s in spec["steps"] if s["type"] == "audit"]
    assert [(s["model"], "batch" in s) for s in loose] == [("s.shown", False)]


def _ts(ms: int) -> str:
    from sluice.core.timeutil import to_ts

    return to_ts(ms)


def test_batch_rows_scopes_only_the_model_s_own_table() -> None:
    sql = (
        "SELECT o.id FROM sluice__s.s__events__1 AS o "
        "WHERE o.id NOT IN (SELECT id FROM s.other) AND o.id IS NULL"
    )
    scoped = batch_rows(sql, "sluice__s.s__events__1", "ds", START, START + DAY)
    tree = sqlglot.parse_one(scoped, read="spark")
    [inner] = [t for t in tree.find_all(sqlglot.exp.Table) if t.name == "s__events__1"]
    subquery = inner.find_ancestor(sqlglot.exp.Subquery)
    assert subquery is not None and subquery.alias == "o"  # `o.id` still resolves
    assert "s.other" in scoped and "s.other WHERE" not in scoped  # other tables as named
    assert "'2024-01-01 00:00:00'" in scoped and "'2024-01-02 00:00:00'" in scoped


@pytest.fixture
def store(tmp_path: Path) -> Any:
    state = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield state
    state.close()


def _write(op: str, **fields: Any) -> dict[str, Any]:
    return {"event": "write", "op": op, **fields}


def _audit(spec: JobSpec, name: str, batch: list[int] | None, passed: bool) -> dict[str, Any]:
    scope = {} if batch is None else {"batch": batch}
    return _write("save_result", kind="audit", name=name, passed=passed,
                  payload={"violations": 0 if passed else 2}, job_id=spec["job_id"],
                  plan_id=spec["plan_id"], **scope)  # fmt: skip


def test_a_batch_is_recorded_once_its_own_blocking_audits_passed(
    tmp_path: Path, store: StateStore
) -> None:
    _, spec = _job(tmp_path)
    events = _builds(spec)["s.events"]
    key = ("s.events", events["version"])
    writes = JobWrites(spec, store)
    one, two, three = ([b["start"], b["end"]] for b in events["batches"])

    def batch(span: list[int]) -> None:
        writes.apply(_write("add_intervals", model=key[0], version=key[1], intervals=[span]))

    def recorded() -> list[tuple[int, int]]:
        return store.get_intervals([key]).get(key, [])

    # The driver's order: batch written, its audits, then its intervals.
    writes.apply(_audit(spec, "s.events:not_null", one, True))
    writes.apply(_audit(spec, "s.events:accepted_range", one, False))  # non-blocking
    batch(one)
    assert recorded() == [tuple(one)]
    # Batch two's intervals before its audit (any order): held, and batch one's pass
    # does not stand for it.
    batch(two)
    assert recorded() == [tuple(one)]
    writes.apply(_audit(spec, "s.events:not_null", two, True))
    assert recorded() == [(one[0], two[1])]  # state merges adjacent intervals
    # Batch three's blocking audit failed: never recorded, the next run builds it again.
    writes.apply(_audit(spec, "s.events:not_null", three, False))
    batch(three)
    assert recorded() == [(one[0], two[1])]
    assert writes._held == {key: [tuple(three)]}
    assert [r.name for r in store.get_results(job_id=spec["job_id"])] == [
        "s.events:not_null", "s.events:accepted_range", "s.events:not_null",
        "s.events:not_null",
    ]  # fmt: skip


def test_a_view_model_waits_for_its_whole_build_audit(tmp_path: Path, store: StateStore) -> None:
    _, spec = _job(tmp_path)
    shown = _builds(spec)["s.shown"]
    key = ("s.shown", shown["version"])
    writes = JobWrites(spec, store)
    writes.apply(_write("add_intervals", model=key[0], version=key[1],
                        intervals=[list(VIEW_MARKER)]))  # fmt: skip
    assert store.get_intervals([key]) == {}
    writes.apply(_audit(spec, "s.shown:not_null", None, True))
    assert store.get_intervals([key]) == {key: [VIEW_MARKER]}


@pytest.mark.parametrize(
    ("name", "batch", "problem"),
    [
        # A per-batch audit's result must say which batch it audited ...
        ("s.events:not_null", None, "no such audit of the whole build"),
        # ... and a batch the job builds.
        ("s.events:not_null", [START, START + 2 * DAY], "no such audit of batch"),
        ("s.events:not_null", [START, "x"], r"is not \[start, end\]"),
        # A whole-build audit names no batch.
        ("s.shown:not_null", [START, START + DAY], "no such audit of batch"),
    ],
)
def test_an_audit_result_of_another_scope_is_refused(
    tmp_path: Path, store: StateStore, name: str, batch: list[Any] | None, problem: str
) -> None:
    _, spec = _job(tmp_path)
    writes = JobWrites(spec, store)
    with pytest.raises(WriteRefused, match=problem):
        writes.apply(_audit(spec, name, batch, True))
    assert store.get_results(job_id=spec["job_id"]) == []


def test_only_an_audit_result_names_a_batch(tmp_path: Path, store: StateStore) -> None:
    spec: JobSpec = {
        "job_id": "j", "kind": "test", "plan_id": None,
        "steps": [{"type": "unit_test", "label": "t", "name": "t1", "model": "s.a", "path": "",
                   "line": 1, "inputs": [], "query": "", "expected": [], "ctes": [],
                   "grain": [], "notes": []}],
    }  # fmt: skip
    with pytest.raises(WriteRefused, match="only an audit's result names a batch"):
        JobWrites(spec, store).apply(
            _write(
                "save_result", kind="unit_test", name="t1", passed=True, payload={}, batch=[0, 1]
            )
        )


def test_the_scripted_runner_audits_each_batch_and_records_it(
    tmp_path: Path, store: StateStore
) -> None:
    project, spec = _job(tmp_path)
    warehouse = Warehouse(Script())
    runner = warehouse.runner(project, None)
    run_recorded(runner, spec, state=store)
    events = _builds(spec)["s.events"]
    key = ("s.events", events["version"])
    assert store.get_intervals([key])[key] == [(START, END)]
    results = [(r.name, r.payload.get("batch")) for r in store.get_results(job_id=spec["job_id"])]
    assert results.count(("s.events:not_null", [START, START + DAY])) == 1
    assert sum(1 for name, _ in results if name == "s.events:not_null") == 3


def test_a_scripted_blocking_violation_leaves_the_batch_unrecorded(
    tmp_path: Path, store: StateStore
) -> None:
    project, spec = _job(tmp_path)
    warehouse = Warehouse(Script(violations={"s.events:not_null": 1}))
    with pytest.raises(ExecutionError, match="not_null"):
        run_recorded(warehouse.runner(project, None), spec, state=store)
    events = _builds(spec)["s.events"]
    key = ("s.events", events["version"])
    assert store.get_intervals([key]).get(key, []) == []
