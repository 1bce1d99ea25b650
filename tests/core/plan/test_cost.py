"""The scan estimate: what a backfill reads, from the sizes jobs measured (real state)."""

from __future__ import annotations

from pathlib import Path

from sluice.core import workflow
from sluice.core.model.definition import Kind, KindName, Model
from sluice.core.plan.cost import estimate_scan
from sluice.core.plan.plan import Backfill
from sluice.core.snapshot.fingerprint import Fingerprint
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.state import TableSize, open_state
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import load

GB = 1024**3
D0 = to_ms("2018-01-01")


def _snap(
    name: str, kind: KindName, parents: tuple[str, ...] = (), version: str = "v1"
) -> Snapshot:
    model = Model(name, Kind(kind), query_sql="SELECT 1", depends_on=parents)
    return Snapshot(model, Fingerprint("d", "m", "p"), version)


def _days(n: int, start: int = D0) -> tuple[tuple[int, int], ...]:
    return tuple((start + i * DAY_MS, start + (i + 1) * DAY_MS) for i in range(n))


def _backfill(name: str, version: str, days: int, batch_days: int = 1) -> Backfill:
    intervals = _days(days)
    batches = tuple(
        (intervals[i][0], intervals[min(i + batch_days, days) - 1][1])
        for i in range(0, days, batch_days)
    )
    return Backfill(name, version, f"t_{name}", intervals, batches)


def test_a_time_range_parent_is_read_one_share_per_interval_others_once_a_batch() -> None:
    snapshots = {
        s.name: s
        for s in (
            _snap("raw.events", KindName.INCREMENTAL_BY_TIME_RANGE),
            _snap("raw.rates", KindName.FULL),
            _snap("mart.daily", KindName.INCREMENTAL_BY_TIME_RANGE, ("raw.events", "raw.rates")),
        )
    }
    sizes = {("raw.events", "v1"): TableSize(6 * GB, 1), ("raw.rates", "v1"): TableSize(1000, 1)}
    # raw.events holds 2,000 days; a year of mart.daily in 73 batches of 5 days reads
    # 365/2,000 of it, and the whole of raw.rates once a batch.
    filled = {("raw.events", "v1"): [(D0, D0 + 2000 * DAY_MS)]}
    scan = estimate_scan(snapshots, [_backfill("mart.daily", "v1", 365, 5)], sizes, filled)
    assert scan.bytes == {"mart.daily": 6 * GB * 365 // 2000 + 1000 * 73}
    assert scan.complete and scan.total == scan.bytes["mart.daily"]
    # A full-refresh child reads every parent whole, once.
    snapshots["mart.daily"] = _snap("mart.daily", KindName.FULL, ("raw.events", "raw.rates"))
    full = Backfill("mart.daily", "v1", "t", ((D0, D0 + DAY_MS),), ((D0, D0 + DAY_MS),))
    assert estimate_scan(snapshots, [full], sizes, filled).bytes == {"mart.daily": 6 * GB + 1000}


def test_views_are_read_through_and_a_rebuilt_parent_counts_at_its_last_measured_size() -> None:
    snapshots = {
        s.name: s
        for s in (
            _snap("raw.orders", KindName.FULL, version="v3"),  # rebuilt by this plan
            _snap("stg.orders", KindName.VIEW, ("raw.orders", "ext.fx")),
            _snap("mart.orders", KindName.FULL, ("stg.orders",)),
            _snap("seed.countries", KindName.SEED),
        )
    }
    sizes = {
        ("raw.orders", "v2"): TableSize(500, measured_ts=20),  # the latest measurement
        ("raw.orders", "v1"): TableSize(100, measured_ts=10),
        ("stg.orders", "v1"): TableSize(999_999, measured_ts=30),  # a view is not a table
    }
    plan = [_backfill("mart.orders", "v1", 1), _backfill("seed.countries", "v1", 1)]
    scan = estimate_scan(snapshots, plan, sizes, {})
    assert scan.bytes == {"mart.orders": 500}
    assert scan.unmeasured == {"mart.orders": ("ext.fx",)}  # an external table: never measured
    assert not scan.complete
    assert scan.reads("mart.orders") == "reads about 500 B, besides ext.fx (size not measured yet)"
    assert scan.reads("seed.countries") == ""  # reads no table


def test_a_parent_built_in_the_same_plan_counts_what_it_will_hold() -> None:
    snapshots = {
        s.name: s
        for s in (
            _snap("raw.events", KindName.INCREMENTAL_BY_TIME_RANGE, version="v2"),
            _snap("mart.daily", KindName.INCREMENTAL_BY_TIME_RANGE, ("raw.events",)),
        )
    }
    sizes = {("raw.events", "v1"): TableSize(1000, 1)}  # the old version, as a stand-in
    # raw.events' new version holds 10 days and gets 10 more; mart.daily backfills 5.
    filled = {("raw.events", "v2"): [(D0, D0 + 10 * DAY_MS)]}
    plan = [_backfill("raw.events", "v2", 10), _backfill("mart.daily", "v1", 5)]
    assert estimate_scan(snapshots, plan, sizes, filled).bytes["mart.daily"] == 1000 * 5 // 20


def test_the_plan_carries_the_estimate_and_its_ids_do_not_move_with_table_sizes(
    tmp_path: Path, state_url: str
) -> None:
    files = {
        "config.yaml": "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n",
        "models/raw.sql": "MODEL (name s.raw, kind FULL);\nSELECT DATE '2018-01-01' AS ds, 1 AS id",
        "models/events.sql": (
            "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
            "SELECT id, ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds"
        ),
    }
    end = to_ms("2024-01-01")
    store = open_state(state_url)
    try:
        project = load(tmp_path, files)
        first = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
        assert first.scan is not None and first.scan.bytes == {"s.events": 0}
        assert first.scan.unmeasured == {"s.events": ("s.raw",)}  # never built yet
        raw = first.snapshot("s.raw")
        store.set_table_size("s.raw", raw.version, TableSize(3 * GB, measured_ts=end))
        second = workflow.plan_environment(project, store, "prod", end=end, execution_time=end)
        events = next(b for b in second.backfill if b.name == "s.events")
        assert len(events.intervals) == 2191  # six years of days
        # s.raw is FULL: each of the 2,191 daily batches reads all of it.
        assert second.scan_bytes == 3 * GB * len(events.batches)
        assert (second.plan_id, second.content_hash) == (first.plan_id, first.content_hash)
        shown = {b["model"]: b for b in second.to_json()["backfill"]}
        assert shown["s.events"]["scan_bytes"] == second.scan_bytes
        assert second.to_json()["scan_bytes"] == second.scan_bytes
    finally:
        store.close()
