"""A backfill's output before it runs: about how many rows and bytes its tables will hold.

Every job that writes a table records its rows and the size of its files
(:mod:`sluice.core.state`). A backfilled model will write about what its table held the
last time a job measured it:

- its own version when a job already measured it (a backfill that goes on), else the
  model's last measured version (a change rebuilds a table of about the same size);
- a model incremental by time writes the share its intervals are of what the measured
  table held (three days of a table that held thirty: a tenth);
- any other kind writes its whole table (a full refresh, or a rewrite by unique key);
- a model no job has measured (a new one) is named as unmeasured.

Once the plan is applied, :func:`written` sums what the jobs measured of the tables it
built (:class:`Written`).

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> from sluice.core.plan.plan import Backfill
>>> from sluice.core.snapshot.fingerprint import Fingerprint
>>> from sluice.core.snapshot.snapshot import Snapshot
>>> from sluice.core.state.records import TableSize
>>> def snap(name, kind, version):
...     return Snapshot(Model(name, Kind(kind), query_sql="SELECT 1"), Fingerprint("d", "m", "p"), version)
>>> snapshots = {s.name: s for s in (snap("mart.daily", KindName.FULL, "v2"), snap("mart.new", KindName.FULL, "v1"))}
>>> todo = [Backfill("mart.daily", "v2", "t", ((0, 10),), ((0, 10),)),
...         Backfill("mart.new", "v1", "t", ((0, 10),), ((0, 10),))]
>>> sizes = {("mart.daily", "v1"): TableSize(5_000, measured_ts=0, rows=120)}
>>> found = estimate_output(snapshots, todo, sizes, {})
>>> found.rows, found.bytes, found.unmeasured
({'mart.daily': 120}, {'mart.daily': 5000}, ('mart.new',))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sluice.core.intervals import Interval
from sluice.core.model.definition import KindName
from sluice.core.plan.cost import latest_sizes
from sluice.core.plan.plan import Backfill, OutputEstimate, Plan
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.state.records import TableSize
from sluice.core.state.store import StateReader

TableKey = tuple[str, str]


def estimate_output(
    snapshots: Mapping[str, Snapshot],
    backfill: Iterable[Backfill],
    sizes: Mapping[TableKey, TableSize],
    intervals: Mapping[TableKey, list[Interval]],
) -> OutputEstimate:
    """The rows and bytes ``backfill`` writes.

    Args:
        snapshots: The environment's snapshot of each model after the plan.
        backfill: What the plan computes.
        sizes: The measured size of physical tables ``(name, version)``, any versions of
            the backfilled models (the last one measured stands in for a version never
            measured).
        intervals: Filled intervals per physical table (the share a time range is of the
            measured table).
    """
    latest = latest_sizes(sizes)
    rows: dict[str, int] = {}
    data: dict[str, int] = {}
    unmeasured: list[str] = []
    for item in backfill:
        own = sizes.get((item.name, item.version))
        found = (item.version, own) if own is not None else latest.get(item.name)
        if found is None:
            unmeasured.append(item.name)
            continue
        version, measured = found
        snap = snapshots.get(item.name)
        share = (1, 1)
        if snap is not None and snap.model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE:
            held = _span(intervals.get((item.name, version), []))
            share = (_span(item.intervals), held) if held else (1, 1)
        data[item.name] = measured.bytes * share[0] // share[1]
        if measured.rows is not None:
            rows[item.name] = measured.rows * share[0] // share[1]
    return OutputEstimate(rows, data, tuple(sorted(unmeasured)))


@dataclass(frozen=True)
class Written:
    """What the tables a plan builds hold once built, as the jobs measured them (from this
    job or an earlier one); None where no job measured it."""

    bytes: int | None
    rows: int | None


def written(state: StateReader, plan: Plan) -> Written:
    """The bytes and rows of the tables ``plan`` builds, summed over those measured."""
    built = {(b.name, b.version) for b in plan.backfill}
    sizes = state.get_table_sizes({name for name, _ in built}) if built else {}
    measured = [sizes[key] for key in built if key in sizes]
    counted = [m.rows for m in measured if m.rows is not None]
    return Written(
        sum(m.bytes for m in measured) if measured else None,
        sum(counted) if counted else None,
    )


def _span(spans: Iterable[Interval]) -> int:
    return sum(end - start for start, end in spans)
