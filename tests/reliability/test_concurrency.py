"""Two service processes sharing one PostgreSQL, many PRs at once: a small run of
``bench/concurrency.py`` (real app on uvicorn, real queue, real workers; the flow
records what it runs), whose every check must come out zero; and the checks themselves,
on made-up records, must see what they look for."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bench.concurrency import Options, Plan, Report, analyse, run


@pytest.mark.postgres
def test_two_service_processes_run_each_job_once_in_order_without_overlap(
    fresh_postgres_url: str,
) -> None:
    options = Options(
        prs=12, commits=3, repos=2, tags=4, merge=0.5, burst=0.5, dup=0.4, redeliver=0.2,
        workers=2, seconds=3.0, handle_ms=(3.0, 10.0), poll=0.5, lease=4.0, janitor=1.0,
        # The recorder writes the ledger as the real flow does, and Ledger.seen can
        # lose a race to another worker (the queue retries the job): room for that.
        max_attempts=6, drain_timeout=45.0,
    )  # fmt: skip
    began = time.monotonic()
    report = run(fresh_postgres_url, options)

    assert report.problems() == []
    # The zeros, one by one (problems() names them all; these say which in a failure).
    assert report.duplicates_run == 0
    assert report.order_violations == report.accept_order_violations == 0
    assert report.overlaps == report.prod_overlaps == 0
    assert report.stored_twice == report.lost == report.answered_wrong == 0
    assert report.deadlocks == 0 and report.log_errors == [] and report.drained
    # ... and the run did exercise what they check.
    deliveries = 12 * (3 + 1) + 4
    assert report.deliveries == deliveries
    assert report.dup_copies > 0 and report.redeliveries > 0
    assert report.answers[202] == deliveries
    assert report.answers[200] == report.dup_copies + report.redeliveries
    assert report.jobs_run == report.statuses["done"] == report.runs
    assert report.statuses["superseded"] > 0  # bursts of heads: older queued ones skipped
    assert report.runs_by_kind["janitor"] > 0
    assert report.prod_runs >= 4 + report.runs_by_kind["janitor"]  # tags and janitors, at least
    assert set(report.runs_by_process) == {"svc-a", "svc-b"}
    assert report.max_concurrent >= 2
    assert time.monotonic() - began < 60


# -- the checks, on made-up records ---------------------------------------------------------

PR, PROD = "github:sluice-bench/repo-0#1", "github:sluice-bench/repo-0:prod"


def made_up() -> tuple[Plan, list[dict[str, Any]], dict[str, int | None], list[dict[str, Any]]]:
    """One PR (two heads, merged) and one tag, stored as jobs 1-4 and run one after the other."""
    plan = Plan(Options(prs=1, commits=2, repos=1, tags=1, merge=1.0, dup=0.0), "r")
    ids = ["r-pr1-0", "r-pr1-1", "r-pr1-close", "r-tag0"]
    keys = [PR, PR, PROD, PROD]
    jobs = [
        {"id": n, "delivery_id": d, "key": k, "kind": "pull_request", "head_sha": None,
         "status": "done", "attempts": 1, "created_ts": 1_000_000}
        for n, (d, k) in enumerate(zip(ids, keys, strict=True), 1)
    ]  # fmt: skip
    stored: dict[str, int | None] = {d: n for n, d in enumerate(ids, 1)}
    attempts = [
        run_row(n, d, k, start=1000.0 + n, end=1000.5 + n)
        for n, (d, k) in enumerate(zip(ids, keys, strict=True), 1)
    ]
    return plan, jobs, stored, attempts


def run_row(job: int, delivery: str, key: str, *, start: float, end: float) -> dict[str, Any]:
    return {"t": "run", "ok": True, "error": None, "proc": "svc-a", "job": job, "key": key,
            "kind": "pull_request", "token": delivery, "attempt": 1, "start": start,
            "end": end}  # fmt: skip


def checked(
    plan: Plan,
    jobs: list[dict[str, Any]],
    stored: dict[str, int | None],
    attempts: list[dict[str, Any]],
) -> Report:
    report = Report(drained=True)
    analyse(report, plan, jobs, stored, attempts, [])
    return report


def test_the_checks_pass_a_clean_run() -> None:
    report = checked(*made_up())
    assert report.problems() == []
    assert (report.runs, report.jobs_run, report.prod_runs, report.keys) == (4, 4, 2, 2)


def test_the_checks_see_a_job_run_twice() -> None:
    plan, jobs, stored, attempts = made_up()
    again = dict(attempts[3], start=1010.0, end=1011.0)
    report = checked(plan, jobs, stored, [*attempts, again])
    assert report.duplicates_run == 1 and report.overlaps == 0


def test_the_checks_see_a_delivery_run_under_two_jobs() -> None:
    plan, jobs, stored, attempts = made_up()
    jobs.append(dict(jobs[3], id=5))
    report = checked(plan, jobs, stored, [*attempts, dict(attempts[3], job=5, start=1010.0)])
    assert report.duplicates_run == 1 and report.stored_twice == 1


def test_the_checks_see_overlapping_promotions() -> None:
    plan, jobs, stored, attempts = made_up()
    attempts[3]["start"] = attempts[2]["end"] - 0.1  # the tag starts before the merge ends
    report = checked(plan, jobs, stored, attempts)
    assert (report.overlaps, report.prod_overlaps) == (1, 1)


def test_the_checks_see_work_for_one_pr_out_of_order() -> None:
    plan, jobs, stored, attempts = made_up()
    attempts[0]["start"], attempts[0]["end"] = 1010.0, 1011.0  # the first head runs last
    report = checked(plan, jobs, stored, attempts)
    assert report.order_violations == 1 and report.overlaps == 0


def test_the_checks_see_deliveries_accepted_out_of_the_order_sent() -> None:
    plan, jobs, stored, attempts = made_up()
    stored["r-pr1-0"], stored["r-pr1-1"] = 2, 1
    report = checked(plan, jobs, stored, attempts)
    assert report.accept_order_violations == 1


def test_the_checks_see_a_superseded_job_run_and_a_last_head_skipped() -> None:
    plan, jobs, stored, attempts = made_up()
    jobs[1]["status"] = "superseded"  # the last head, yet it ran
    report = checked(plan, jobs, stored, attempts)
    assert report.state_mismatch == 1 and report.latest_not_built == 1
