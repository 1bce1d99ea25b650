"""Plain records the state store reads and writes.

The store treats snapshot and plan payloads as opaque JSON documents: it only looks at the
keys it indexes on (names, identifiers, versions, plan ids). Everything else belongs to the
layers above, which may evolve their documents without a state migration.

Intervals are half-open ``(start_ms, end_ms)`` pairs of epoch milliseconds, recorded per
physical table ``(name, version)`` rather than per snapshot, because snapshots whose data is
the same share one physical table and therefore its filled intervals.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

SnapshotId = tuple[str, str]
"""``(model name "schema.table", identifier hex)``: the key of a stored snapshot."""

TableKey = tuple[str, str]
"""``(model name, version)``: the key of a physical table, which owns intervals."""

Interval = tuple[int, int]
"""Half-open ``[start_ms, end_ms)`` range of epoch milliseconds."""

SCHEMA_VERSION = 6
"""The state schema this Sluice creates and understands: the number of the state's last
migration (:mod:`sluice.core.state.migrations` ends there; a test holds the two equal).
Here, not there, so a process that only reads state can check it without SQLAlchemy."""

_T = TypeVar("_T")


def chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """``items`` in runs of at most ``size``: the keys of one ``IN (...)`` list each, so a
    statement stays under the database's limit of bound parameters."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """One snapshot as the store keeps it.

    Attributes:
        name: Model name, e.g. ``"jaffle.orders"``.
        identifier: Fingerprint id (hex); unique together with ``name``.
        version: Physical table version, shared by snapshots whose data is the same.
        payload: JSON-serialisable snapshot document; opaque to the store.
    """

    name: str
    identifier: str
    version: str
    # Excluded from the hash (dicts are unhashable); equal records still hash equal because
    # the key fields are included.
    payload: dict[str, Any] = field(hash=False)

    @property
    def id(self) -> SnapshotId:
        """The ``(name, identifier)`` key of this snapshot."""
        return (self.name, self.identifier)

    @property
    def ref(self) -> SnapshotRef:
        """A reference to this snapshot, as stored in an environment."""
        return SnapshotRef(self.name, self.identifier, self.version)


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    """Pointer from an environment to a snapshot (and, through ``version``, its table)."""

    name: str
    identifier: str
    version: str

    @property
    def id(self) -> SnapshotId:
        """The ``(name, identifier)`` key of the referenced snapshot."""
        return (self.name, self.identifier)


@dataclass(frozen=True, slots=True)
class EnvironmentRecord:
    """An environment: the set of snapshots a plan promoted, and its bookkeeping.

    Attributes:
        name: Environment name, e.g. ``"prod"`` or ``"dev_alice"``.
        snapshots: The snapshots the environment's views point at.
        plan_id: The plan that produced this state; the compare-and-swap token.
        previous_plan_id: The plan this one replaced, if any.
        start: Start of the environment's time range (epoch ms), if bounded.
        end: End of the environment's time range (epoch ms), if bounded.
        expiration_ts: Epoch ms after which the janitor may remove the environment.
        invalidated: Set by ``invalidate_environment``; the janitor removes it next.
        updated_ts: Epoch ms of the last write, supplied by the caller's clock.
    """

    name: str
    snapshots: tuple[SnapshotRef, ...]
    plan_id: str
    previous_plan_id: str | None = None
    start: int | None = None
    end: int | None = None
    expiration_ts: int | None = None
    invalidated: bool = False
    updated_ts: int = 0


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """An applied (or about to be applied) plan, kept for audit and for re-planning.

    Attributes:
        plan_id: Unique plan id.
        environment: The environment the plan targets.
        base_plan_id: The environment's plan the plan was computed against, if any.
        created_ts: Epoch ms when the plan was created.
        payload: JSON-serialisable plan document; opaque to the store.
        project_commit: The commit whose project the plan's models came from (the promoted
            commit; a plan that changes no model has its base plan's); None: not known.
    """

    plan_id: str
    environment: str
    base_plan_id: str | None
    created_ts: int
    payload: dict[str, Any] = field(hash=False)
    project_commit: str | None = None


@dataclass(frozen=True, slots=True)
class TableSize:
    """What a physical table's files held when a job last wrote it.

    Attributes:
        bytes: The catalog's size statistic of the table (its data files), in bytes.
        measured_ts: Epoch ms of the measurement.
        rows: The catalog's row count of the table then (None: not counted).
    """

    bytes: int
    measured_ts: int
    rows: int | None = None


def checked_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """``intervals`` as a list of int pairs.

    Raises:
        ValueError: An interval is empty or reversed (``start >= end``).
    """
    spans = [(int(s), int(e)) for s, e in intervals]
    for s, e in spans:
        if s >= e:
            raise ValueError(f"interval [{s}, {e}) is empty or reversed")
    return spans


@dataclass(frozen=True, slots=True)
class JobResult:
    """One outcome a job recorded: an audit or a unit test."""

    job_id: str
    plan_id: str | None
    kind: str
    name: str
    passed: bool
    payload: dict[str, Any]
    created_ts: int


@dataclass(frozen=True)
class Seen:
    """What the last run that rebuilt a model version read (:mod:`sluice.core.skip`): its
    query's key, each input table's version (``None``: unreadable), when it ran (epoch ms)."""

    key: str
    inputs: dict[str, str | None]
    at: int


VIEWS_DROPPED = "views_dropped"
"""The kind of result the janitor records on a plan whose views it dropped (a job cut short
left them, no record naming them): it is not visited again (``state.unswept_plans``)."""
