"""Stopping a running job on purpose: a :class:`Cancel` asked from another thread (the
worker's, when a newer head supersedes the build) and honoured by the runner of the job
running in the thread it is bound to (:func:`scope`).

A runner hands :func:`on_cancel` the same callback that ends its job at the time limit
(kill the driver's process group; on Spark Connect the job child's, whose sessions are
then interrupted on the server; in process, every Spark job cancelled), and reports the
end as :class:`~sluice.core.errors.JobCancelled` (:func:`stopped`) rather than a timeout.
A job stopped this way keeps what it finished, as a killed one does: intervals recorded
only for batches written and audited, the environment's views and record untouched (they
change only once every table is built), so nothing half-built is marked built.

>>> stop = Cancel()
>>> seen = []
>>> with scope(stop):
...     forget = on_cancel(lambda: seen.append("killed"))
...     stop.cancel("superseded by job 7 (head abc)")
...     stopped().message
'the job was stopped: superseded by job 7 (head abc)'
>>> seen
['killed']
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from sluice.core.errors import JobCancelled


class Cancel:
    """One job's stop: :meth:`cancel` from any thread, once; the hooks the runner added
    run then (or at once, when added after it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._hooks: list[Callable[[], None]] = []

    @property
    def reason(self) -> str | None:
        """Why the job was stopped; None while it was not."""
        return self._reason

    def cancel(self, reason: str) -> None:
        """Stop the job: run the hooks (they must not block long). Once; later calls do
        nothing."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` when the job is stopped (now, if it already was); the function
        that forgets it (call it once the work it stops is over)."""
        with self._lock:
            if self._reason is None:
                self._hooks.append(hook)
                return lambda: self._forget(hook)
        hook()
        return lambda: None

    def _forget(self, hook: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._hooks.remove(hook)


_CURRENT: ContextVar[Cancel | None] = ContextVar("sluice_job_cancel", default=None)


@contextlib.contextmanager
def scope(stop: Cancel) -> Iterator[Cancel]:
    """Bind ``stop`` to the job run in this thread (and what it calls)."""
    token = _CURRENT.set(stop)
    try:
        yield stop
    finally:
        _CURRENT.reset(token)


def on_cancel(hook: Callable[[], None]) -> Callable[[], None]:
    """:meth:`Cancel.on_cancel` of this thread's job; nothing when none is bound."""
    stop = _CURRENT.get()
    return stop.on_cancel(hook) if stop is not None else lambda: None


def reason() -> str | None:
    """Why this thread's job was stopped; None: it was not (or none is bound)."""
    stop = _CURRENT.get()
    return stop.reason if stop is not None else None


def stopped() -> JobCancelled:
    """The error of this thread's stopped job."""
    why = reason() or "stopped"
    return JobCancelled(
        f"the job was stopped: {why}",
        hint="nothing to do: a newer run takes its place; what it finished is kept",
    )


def check() -> None:
    """Raise :func:`stopped` when this thread's job was stopped."""
    if reason() is not None:
        raise stopped()
