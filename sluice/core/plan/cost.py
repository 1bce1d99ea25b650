"""A backfill's cost before it runs: about how many bytes its queries read.

Every job that writes a physical table records the size of its files (the catalog's
statistics, :mod:`sluice.core.state`). A backfilled model reads each of its parents:

- a parent that is itself incremental by time, from a model incremental by time, is read
  one time range per batch (the batch's query filters on it and Spark prunes its
  partitions), so the backfill reads the share of the parent its intervals cover;
- any other parent is read whole by every batch;
- a VIEW parent is read through: its own parents count instead;
- a parent whose version no job has measured counts at the size of the model's last
  measured version (a change rebuilds a table of about the same size), and a parent with
  no measured version at all (an external table, a new model) is named as unmeasured.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> from sluice.core.plan.plan import Backfill
>>> from sluice.core.snapshot.fingerprint import Fingerprint
>>> from sluice.core.snapshot.snapshot import Snapshot
>>> from sluice.core.state.records import TableSize
>>> def snap(name, kind, parents=()):
...     model = Model(name, Kind(kind), query_sql="SELECT 1", depends_on=parents)
...     return Snapshot(model, Fingerprint("d", "m", "p"), "v1")
>>> snapshots = {s.name: s for s in (
...     snap("raw.events", KindName.FULL),
...     snap("mart.daily", KindName.FULL, ("raw.events", "ext.rates")))}
>>> todo = Backfill("mart.daily", "v1", "t", ((0, 10),), ((0, 10),))
>>> sizes = {("raw.events", "v1"): TableSize(5_000, measured_ts=0)}
>>> found = estimate_scan(snapshots, [todo], sizes, {})
>>> found.bytes, found.unmeasured
({'mart.daily': 5000}, {'mart.daily': ('ext.rates',)})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.core.intervals import Interval
from sluice.core.model.definition import KindName
from sluice.core.plan.plan import Backfill, ScanEstimate
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.state.records import TableSize

TableKey = tuple[str, str]


def estimate_scan(
    snapshots: Mapping[str, Snapshot],
    backfill: Iterable[Backfill],
    sizes: Mapping[TableKey, TableSize],
    intervals: Mapping[TableKey, list[Interval]],
) -> ScanEstimate:
    """The bytes ``backfill`` reads.

    Args:
        snapshots: The environment's snapshot of each model after the plan.
        backfill: What the plan computes.
        sizes: The measured size of physical tables ``(name, version)``, any versions of
            the parents (the last one measured stands in for a version never measured).
        intervals: Filled intervals per physical table (a time-range parent's share).
    """
    latest = latest_sizes(sizes)
    planned = {b.name: b for b in backfill}
    scan: dict[str, int] = {}
    unmeasured: dict[str, tuple[str, ...]] = {}
    for item in planned.values():
        child = snapshots[item.name]
        by_time = child.model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
        covered: int | None = None  # the span of the item's intervals, summed when needed
        total, missing = 0, []
        parents = _read_tables(snapshots, child.model.depends_on)
        if not parents:
            continue  # a seed, or a query of literals: reads no table
        for parent in parents:
            snap = snapshots.get(parent)
            own = sizes.get((parent, snap.version)) if snap is not None else None
            last = latest.get(parent)
            size = own.bytes if own is not None else last[1].bytes if last is not None else None
            if snap is None or size is None:
                missing.append(parent)
                continue
            if by_time and snap.model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE:
                filled = _span(intervals.get((parent, snap.version), []))
                if parent in planned:
                    filled += _span(planned[parent].intervals)
                covered = _span(item.intervals) if covered is None else covered
                total += size if filled <= covered or not filled else size * covered // filled
            else:
                total += size * len(item.batches)
        scan[item.name] = total
        unmeasured[item.name] = tuple(sorted(set(missing)))
    return ScanEstimate(scan, unmeasured)


def latest_sizes(sizes: Mapping[TableKey, TableSize]) -> dict[str, tuple[str, TableSize]]:
    """Per model, its last measured version and that version's size (the latest
    ``measured_ts``), which stands in for a version no job has measured yet."""
    latest: dict[str, tuple[str, TableSize]] = {}
    for (name, version), measured in sorted(sizes.items(), key=lambda item: item[1].measured_ts):
        latest[name] = (version, measured)
    return latest


def _read_tables(snapshots: Mapping[str, Snapshot], parents: Iterable[str]) -> list[str]:
    """The tables reading ``parents`` reads: a VIEW (or embedded) model's own parents,
    recursively; an EXTERNAL model is a table read (never measured by Sluice)."""
    found: list[str] = []
    seen: set[str] = set()
    todo = list(parents)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        snap = snapshots.get(name)
        if snap is not None and snap.model.kind.name in (KindName.VIEW, KindName.EMBEDDED):
            todo.extend(snap.model.depends_on)
        else:
            found.append(name)
    return found


def _span(spans: Iterable[Interval]) -> int:
    return sum(end - start for start, end in spans)
