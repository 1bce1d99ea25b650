"""Chat notifications (issue 46): which event is told, to which targets, once.

The flow tells an event where it already records it: :func:`sluice.bot.flow.audit.record`
with ``notify=`` (a promotion of prod and its refusal, a rollback, a build held for the
backfill budget), :func:`sluice.bot.flow.scheduled.report_failure` (a scheduled run that
failed for good) and the janitor's pass, :func:`overdue` (no successful scheduled run for
``SLUICE_NOTIFY_RUN_LATE_HOURS``, a PR whose plan has waited for approval for
``SLUICE_NOTIFY_APPROVAL_WAIT_HOURS``). Each of those adds a
:class:`~sluice.bot.present.notify_text.Notice` to the job (:meth:`Job.tell`); nothing is
sent then.

:func:`flush` sends them when the job's work and its ledger writes are done (the
dispatcher calls it last, whatever the job's outcome), so a chat never holds up or fails
a job. For each notice with a target that wants its event (``SLUICE_NOTIFY``'s routes,
:class:`~sluice.bot.forge.chat.Channels`), the audit log's ``notification`` row keyed by
the notice is appended first, once (:meth:`AuditLog.append` with ``once``): an event
already told is not told again (a replayed or retried job, a second janitor pass), and a
notice whose row cannot be written is not sent. Then each target gets the platform's body
(:mod:`sluice.bot.present.notify_text`) through :meth:`~sluice.bot.forge.chat.Sender.post`
(timeout, retries with backoff). A target that still fails is logged by its name, never
its URL, and counted (``sluice_notifications_total{outcome="failed"}``); it is not tried
again later. Delivery is at most once per event and target.
"""

from __future__ import annotations

import logging
import time

from sluice.bot.flow import audit
from sluice.bot.flow.job import Job
from sluice.bot.present import notify_text
from sluice.bot.present.notify_text import Notice
from sluice.core import runs
from sluice.core.snapshot.naming import PROD

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
RUNS_READ = 200
"""Recorded runs read, newest first, looking for the last successful one."""
WAITING_READ = 20
"""Pull requests asked of the forge (open?) in one janitor pass, at most (newest first)."""
WAITING_WINDOW_MS = 7 * 24 * HOUR_MS
"""A plan waiting longer than its threshold plus this is not looked at again (a PR closed
unapproved stays in the ledger: it is not asked about for ever)."""


def flush(job: Job) -> None:
    """Send the job's notices (see the module docstring); never raises."""
    notices, job.notices = job.notices, []
    channels = job.deps.chat
    if channels is None:
        return
    for notice in notices:
        try:
            _send(job, notice)
        except Exception as exc:  # a notification never fails the job it tells of
            # Its type only: an error's text or traceback may hold a target's URL.
            log.error("%s: the %s notification was not sent: %s", job.repo, notice.event,
                      type(exc).__name__)  # fmt: skip
            _count(job, notice.event, "failed")


def _send(job: Job, notice: Notice) -> None:
    channels = job.deps.chat
    assert channels is not None
    targets = channels.targets(job.repo, notice.event)
    if not targets:
        return
    told = audit.Entry(
        at=job.now,
        repo=job.repo,
        kind=audit.NOTICE,
        actor=audit.SERVICE,
        outcome=notice.event,
        ref=notice.key,
        detail=f"{len(targets)} target(s): {', '.join(t.name for t in targets)}",
    )
    if not job.ledger.append(told, once=True):
        log.info("%s: the %s notification %s was sent before", job.repo, notice.event, notice.key)
        return
    for target in targets:
        delivery = channels.sender.post(target, notify_text.body(target.kind, notice))
        if delivery.ok:
            log.info("%s: %s notification sent to %s", job.repo, notice.event, target.name)
            _count(job, notice.event, "sent")
        else:
            log.warning(
                "%s: %s notification to %s not sent: %s",
                job.repo,
                notice.event,
                target.name,
                delivery.reason,
            )
            _count(job, notice.event, "failed")


def _count(job: Job, event: str, outcome: str) -> None:
    if job.deps.metrics is not None:
        job.deps.metrics.inc("sluice_notifications_total", event=event, outcome=outcome)


def wanted(job: Job, event: str) -> bool:
    """Whether any target of the job's repository wants ``event`` (work to find it)."""
    channels = job.deps.chat
    return channels is not None and bool(channels.targets(job.repo, event))


def overdue(job: Job) -> None:
    """The janitor's pass: a late scheduled run, pull requests waiting for approval."""
    try:
        _late_run(job)
        _waiting(job)
    except Exception:  # the janitor's own work goes on
        log.warning("%s: overdue notifications not looked for", job.repo, exc_info=True)


def _late_run(job: Job) -> None:
    hours = job.deps.notify_run_late_hours
    if not hours or not wanted(job, notify_text.RUN_LATE):
        return
    found, _ = runs.recorded_runs(job.state(), PROD, offset=0, limit=RUNS_READ)
    last = next((r for r in found if r.ok), None)
    if last is None:
        return  # no successful run known to be late from
    ended = int(last.payload.get("finished") or last.payload.get("at") or 0)
    if not ended or job.now - ended < hours * HOUR_MS:
        return
    job.tell(
        Notice(
            notify_text.RUN_LATE,
            key=f"run late since {ended}",
            repo=job.forge.repo,
            plan_id=last.plan_id or "",
            detail=f"{runs_time(ended)}",
            hours=(job.now - ended) / HOUR_MS,
        )
    )


def runs_time(ms: int) -> str:
    """An instant as people read it (UTC).

    >>> runs_time(0)
    '1970-01-01 00:00 UTC'
    """
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))


def _waiting(job: Job) -> None:
    hours = job.deps.notify_approval_wait_hours
    if not hours or not wanted(job, notify_text.APPROVAL_WAITING):
        return
    repo, asked, after = job.repo, 0, hours * HOUR_MS
    latest = [(heads[-1], number) for number, heads in job.ledger.builds(repo).items()]
    for (sha, _fingerprint, planned), number in sorted(latest, key=lambda p: -p[0][2]):
        if not after <= job.now - planned < after + WAITING_WINDOW_MS:
            continue
        if job.ledger.approved_by_pr(repo, number):
            continue
        key = f"waiting #{number} at {sha[:12]}"
        if job.ledger.appended(repo, audit.NOTICE, key, notify_text.APPROVAL_WAITING):
            continue
        review = job.ledger.review(repo, number, sha)
        if review is None or not review.items:
            continue  # nothing to approve
        if asked >= WAITING_READ:
            break
        asked += 1
        pr = job.forge.pull_request(number)
        if not pr.open or pr.draft or pr.head_sha != sha:
            continue
        job.tell(
            Notice(
                notify_text.APPROVAL_WAITING,
                key=key,
                repo=job.forge.repo,
                ref=f"#{number}",
                actor=pr.author,
                plan_id=review.fingerprint,
                detail=pr.title,
                hours=(job.now - planned) / HOUR_MS,
            )
        )
