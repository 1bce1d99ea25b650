"""A Spark job's writes to state, a transaction per second at most, not one per event.

The driver reports what it wants kept (a batch's intervals, an audit's or a table diff's
result, a table's size) as events, one at a time (:mod:`sluice.core.spark.writes`). Written
one transaction each, a PR build of a few models opens dozens. :class:`Coalesced` holds
them for at most :data:`WITHIN_S` and writes what arrived in that time in one transaction,
in the order it arrived; :meth:`Coalesced.flush` writes the rest when the job ends (or
fails). So a batch's interval is recorded within a second of its data being written: a
service killed mid-job loses at most that second's records, and a run again rebuilds only
those batches.

Example::

    >>> class Store:
    ...     def __init__(self): self.calls, self.transactions = [], 0
    ...     def together(self, action):
    ...         import contextlib; self.transactions += 1; return contextlib.nullcontext()
    ...     def add_intervals(self, *args): self.calls.append(("add", args))
    >>> store = Store()
    >>> writes = Coalesced(store, within=60.0)
    >>> writes.add_intervals("db.a", "v1", [(0, 10)])
    >>> writes.add_intervals("db.b", "v1", [(0, 10)])
    >>> (store.calls, store.transactions)
    ([], 0)
    >>> writes.flush()
    >>> (len(store.calls), store.transactions)
    (2, 1)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from sluice.core.state.records import Interval, JobResult, TableSize

WITHIN_S = 1.0


class Coalesced:
    """The writes of one job to ``state`` (a :class:`~sluice.core.state.store.StateStore`),
    held up to ``within`` seconds and written together, in order.

    Only the writes a job makes are offered (``add_intervals``, ``remove_intervals``,
    ``set_table_size``, ``save_results``); :meth:`flush` must be called when the job ends.
    Thread-safe: the runners hand writes over from their reader threads.

    Raises (from the write that found it, or :meth:`flush`): the store's error of a
    held write that failed (:class:`~sluice.core.errors.StateError`).
    """

    def __init__(self, state: Any, *, within: float = WITHIN_S) -> None:
        self.state = state
        self.within = within
        self._lock = threading.Lock()
        self._held: list[Callable[[], None]] = []
        self._timer: threading.Timer | None = None
        self._failed: BaseException | None = None

    def add_intervals(self, name: str, version: str, intervals: Iterable[Interval]) -> None:
        spans = list(intervals)
        self._hold(lambda: self.state.add_intervals(name, version, spans))

    def remove_intervals(self, name: str, version: str, start: int, end: int) -> None:
        self._hold(lambda: self.state.remove_intervals(name, version, start, end))

    def set_table_size(self, name: str, version: str, size: TableSize) -> None:
        self._hold(lambda: self.state.set_table_size(name, version, size))

    def save_results(self, results: Iterable[JobResult]) -> None:
        records = list(results)
        self._hold(lambda: self.state.save_results(records))

    def flush(self) -> None:
        """Write what is held now, in one transaction; raise a held write's failure."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._write()
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _hold(self, write: Callable[[], None]) -> None:
        with self._lock:
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed
            self._held.append(write)
            if self._timer is None:
                self._timer = threading.Timer(self.within, self._on_time)
                self._timer.daemon = True
                self._timer.start()

    def _on_time(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self._write()
            except BaseException as exc:  # raised to the job by its next write or flush
                self._failed = exc

    def _write(self) -> None:  # under the lock
        held, self._held = self._held, []
        if not held:
            return
        with self.state.together(f"record {len(held)} of a Spark job's writes"):
            for write in held:
                write()
