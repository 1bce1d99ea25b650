"""One replica at a time runs the duties only one may run: the scheduler and the janitor's
purge (:mod:`sluice.bot.queue.scheduler`).

Each service process (a replica) has a :class:`Leader`: a thread that tries to take the
lease ``scheduler`` in the state database (the row ``sluice_leases``, made by the queue's
migration 4) every third of its length, renews it while it holds it, and runs the duty
after each renewal. Taking and renewing are one statement
(:meth:`~sluice.bot.queue.store.JobQueue.take_lease`), so of several replicas trying at
once exactly one wins; the others try again a third of a lease later. A holder that stops
(killed, hung, cut off from the database) stops renewing, and once its lease has expired
the next replica to try takes it: the duty pauses for at most a lease and a third. A
holder that stops on purpose lets go of the lease first (:meth:`Leader.stop`), and the
next try of another replica takes it at once.

The times are the replicas' clocks (like the jobs' leases): they must agree to well within
a lease (NTP). A holder believes it holds the lease only until its last renewal's
expiry by its own clock; should two ever run the scheduler in one period anyway (a holder
paused past its expiry), the queue still keeps one job of each period (the delivery id
names it), and a second purge finds nothing to delete.

Taking and losing the lease are logged at INFO, with the holder's name (host:pid:random).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from sluice.bot.queue.store import JobQueue

log = logging.getLogger(__name__)

SCHEDULER = "scheduler"
"""The lease of the scheduler and the janitor's purge."""


def replica_name() -> str:
    """A name for this service process, unique among replicas: host:pid:random."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Leader:
    """This replica's hold on the lease ``name``; while held, ``duty(now)`` runs.

    Args:
        queue: The queue whose database keeps the lease.
        duty: Run after each renewal while this replica holds the lease (its errors are
            logged, the lease is kept).
        seconds: The lease's length: a holder that stops renewing is replaced after it.
        name: The lease.
        holder: This replica's name (default: :func:`replica_name`).
        clock: Epoch seconds.
    """

    def __init__(
        self,
        queue: JobQueue,
        *,
        duty: Callable[[float], object],
        seconds: float,
        name: str = SCHEDULER,
        holder: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if seconds <= 0:
            raise ValueError(f"the lease must last a positive time, not {seconds}")
        self.queue, self.duty, self.seconds, self.name = queue, duty, seconds, name
        self.holder = holder or replica_name()
        self.clock = clock
        self._until = 0.0  # our hold's expiry by our clock (0: not held)
        self._holding = False  # taken and not yet known lost (for the log)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def every(self) -> float:
        """How often the thread tries (and renews): a third of the lease."""
        return self.seconds / 3

    @property
    def held(self) -> bool:
        """Whether this replica holds the lease (as of its last renewal)."""
        return self.clock() < self._until

    def step(self) -> bool:
        """Take or renew the lease, then run the duty if held; whether it is held. One
        round of the thread (tests call it directly)."""
        now = self.clock()
        try:
            got = self.queue.take_lease(self.name, self.holder, now, self.seconds)
        except Exception:  # the database is out of reach: held only until it expires
            log.warning("%s lease: could not take or renew it", self.name, exc_info=True)
            if self._holding and not self.held:
                self._holding = False
                log.info("%s lease lost by this replica (%s): it expired", self.name, self.holder)
            return self.held
        if got:
            self._until = now + self.seconds
            if not self._holding:
                self._holding = True
                log.info("%s lease taken by this replica (%s)", self.name, self.holder)
            try:
                self.duty(now)
            except Exception:
                log.exception(
                    "%s lease: the duty failed; trying again at the next renewal", self.name
                )
            return True
        self._until = 0.0
        if self._holding:
            self._holding = False
            log.info(
                "%s lease lost by this replica (%s) to %s", self.name, self.holder, self._other(now)
            )
        return False

    def _other(self, now: float) -> str:
        try:
            found = self.queue.lease_holder(self.name, now)
        except Exception:
            return "another replica"
        return "nobody" if found is None else found[0]

    def start(self) -> None:
        """Try, renew and run the duty on a thread, every :attr:`every` seconds."""
        self._thread = threading.Thread(
            target=self._run, name=f"sluice-lease-{self.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.every)

    def stop(self, timeout: float | None = None) -> None:
        """Stop trying, and let go of the lease if held, so another replica takes it at
        its next try rather than after the lease expires."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._holding:
            self._until, self._holding = 0.0, False
            try:
                if self.queue.drop_lease(self.name, self.holder):
                    log.info("%s lease let go by this replica (%s)", self.name, self.holder)
            except Exception:
                log.warning("%s lease: could not let go of it", self.name, exc_info=True)
