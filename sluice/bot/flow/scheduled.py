"""The jobs the service's schedule queues for a repository (:meth:`Worker.schedule`): the
janitor, the scheduled run of prod and its drift check. Each works on the prod branch's project with the
trusted settings as in force (never a pull request's), and run under the repository's
prod queue key, so never at the same time as a promotion, a tag or each other.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from sluice.bot.flow import drift_repair, notify, trust
from sluice.bot.flow.job import Job
from sluice.bot.present import checks, notify_text, replies
from sluice.core import drift, runs
from sluice.core.errors import SluiceError
from sluice.core.rollback import kept_tables
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.state import open_state
from sluice.core.timeutil import DAY_MS
from sluice.core.workflow import apply_plan, plan_run, run_janitor

log = logging.getLogger(__name__)


def _quiet_ms(job: Job) -> int:
    """How long after a plan was recorded its job has surely ended: twice the service's
    job time limit (a day when it has none)."""
    limit = job.deps.job_timeout
    return int(2 * (limit if limit is not None else DAY_MS / 1000) * 1000)


def _building(job: Job) -> Callable[[str], bool]:
    """Whether a job of this repository running now (on any replica: the queue says) may
    be making ``environment``'s views: a pull request's (queue key ``<repo>#<n>``) its
    environment's; one keyed by a commit (a check run named by its commit, a merge group)
    any environment's. Read when asked: the janitor asks after it holds the environment."""
    repo = job.repo.casefold()

    def busy(environment: str) -> bool:
        for key in job.deps.running_keys():
            folded = key.casefold()
            if not folded.startswith(repo):
                continue
            rest = folded[len(repo) :]
            if rest.startswith("@"):
                return True
            number = rest[1:] if rest.startswith("#") else ""
            if number.isdigit() and (
                environment == pr_environment(int(number))
                or environment.endswith(f"_{pr_environment(int(number))}")
            ):
                return True
        return False

    return busy


def janitor(job: Job) -> None:
    """Drop expired environments and unreferenced tables, with the prod branch's TTLs and
    the service's Spark; prune the repository's checkouts and the job logs not used for
    ``SLUICE_WORKDIR_KEEP_DAYS``. First, whatever the repository's state, rotate the
    workdir's Spark logs past ``SLUICE_LOG_MAX_BYTES`` (``SLUICE_LOG_BACKUPS`` kept)."""
    rotated = job.deps.checkout.rotate_logs(job.deps.log_max_bytes, job.deps.log_backups)
    for path in rotated:
        log.info("rotated %s (past %s bytes)", path, job.deps.log_max_bytes)
    notify.overdue(job)  # a late scheduled run, PRs waiting for approval: told in chat
    found = trust.prod_project(job, "janitor")
    if found is None:
        return
    settings, tree, project = found
    store = open_state(job.state_url)
    try:
        report = run_janitor(
            store,
            job.deps.spark_runner(project, tree, lambda _event: None),
            url=job.state_url,
            now=job.now,
            table_ttl_ms=int(settings.sluice.table_ttl_days * DAY_MS),
            keep=kept_tables(store, PROD, settings.sluice.keep_prod_plans),
            quiet_ms=_quiet_ms(job),
            busy=_building(job),
        )
    finally:
        store.close()
    trees, logs = job.deps.checkout.prune(
        job.forge.repo,
        job.deps.workdir_keep_days,
        folder=job.namespace.folder,
        spark=job.namespace.spark,
    )
    log.info(
        "%s: janitor removed %s environment(s), dropped %s table(s), pruned %s checkout(s) "
        "and %s job log(s)",
        job.forge.repo,
        len(report.environments),
        len(report.tables),
        trees,
        logs,
    )


def run(job: Job) -> None:
    """``sluice run prod``: the intervals due by each model's cron, in one Spark job;
    no Spark when none is due. A rebuild whose query and inputs did not change since its
    last run is skipped, as ``sluice run`` skips it (:mod:`sluice.core.skip`).

    The project is that of the commit prod's plan was promoted from, as the state records
    it (:func:`drift_repair.promoted_project`), never the prod branch's head: a commit on
    it no promotion applied runs none of its statements or audits in prod's run.

    Raises:
        SluiceError: prod does not exist, its plan records no commit (promote it once), the
            project is not what prod runs, or the job failed: the worker tries again, then
            :func:`report_failure`.
    """
    if job.ledger.last_sha(job.repo) is None:
        return  # no project was ever loaded for this repository: nothing built
    settings = trust.for_repository(job)
    now = job.now
    store = open_state(job.state_url)
    try:
        # its outcome recorded in the state (core/runs.py): what the web UI's prod history shows
        with runs.recorded(store, PROD, now=now, scrub=job.scrub) as recording:
            found = drift_repair.promoted_project(job, store, settings, "scheduled run")
            _settings, tree, project = found
            plan = recording.plan = plan_run(project, store, PROD, now=now)
            if not plan.backfill:
                log.info(
                    "%s: scheduled run: prod is up to date, no interval is due", job.forge.repo
                )
                return
            due = plan.backfill_intervals
            log.info(
                "%s: scheduled run: %s interval(s) due in %s model(s)",
                job.forge.repo,
                due,
                len(plan.backfill),
            )
            runner = job.deps.spark_runner(project, tree, lambda _event: None)
            result = apply_plan(
                project, store, plan, runner, url=job.state_url, now=now, skip_unchanged=True
            )
            recording.tables_built = result.tables_built
            recording.spark_seconds = result.job.seconds if result.job is not None else None
            recording.skipped = tuple(result.skipped)
    finally:
        store.close()
    log.info(
        "%s: scheduled run: %s table(s) brought up to date, %s skipped (nothing they read changed)",
        job.forge.repo,
        result.tables_built,
        len(result.skipped),
    )
    for line in result.explain():
        log.debug(
            "%s: scheduled run: %s %s: %s", job.forge.repo, line.name, line.outcome, line.reason
        )


def report_failure(job: Job, error: str) -> None:
    """A scheduled run failed for good: the log, ``SLUICE_RUN_REPORT_TO`` if set, and the
    chat targets that want ``run_failed`` (``error`` is scrubbed already)."""
    log.error("%s: scheduled run of prod failed for good: %s", job.forge.repo, error)
    job.tell(
        notify_text.Notice(
            notify_text.RUN_FAILED,
            key=f"run failed at {job.now}",
            repo=job.forge.repo,
            detail=error,
        )
    )
    if job.deps.run_report_to is not None:
        job.forge.reply(job.deps.run_report_to, replies.scheduled_run_failed(error))


def drift_check(job: Job) -> None:
    """``sluice drift prod``: prod's views and tables on Spark against what Sluice recorded
    (reads only; issue 47). The outcome is the ``sluice/drift`` check of the prod branch's
    head, the ``sluice_drift_*`` metrics, and, when prod drifted, a ``drift`` notice to the
    chat targets that want it (once per distinct drift: its models and kinds); while a repair
    of that drift waits for approvals, the check shows it (:mod:`sluice.bot.flow.drift_repair`).
    A check that
    cannot run says so on the same check and is tried again next period (no retry)."""
    found = trust.prod_project(job, "drift check")
    if found is None:
        return
    settings, tree, project = found
    head = job.forge.commit_of(settings.branch)
    metrics = job.deps.metrics
    store = open_state(job.state_url)
    try:
        if store.get_environment(PROD) is None:
            return  # no prod yet: nothing recorded to check
        runner = job.deps.spark_runner(project, tree, lambda _event: None)
        report = drift.check(store, PROD, runner, now=job.now)
        # A repair asked for and waiting for approvals keeps its check (and its button).
        approvers = settings.gate.required_approvers
        waiting = drift_repair.pending(job, store, report, approvers, settings, project)
        drift_repair.show(job, store, report, settings, project, head)  # the web UI's page
    except SluiceError as exc:
        error = job.scrub(str(exc), tree)
        log.warning("%s: drift check of prod could not run: %s", job.forge.repo, error)
        if metrics is not None:
            metrics.inc("sluice_drift_checks_total", outcome="failed")
        if head is not None:
            job.forge.set_check(head, checks.drift_failed(error))
        return
    finally:
        store.close()
    models = report.drifted_models
    if metrics is not None:
        metrics.inc("sluice_drift_checks_total", outcome="drift" if models else "clean")
        metrics.set("sluice_drift_models", len(models), repository=job.repo)
    if head is not None:
        job.forge.set_check(head, waiting or checks.drift_result(report))
    if not models:
        log.info("%s: drift check: prod is as Sluice recorded it", job.forge.repo)
        return
    log.warning(
        "%s: drift check: %s model(s) of prod differ from what Sluice recorded: %s",
        job.forge.repo,
        len(models),
        ", ".join(models),
    )
    kinds = sorted({f"{d.model}:{d.kind}" for d in report.differences})
    job.tell(
        notify_text.Notice(
            notify_text.DRIFT,
            key=f"drift {report.plan_id} {hashlib.sha256(repr(kinds).encode()).hexdigest()[:16]}",
            repo=job.forge.repo,
            plan_id=report.plan_id,
            detail="; ".join(kinds),
        )
    )
