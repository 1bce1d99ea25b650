"""`sluice_job_retries_total{kind}`: a failed attempt put back in the queue counts once, by
the job's kind (a bounded label); the last attempt, which fails for good, does not."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from sluice.bot.events.neutral import Event, JanitorEvent, event_from_json, pr_key
from sluice.bot.present.metrics import JOB_KINDS, Registry
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.bot.queue.worker import Worker


def _retries(metrics: Registry) -> dict[str, float]:
    return {
        s.labels["kind"]: s.value
        for family in text_string_to_metric_families(metrics.render())
        for s in family.samples
        if s.name == "sluice_job_retries_total"
    }


def test_a_retried_job_is_counted_by_kind_and_its_last_attempt_is_not(tmp_path: Path) -> None:
    queue = JobQueue(f"sqlite:///{tmp_path / 'state.db'}", max_attempts=3, retry_seconds=0)
    event = JanitorEvent(forge="github", repo="octo/r", installation_id=None)
    job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
    assert queue.accept("d-1", "github", "janitor", job, 1.0)
    given_up: list[str] = []

    def fails(_: Event) -> None:
        raise RuntimeError("the forge is down")

    metrics = Registry()
    worker = Worker(queue, handle=fails, abandon=lambda _e, why: given_up.append(why),
                    metrics=metrics)  # fmt: skip
    try:
        assert _retries(metrics) == {}
        assert worker.run_once()
        assert _retries(metrics) == {"janitor": 1.0}
        assert worker.run_once()
        assert _retries(metrics) == {"janitor": 2.0}
        assert worker.run_once()  # the third and last attempt: failed for good
        assert _retries(metrics) == {"janitor": 2.0} and given_up == ["the forge is down"]
        assert not worker.run_once()
    finally:
        queue.close()
    assert event_from_json(job.payload) == event


def test_the_kind_label_takes_only_job_kinds() -> None:
    assert set(JOB_KINDS) == {"pull_request", "comment", "review", "check_run", "tag",
                              "branch_push", "merge_group", "janitor", "run", "drift"}  # fmt: skip
    metrics = Registry()
    metrics.inc("sluice_job_retries_total", kind="made-up")
    assert 'sluice_job_retries_total{kind="other"} 1.0' in metrics.render()
