"""Group commit for webhook deliveries: one writer thread, one transaction per batch.

Storing each delivery in its own transaction costs a thread hop, a pooled connection,
BEGIN, five statements and a COMMIT per request; under a burst of concurrent deliveries
the service then spends its CPU on that and requests queue behind each other. The
:class:`Intake` instead hands every delivery to one writer thread. Whenever the writer is
free it takes *all* the deliveries waiting at that moment (up to ``max_batch``), stores
them with :meth:`JobQueue.accept_many` in one transaction, and only after its commit
answers each one's future. Nothing waits on purpose: a lone delivery is stored at once,
and the deliveries that arrive during a commit go together in the next one.

Semantics are those of calling :meth:`JobQueue.accept` for each delivery in arrival order
(duplicates refused, ordering and supersede kept). Durability: a future resolves fresh
only after the commit that stored its delivery. Errors: when a batch's transaction fails,
each of its deliveries is tried again alone, so that one delivery the database refuses
does not fail the others; when the failure is the database itself (unreachable, locked),
every delivery of the batch gets the error at once, since trying them one by one would
only make each wait for the same failure.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from queue import Empty, SimpleQueue

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError

from sluice.bot.queue import Delivery, JobQueue

log = logging.getLogger(__name__)

_Waiting = tuple[Delivery, "Future[bool]"]


class IntakeClosed(RuntimeError):
    """The intake is stopped (the service is shutting down): the delivery was not stored."""


class Intake:
    """The writer thread that stores deliveries in groups (see the module docstring).

    Args:
        queue: Where deliveries are stored.
        max_batch: Most deliveries stored in one transaction.
    """

    def __init__(self, queue: JobQueue, *, max_batch: int = 500) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.max_batch = max_batch
        self._queue = queue
        self._waiting: SimpleQueue[_Waiting | None] = SimpleQueue()
        self._lock = threading.Lock()  # orders submit against stop
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sluice-intake", daemon=True)
        # Written by the writer thread only: transactions tried, and the most deliveries one
        # of them held (for tests and diagnostics).
        self.transactions = 0
        self.largest_batch = 0

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Store what was submitted, then stop; later submissions fail with IntakeClosed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._waiting.put(None)  # after every delivery submitted so far
        if self._thread.is_alive():
            self._thread.join(timeout)
        else:  # never started: nothing will store what waits
            self._fail_waiting(IntakeClosed("the service stopped before storing the delivery"))

    def submit(self, delivery: Delivery) -> Future[bool]:
        """Hand over a delivery; the future says whether it was fresh, once committed.

        The future's exception is the :class:`sluice.core.errors.StateError` of a failed
        transaction, or :class:`IntakeClosed` after :meth:`stop`.
        """
        future: Future[bool] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(IntakeClosed("the service is shutting down"))
            else:
                self._waiting.put((delivery, future))
        return future

    async def accept(self, delivery: Delivery) -> bool:
        """Store a delivery with the others waiting; True when fresh, False for a duplicate.

        Raises:
            StateError: The database did not store it.
            IntakeClosed: The intake is stopped.
        """
        return await asyncio.wrap_future(self.submit(delivery))

    # -- the writer thread ------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[_Waiting] = []
            item = self._waiting.get()
            while True:
                if item is None:
                    stopping = True
                    break
                # From here on the future cannot be cancelled. One cancelled before (its
                # request went away) is still stored, and its outcome told to nobody.
                item[1].set_running_or_notify_cancel()
                batch.append(item)
                if len(batch) >= self.max_batch:
                    break
                try:
                    item = self._waiting.get_nowait()
                except Empty:
                    break
            if batch:
                self._store(batch)

    def _store(self, batch: list[_Waiting]) -> None:
        self.transactions += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        try:
            outcome = self._queue.accept_many([delivery for delivery, _ in batch])
        except Exception as exc:
            if len(batch) == 1 or _database_down(exc):
                if len(batch) > 1:
                    log.error("storing %d deliveries failed: %s", len(batch), exc)
                for _, future in batch:
                    _settle(future, error=exc)
                return
            log.warning(
                "storing %d deliveries together failed (%s); storing each alone", len(batch), exc
            )
            for waiting in batch:
                self._store([waiting])
            return
        for (_, future), fresh in zip(batch, outcome, strict=True):
            _settle(future, result=fresh)

    def _fail_waiting(self, error: BaseException) -> None:
        while True:
            try:
                item = self._waiting.get_nowait()
            except Empty:
                return
            if item is not None:
                _settle(item[1], error=error)


def _settle(
    future: Future[bool], *, result: bool | None = None, error: BaseException | None = None
) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(bool(result))


def _database_down(exc: BaseException) -> bool:
    """Whether ``exc`` (a StateError, or what it wraps) says the database itself failed."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(cause, (OperationalError, InterfaceError, DisconnectionError)):
        return True
    return bool(getattr(cause, "connection_invalidated", False))
