"""What a scheduled run did, kept in the state: one job result of kind :data:`RUN` for each
run of an environment that had intervals due or failed (``sluice run`` and the service's
scheduled run both record through :func:`recorded`), read back by :func:`recorded_runs`.

A run that found nothing due is not recorded (it did nothing; a schedule every few
minutes would otherwise add a row each time). A run's plan is recorded as every applied
plan is, and the environment points at it once its job succeeded; a failed run's plan is
left unreferenced, so this record is the only place that says it was tried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sluice.core import jobs
from sluice.core.errors import SluiceError
from sluice.core.plan.plan import Plan
from sluice.core.state import JobResult, StateStore

log = logging.getLogger(__name__)

RUN = "run"
"""The kind of a scheduled run's result (its name is the environment's)."""
MAX_MODELS = 1000
"""Models a run's record lists (their count is kept whole)."""
MAX_ERROR = 4000
"""Characters of a failed run's error that its record keeps."""


def _now() -> int:
    return int(time.time() * 1000)


@dataclass
class Run:
    """What the ``with`` block of :func:`recorded` tells it: the run's plan once made
    (None: it failed before), what applying it did."""

    plan: Plan | None = None
    tables_built: int = 0
    spark_seconds: float | None = None
    skipped: tuple[str, ...] = ()
    """The models whose rebuild it skipped, nothing they read having changed."""


@contextmanager
def recorded(
    state: StateStore,
    environment: str,
    *,
    now: int,
    clock: Callable[[], int] = _now,
    scrub: Callable[[str], str] = lambda text: text,
) -> Iterator[Run]:
    """Record the run of ``environment`` due at ``now`` that the block does: ``ok`` when it
    ends with a plan that had a backfill, ``failed`` (with the error, through ``scrub``)
    when it raises; nothing when its plan had nothing due. The error is raised on."""
    run = Run()
    started = clock()
    try:
        yield run
    except Exception as exc:
        _save(state, environment, run, now, started, clock(), scrub(str(exc) or type(exc).__name__))
        raise
    if run.plan is not None and run.plan.backfill:
        _save(state, environment, run, now, started, clock(), None)


def _save(
    state: StateStore,
    environment: str,
    run: Run,
    now: int,
    started: int,
    finished: int,
    error: str | None,
) -> None:
    plan = run.plan
    backfill = plan.backfill if plan is not None else ()
    payload: dict[str, Any] = {
        "environment": environment,
        "at": now,
        "started": started,
        "finished": finished,
        "models": [
            {
                "name": b.name,
                "version": b.version,
                "start": b.intervals[0][0],
                "end": b.intervals[-1][1],
                "intervals": len(b.intervals),
            }
            for b in backfill[:MAX_MODELS]
            if b.intervals
        ],
        "models_total": len(backfill),
        "intervals": sum(len(b.intervals) for b in backfill),
        "tables_built": run.tables_built,
        "skipped": list(run.skipped[:MAX_MODELS]),
        "spark_seconds": run.spark_seconds,
        "error": error[:MAX_ERROR] if error is not None else None,
    }
    job_id = jobs.apply_job_id(plan, now) if plan is not None else f"run-{environment}-{now}"
    record = JobResult(
        job_id, plan.plan_id if plan else None, RUN, environment, error is None, payload, started
    )
    try:
        state.save_results([record])
    except SluiceError as exc:  # the run's own outcome (raised or returned) matters more
        log.warning("the run of %s at %s was not recorded: %s", environment, now, exc)


@dataclass(frozen=True)
class RecordedRun:
    """A run as its record says (:func:`recorded`)."""

    job_id: str
    plan_id: str | None
    environment: str
    ok: bool
    payload: dict[str, Any]


def recorded_runs(
    state: StateStore, environment: str, *, offset: int, limit: int
) -> tuple[list[RecordedRun], int]:
    """The recorded runs of ``environment``, newest first (``limit`` from ``offset``), and
    how many there are."""
    found, total = state.get_results_page(RUN, environment, offset=offset, limit=limit)
    return [RecordedRun(r.job_id, r.plan_id, r.name, r.passed, r.payload) for r in found], total
