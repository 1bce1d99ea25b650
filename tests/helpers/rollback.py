"""What the rollback tests share (``tests/bot/flow/test_rollback_command.py`` and
``tests/security/test_rollback_rights.py``): a Spark runner stand-in that records the
jobs it is given."""

from __future__ import annotations

from typing import Any

from sluice.core.spark.submit import JobResult


class Recorder:
    """A runner factory and its runner at once: every job spec it is asked to run is kept
    in ``jobs``, and each succeeds at once (no Spark)."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    def __call__(self, *_args: Any) -> Recorder:
        return self

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.jobs.append(spec)
        return JobResult(spec["job_id"], {}, 0.1, None)
