"""What a step handler gets besides Spark and its step: the job, a way to report and write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepContext:
    """Shared by the steps of one job.

    The driver holds no state store: :meth:`write` reports a write as an event, and the
    runner (service side) checks it against the job's spec and applies it
    (:mod:`sluice.core.spark.writes`).
    """

    job: dict[str, Any]
    emit: Callable[[dict[str, Any]], None]
    results: dict[str, Any] = field(default_factory=dict)

    def log(self, message: str, **extra: Any) -> None:
        """Report progress to the runner (and through it to the user)."""
        self.emit({"event": "log", "message": message, **extra})

    def write(self, op: str, **fields: Any) -> None:
        """Ask the runner to write ``op`` to state (``add_intervals``, ``remove_intervals``,
        ``save_result``); sent at once, so it is kept even if the job dies right after."""
        self.emit({"event": "write", "op": op, **fields})
