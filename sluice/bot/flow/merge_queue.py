"""Merge queues: GitHub's merge queue and GitLab's merge trains; an entry's checks, and its end.

A merge group's head commit is the prod branch with the pull requests ahead of it in the
queue and its own merged in; GitHub waits for the branch's required checks on it and
merges the group when they pass. A GitLab merge train runs a pipeline for each merge
request on it, on the commit of ``refs/merge-requests/<iid>/train`` (the target branch with
the merge requests ahead of it and its own merged in), and merges it when that pipeline
succeeds: the pipeline's hook is the same event (:mod:`sluice.bot.events.gitlab`), and the
GitLab forge posts the checks as commit statuses into that pipeline, so that it succeeds
only when they do. ``checks_requested`` (:func:`on_merge_group`) sets every
check a PR's head has (:data:`~sluice.bot.present.checks.MERGE_GROUP_CHECKS`) on that
commit:

1. The combined head is planned against prod as a merge would promote it, and that plan
   must hold nothing no gate approved: the rule a promotion checks
   (:func:`sluice.bot.flow.promotion.to_approve` and the ledger's ``unapproved``), asked
   before the merge rather than after. Each PR's approval covers its own model contents;
   the combination is approved when every content it brings to prod is one of them. A
   content no PR had (two PRs changing one model, merged into a third text) fails
   ``sluice/approval`` with the model, the content and the PRs whose plans change that
   model; GitHub then removes the entry from the queue (GitLab from the train: its
   pipeline failed; a GitLab status shows its title only, so the reason is also posted
   on the merge request). Nothing is built for it.
2. Approved, the combined head is built in its own environment (``merge_group_<sha>``)
   in the sandbox, as a PR's head is: its unit tests run, and only the versions no PR
   built are computed (snapshots are content-addressed, so every table the PRs' own
   environments built is found and reused; a model whose parent another PR ahead changed
   is a new version and is built here, so the promotion after the merge has nothing left
   to compute). Building what approvals cover in the sandbox changes nothing in prod;
   prod is changed only by the promotion after the merge, which checks the approvals
   again.

``destroyed`` (merged, dequeued, invalidated; a train pipeline ended) builds nothing: it
is recorded in the audit log and the group's environment is invalidated (the janitor
drops its views; tables prod or another environment reads are kept).

The settings are the trusted ones in force (the prod branch's, never the group's own); a
group into another branch than prod gets neutral checks: it promotes nothing. The merge
itself arrives as each PR's ``pull_request`` closed event (GitLab: the merge request's
``merge``) and promotes through
:func:`sluice.bot.flow.promotion.on_merge`, in the order the deliveries arrive, a merge
older than the commit prod was promoted from being left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sluice.bot.events.neutral import MergeGroupEvent
from sluice.bot.flow import audit, policies, promotion, trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import Item
from sluice.bot.forge.base import Check, UnusableTree
from sluice.bot.present import checks, comment
from sluice.core.errors import ConfigError, DriverLost, SluiceError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.preview import preview_environment
from sluice.core.snapshot.naming import PROD, merge_group_environment
from sluice.core.tablediff.result import DiffOptions
from sluice.core.timeutil import DAY_MS
from sluice.core.workflow import invalidate_environment, plan_environment

log = logging.getLogger(__name__)

CHANGED_BY_PRS = 200
"""Pull requests (the most recently numbered) whose last plan is read to name who
changes a model the combined plan holds unapproved."""


def on_merge_group(job: Job, event: MergeGroupEvent) -> None:
    """``checks_requested``: plan, gate and build the group's head; ``destroyed``:
    record it and let its environment go (see the module docstring)."""
    if event.action == "destroyed":
        _destroyed(job, event)
    else:
        check_group(job, event)


def _entry(event: MergeGroupEvent) -> str:
    """The audit log's reference of a queue entry."""
    return f"#{event.number}" if event.number is not None else f"queue {event.head_sha[:12]}"


def _all(job: Job, sha: str, make: Callable[[str], Check]) -> None:
    for name in checks.MERGE_GROUP_CHECKS:
        job.forge.set_check(sha, make(name))


def _fail(job: Job, sha: str, title: str, text: str) -> None:
    _all(job, sha, lambda name: checks.merge_group_failed(name, title, text))


def check_group(job: Job, event: MergeGroupEvent) -> None:
    """Set the merge group's checks on its head commit (see the module docstring)."""
    sha = event.head_sha
    _all(job, sha, checks.merge_group_queued)
    try:
        settings = trust.for_repository(job)
    except ConfigError as exc:
        _fail(job, sha, checks.SETTINGS_INVALID, job.scrub(str(exc)))
        return
    if event.base_ref != settings.branch:
        _all(job, sha, lambda n: checks.merge_group_elsewhere(n, event.base_ref, settings.branch))
        return
    try:
        tree = job.tree(sha)
    except UnusableTree as exc:
        _fail(job, sha, checks.FILES_REFUSED, job.scrub(str(exc)))
        return
    try:
        project = trust.load_trusted(job, tree, settings)
        own = trust.parse(trust.tree_source(tree, job.deps.config_path))
    except SluiceError as exc:
        _fail(job, sha, checks.PROJECT_DOES_NOT_LOAD, job.scrub(str(exc), tree))
        return
    environment = merge_group_environment(sha)
    tiers = settings.deploy.merge_tiers()
    reaches = tiers[0].name if tiers else PROD  # what the merge promotes
    pr = project.config.sluice.pr
    now = job.now
    start = now - pr.backfill_days * DAY_MS if pr.backfill_days is not None else None
    store = job.state()
    try:
        with store.together(f"plan {environment}"):
            plan = plan_environment(
                project, store, environment, start=start, end=now, execution_time=now,
                against=PROD,
            )  # fmt: skip
            merging = plan_environment(project, store, reaches, end=now, execution_time=now)
        items = promotion.to_approve(
            merging,
            project,
            own,
            settings,
            trust.prod_python_digest(job, tree, settings),
            trust.prod_statements_digest(job, settings),
        )
    except SluiceError as exc:
        _fail(job, sha, checks.PLAN_FAILED, job.scrub(str(exc), tree))
        return
    # Approved under the settings in force, as a promotion asks.
    needs = settings.requires_approval
    missing = job.ledger.unapproved(job.repo, items, settings.generation) if needs else []
    if missing:
        _refuse(job, event, settings, missing, merging.plan_id)
        return
    # Policies hold whatever was approved (issue 47): the plan the merge would promote.
    held = policies.held_back(
        job, settings, merging, project, own, store,
        prod_python=trust.prod_python_digest(job, tree, settings),
        prod_statements=trust.prod_statements_digest(job, settings),
        number=event.number, environment=reaches,
    )  # fmt: skip
    if held is not None:
        job.forge.set_check(sha, checks.merge_group_gate(*held, False))
        return
    title, summary = checks.merge_group_approved(len(items), settings.requires_approval)
    job.forge.set_check(sha, checks.merge_group_gate(title, summary, True))
    budget = settings.gate.backfill
    what = budget.exceeded(plan.backfill_intervals, plan.scan_bytes) if budget else None
    if budget is not None and what is not None:
        for name in checks.PR_CHECKS:
            job.forge.set_check(sha, checks.merge_group_held(name, what, budget.approver))
        return
    _build(job, sha, project, plan, merging, tree)


def _build(job: Job, sha: str, project: Project, plan: Plan, merging: Plan, tree: Path) -> None:
    """Build the group's environment in the sandbox and report it on the build checks."""
    for name in checks.PR_CHECKS:
        job.forge.set_check(sha, checks.running(name))
    settings = project.config.sluice.pr
    runner = job.deps.spark_runner(project, tree, lambda _event: None)
    try:
        result = preview_environment(
            project,
            job.state(),
            plan,
            runner,
            now=job.now,
            diff_cap=settings.diff_limit,
            diff_options=DiffOptions(decimals=settings.decimals, sample=settings.diff_sample),
        )
    except DriverLost:
        raise  # not this commit's fault: the worker runs the job again
    except SluiceError as exc:
        _fail_build(job, sha, job.scrub(str(exc), tree))
        return
    # What the merge promotes, now that the group's tables are built: what the merge
    # computes still (none, when the PRs and the group built every version).
    store = job.state()
    with store.together(f"plan {merging.environment}"):
        merging = plan_environment(
            project, store, merging.environment, end=job.now, execution_time=job.now
        )
    title, body = comment.tests_summary(result.tests)
    job.forge.set_check(sha, checks.tests_result(title, body, result.tests_passed))
    details = comment.details_markdown(result, merging)
    job.forge.set_check(
        sha,
        checks.environment_result(
            plan.environment, plan.changes_models, result.built, result.views, details
        ),
    )
    job.forge.set_check(
        sha,
        checks.merge_result(
            checks.backfills_of(merging), merging.has_changes, environment=merging.environment
        ),
    )
    log.info(
        "%s: merge group %s built: %s table(s), %s view(s); tests %s",
        job.forge.repo,
        sha[:12],
        result.built,
        result.views,
        "passed" if result.tests_passed else "failed",
    )


def _fail_build(job: Job, sha: str, text: str) -> None:
    for name in checks.PR_CHECKS:
        job.forge.set_check(sha, checks.merge_group_failed(name, checks.BUILD_FAILED, text))


def _refuse(
    job: Job,
    event: MergeGroupEvent,
    settings: trust.Settings,
    missing: list[Item],
    plan_id: str,
) -> None:
    """The combined plan holds contents no gate approved: every check fails, saying which
    and why (GitHub removes the entry from the queue); nothing is built."""
    changed = _changed_by(job, {name for name, _ in missing})
    listed = [
        (None if name == trust.SETTINGS_ITEM else name, content, changed.get(name, []))
        for name, content in missing
    ]
    forge = job.forge.name
    title, summary = checks.merge_group_unapproved(
        listed, event.number, settings.source, settings.branch, forge
    )
    job.forge.set_check(event.head_sha, checks.merge_group_gate(title, summary, False))
    if forge == "gitlab" and event.number is not None:
        # A GitLab status shows its title (255 characters) and nothing else: the models,
        # contents and merge requests go to the merge request the train drops.
        job.forge.reply(event.number, f"**{title}**\n\n{summary}")
    for name in checks.PR_CHECKS:
        job.forge.set_check(
            event.head_sha,
            checks.merge_group_failed(
                name, "Not built: the combined plan is not approved", "see sluice/approval"
            ),
        )
    audit.record(
        job,
        audit.REFUSAL,
        "merge group refused",
        ref=_entry(event),
        plan_id=plan_id,
        detail=f"{event.head_sha[:12]} into {event.base_ref}: {title}: "
        + ", ".join(name for name, _ in missing),
    )
    log.info(
        "%s: merge group %s (%s) refused: %s",
        job.forge.repo,
        event.head_sha[:12],
        _entry(event),
        title,
    )


def _changed_by(job: Job, names: set[str]) -> dict[str, list[int]]:
    """Model -> the pull requests (of the :data:`CHANGED_BY_PRS` most recently numbered
    that were planned) whose last plan changes it."""
    found: dict[str, list[int]] = {}
    builds = job.ledger.builds(job.repo)
    for number in sorted(builds, reverse=True)[:CHANGED_BY_PRS]:
        sha = builds[number][-1][0]
        review = job.ledger.review(job.repo, number, sha)
        if review is None:
            continue
        for name in {name for name, _ in review.items} & names:
            found.setdefault(name, []).append(number)
    return {name: sorted(numbers) for name, numbers in found.items()}


def _destroyed(job: Job, event: MergeGroupEvent) -> None:
    """The group was merged, dequeued or invalidated: nothing to build. Recorded, and its
    environment (if it was built) invalidated."""
    environment = merge_group_environment(event.head_sha)
    store = job.state()
    existed = store.get_environment(environment) is not None
    if existed:
        invalidate_environment(store, environment)
    audit.record(
        job,
        audit.MERGE_QUEUE,
        f"group {event.reason or 'destroyed'}",
        actor=event.sender or audit.SERVICE,
        ref=_entry(event),
        detail=f"{event.head_sha[:12]} into {event.base_ref}"
        + (f"; environment {environment} invalidated" if existed else ""),
    )
    log.info(
        "%s: merge group %s (%s) %s",
        job.forge.repo,
        event.head_sha[:12],
        _entry(event),
        event.reason or "destroyed",
    )
