"""Which steps of a job may run at the same time, and running them so (pure: no pyspark).

A job's steps are grouped into units: a ``build`` step with the ``audit`` steps of its
model that follow it is one unit (a model is built, then audited, by one worker); every
other step (``sql``, ``views``, ``drop``, ...) is a unit of its own that is a barrier:
it starts once every unit before it is done, and every unit after it waits for it.

A build unit waits for the units of its ``parents`` (the models built in this job that it
reads, directly or through models the job does not build: :func:`sluice.core.spark.render.
build_steps` lists them), so it starts once they are built and audited. A build step
without ``parents`` (a hand-written spec) waits for every build before it: the job is then
sequential, as it was before builds ran concurrently.

:func:`run` runs the units in that order, at most ``limit`` at once; with ``limit`` 1 it
runs them one after another in the spec's order, in the calling thread. Failure is
fail-fast, as the sequential driver has always been: after the first unit fails (a step's
error, a blocking audit), no unit starts; units already running are left to finish
(their writes are kept: every write is idempotent), and the first failure is raised. So
a failed model's descendants never start, and neither do models not yet started on
independent branches; the job fails and the environment's views are not pointed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_LIMIT = 4
"""How many models build at once when nothing says otherwise (SQLMesh's default too)."""
MAX_LIMIT = 32
"""The most a setting may ask for: each concurrent build is a thread and a Spark session."""


@dataclass
class Unit:
    """Steps run in order by one worker, once the units in ``after`` are done."""

    index: int
    steps: list[int]
    """Indices of the job's steps."""
    model: str | None
    """The model a build unit builds (None: a barrier)."""
    after: set[int] = field(default_factory=set)
    """Indices of the units that must be done first (all lower than ``index``)."""


class ScheduleError(ValueError):
    """The steps' dependencies cannot be met (a hand-written or corrupt spec)."""


def units(steps: Sequence[Mapping[str, Any]]) -> list[Unit]:
    """The units of ``steps`` and what each waits for.

    Raises:
        ScheduleError: a build lists a parent that the job builds only after it.
    """
    position = {
        str(step.get("model")): i for i, step in enumerate(steps) if step.get("type") == "build"
    }
    result: list[Unit] = []
    built: dict[str, int] = {}  # model -> its build unit
    barrier: int | None = None  # the last barrier unit
    since: list[int] = []  # build units since that barrier
    for i, step in enumerate(steps):
        kind = step.get("type")
        last = result[-1] if result else None
        if (
            kind == "audit"
            and last is not None
            and last.model is not None
            and last.model == step.get("model")
        ):
            last.steps.append(i)
            continue
        unit = Unit(len(result), [i], None)
        if kind == "build":
            unit.model = str(step.get("model"))
            parents = step.get("parents")
            if parents is None:
                unit.after.update(since)
            else:
                for parent in parents:
                    if parent in built:
                        unit.after.add(built[parent])
                    elif parent in position:
                        raise ScheduleError(
                            f"step {i} ({step.get('label')}) lists parent {parent!r}, which "
                            f"the job builds later (step {position[parent]}): a parent must "
                            "be built before its children"
                        )
            built[unit.model] = unit.index
            since.append(unit.index)
        else:
            unit.after.update(since)
            since = []
        if barrier is not None:
            unit.after.add(barrier)
        if unit.model is None:
            barrier = unit.index
        result.append(unit)
    return result


Work = Callable[[Unit, int], None]
"""Runs one unit on worker ``slot`` (0 .. limit-1; a slot runs one unit at a time);
raises to fail it."""


def run(plan: Sequence[Unit], work: Work, limit: int) -> None:
    """Run every unit of ``plan`` (from :func:`units`) with ``work``, at most ``limit`` at
    once, each once the units it waits for are done.

    Raises:
        BaseException: the first failure of a unit, once the units running then are done
            (no unit starts after a failure).
    """
    if limit < 1:
        raise ValueError(f"at least one unit must be able to run, not {limit}")
    if limit == 1 or len(plan) <= 1:
        for unit in plan:
            work(unit, 0)
        return
    waiting = {unit.index: set(unit.after) for unit in plan}
    children: dict[int, list[int]] = {unit.index: [] for unit in plan}
    for unit in plan:
        for parent in unit.after:
            children[parent].append(unit.index)
    by_index = {unit.index: unit for unit in plan}
    ready: queue.Queue[Unit | None] = queue.Queue()
    lock = threading.Lock()
    failures: list[BaseException] = []
    outstanding = [0]  # units queued or running
    settled = threading.Event()

    def enqueue(indices: list[int]) -> None:  # under the lock
        for index in sorted(indices):
            outstanding[0] += 1
            ready.put(by_index[index])

    def worker(slot: int) -> None:
        while (unit := ready.get()) is not None:
            with lock:
                skip = bool(failures)
            error: BaseException | None = None
            if not skip:
                try:
                    work(unit, slot)
                except BaseException as exc:  # handed to the caller
                    error = exc
            with lock:
                outstanding[0] -= 1
                if error is not None:
                    failures.append(error)
                elif not skip and not failures:
                    freed = []
                    for child in children[unit.index]:
                        waiting[child].discard(unit.index)
                        if not waiting[child]:
                            freed.append(child)
                    enqueue(freed)
                if outstanding[0] == 0:
                    settled.set()

    with lock:
        enqueue([index for index, after in waiting.items() if not after])
    workers = [
        threading.Thread(target=worker, args=(slot,), name=f"sluice-build-{slot}", daemon=True)
        for slot in range(min(limit, len(plan)))
    ]
    for thread in workers:
        thread.start()
    try:
        settled.wait()
    except BaseException:  # interrupted (Ctrl-C): start nothing more, wait for nothing
        with lock:
            failures.append(KeyboardInterrupt())
        raise
    finally:
        for _ in workers:
            ready.put(None)
    for thread in workers:
        thread.join()
    if failures:
        raise failures[0]
    left = [index for index, after in waiting.items() if after]
    if left:  # cannot happen with plans from units(): every wait is on a lower index
        raise ScheduleError(f"units {left} never became ready")
