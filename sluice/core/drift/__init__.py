"""Drift (issue 47): an environment on Spark held against what Sluice recorded of it.

- :mod:`~sluice.core.drift.recorded`: what state records (views, tables, intervals, the
  last write each job measured);
- :mod:`~sluice.core.drift.catalog`: what the catalog holds (one read-only Spark job);
- :mod:`~sluice.core.drift.compare`: the differences (pure);
- :mod:`~sluice.core.drift.repair`: the plan that mends them, applied as any plan.

:func:`check` is the three first together: ``sluice drift`` and the service's scheduled
check call it. It reads state and the catalog and writes neither.
"""

from __future__ import annotations

from sluice.core.drift.catalog import Catalog, read_catalog
from sluice.core.drift.compare import Difference, DriftReport, compare
from sluice.core.drift.recorded import gather
from sluice.core.drift.repair import Repair, plan_repair
from sluice.core.spark.submit import Runner
from sluice.core.state.store import StateReader


def check(state: StateReader, environment: str, runner: Runner, *, now: int) -> DriftReport:
    """The drift of ``environment``: its recorded truth, the catalog, their differences.

    Raises:
        PlanError: the environment does not exist.
        ExecutionError: Spark failed.
    """
    recorded = gather(state, environment)
    # An environment without a view to check (no models) asks Spark nothing.
    catalog = read_catalog(recorded, runner, now=now) if recorded.models else Catalog({}, {})
    return compare(recorded, catalog, now=now)


__all__ = ["Difference", "DriftReport", "Repair", "check", "compare", "plan_repair"]
