"""When a queue operation or a job is tried again.

Two policies, one place: a job that failed waits :func:`backoff` before its next attempt
(doubling per failure, capped, with jitter, so a forge that is down is not hammered and
other repositories' jobs run meanwhile); a database statement PostgreSQL chose as a
deadlock or serialization victim, or whose connection died, is retried a few times at
once (:func:`try_again`).

>>> backoff(10.0, 1, lambda: 0.5), backoff(10.0, 3, lambda: 0.5), backoff(10.0, 30, lambda: 0.0)
(10.0, 40.0, 300.0)
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError

from sluice.core.errors import StateError

logger = logging.getLogger(__name__)

TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
"""PostgreSQL's deadlock_detected and serialization_failure."""
TRANSIENT_TRIES = 5
"""Attempts of a statement that failed transiently, the first included."""

RETRY_CAP_SECONDS = 600.0
"""The longest wait between two attempts of a job, jitter aside."""


def backoff(base: float, attempts: int, draw: Callable[[], float] = random.random) -> float:
    """Seconds to wait after a job's ``attempts``-th failed attempt: ``base`` doubled per
    attempt after the first, capped at :data:`RETRY_CAP_SECONDS`, times a factor drawn
    from [0.5, 1.5) (``draw`` gives [0, 1))."""
    wait = min(base * 2.0 ** max(0, attempts - 1), RETRY_CAP_SECONDS)
    return wait * (0.5 + draw())


def try_again(exc: StateError, attempt: int, action: str, *, reconnect: bool = False) -> None:
    """Re-raise ``exc`` unless another attempt may succeed: PostgreSQL chose the transaction
    as a deadlock victim, or (``reconnect``, for calls safe to repeat) the connection died;
    attempts are bounded."""
    lost = reconnect and bool(getattr(exc.__cause__, "connection_invalidated", False))
    if attempt == TRANSIENT_TRIES or not (lost or _transient(exc.__cause__)):
        raise exc
    reason = "connection lost" if lost else "transient conflict"
    logger.info("state database: %s: %s, trying again", action, reason)


def _transient(exc: BaseException | None) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    return getattr(exc.orig, "sqlstate", None) in TRANSIENT_SQLSTATES
