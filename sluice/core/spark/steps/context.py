"""What a step handler gets besides Spark and its step: state, the job, a way to report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.core.state import StateStore


@dataclass
class StepContext:
    """Shared by the steps of one job."""

    job: dict[str, Any]
    emit: Callable[[dict[str, Any]], None]
    state: StateStore | None = None
    results: dict[str, Any] = field(default_factory=dict)

    def log(self, message: str, **extra: Any) -> None:
        """Report progress to the runner (and through it to the user)."""
        self.emit({"event": "log", "message": message, **extra})
