"""Group commit for webhook deliveries: one task on the event loop, one transaction per batch.

Storing each delivery in its own transaction costs a pooled connection, BEGIN, several
statements and a COMMIT per request; under a burst of concurrent deliveries the service
then spends its CPU on that and requests queue behind each other. The :class:`Intake`
instead collects the deliveries of all requests in one list. Whenever its task is free it
takes *all* the deliveries waiting at that moment (up to ``max_batch``), stores them with
:meth:`JobQueue.accept_many_async` (PostgreSQL: one awaited call of a server-side
function, so the event loop keeps serving requests meanwhile and no thread waits for the
GIL after each round trip; SQLite: in a worker thread), and only after the commit answers
each request. Nothing waits on purpose: a lone delivery is stored at once, and the
deliveries that arrive during a commit go together in the next one.

Semantics are those of calling :meth:`JobQueue.accept` for each delivery in arrival order
(duplicates refused, ordering and supersede kept). Durability: a request is answered fresh
only after the commit that stored its delivery. Errors: when a batch's transaction fails,
each of its deliveries is tried again alone, so that one delivery the database refuses
does not fail the others; when the failure is the database itself (unreachable, locked),
every delivery of the batch gets the error at once, since trying them one by one would
only make each wait for the same failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.bot.events.neutral import Event, TagEvent, pr_key, supersedes
from sluice.bot.intake.pin import ForgeFor, pin_job
from sluice.bot.queue.store import Delivery, JobQueue, NewJob

log = logging.getLogger(__name__)

_Waiting = tuple[Delivery, "asyncio.Future[bool]"]


def job_of(event: Event) -> NewJob:
    """The job ``event`` asks for: queued under its key (``pr_key``), superseding what it
    makes moot, stamped with when the service received it (``received_ms``). A webhook's
    event and a web UI action's are queued alike."""
    event = dataclasses.replace(event, received_ms=int(time.time() * 1000))
    return NewJob(
        key=pr_key(event),
        kind=event.kind,
        payload=event.to_json(),
        head_sha=getattr(event, "head_sha", None),
        supersede=supersedes(event),
    )


class IntakeClosed(RuntimeError):
    """The intake is stopped (the service is shutting down): the delivery was not stored."""


class Intake:
    """The task that stores deliveries in groups (see the module docstring). Lives on one
    event loop: :meth:`start`, :meth:`accept` and :meth:`stop` are called on it.

    Args:
        queue: Where deliveries are stored.
        max_batch: Most deliveries stored in one transaction.
        forge_for: The forge of an event: a release's tag is resolved to its commit with
            it before the delivery is stored (:mod:`sluice.bot.intake.pin`). Without it, a
            release is stored without its commit, and the flow does not promote it.
    """

    def __init__(
        self, queue: JobQueue, *, max_batch: int = 500, forge_for: ForgeFor | None = None
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.max_batch = max_batch
        self.queue = queue
        self.forge_for = forge_for
        self._waiting: deque[_Waiting] = deque()
        self._wake = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._engine: AsyncEngine | None = None
        # Transactions tried, and the most deliveries one of them held (for tests and
        # diagnostics).
        self.transactions = 0
        self.largest_batch = 0

    def start(self) -> None:
        """Start storing (the task runs on the running event loop)."""
        self._engine = self.queue.async_engine()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sluice-intake")

    async def stop(self) -> None:
        """Store what was handed over, then stop; later deliveries fail with IntakeClosed."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._task is not None:
            await self._task
        else:  # never started: nothing will store what waits
            error = IntakeClosed("the service stopped before storing the delivery")
            while self._waiting:
                _settle(self._waiting.popleft()[1], error=error)
        if self._engine is not None:
            await self._engine.dispose()

    async def accept(self, delivery: Delivery) -> bool:
        """Store a delivery with the others waiting; True when fresh, False for a duplicate.

        A request that goes away while it waits still has its delivery stored.

        A tag or release is pinned to the commit its tag names now, before it waits
        (:func:`~sluice.bot.intake.pin.pin_job`, in a thread: it may ask the forge); a
        release whose tag names no commit is stored as a delivery without work.

        Raises:
            StateError: The database did not store it, or the forge did not say which
                commit a release's tag names (``TagNotResolved``).
            IntakeClosed: The intake is stopped.
        """
        if self._closed:
            raise IntakeClosed("the service is shutting down")
        if delivery.job is not None and delivery.job.kind == TagEvent.kind and self.forge_for:
            job = await asyncio.to_thread(pin_job, delivery.job, self.forge_for)
            delivery = dataclasses.replace(delivery, job=job)
            if self._closed:
                raise IntakeClosed("the service is shutting down")
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((delivery, future))
        self._wake.set()
        return await future

    async def _run(self) -> None:
        while True:
            if not self._waiting:
                if self._closed:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            count = min(len(self._waiting), self.max_batch)
            await self._store([self._waiting.popleft() for _ in range(count)])

    async def _store(self, batch: list[_Waiting]) -> None:
        self.transactions += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        try:
            outcome = await self.queue.accept_many_async([d for d, _ in batch], self._engine)
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
                await self._store([waiting])
            return
        for (_, future), fresh in zip(batch, outcome, strict=True):
            _settle(future, result=fresh)


def _settle(
    future: asyncio.Future[bool], *, result: bool | None = None, error: BaseException | None = None
) -> None:
    if future.done():  # its request went away (cancelled)
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
