"""What a plan is: the changes it makes to one environment and the data it must compute."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sluice.core.intervals import Interval
from sluice.core.plan.lineage import ColumnImpact
from sluice.core.snapshot.snapshot import Category, Snapshot
from sluice.core.timeutil import DAY_MS, to_ds, to_ts
from sluice.core.words import plural, size

VIEW_MARKER = (0, 1)
"""The interval a VIEW model's version records once its physical view exists."""


def iso(ms: int) -> str:
    """A date when ``ms`` is midnight, else a timestamp (for JSON and people)."""
    return to_ds(ms) if ms % DAY_MS == 0 else to_ts(ms)


@dataclass(frozen=True)
class ModelChange:
    """One changed model: how, and what its data version becomes."""

    name: str
    category: Category
    version: str
    previous_version: str
    diff: str = ""
    # Indirect changes: the directly modified models upstream whose change reaches it.
    reached_by: tuple[str, ...] = ()
    columns: ColumnImpact | None = None  # column-level impact (None: not computed)
    # Direct changes made by a parent's change (sluice.core.plan.narrowing, rule 1): the
    # changed parents whose columns its query's stars take (or whose new column one of
    # its names may now be), in its depends_on order. Empty: its own definition changed.
    reshaped_by: tuple[str, ...] = ()

    @property
    def rebuilds(self) -> bool:
        """Whether the change gets a new physical table."""
        return self.version != self.previous_version


@dataclass(frozen=True)
class Backfill:
    """The intervals one physical table is missing, and the batches that compute them."""

    name: str
    version: str
    table: str
    intervals: tuple[Interval, ...]
    batches: tuple[Interval, ...]

    @property
    def start(self) -> int:
        return self.intervals[0][0]

    @property
    def end(self) -> int:
        return self.intervals[-1][1]


@dataclass(frozen=True)
class OutputEstimate:
    """About how many rows and bytes a plan's backfill writes, before anything runs
    (:mod:`sluice.core.plan.output` computes it from the table sizes jobs measured).

    Attributes:
        rows: Backfilled model -> the estimated rows it writes (models whose measured
            table had a row count).
        bytes: Backfilled model -> the estimated bytes of files it writes.
        unmeasured: Backfilled models no job has measured yet (new models).
    """

    rows: Mapping[str, int]
    bytes: Mapping[str, int]
    unmeasured: tuple[str, ...]

    def writes(self) -> str:
        """What the whole backfill writes, in words ("": nothing measured).

        >>> OutputEstimate({"a.b": 1200}, {"a.b": 3 * 1024**2}, ("a.c",)).writes()
        'writes about 1,200 rows (3.0 MB), besides a.c (not built yet)'
        """
        if not self.bytes:
            return ""
        data = size(sum(self.bytes.values()))
        rows = plural(sum(self.rows.values()), "row")
        total = f"writes about {rows} ({data})" if self.rows else f"writes about {data}"
        names = self.unmeasured
        if not names:
            return total
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return f"{total}, besides {shown} (not built yet)"


@dataclass(frozen=True)
class ScanEstimate:
    """About how many bytes a plan's backfill reads, before anything runs
    (:mod:`sluice.core.plan.cost` computes it from the table sizes jobs measured).

    Attributes:
        bytes: Backfilled model -> the estimated bytes its batches read from the parents
            whose size is known.
        unmeasured: Backfilled model -> the parents it reads whose size no job has
            measured (external tables, models never built): the estimate leaves them out.
    """

    bytes: Mapping[str, int]
    unmeasured: Mapping[str, tuple[str, ...]]

    @property
    def total(self) -> int:
        """The estimate for the whole backfill."""
        return sum(self.bytes.values())

    @property
    def complete(self) -> bool:
        """Whether every parent read has a measured size."""
        return not any(self.unmeasured.values())

    def reads(self, model: str | None = None) -> str:
        """What one backfilled model (None: the whole backfill) reads, in words ("": a
        model that reads no table).

        >>> scan = ScanEstimate({"a.b": 3 * 1024**3, "a.c": 0}, {"a.b": (), "a.c": ("raw.x",)})
        >>> scan.reads("a.b"), scan.reads("a.c"), scan.reads()
        ('reads about 3.0 GB', 'reads raw.x (size not measured yet)', 'reads about 3.0 GB, besides raw.x (size not measured yet)')
        """
        if model is not None and model not in self.bytes:
            return ""
        total = self.bytes.get(model, 0) if model is not None else self.total
        names = (
            self.unmeasured.get(model, ())
            if model is not None
            else tuple(sorted({n for names in self.unmeasured.values() for n in names}))
        )
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        if not names:
            return f"reads about {size(total)}"
        if not total:
            return f"reads {shown} (size not measured yet)"
        return f"reads about {size(total)}, besides {shown} (size not measured yet)"


@dataclass(frozen=True)
class Plan:
    """The result of comparing a project with an environment. Immutable; built purely."""

    environment: str
    plan_id: str
    content_hash: str
    base_plan_id: str | None
    start: int | None
    end: int
    execution_time: int
    forward_only: bool
    snapshots: tuple[Snapshot, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    directly_modified: tuple[ModelChange, ...]
    indirectly_modified: tuple[ModelChange, ...]
    metadata_only: tuple[str, ...]
    backfill: tuple[Backfill, ...]
    new_environment: bool
    restated: tuple[str, ...] = ()
    create_views: tuple[str, ...] = ()  # VIEW models whose physical view must be created
    warnings: tuple[str, ...] = ()  # "file:line: what\n  hint: ..." the plan goes ahead with
    # Models only non-breaking changes reach, reading none of the changed columns: new
    # snapshots (their parents' fingerprints moved), same data; not indirectly modified.
    unaffected: tuple[str, ...] = ()
    # The bytes the backfill reads: not part of the plan's ids (tables grow between plans).
    scan: ScanEstimate | None = None
    output: OutputEstimate | None = None
    # A drift repair's (sluice.core.drift.repair): models whose environment view is made
    # again whatever its version, and whose physical table is dropped before it is built.
    repoint: tuple[str, ...] = ()
    rebuild: tuple[str, ...] = ()
    # Forward-only changes dropping or retyping a column of their table, whatever their
    # on_destructive_change says (``allow`` silences the warning, not the change).
    destructive: tuple[str, ...] = ()

    @property
    def backfill_intervals(self) -> int:
        """How many intervals the backfill computes, all tables together."""
        return sum(len(b.intervals) for b in self.backfill)

    @property
    def scan_bytes(self) -> int | None:
        """The backfill's estimated bytes to scan (None: not estimated)."""
        return self.scan.total if self.scan is not None else None

    @property
    def has_changes(self) -> bool:
        """Whether applying it changes what the environment points at."""
        return bool(
            self.added
            or self.removed
            or self.directly_modified
            or self.indirectly_modified
            or self.metadata_only
            or self.unaffected
            or self.new_environment
            or self.restated
            or self.repoint
            or self.rebuild
        )

    @property
    def changes_models(self) -> bool:
        """Whether any model differs from the environment (a new copy of prod does not)."""
        return bool(
            self.added
            or self.removed
            or self.directly_modified
            or self.indirectly_modified
            or self.metadata_only
            or self.unaffected
        )

    def snapshot(self, name: str) -> Snapshot:
        """The environment's snapshot of model ``name`` after this plan (StopIteration if
        it has none, as callers expect)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise StopIteration(name) from None

    @cached_property
    def _by_name(self) -> dict[str, Snapshot]:
        # Printing a plan asks for every backfilled model's snapshot: a scan per call
        # was quadratic (27 s of a 5,000-model sluice plan).
        return {s.name: s for s in self.snapshots}

    def to_json(self) -> dict[str, Any]:
        """The plan as the CLI's --json prints it and the bot reads it."""
        return {
            "environment": self.environment,
            "plan_id": self.plan_id,
            "content_hash": self.content_hash,
            "base_plan_id": self.base_plan_id,
            "new_environment": self.new_environment,
            "forward_only": self.forward_only,
            "start": iso(self.start) if self.start is not None else None,
            "end": iso(self.end),
            "has_changes": self.has_changes,
            "added": list(self.added),
            "removed": list(self.removed),
            "directly_modified": [
                {
                    "name": c.name,
                    "category": c.category.value,
                    "diff": c.diff,
                    "version": c.version,
                    "previous_version": c.previous_version,
                    "columns": c.columns.to_json() if c.columns else None,
                    "reshaped_by": list(c.reshaped_by),
                }
                for c in self.directly_modified
            ],
            "indirectly_modified": [
                {
                    "name": c.name,
                    "category": c.category.value,
                    "version": c.version,
                    "previous_version": c.previous_version,
                    "reached_by": list(c.reached_by),
                    "columns": c.columns.to_json() if c.columns else None,
                }
                for c in self.indirectly_modified
            ],
            "metadata_only": list(self.metadata_only),
            "unaffected": list(self.unaffected),
            "restated": list(self.restated),
            "create_views": list(self.create_views),
            "warnings": list(self.warnings),
            "backfill": [
                {
                    "model": b.name,
                    "version": b.version,
                    "start": iso(b.start),
                    "end": iso(b.end),
                    "table": b.table,
                    "intervals": len(b.intervals),
                    "batches": len(b.batches),
                    "scan_bytes": self.scan.bytes.get(b.name, 0) if self.scan else None,
                    "unmeasured": list(self.scan.unmeasured.get(b.name, ())) if self.scan else [],
                    "write_rows": self.output.rows.get(b.name) if self.output else None,
                    "write_bytes": self.output.bytes.get(b.name) if self.output else None,
                }
                for b in self.backfill
            ],
            "scan_bytes": self.scan_bytes,
            "write_rows": sum(self.output.rows.values())
            if self.output and self.output.rows
            else None,
            "write_bytes": (
                sum(self.output.bytes.values()) if self.output and self.output.bytes else None
            ),
            # a drift repair's only (sluice drift --repair)
            **({"repoint": list(self.repoint)} if self.repoint else {}),
            **({"rebuild": list(self.rebuild)} if self.rebuild else {}),
        }
