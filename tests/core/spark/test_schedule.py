"""Concurrent builds: the scheduler's units and pool (pure), and the driver's run_job on
fake step handlers (the scheduling, events, writes and failures are the real code; only
Spark is a fake). Real Spark: tests/core/spark/test_concurrent_builds.py."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

import pytest

from sluice.core.spark import driver, schedule
from sluice.core.spark.schedule import ScheduleError, Unit
from sluice.core.spark.steps.context import StepContext
from sluice.core.spark.writes import JobWrites

WAIT = 30  # seconds a barrier waits before the test fails (never reached when correct)


def build(model: str, parents: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "type": "build",
        "label": f"build {model}",
        "model": model,
        "version": f"v_{model}",
        "table": f"t_{model}",
        "batches": [{"start": 0, "end": 10, "sql": "x"}, {"start": 10, "end": 20, "sql": "x"}],
        "restate": [],
        **extra,
    }
    if parents is not None:
        step["parents"] = parents
    return step


def audit(model: str, name: str = "not_null", blocking: bool = True) -> dict[str, Any]:
    return {
        "type": "audit",
        "label": f"audit {model}: {name}",
        "model": model,
        "version": f"v_{model}",
        "audit": name,
        "blocking": blocking,
        "sql": "x",
    }


def sql(label: str) -> dict[str, Any]:
    return {"type": "sql", "label": label, "statements": []}


# --- units ----------------------------------------------------------------------------


def test_a_build_and_its_audits_are_one_unit_and_other_steps_are_barriers() -> None:
    steps = [
        sql("schemas"),
        build("s.a", []),
        audit("s.a"),
        audit("s.a", "unique"),
        build("s.b", []),
        build("s.c", ["s.a", "s.b"]),
        audit("s.c"),
        {"type": "views", "label": "views"},
    ]
    found = schedule.units(steps)
    assert [(u.steps, u.model, u.after) for u in found] == [
        ([0], None, set()),
        ([1, 2, 3], "s.a", {0}),
        ([4], "s.b", {0}),
        ([5, 6], "s.c", {0, 1, 2}),
        ([7], None, {0, 1, 2, 3}),  # after everything before it
    ]


def test_steps_after_a_barrier_wait_for_it_and_not_for_builds_before_it() -> None:
    steps = [build("s.a", []), sql("middle"), build("s.b", []), build("s.c", [])]
    found = schedule.units(steps)
    assert [u.after for u in found] == [set(), {0}, {1}, {1}]


def test_a_build_without_parents_waits_for_every_build_before_it() -> None:
    # A hand-written spec (no "parents"): sequential, as before concurrent builds.
    steps = [build("s.a"), build("s.b"), build("s.c", [])]
    assert [u.after for u in schedule.units(steps)] == [set(), {0}, set()]


def test_an_audit_not_after_its_models_build_runs_alone() -> None:
    steps = [build("s.a", []), build("s.b", []), audit("s.a")]
    found = schedule.units(steps)
    assert [(u.steps, u.model, u.after) for u in found][-1] == ([2], None, {0, 1})


def test_a_parent_built_after_its_child_is_refused() -> None:
    steps = [build("s.child", ["s.parent"]), build("s.parent", [])]
    with pytest.raises(ScheduleError, match=r"step 0 \(build s.child\).*'s.parent'.*step 1"):
        schedule.units(steps)


def test_a_parent_not_built_in_the_job_is_no_wait() -> None:
    steps = [build("s.b", ["s.already_built"])]
    assert schedule.units(steps)[0].after == set()


# --- run --------------------------------------------------------------------------------


def independent(count: int) -> list[Unit]:
    return [Unit(i, [i], f"s.m{i}") for i in range(count)]


def test_at_most_limit_units_run_at_once_and_that_many_do() -> None:
    limit, active, peak = 3, [0], [0]
    lock = threading.Lock()
    together = threading.Barrier(limit, timeout=WAIT)  # passes only with `limit` at once

    def work(unit: Unit, slot: int) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        if unit.index < limit:
            together.wait()
        with lock:
            active[0] -= 1

    schedule.run(independent(10), work, limit)
    assert peak[0] == limit


def test_a_unit_starts_only_after_the_units_it_waits_for_are_done() -> None:
    # a -> c, b -> c, c -> d; e independent.
    plan = [
        Unit(0, [0], "a"),
        Unit(1, [1], "b"),
        Unit(2, [2], "c", {0, 1}),
        Unit(3, [3], "d", {2}),
        Unit(4, [4], "e"),
    ]
    log: list[tuple[str, str]] = []
    lock = threading.Lock()

    def work(unit: Unit, slot: int) -> None:
        with lock:
            log.append(("start", str(unit.model)))
        with lock:
            log.append(("end", str(unit.model)))

    for _ in range(20):  # many interleavings
        log.clear()
        schedule.run(plan, work, 4)
        at = {entry: i for i, entry in enumerate(log)}
        for unit in plan:
            for parent in unit.after:
                assert at[("end", str(plan[parent].model))] < at[("start", str(unit.model))]
        assert len(log) == 10


def test_each_slot_runs_one_unit_at_a_time() -> None:
    busy: set[int] = set()
    lock = threading.Lock()
    clashes: list[int] = []

    def work(unit: Unit, slot: int) -> None:
        with lock:
            if slot in busy:
                clashes.append(slot)
            busy.add(slot)
        with lock:
            busy.discard(slot)

    schedule.run(independent(30), work, 4)
    assert clashes == []


def test_limit_one_runs_in_order_in_the_calling_thread() -> None:
    seen: list[tuple[int, str]] = []
    plan = [Unit(0, [0], "a"), Unit(1, [1], "b"), Unit(2, [2], "c", {0})]
    schedule.run(
        plan, lambda unit, slot: seen.append((unit.index, threading.current_thread().name)), 1
    )
    assert seen == [(i, threading.current_thread().name) for i in range(3)]


def test_after_a_failure_nothing_starts_running_units_finish_and_the_first_is_raised() -> None:
    # a fails while b runs; c (a's child) and d (independent, not started) never start.
    plan = [Unit(0, [0], "a"), Unit(1, [1], "b"), Unit(2, [2], "c", {0}), Unit(3, [3], "d")]
    failed, running = threading.Event(), threading.Event()
    done: list[str] = []

    def work(unit: Unit, slot: int) -> None:
        if unit.model == "a":
            assert running.wait(WAIT)
            failed.set()
            raise RuntimeError("a broke")
        if unit.model == "b":
            running.set()
            assert failed.wait(WAIT)
            done.append("b")  # b was running: it finishes
            return
        done.append(str(unit.model))

    with pytest.raises(RuntimeError, match="a broke"):
        schedule.run(plan, work, 2)
    assert done == ["b"]


def test_the_first_failure_is_raised_when_two_fail() -> None:
    order = threading.Event()

    def work(unit: Unit, slot: int) -> None:
        if unit.index == 0:
            raise ValueError("first")
        assert order.wait(0) or True
        raise KeyError("second")

    plan = [Unit(0, [0], "a"), Unit(1, [1], "b", {0})]
    with pytest.raises(ValueError, match="first"):
        schedule.run(plan, work, 2)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        schedule.run(independent(2), lambda unit, slot: None, 0)


# --- run_job on fake handlers -------------------------------------------------------------


class FakeContext:
    def __init__(self) -> None:
        self.pools: dict[str, str] = {}

    def setLocalProperty(self, key: str, value: str) -> None:  # noqa: N802 - Spark's name
        self.pools[threading.current_thread().name] = value


class FakeCatalog:
    def __init__(self) -> None:
        self.refreshed: list[str] = []

    def refreshTable(self, name: str) -> None:  # noqa: N802 - Spark's name
        self.refreshed.append(name)


class FakeSpark:
    """Stands for a classic SparkSession: the handlers below never touch it."""

    def __init__(self, context: FakeContext | None = None) -> None:
        self.sparkContext = context or FakeContext()
        self.catalog = FakeCatalog()
        self.copies: list[FakeSpark] = []


class Handlers:
    """Fake build and audit handlers: a build writes its batches' intervals as the real
    one does; an audit fails when its model is in ``failing``; ``gate`` holds builds of
    the named models until that many are running at once."""

    def __init__(self, failing: set[str] = frozenset(), gate: tuple[set[str], int] | None = None):  # type: ignore[assignment]
        self.failing = failing
        self.gate = gate
        self.barrier = threading.Barrier(gate[1], timeout=WAIT) if gate else None
        self.sessions: dict[str, Any] = {}
        self.lock = threading.Lock()

    def table(self) -> dict[str, Any]:
        return {"build": self.build, "audit": self.audit, "sql": self.noop, "views": self.noop}

    def noop(self, spark: Any, step: dict[str, Any], ctx: StepContext) -> None:
        return None

    def build(self, spark: Any, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        with self.lock:
            self.sessions[step["model"]] = spark
        if self.gate and step["model"] in self.gate[0]:
            assert self.barrier is not None
            self.barrier.wait()
        for batch in step["batches"]:
            ctx.add_intervals(step["model"], step["version"], [[batch["start"], batch["end"]]])
        return {"step": "build", "model": step["model"], "version": step["version"],
                "table": step["table"], "batches": len(step["batches"])}  # fmt: skip

    def audit(self, spark: Any, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        passed = step["model"] not in self.failing
        ctx.save_result("audit", f"{step['model']}:{step['audit']}", passed, {})
        if not passed:
            raise RuntimeError(f"audit {step['audit']} on {step['model']} failed")
        return {"step": "audit", "model": step["model"], "audit": step["audit"], "passed": True,
                "violations": 0, "sample": [], "blocking": step["blocking"]}  # fmt: skip


def diamond(limit: int) -> dict[str, Any]:
    """raw_a, raw_b -> mid -> top; side independent; then the views."""
    return {
        "job_id": "j",
        "kind": "apply",
        "plan_id": "p",
        "concurrent_tasks": limit,
        "steps": [
            sql("create physical schemas"),
            build("s.raw_a", []),
            audit("s.raw_a"),
            build("s.raw_b", []),
            build("s.side", []),
            build("s.mid", ["s.raw_a", "s.raw_b"]),
            audit("s.mid"),
            build("s.top", ["s.mid"]),
            {"type": "views", "label": "views"},
        ],
    }


def run(
    spec: dict[str, Any],
    handlers: Handlers,
    monkeypatch: pytest.MonkeyPatch,
    *,
    cannot_copy: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any] | BaseException, FakeSpark]:
    spark = FakeSpark()

    def clone(self: Any) -> FakeSpark:
        if cannot_copy:  # a Spark Connect server older than PySpark 4.3's
            raise RuntimeError("UNSUPPORTED: CloneSession\nmore")
        copy = FakeSpark(spark.sparkContext)
        spark.copies.append(copy)
        return copy

    monkeypatch.setattr(driver, "handlers", handlers.table)
    monkeypatch.setattr(driver._Sessions, "_clone", clone)
    events: list[dict[str, Any]] = []
    inside = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        # Never entered by two threads at once: each event (a stdout line) stays whole.
        assert inside.acquire(blocking=False), "emit entered concurrently"
        try:
            events.append(event)
        finally:
            inside.release()

    try:
        outcome: dict[str, Any] | BaseException = driver.run_job(spec, spark, emit)  # type: ignore[arg-type]
    except driver.StepFailed as exc:
        outcome = exc
    return events, outcome, spark


def writes(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(
        repr(sorted((k, repr(v)) for k, v in e.items())) for e in events if e["event"] == "write"
    )


def test_independent_models_build_at_once_in_sessions_and_pools_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # raw_a, raw_b and side only pass the gate when all three build at the same time.
    handlers = Handlers(gate=({"s.raw_a", "s.raw_b", "s.side"}, 3))
    events, results, spark = run(diamond(4), handlers, monkeypatch)
    assert isinstance(results, dict)
    assert list(results) == ["1", "2", "3", "4", "5", "6", "7"]  # the steps' order
    sessions = {model: handlers.sessions[model] for model in ("s.raw_a", "s.raw_b", "s.side")}
    assert len({id(s) for s in sessions.values()}) == 3
    assert all(s in spark.copies for s in sessions.values())
    assert set(spark.sparkContext.pools.values()) <= {f"sluice-{i}" for i in range(4)}
    starts = [e for e in events if e["event"] == "step_start" and e["type"] == "build"]
    assert all("worker" in e and "model" in e for e in starts)
    # The job's session re-reads every table the workers wrote (before the views step),
    # as it may hold a stale listing of one; the workers' copies start with none.
    built = ["t_s.raw_a", "t_s.raw_b", "t_s.side", "t_s.mid", "t_s.top"]
    assert sorted(spark.catalog.refreshed) == sorted(built)
    assert all(copy.catalog.refreshed == [] for copy in spark.copies)


class FakeConnectSpark(FakeSpark):
    """Stands for a Spark Connect session (which the driver tells by its module)."""


FakeConnectSpark.__module__ = "pyspark.sql.connect.session"


@pytest.mark.parametrize("connect", [False, True])
def test_on_connect_only_tables_that_existed_before_the_job_are_refreshed(
    monkeypatch: pytest.MonkeyPatch, connect: bool
) -> None:
    # raw_a and top are new tables (their builds created them): a Spark Connect job's
    # session, opened with the job, cannot have read them. A classic session may outlive
    # the job (in-process runs), so it forgets every table the workers wrote.
    class Creating(Handlers):
        def build(self, spark: Any, step: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
            if step["model"] in ("s.raw_a", "s.top"):
                ctx.created.add(step["table"])
            return super().build(spark, step, ctx)

    if connect:
        monkeypatch.setattr(sys.modules[__name__], "FakeSpark", FakeConnectSpark)
    _, results, spark = run(diamond(4), Creating(), monkeypatch)
    assert isinstance(results, dict)
    assert type(spark).__module__.startswith("pyspark.sql.connect") is connect
    rewritten = ["t_s.mid", "t_s.raw_b", "t_s.side"]
    everything = sorted([*rewritten, "t_s.raw_a", "t_s.top"])
    assert sorted(spark.catalog.refreshed) == (rewritten if connect else everything)


def test_events_and_writes_equal_the_sequential_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    one, results_one, _ = run(diamond(1), Handlers(), monkeypatch)
    four, results_four, _ = run(diamond(4), Handlers(), monkeypatch)
    assert writes(one) == writes(four)
    assert results_one == results_four
    strip = ("seconds", "worker")
    key = lambda e: repr(sorted((k, repr(v)) for k, v in e.items() if k not in strip))  # noqa: E731
    assert Counter(map(key, one)) == Counter(map(key, four))
    # And the runner's checker accepts the interleaved writes: nothing refused.
    checker = JobWrites(diamond(4), None)  # type: ignore[arg-type]
    for event in four:
        if event["event"] == "write":
            checker.apply(event)


def test_each_model_starts_after_its_parents_are_built_and_audited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for _ in range(10):
        events, _, _ = run(diamond(4), Handlers(), monkeypatch)
        at = {(e["event"], e.get("label")): i for i, e in enumerate(events)}
        mid = at[("step_start", "build s.mid")]
        assert at[("step_done", "audit s.raw_a: not_null")] < mid
        assert at[("step_done", "build s.raw_b")] < mid
        assert at[("step_done", "audit s.mid: not_null")] < at[("step_start", "build s.top")]
        assert max(i for i, e in enumerate(events) if e["event"] == "step_done" and e.get("label") != "views") < at[("step_start", "views")]  # fmt: skip


def test_a_parents_failing_audit_stops_its_descendants_and_the_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for limit in (1, 4):
        events, outcome, _ = run(diamond(limit), Handlers(failing={"s.raw_a"}), monkeypatch)
        assert isinstance(outcome, driver.StepFailed)
        assert outcome.step["label"] == "audit s.raw_a: not_null"
        started = {e["label"] for e in events if e["event"] == "step_start"}
        assert not started & {"build s.mid", "build s.top", "views"}
        failed = [e for e in events if e["event"] == "step_failed"]
        assert [(e["label"], e["model"]) for e in failed] == [
            ("audit s.raw_a: not_null", "s.raw_a")
        ]
        # The failed audit's result is reported (the runner holds raw_a's intervals back).
        checker = JobWrites(diamond(limit), None)  # type: ignore[arg-type]
        for event in events:
            if event["event"] == "write":
                checker.apply(event)
        assert checker._held.get(("s.raw_a", "v_s.raw_a")) == [(0, 10), (10, 20)]


def test_a_concurrent_tasks_that_is_not_a_small_whole_number_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for bad in (0, -1, "4", 2.5, True):
        spec = {**diamond(1), "concurrent_tasks": bad}
        with pytest.raises(ValueError, match="concurrent_tasks"):
            run(spec, Handlers(), monkeypatch)
    assert driver.concurrency({"job_id": "j", "kind": "apply", "steps": [], "concurrent_tasks": 99}) == 32  # fmt: skip
    assert driver.concurrency({"job_id": "j", "kind": "apply", "steps": []}) == 4


# --- what the service side adds -------------------------------------------------------------


def snap(name: str, *parents: str) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(name=name, model=SimpleNamespace(depends_on=parents))


def test_a_build_waits_for_built_parents_and_through_unbuilt_ones() -> None:
    from sluice.core.spark.render import built_parents

    snapshots = [
        snap("s.raw"),
        snap("s.ext"),  # an external, or a model already built: not built here
        snap("s.kept", "s.raw"),  # not rebuilt (e.g. a view already in place)
        snap("s.a", "s.kept", "s.ext"),
        snap("s.b", "s.a", "s.raw"),
        snap("s.c", "s.unknown"),
    ]
    built = {"s.raw", "s.a", "s.b", "s.c"}
    assert built_parents(snapshots, built) == {
        "s.raw": [],
        "s.a": ["s.raw"],  # through s.kept, which reads it
        "s.b": ["s.a", "s.raw"],
        "s.c": [],
    }


def test_the_job_error_names_the_first_failure_and_the_others() -> None:
    from sluice.core.spark.failures import job_failure

    seen = [
        {"event": "step_failed", "label": "build s.a", "error": "AnalysisException: no x\nmore"},
        {"event": "step_failed", "label": "build s.b", "error": "ValueError: bad"},
    ]
    message = str(job_failure("j", seen))
    assert message.startswith("Spark job failed at step 'build s.a': AnalysisException: no x")
    assert "also failed: step 'build s.b': ValueError: bad" in message


def test_a_lost_driver_names_every_step_that_was_running() -> None:
    from sluice.core.errors import DriverLost
    from sluice.core.spark.failures import job_failure

    seen = [
        {"event": "step_start", "index": 1, "label": "build s.a"},
        {"event": "step_start", "index": 2, "label": "build s.b"},
        {"event": "step_start", "index": 3, "label": "build s.c"},
        {"event": "step_done", "index": 2, "label": "build s.b"},
    ]
    error = job_failure("j", seen, exit_code=137)
    assert isinstance(error, DriverLost)
    assert "during steps 'build s.a', 'build s.c'" in str(error)


def test_a_spark_that_cannot_copy_sessions_builds_one_model_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old_events, old_results, _ = run(diamond(4), Handlers(), monkeypatch)
    events, results, spark = run(diamond(4), Handlers(), monkeypatch, cannot_copy=True)
    assert spark.copies == []
    assert results == old_results
    said = [e["message"] for e in events if e["event"] == "log"]
    assert said == [
        "concurrent builds need a copy of the job's Spark session, which this Spark cannot "
        "make (RuntimeError: UNSUPPORTED: CloneSession): building one model at a time"
    ]
    assert not any("worker" in e for e in events)
    assert writes(events) == writes(old_events)
