"""The state store's interface: a reader and a writer protocol.

State is split the way SQLMesh splits it: code that only needs to look at state (planning,
diffing, rendering a plan on a pull request) depends on :class:`StateReader`, and only the
code that applies plans or cleans up depends on :class:`StateWriter`. :class:`StateStore`
is both, plus ``close``.

Every writer method is atomic: it either happens completely or not at all; several
readers' and writers' calls are one transaction inside ``with store.together(...)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from sluice.core.state.records import (
    EnvironmentRecord,
    Interval,
    JobResult,
    PlanRecord,
    Seen,
    SnapshotId,
    StoredSnapshot,
    TableKey,
    TableSize,
)


class StateReader(Protocol):
    """Read access to environments, snapshots, intervals and plans."""

    def get_environment(self, name: str) -> EnvironmentRecord | None:
        """The environment called ``name`` (invalidated ones included), or None."""
        ...

    def list_environments(self) -> list[EnvironmentRecord]:
        """All environments, invalidated ones included, sorted by name."""
        ...

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, StoredSnapshot]:
        """The stored snapshots among ``ids``; ids that are not stored are simply absent."""
        ...

    def get_intervals(self, tables: Iterable[TableKey]) -> dict[TableKey, list[Interval]]:
        """Filled intervals per physical table ``(name, version)``.

        Each list is sorted, merged and non-overlapping (adjacent intervals are merged too).
        Tables with no intervals are absent from the result.
        """
        ...

    def get_plan(self, plan_id: str) -> PlanRecord | None:
        """The plan with id ``plan_id``, or None."""
        ...

    def get_table_sizes(self, names: Iterable[str]) -> dict[TableKey, TableSize]:
        """The last measured size of every version of the models ``names`` that a job
        measured; versions never measured are absent."""
        ...


class StateWriter(Protocol):
    """Write access to environments, snapshots, intervals and plans."""

    def push_snapshots(self, snapshots: Iterable[StoredSnapshot]) -> None:
        """Store snapshots that are not stored yet.

        Insert-if-absent: a snapshot whose ``(name, identifier)`` is already stored is left
        as it is, so pushing the same snapshots twice is a no-op.
        """
        ...

    def add_intervals(self, name: str, version: str, intervals: Iterable[Interval]) -> None:
        """Record ``intervals`` as filled for the physical table ``(name, version)``.

        Raises:
            ValueError: An interval is empty or reversed (``start >= end``).
        """
        ...

    def remove_intervals(self, name: str, version: str, start: int, end: int) -> None:
        """Mark ``[start, end)`` of ``(name, version)`` as not filled (for restatement).

        Stored intervals that straddle the range are split; the parts outside it remain.

        Raises:
            ValueError: ``start >= end``.
        """
        ...

    def update_environment(self, env: EnvironmentRecord, expected_plan_id: str | None) -> None:
        """Write ``env`` if the environment is still where the caller last saw it.

        Compare-and-swap on the plan id: with ``expected_plan_id`` None the environment must
        not exist yet; otherwise the stored environment's plan id must equal
        ``expected_plan_id``. The record is written as given (including ``updated_ts`` and
        ``invalidated``), so this also re-creates an invalidated environment.

        Raises:
            ConflictError: The environment changed (or appeared) since the plan was made.
        """
        ...

    def invalidate_environment(self, name: str) -> None:
        """Flag an environment as invalidated; it stays readable until deleted.

        Raises:
            StateError: No environment is called ``name``.
        """
        ...

    def delete_environment(self, name: str) -> None:
        """Remove an environment. Deleting one that does not exist is a no-op."""
        ...

    def set_table_size(self, name: str, version: str, size: TableSize) -> None:
        """Record the size of the physical table ``(name, version)``, replacing the last.

        Raises:
            ValueError: ``size.bytes`` is negative.
        """
        ...

    def save_plan(self, plan: PlanRecord) -> None:
        """Store a plan; saving a plan id that is already stored is a no-op."""
        ...

    def set_plan_commit(self, plan_id: str, commit: str) -> None:
        """Record ``commit`` as the one the plan's project came from (a promotion that
        found prod already at its project: the plan stays, the commit is the promoted one).

        Raises:
            StateError: No plan is ``plan_id``.
        """
        ...

    def delete_snapshots(self, ids: Iterable[SnapshotId]) -> None:
        """Remove snapshots; ids that are not stored are ignored.

        Intervals belong to physical tables, not snapshots, and are left alone.
        """
        ...


class OpenStateReader(StateReader, Protocol):
    """A state reader that holds a connection until closed."""

    def close(self) -> None:
        """Release the connection."""
        ...


class StateStore(StateReader, StateWriter, Protocol):
    """A state reader and writer that holds resources (connections) until closed.

    Besides environments and snapshots it keeps the janitor's bookkeeping and the results
    of jobs (audits, unit tests).
    """

    def list_tables(self) -> set[TableKey]:
        """Every physical table some stored snapshot uses."""
        ...

    def set_orphans(self, tables: Iterable[TableKey], now: int) -> dict[TableKey, int]:
        """Make ``tables`` the unreferenced set; return since when each has been."""
        ...

    def forget_tables(self, tables: Iterable[TableKey]) -> None:
        """Drop the orphan marks, intervals, sizes and snapshots of dropped tables."""
        ...

    def save_results(self, results: Iterable[JobResult]) -> None:
        """Store the outcomes of a job."""
        ...

    def get_results(
        self, *, job_id: str | None = None, plan_id: str | None = None
    ) -> list[JobResult]:
        """Outcomes of one job, or of every job of one plan."""
        ...

    def get_results_page(
        self,
        kind: str,
        name: str | None,
        *,
        offset: int,
        limit: int,
        max_chars: int | None = None,
    ) -> tuple[list[JobResult], int]:
        """Outcomes of ``kind`` named ``name`` (None: any), newest first (``limit`` from
        ``offset``), and how many there are (``max_chars``: whose payload is at most that
        long, as JSON)."""
        ...

    def unswept_plans(self) -> list[tuple[str, str, int]]:
        """(environment, plan id, recorded at) of every plan of an environment other than
        prod whose views no janitor has dropped yet (:func:`~sluice.core.workflow.run_janitor`
        marks those it did with a ``views_dropped`` result)."""
        ...

    def get_run_inputs(self, tables: Iterable[TableKey]) -> dict[TableKey, Seen]:
        """What the last run that rebuilt each of ``tables`` read (:mod:`sluice.core.skip`)."""
        ...

    def save_run_inputs(self, seen: Mapping[TableKey, Seen]) -> None:
        """Record what each table's rebuild read, replacing the last record."""
        ...

    def together(self, action: str) -> AbstractContextManager[None]:
        """The reads and writes of a ``with`` block as one transaction (``action`` names it
        in errors); keep it short: no Spark job, no forge call inside."""
        ...

    def close(self) -> None:
        """Release the store's connections. The store must not be used afterwards."""
        ...
