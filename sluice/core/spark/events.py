"""The line protocol between the driver and the runner (pure).

The driver prints one line per event to stdout: ``@@sluice `` followed by a JSON object.
Everything else on stdout or stderr is Spark's or Python's own output, kept in the log.

Besides progress (``job_start``, ``step_start``, ``log``, ``step_done``, ``step_failed``,
``job_done``, ``job_failed``), the driver reports what it wants kept in state as ``write``
events (``{"event": "write", "op": ...}``): it has no state store of its own. The runner
checks each against the job's spec and applies it (:mod:`sluice.core.spark.writes`).
"""

from __future__ import annotations

import json
from typing import Any

PREFIX = "@@sluice "

# Exit codes of the driver: 0 done; STEP_FAILED a step failed (the event says which);
# BAD_SPEC the job spec could not be read; anything else is a crash (JVM, Python).
STEP_FAILED = 3
BAD_SPEC = 4


def encode(event: dict[str, Any]) -> str:
    """One event as a line (no newline)."""
    return PREFIX + json.dumps(event, separators=(",", ":"), default=str)


def decode(line: str) -> dict[str, Any] | None:
    """The event in ``line``, or None when the line is ordinary output."""
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX) :])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
