"""The state store against real SQLite and PostgreSQL databases."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from sluice.core.errors import ConflictError, StateError
from sluice.core.state import (
    EnvironmentRecord,
    PlanRecord,
    SnapshotRef,
    StateStore,
    StoredSnapshot,
    TableSize,
    open_state,
)


@pytest.fixture
def store(state_url: str) -> Iterator[StateStore]:
    opened = open_state(state_url)
    yield opened
    opened.close()


def snap(name: str, identifier: str, version: str = "v1", **payload: Any) -> StoredSnapshot:
    return StoredSnapshot(name, identifier, version, {"kind": "FULL", **payload})


def env(name: str, plan_id: str, *refs: SnapshotRef, **extra: Any) -> EnvironmentRecord:
    return EnvironmentRecord(name=name, snapshots=refs, plan_id=plan_id, **extra)


def race(url: str, attempts: list[Callable[[StateStore], None]]) -> list[BaseException | None]:
    """Run each attempt in its own thread with its own store, released together."""
    stores = [open_state(url) for _ in attempts]
    barrier = threading.Barrier(len(attempts))
    outcomes: list[BaseException | None] = [None] * len(attempts)

    def run(i: int) -> None:
        barrier.wait()
        try:
            attempts[i](stores[i])
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(attempts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for s in stores:
        s.close()
    return outcomes


def test_snapshots_round_trip_and_push_is_idempotent(store: StateStore) -> None:
    a = snap("jaffle.orders", "aa11", nested={"cols": ["id", "amount"], "n": 1.5})
    b = snap("jaffle.customers", "bb22", "v7", unicode="café ✓")
    store.push_snapshots([a, b])
    store.push_snapshots([a, b, a])
    # Insert-if-absent: a second push with the same key does not overwrite.
    store.push_snapshots([snap("jaffle.orders", "aa11", payload_changed=True)])
    got = store.get_snapshots([a.id, b.id, ("jaffle.orders", "missing")])
    assert got == {a.id: a, b.id: b}
    assert store.get_snapshots([]) == {}


def test_get_many_snapshots_in_few_queries(store: StateStore) -> None:
    store.push_snapshots(snap(f"s.m{i:04d}", f"{i:x}") for i in range(1300))
    wanted = [(f"s.m{i:04d}", f"{i:x}") for i in range(0, 1300, 13)] + [
        (f"s.m{i:04d}", f"{i:x}") for i in range(1300) if i % 13
    ][:1100]
    assert len(set(wanted)) == 1200
    missing = [(f"s.x{i}", "0") for i in range(50)]

    statements: list[str] = []
    engine = store.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    got = store.get_snapshots(wanted + missing)
    assert set(got) == set(wanted)
    assert all(got[k].id == k for k in wanted)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert 1 <= len(selects) <= 5


def test_delete_snapshots(store: StateStore) -> None:
    snaps = [snap("s.t", f"{i}") for i in range(1100)]
    store.push_snapshots(snaps)
    store.delete_snapshots(s.id for s in snaps[:1050])
    store.delete_snapshots([("s.t", "not-there")])
    assert set(store.get_snapshots(s.id for s in snaps)) == {s.id for s in snaps[1050:]}


def test_intervals_merge_and_stay_per_table(store: StateStore) -> None:
    store.add_intervals("s.t", "v1", [(10, 20), (0, 10)])
    assert store.get_intervals([("s.t", "v1")]) == {("s.t", "v1"): [(0, 20)]}
    store.add_intervals("s.t", "v1", [(15, 30), (40, 50)])
    store.add_intervals("s.t", "v2", [(0, 5)])
    store.add_intervals("s.u", "v1", [(100, 200)])
    store.add_intervals("s.t", "v1", [])
    got = store.get_intervals([("s.t", "v1"), ("s.t", "v2"), ("s.u", "v1"), ("s.none", "v1")])
    assert got == {
        ("s.t", "v1"): [(0, 30), (40, 50)],
        ("s.t", "v2"): [(0, 5)],
        ("s.u", "v1"): [(100, 200)],
    }
    # Filling the gap joins everything; re-adding what is there changes nothing.
    store.add_intervals("s.t", "v1", [(30, 40), (0, 50)])
    assert store.get_intervals([("s.t", "v1")]) == {("s.t", "v1"): [(0, 50)]}


def test_table_sizes_keep_the_last_measurement_and_go_with_their_table(
    store: StateStore,
) -> None:
    store.set_table_size("s.t", "v1", TableSize(100, measured_ts=1))
    store.set_table_size("s.t", "v1", TableSize(250, measured_ts=2))
    store.set_table_size("s.t", "v2", TableSize(0, measured_ts=3))
    store.set_table_size("s.u", "v1", TableSize(7, measured_ts=4))
    assert store.get_table_sizes(["s.t", "s.none"]) == {
        ("s.t", "v1"): TableSize(250, 2),
        ("s.t", "v2"): TableSize(0, 3),
    }
    with pytest.raises(ValueError, match="negative"):
        store.set_table_size("s.t", "v1", TableSize(-1, measured_ts=5))
    with pytest.raises(ValueError, match="negative"):
        store.set_table_size("s.t", "v1", TableSize(1, measured_ts=5, rows=-1))
    # The rows counted with it are kept with it, and a later count replaces them.
    store.set_table_size("s.w", "v1", TableSize(64, measured_ts=5, rows=3))
    assert store.get_table_sizes(["s.w"]) == {("s.w", "v1"): TableSize(64, 5, rows=3)}
    store.set_table_size("s.w", "v1", TableSize(80, measured_ts=6, rows=4))
    assert store.get_table_sizes(["s.w"]) == {("s.w", "v1"): TableSize(80, 6, rows=4)}
    store.add_intervals("s.t", "v1", [(0, 10)])
    store.forget_tables([("s.t", "v1")])  # the janitor dropped the table
    assert store.get_table_sizes(["s.t", "s.u"]) == {
        ("s.t", "v2"): TableSize(0, 3),
        ("s.u", "v1"): TableSize(7, 4),
    }
    many = [f"s.m{i}" for i in range(1200)]  # more names than one IN list takes
    for name in many[::300]:
        store.set_table_size(name, "v1", TableSize(1, measured_ts=6))
    assert len(store.get_table_sizes(many)) == 4


def test_remove_intervals_splits(store: StateStore) -> None:
    store.add_intervals("s.t", "v1", [(0, 30), (40, 50)])
    store.remove_intervals("s.t", "v1", 5, 8)
    assert store.get_intervals([("s.t", "v1")])[("s.t", "v1")] == [(0, 5), (8, 30), (40, 50)]
    store.remove_intervals("s.t", "v1", 25, 45)
    assert store.get_intervals([("s.t", "v1")])[("s.t", "v1")] == [(0, 5), (8, 25), (45, 50)]
    store.remove_intervals("s.t", "v1", -100, 100)
    assert store.get_intervals([("s.t", "v1")]) == {}


def test_empty_interval_is_rejected(store: StateStore) -> None:
    with pytest.raises(ValueError, match="empty or reversed"):
        store.add_intervals("s.t", "v1", [(5, 5)])
    with pytest.raises(ValueError):
        store.remove_intervals("s.t", "v1", 9, 3)


def test_environment_insert_and_cas(store: StateStore) -> None:
    ref = SnapshotRef("jaffle.orders", "aa11", "v1")
    first = env("dev", "p1", ref, start=0, end=86_400_000, expiration_ts=99, updated_ts=1)
    store.update_environment(first, None)
    assert store.get_environment("dev") == first
    assert store.get_environment("nope") is None

    other = SnapshotRef("jaffle.customers", "bb", "v2")
    second = env("dev", "p2", ref, other, previous_plan_id="p1", updated_ts=2)
    store.update_environment(second, "p1")
    assert store.get_environment("dev") == second

    with pytest.raises(ConflictError) as stale:
        store.update_environment(env("dev", "p3", updated_ts=3), "p1")
    text = str(stale.value)
    assert "dev" in text and "re-run" in text and "'p1'" in text and "'p2'" in text
    assert store.get_environment("dev") == second  # the loser changed nothing

    with pytest.raises(ConflictError, match="already exists"):
        store.update_environment(env("dev", "p4"), None)
    with pytest.raises(ConflictError, match="no longer exists"):
        store.update_environment(env("ghost", "p1"), "p0")


def test_invalidate_list_recreate_delete(store: StateStore) -> None:
    store.update_environment(env("prod", "p1"), None)
    store.update_environment(env("dev", "p9"), None)
    store.invalidate_environment("dev")
    listed = store.list_environments()
    assert [(e.name, e.invalidated) for e in listed] == [("dev", True), ("prod", False)]

    # An invalidated environment is re-created by CAS on its current plan.
    store.update_environment(env("dev", "p10", previous_plan_id="p9"), "p9")
    dev = store.get_environment("dev")
    assert dev is not None and not dev.invalidated and dev.plan_id == "p10"

    with pytest.raises(StateError, match="no such environment") as missing:
        store.invalidate_environment("stage")
    assert "dev, prod" in str(missing.value)

    store.delete_environment("dev")
    store.delete_environment("dev")  # deleting twice is fine
    assert [e.name for e in store.list_environments()] == ["prod"]


def test_plans_are_saved_once(store: StateStore) -> None:
    plan = PlanRecord("p1", "dev", None, 1_700_000_000_000, {"steps": [1, 2], "why": "x"})
    store.save_plan(plan)
    store.save_plan(plan)
    store.save_plan(PlanRecord("p1", "other", "p0", 0, {}))  # idempotent on plan_id
    assert store.get_plan("p1") == plan
    assert store.get_plan("p2") is None


def test_state_survives_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'reopen.db'}"
    first = open_state(url)
    first.push_snapshots([snap("s.t", "a")])
    first.add_intervals("s.t", "v1", [(0, 10)])
    first.update_environment(env("dev", "p1", snap("s.t", "a").ref), None)
    first.save_plan(PlanRecord("p1", "dev", None, 5, {}))
    first.close()

    second = open_state(url)
    try:
        assert second.get_snapshots([("s.t", "a")])[("s.t", "a")] == snap("s.t", "a")
        assert second.get_intervals([("s.t", "v1")]) == {("s.t", "v1"): [(0, 10)]}
        dev = second.get_environment("dev")
        assert dev is not None and dev.snapshots == (SnapshotRef("s.t", "a", "v1"),)
        assert second.get_plan("p1") is not None
    finally:
        second.close()


def test_concurrent_cas_has_exactly_one_winner(state_url: str) -> None:
    def cas(plan_id: str, expected: str | None) -> Callable[[StateStore], None]:
        return lambda s: s.update_environment(env("dev", plan_id), expected)

    # Rounds: first both create the environment, then both update it from the same plan.
    current: str | None = None
    for round_no in range(4):
        names = (f"a{round_no}", f"b{round_no}")
        outcomes = race(state_url, [cas(p, current) for p in names])
        winners = [p for p, o in zip(names, outcomes, strict=True) if o is None]
        losers = [o for o in outcomes if o is not None]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert isinstance(losers[0], ConflictError)
        assert winners[0] in str(losers[0])  # the loser is told which plan won
        current = winners[0]

    final = open_state(state_url)
    try:
        got = final.get_environment("dev")
        assert got is not None and got.plan_id == current
    finally:
        final.close()


def test_concurrent_interval_writers_lose_nothing(state_url: str) -> None:
    def writer(first: int) -> Callable[[StateStore], None]:
        def write(s: StateStore) -> None:
            # Interleaved, adjacent slices: every write merges with another thread's rows.
            for j in range(first, 20, 4):
                s.add_intervals("s.t", "v1", [(j * 10, j * 10 + 10)])

        return write

    outcomes = race(state_url, [writer(i) for i in range(4)])
    assert outcomes == [None] * 4
    reader = open_state(state_url)
    try:
        assert reader.get_intervals([("s.t", "v1")]) == {("s.t", "v1"): [(0, 200)]}
    finally:
        reader.close()
