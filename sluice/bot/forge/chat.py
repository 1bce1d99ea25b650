"""Chat incoming webhooks (Slack, Microsoft Teams): a message posted, retried, never
blocking; the only module that sends to them.

A :class:`Target` is one webhook: its kind (``slack`` or ``teams``), its URL (a secret:
whoever holds it may post to the channel) and the events it wants. Its URL is never in
its ``repr``, a log line or an error: a target is named by its kind and its place in
``SLUICE_NOTIFY`` (:attr:`Target.name`). The service's settings make them
(``sluice.bot.entry.settings``); which message goes where is the flow's
(:mod:`sluice.bot.flow.notify`), its words the presenter's
(:mod:`sluice.bot.present.notify_text`).

:meth:`Sender.post` sends one JSON body with a timeout; a 429, a 5xx, a timeout or a
connection error is tried again after a backoff (doubled each time, from
:data:`BACKOFF_S`; a ``Retry-After`` of seconds is honoured up to :data:`MAX_WAIT_S`), at
most :data:`ATTEMPTS` times in all; any other answer is final. It never raises: the
:class:`Delivery` says what became of it, in words that hold no URL (an exception's text
may: ``requests`` names the URL in it, so only its type is kept).
"""

from __future__ import annotations

import fnmatch
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import requests

Kind = Literal["slack", "teams"]
KINDS: tuple[str, ...] = ("slack", "teams")

TIMEOUT_S = 10.0
"""Seconds to connect and to read an answer, each."""
ATTEMPTS = 4
"""Tries of one message, the first included."""
BACKOFF_S = 1.0
"""The first wait before trying again (then 2, 4 s)."""
MAX_WAIT_S = 30.0
"""The longest wait between tries, whatever ``Retry-After`` asks."""


@dataclass(frozen=True)
class Target:
    """One incoming webhook: where, which kind, for which events, and its name in logs."""

    kind: Kind
    url: str = field(repr=False)
    events: frozenset[str]
    name: str = ""
    """How logs and errors name it (``slack #1 of acme/*``): never its URL."""

    def __repr__(self) -> str:
        return f"Target({self.kind}, {self.name or '?'}, url=***)"

    def wants(self, event: str) -> bool:
        return event in self.events


@dataclass(frozen=True)
class Route:
    """The targets of the repositories a pattern matches (``acme/*``, ``gitlab:data/*``)."""

    pattern: str
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Channels:
    """The service's chat targets (``SLUICE_NOTIFY``) and the sender that posts to them."""

    routes: tuple[Route, ...]
    sender: Sender

    def targets(self, repo: str, event: str) -> list[Target]:
        """The targets of ``repo`` (``forge:owner/name``) that want ``event``: of every
        route whose pattern matches it (``[forge:]glob``, without regard to case), each
        target once."""
        forge, _, name = repo.partition(":")
        found: list[Target] = []
        for route in self.routes:
            only, _, pattern = route.pattern.rpartition(":")
            if only and only.casefold() != forge.casefold():
                continue
            if not fnmatch.fnmatchcase(name.casefold(), pattern.casefold()):
                continue
            found.extend(t for t in route.targets if t.wants(event) and t not in found)
        return found


@dataclass(frozen=True)
class Delivery:
    """What became of one message: ``sent``, or ``failed`` and why (no URL in it)."""

    ok: bool
    attempts: int
    reason: str = ""


_RETRY = frozenset({429, 500, 502, 503, 504})
_UNUSABLE = (
    requests.exceptions.InvalidURL,
    requests.exceptions.InvalidSchema,
    requests.exceptions.MissingSchema,
)


class Sender:
    """Posts JSON bodies to targets (one ``requests`` session; ``sleep`` between tries)."""

    def __init__(
        self,
        *,
        timeout: float = TIMEOUT_S,
        attempts: int = ATTEMPTS,
        backoff: float = BACKOFF_S,
        max_wait: float = MAX_WAIT_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._session = requests.Session()
        self._timeout = timeout
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._max_wait = max_wait
        self._sleep = sleep

    def post(self, target: Target, body: dict[str, Any]) -> Delivery:
        """Send ``body`` to ``target``, trying again as the module docstring says."""
        reason = ""
        for attempt in range(1, self._attempts + 1):
            wait = self._backoff * 2 ** (attempt - 1)
            try:
                answer = self._session.post(
                    target.url, json=body, timeout=self._timeout, allow_redirects=False
                )
            except _UNUSABLE as exc:  # a URL requests cannot use: trying again won't help
                return Delivery(False, attempt, f"{type(exc).__name__} (not sent)")
            except requests.RequestException as exc:
                reason = f"{type(exc).__name__} (no answer)"
            except Exception as exc:  # anything else, final: the job goes on
                return Delivery(False, attempt, f"{type(exc).__name__} (not sent)")
            else:
                status = answer.status_code
                if 200 <= status < 300:
                    return Delivery(True, attempt)
                reason = f"HTTP {status}"
                if status not in _RETRY:
                    return Delivery(False, attempt, reason)
                wait = _retry_after(answer.headers.get("Retry-After"), wait)
            if attempt < self._attempts:
                self._sleep(min(wait, self._max_wait))
        return Delivery(False, self._attempts, f"{reason} after {self._attempts} tries")

    def close(self) -> None:
        self._session.close()


def _retry_after(value: str | None, default: float) -> float:
    """``Retry-After`` in seconds (its date form is not used: ``default``).

    >>> _retry_after("7", 1.0), _retry_after("soon", 1.0), _retry_after("nan", 2.0)
    (7.0, 1.0, 2.0)
    """
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        return default
    return seconds if math.isfinite(seconds) and seconds >= 0 else default
