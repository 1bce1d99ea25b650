"""The output estimate: what a backfill writes, from the rows and sizes jobs measured
(pure rule, then through real state)."""

from __future__ import annotations

from pathlib import Path

from sluice.core import workflow
from sluice.core.model.definition import KindName
from sluice.core.plan.output import estimate_output
from sluice.core.plan.plan import OutputEstimate
from sluice.core.state import TableSize, open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import load
from tests.core.plan.test_cost import _backfill, _snap

MB = 1024**2


def test_a_full_refresh_writes_what_its_last_measured_table_held() -> None:
    snapshots = {"m.full": _snap("m.full", KindName.FULL, version="v2")}
    sizes = {
        ("m.full", "v0"): TableSize(1 * MB, measured_ts=1, rows=10),
        ("m.full", "v1"): TableSize(4 * MB, measured_ts=2, rows=40),  # the latest stands in
    }
    found = estimate_output(snapshots, [_backfill("m.full", "v2", 3)], sizes, {})
    assert (found.rows, found.bytes, found.unmeasured) == ({"m.full": 40}, {"m.full": 4 * MB}, ())


def test_its_own_version_measured_wins_over_a_later_other_version() -> None:
    snapshots = {"m.full": _snap("m.full", KindName.FULL, version="v1")}
    sizes = {
        ("m.full", "v1"): TableSize(2 * MB, measured_ts=1, rows=20),
        ("m.full", "v9"): TableSize(9 * MB, measured_ts=5, rows=90),
    }
    found = estimate_output(snapshots, [_backfill("m.full", "v1", 1)], sizes, {})
    assert found.rows == {"m.full": 20} and found.bytes == {"m.full": 2 * MB}


def test_a_time_range_writes_its_share_of_what_the_measured_table_held() -> None:
    snapshots = {"m.daily": _snap("m.daily", KindName.INCREMENTAL_BY_TIME_RANGE, version="v2")}
    held = list(_backfill("m.daily", "v1", 30).intervals)  # v1 held thirty days
    sizes = {("m.daily", "v1"): TableSize(30 * MB, measured_ts=1, rows=3000)}
    found = estimate_output(
        snapshots, [_backfill("m.daily", "v2", 3)], sizes, {("m.daily", "v1"): held}
    )
    assert found.rows == {"m.daily": 300} and found.bytes == {"m.daily": 3 * MB}


def test_a_time_range_whose_intervals_are_unknown_counts_whole() -> None:
    snapshots = {"m.daily": _snap("m.daily", KindName.INCREMENTAL_BY_TIME_RANGE)}
    sizes = {("m.daily", "v1"): TableSize(5 * MB, measured_ts=1, rows=50)}
    found = estimate_output(snapshots, [_backfill("m.daily", "v1", 3)], sizes, {})
    assert found.rows == {"m.daily": 50}


def test_a_new_model_is_unmeasured_and_a_size_without_rows_has_bytes_only() -> None:
    snapshots = {
        "m.new": _snap("m.new", KindName.FULL),
        "m.old": _snap("m.old", KindName.FULL),
    }
    sizes = {("m.old", "v1"): TableSize(7 * MB, measured_ts=1)}  # measured before rows were
    todo = [_backfill("m.new", "v1", 1), _backfill("m.old", "v1", 1)]
    found = estimate_output(snapshots, todo, sizes, {})
    assert (found.rows, found.bytes, found.unmeasured) == ({}, {"m.old": 7 * MB}, ("m.new",))
    assert found.writes() == "writes about 7.0 MB, besides m.new (not built yet)"


def test_the_words_say_rows_size_and_what_is_not_built() -> None:
    assert OutputEstimate({}, {}, ("a.b",)).writes() == ""
    assert OutputEstimate({"a.b": 1}, {"a.b": 10}, ()).writes() == "writes about 1 row (10 B)"
    many = OutputEstimate({"a.b": 2}, {"a.b": 10}, ("c.d", "c.e", "c.f", "c.g")).writes()
    assert many == "writes about 2 rows (10 B), besides c.d, c.e, c.f and 1 more (not built yet)"


def test_the_plan_carries_what_it_writes_and_its_ids_do_not_move(
    tmp_path: Path, state_url: str
) -> None:
    files = {
        "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n",
        "models/raw.sql": "MODEL (name s.raw, kind FULL);\nSELECT 1 AS id",
    }
    end = to_ms("2024-01-01")
    store = open_state(state_url)
    try:
        project = load(tmp_path, files)
        first = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
        assert first.output is not None and first.output.unmeasured == ("s.raw",)
        assert first.to_json()["write_rows"] is None
        raw = first.snapshot("s.raw")
        store.set_table_size("s.raw", raw.version, TableSize(MB, measured_ts=end, rows=1))
        second = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
        assert (second.plan_id, second.content_hash) == (first.plan_id, first.content_hash)
        shown = second.to_json()
        assert (shown["write_rows"], shown["write_bytes"]) == (1, MB)
        assert shown["backfill"][0]["write_rows"] == 1
    finally:
        store.close()
