"""What the catalog holds of an environment: one read-only Spark job, one ``inspect``
step (:mod:`sluice.core.spark.steps.inspect`) naming every view and table Sluice recorded
(:mod:`sluice.core.drift.recorded`).

The job writes nothing (no state write event, no catalog statement that changes
anything), so it runs under any lock a caller holds and may run at any time.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.core.drift.recorded import RecordedEnvironment
from sluice.core.spark.results import InspectedTable, InspectedView, result_of
from sluice.core.spark.spec import InspectStep, InspectTable, JobSpec
from sluice.core.spark.submit import Runner, run_recorded


@dataclass(frozen=True)
class Catalog:
    """What the catalog answered: by view name and by table name (as recorded)."""

    views: dict[str, InspectedView]
    tables: dict[str, InspectedTable]


def inspect_step(recorded: RecordedEnvironment) -> InspectStep:
    """The step reading ``recorded``'s views and tables (each once, in order)."""
    views = [m.view for m in recorded.models]
    tables: list[InspectTable] = []
    seen: set[str] = set()
    for model in recorded.models:
        if model.table in seen:
            continue
        seen.add(model.table)
        if model.table_is_view:
            views.append(model.table)
            continue
        tables.append(
            {"table": model.table, "query": model.query, "time_column": model.time_column}
        )
    return {
        "type": "inspect",
        "label": f"read {recorded.name}'s views and tables from the catalog",
        "views": list(dict.fromkeys(views)),
        "tables": tables,
    }


def read_catalog(recorded: RecordedEnvironment, runner: Runner, *, now: int) -> Catalog:
    """Ask Spark what the catalog holds of ``recorded``'s views and tables.

    Raises:
        ExecutionError: Spark failed (the step itself reads each object apart, so an
            object that cannot be read is its own error, not the job's).
    """
    step = inspect_step(recorded)
    spec: JobSpec = {"job_id": f"drift-{recorded.name}-{now}", "kind": "drift", "steps": [step]}
    job = run_recorded(runner, spec, state=None)
    found = result_of(job.results, "0", "inspect")
    return Catalog({v["name"]: v for v in found["views"]}, {t["name"]: t for t in found["tables"]})
