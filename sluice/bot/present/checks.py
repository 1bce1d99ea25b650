"""Every check the bot sets, and every word of them: the names people see in the PR's
checks list and each state's title and summary. The flow decides *which* state a check is
in; this module says it.

Checks of a pull request's head: :data:`TESTS`, :data:`ENVIRONMENT`, :data:`PROD_PLAN`
(the PR build), :data:`APPROVAL` (the gate). Of a promoted commit: :data:`DEPLOY`.

>>> waiting_for_plan().title
'Waiting for the plan'
>>> merge_result(backfills=[("jaffle.orders", 3, False)], has_changes=True).summary
'Not every interval was built in this PR: merging computes `jaffle.orders` (3 intervals).'
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from sluice.bot.forge.base import Check, CheckAction
from sluice.core import markdown as md
from sluice.core.drift.compare import DriftReport
from sluice.core.drift.repair import Repair
from sluice.core.model.definition import KindName
from sluice.core.plan.plan import iso
from sluice.core.snapshot.naming import PROD
from sluice.core.words import plural

TESTS, ENVIRONMENT, PROD_PLAN = "sluice/tests", "sluice/pr-environment", "sluice/prod-plan"
PR_CHECKS = (TESTS, ENVIRONMENT, PROD_PLAN)
"""The checks of a PR build, in the order the comment lists them."""
APPROVAL = "sluice/approval"
DEPLOY = "sluice/deploy"
DRIFT = "sluice/drift"
"""Of the prod branch's head: whether prod is what Sluice recorded (the scheduled drift
check, :func:`drift_result`)."""
APPROVE = "approve"
"""The identifier of "Approve this plan" (the check's button, the web UI's form), followed
by ``:`` and the first :data:`PLAN_IN_ACTION` characters of the plan's fingerprint: a click
approves the plan its button showed, never one made again on the same commit since."""
PLAN_IN_ACTION = 12  # GitHub's identifier holds 20 characters: "approve:" and 12
_APPROVE_ID = re.compile(rf"{APPROVE}(?::([0-9A-Za-z]{{1,{PLAN_IN_ACTION}}}))?")


def approve_action(plan: str) -> CheckAction:
    """The check's "Approve this plan" button for the plan with fingerprint ``plan``."""
    return CheckAction(
        "Approve this plan", "Approve the plan of this commit", approve_identifier(plan)
    )


def approve_identifier(plan: str) -> str:
    """The identifier of an approval of the plan with fingerprint ``plan``."""
    return f"{APPROVE}:{plan[:PLAN_IN_ACTION]}"


def approved_plan(identifier: str | None) -> tuple[bool, str | None]:
    """Whether ``identifier`` is an "Approve this plan", and the plan (a fingerprint's
    prefix) it names; None for a button made before buttons named their plan."""
    match = _APPROVE_ID.fullmatch(identifier or "")
    return (match is not None, match.group(1) if match else None)


# -- the PR build ----------------------------------------------------------------------


def queued(name: str) -> Check:
    return Check(name, "queued", "Queued", "Waiting for the Sluice worker.")


def running(name: str) -> Check:
    return Check(name, "in_progress", "Running", "Building the environment.")


def build_failed(name: str, title: str, error: str) -> Check:
    """``title``: one of the failure titles below (what could not be done)."""
    return Check(name, "completed", title, md.fence(error, "text"), conclusion="failure")


BUILD_HELD = "Waiting for the backfill budget's approval"


def held_text(what: str, approver: str) -> str:
    """Why a PR's build waits: its backfill is above ``sluice.gate.backfill``."""
    who = md.mention(approver, team="/" in approver)
    return (
        f"Building this PR's environment would compute a {md.text(what)} "
        f"(`sluice.gate.backfill` on the prod branch). Sluice builds it once {who} approves "
        "this commit (a review that approves the PR). To build less instead, narrow the "
        "backfill: a later `start` on the model, or `sluice.pr.backfill_days` on the prod "
        "branch."
    )


def build_held(name: str, what: str, approver: str) -> Check:
    return Check(
        name, "completed", BUILD_HELD, held_text(what, approver), conclusion="action_required"
    )


def approval_held(what: str, approver: str) -> Check:
    """The gate while the build waits: there is no plan to approve until it is built."""
    return Check(
        APPROVAL,
        "completed",
        "Waiting for the build",
        held_text(what, approver),
        conclusion="failure",
    )


BUILD_SUPERSEDED = "Stopped: a newer commit was pushed"


def superseded_text(reason: str) -> str:
    """What a build stopped for a newer head says (``reason``: which job, which head)."""
    return (
        f"Sluice stopped building this commit ({reason}) and builds the newer one instead. "
        "Nothing of this commit's environment was changed: its tables were not marked "
        "built and its views not switched."
    )


def build_superseded(name: str, reason: str) -> Check:
    return Check(
        name, "completed", BUILD_SUPERSEDED, superseded_text(reason), conclusion="cancelled"
    )


FILES_REFUSED = "The repository's files were refused"
SETTINGS_INVALID = "The prod branch's settings are invalid"
PROJECT_DOES_NOT_LOAD = "The project does not load"
PLAN_FAILED = "Sluice could not plan this PR"
BUILD_FAILED = "Building the environment failed"


def gave_up(name: str, error: str) -> Check:
    return Check(name, "completed", "Sluice gave up on this commit", error, conclusion="failure")


def tests_result(title: str, body: str, passed: bool) -> Check:
    """``title`` and ``body`` from :func:`sluice.bot.present.comment.tests_summary`."""
    return Check(TESTS, "completed", title, body, conclusion="success" if passed else "failure")


def environment_result(
    environment: str, changes_models: bool, built: int, views: int, details: str
) -> Check:
    title = (
        f"{environment}: {plural(built, 'table')} built, {plural(views, 'view')}"
        if changes_models
        else "This PR changes no model"
    )
    return Check(ENVIRONMENT, "completed", title, details, conclusion="success")


def backfills_of(plan: Any) -> list[tuple[str, int, bool]]:
    """(model, intervals, computed whole) of each table ``plan`` (prod's) computes."""
    out = []
    for b in plan.backfill:
        kind = plan.snapshot(b.name).model.kind.name
        out.append((b.name, len(b.intervals), kind != KindName.INCREMENTAL_BY_TIME_RANGE))
    return out


def merge_result(
    backfills: Sequence[tuple[str, int, bool]],
    has_changes: bool,
    reads: str = "",
    environment: str = PROD,
) -> Check:
    """What merging will do to ``environment`` (prod, or the tier of
    ``sluice.deploy.environments`` a merge promotes): ``backfills`` holds (model,
    intervals, full refresh) of each table it would compute, none when every version it
    needs is built; ``reads``: what that backfill reads (:meth:`ScanEstimate.reads`)."""
    if backfills:
        title = f"Merging backfills {plural(len(backfills), 'table')} in {environment}"
        listed = ", ".join(
            f"{md.code(name)} ({'full refresh' if full else plural(n, 'interval')})"
            for name, n, full in backfills
        )
        summary = f"Not every interval was built in this PR: merging computes {listed}."
        if reads:
            summary += f" The backfill {md.text(reads)}."
    elif has_changes:
        title = (
            "Merging is a virtual update: 0 rows written"
            if environment == PROD
            else f"Merging is a virtual update of {environment}: 0 rows written"
        )
        summary = (
            f"Every version {environment} needs is built: merging swaps views, no data is written."
        )
    else:
        title = f"Merging changes nothing in {environment}"
        summary = f"{environment.capitalize()} already has this state."
    if environment != PROD:
        summary += (
            f" A merge promotes to {md.code(environment)} (`sluice.deploy.environments`); "
            "prod follows with its own tier."
        )
    return Check(PROD_PLAN, "completed", title, summary, conclusion="success")


# -- the gate ----------------------------------------------------------------------------


def replan_needed() -> Check:
    """The gate of a plan made under settings no longer in force."""
    return Check(
        APPROVAL,
        "completed",
        "The settings in force changed: plan again",
        "This commit's plan was made under Sluice's settings as they were before another "
        "change to them was promoted; who must approve it follows the settings in force. "
        "Comment `/sluice plan` (or push) to plan it again, then approve the new plan.",
        conclusion="failure",
    )


def waiting_for_plan() -> Check:
    return Check(
        APPROVAL,
        "in_progress",
        "Waiting for the plan",
        "The gate is evaluated once this commit is planned.",
    )


def gate_settings_invalid(error: str) -> tuple[Check, str]:
    """The check, and the text the comment's approval section shows."""
    text = f"The prod branch's gate settings are invalid:\n\n{md.fence(error, 'text')}"
    return Check(APPROVAL, "completed", "Invalid gate settings", text, conclusion="failure"), text


def gate_not_evaluated(error: str) -> Check:
    return Check(
        APPROVAL,
        "completed",
        "The gate could not be evaluated",
        f"{error}\n\nRe-run this check to try again.",
        conclusion="failure",
    )


def nothing_to_approve() -> Check:
    return Check(
        APPROVAL,
        "completed",
        "No plan to approve",
        "This commit could not be planned (see `sluice/pr-environment`), so there is "
        "nothing to approve yet.",
        conclusion="failure",
    )


def not_into_prod(base: str, prod_branch: str, summary: str) -> str:
    """The gate's summary on a PR into another branch than prod."""
    return (
        f"This PR goes into {md.code(base)}, not the prod branch {md.code(prod_branch)}: "
        "approvals here do not count for prod (its changes need an approved PR into "
        f"{md.code(prod_branch)}). {summary}"
    )


def approval_title(
    ok: bool, requires_approval: bool, missing: int, owners_missing: int, stale: bool
) -> str:
    if ok:
        return "Approved" if requires_approval else "No approval required"
    parts = []
    if missing:
        parts.append(f"{missing} more approval{'s' if missing > 1 else ''} needed")
    if owners_missing:
        parts.append(f"{plural(owners_missing, 'owner approval')} needed")
    title = "; ".join(parts) or "Waiting for approval"
    if stale:
        title += " (the plan changed since the last approval)"
    return title


def approval_result(title: str, summary: str, conclusion: str, ok: bool, plan: str) -> Check:
    """The gate's check on the plan with fingerprint ``plan``: its button approves that one."""
    return Check(
        APPROVAL,
        "completed",
        title,
        summary,
        conclusion=conclusion,
        actions=() if ok else (approve_action(plan),),
    )


# -- promotion ---------------------------------------------------------------------------


def deploy_check(environment: str = PROD) -> str:
    """The check a promotion into ``environment`` reports on: ``sluice/deploy`` for prod,
    ``sluice/deploy-<tier>`` for another tier of ``sluice.deploy.environments``."""
    return DEPLOY if environment == PROD else f"{DEPLOY}-{environment}"


def promoting(label: str, environment: str = PROD) -> Check:
    return Check(
        deploy_check(environment),
        "in_progress",
        f"Promoting to {environment}",
        f"Promoting {label}.",
    )


def promotion_result(ok: bool, title: str, summary: str, environment: str = PROD) -> Check:
    return Check(
        deploy_check(environment),
        "completed",
        title,
        summary,
        conclusion="success" if ok else "failure",
    )


def deploy_settings_invalid(error: str) -> Check:
    return Check(
        DEPLOY,
        "completed",
        "Invalid deploy settings",
        md.fence(error, "text"),
        conclusion="failure",
    )


PROMOTION_GAVE_UP = "The promotion job failed on every attempt"


def promotion_gave_up(error: str) -> Check:
    return Check(
        DEPLOY, "completed", PROMOTION_GAVE_UP, md.fence(error, "text"), conclusion="failure"
    )


def promotion_failed(label: str, error: str, environment: str = PROD) -> tuple[str, str]:
    """(title, summary) of a promotion that failed with ``error``."""
    return (
        f"Promotion failed; {environment} is unchanged",
        f"Promoting {label} failed:\n\n{md.fence(error, 'text')}",
    )


def release_refused(
    environment: str, tag: str, actor: str, released_by: Sequence[str], *, bot: str | None = None
) -> Check:
    """A tag that would promote ``environment`` came from someone not in its
    ``released_by``; ``bot``: why the account counts as no person, though named there."""
    who = ", ".join(md.mention(r, team="/" in r) for r in released_by)
    by = md.mention(actor) if actor else "someone the forge did not name"
    tier = f"the {md.code(environment)} tier in `sluice.deploy.environments` on the prod branch"
    why = (
        f"a bot account ({md.text(bot)}): a bot releases nothing, whatever `released_by` of "
        f"{tier} names"
        if bot
        else f"who is not in `released_by` of {tier}"
    )
    return Check(
        deploy_check(environment),
        "completed",
        f"Tag not promoted: {environment} is released by {who} only",
        f"Tag {md.code(tag)} was pushed by {by}, {why}, so {environment} was not touched. "
        f"Ask one of {who} to push the tag (or publish the release) again.",
        conclusion="failure",
    )


def _into(environment: str) -> str:
    return "" if environment == PROD else f" to {environment}"


def already_promoted(environment: str = PROD) -> tuple[str, str]:
    return f"{environment.capitalize()} already has this state", "Nothing to promote."


def promoted_then_failed(label: str, error: str, environment: str = PROD) -> tuple[str, str]:
    """(title, summary) of a promotion whose job failed after its views swap: every view
    of ``environment`` reads the promoted versions and its record says so (``error``)."""
    return (
        f"Promoted{_into(environment)}; its job then failed, after the views swap",
        f"Promoting {label} swapped every {environment} view to the promoted versions, and "
        f"{environment}'s record now names them: {environment} is promoted, not half-way. "
        "The job failed after the swap, so what it runs after the views (the project's "
        "`after_all` statements) may not have run:\n\n"
        f"{md.fence(error, 'text')}",
    )


def virtual_update(views: int, environment: str = PROD) -> tuple[str, str]:
    built = (
        "the PR built" if environment == PROD else "already built (by the PR, or the tier before)"
    )
    return (
        f"Promoted{_into(environment)} by virtual update",
        f"{plural(views, f'{environment} view')} now {'reads' if views == 1 else 'read'} the "
        f"tables {built}; no data was written.",
    )


def backfilled(
    tables: int, names: Sequence[str], views: int, environment: str = PROD
) -> tuple[str, str]:
    listed = ", ".join(md.code(name) for name in names)
    return (
        f"Promoted{_into(environment)}; {plural(tables, 'table')} backfilled",
        f"Not every interval {environment} needs was built before, so the promotion computed "
        f"{listed}; {plural(views, 'view')} swapped.",
    )


def unapproved(
    missing: Sequence[tuple[str | None, bool]],
    source: str,
    prod_branch: str,
    environment: str = PROD,
) -> tuple[str, str]:
    """(title, summary) of a promotion refused for changes no gate approved: ``missing``
    holds (model, removed) pairs, model None for the ``sluice:`` settings."""
    lines = [
        "- Sluice's settings (sluice.yaml, or config.yaml's `sluice:`) (change)"
        if name is None
        else f"- {md.code(name)} ({'removal' if removed else 'change'})"
        for name, removed in missing
    ]
    return (
        f"{plural(len(missing), 'unapproved change')}: {environment} is unchanged",
        "These changes were never approved through the `sluice/approval` gate (for "
        "example a PR merged by an admin past the check, or a tag on unreviewed commits), so "
        f"{environment} was not touched:\n\n" + "\n".join(lines) + "\n\nThe gate in force is "
        f"`sluice.gate` of {source}. Open a PR with these changes into "
        f"{md.code(prod_branch)} and have it approved, then promote again.",
    )


# -- the merge queue ---------------------------------------------------------------------

MERGE_GROUP_CHECKS = (*PR_CHECKS, APPROVAL)
"""The checks set on a merge group's head commit: every check a PR's head has, so that
whichever of them the prod branch requires, the queue finds it there."""
REMOVED_FROM_QUEUE = (
    "A failed required check makes GitHub remove this entry from the merge queue; the "
    "pull requests behind it are tested again without it."
)
REMOVED_FROM_TRAIN = (
    "A failed status fails this merge train pipeline: GitLab removes the merge request "
    "from the train, and the pipelines of the merge requests behind it start again "
    "without it."
)


def merge_group_queued(name: str) -> Check:
    return Check(
        name, "queued", "Queued", "Waiting for the Sluice worker to plan this merge group."
    )


def merge_group_failed(name: str, title: str, error: str) -> Check:
    """The merge group could not be planned or built (``title``: one of the PR build's
    failure titles); nothing of it reaches prod."""
    return Check(
        name,
        "completed",
        title,
        f"{md.fence(error, 'text')}\n\n{REMOVED_FROM_QUEUE}",
        conclusion="failure",
    )


def merge_group_elsewhere(name: str, base: str, prod_branch: str) -> Check:
    """A merge group into a branch other than prod: nothing to gate, nothing promoted."""
    return Check(
        name,
        "completed",
        f"Not into {prod_branch}: nothing to check",
        f"This merge group goes into {md.code(base)}, not the prod branch "
        f"{md.code(prod_branch)}: merging it promotes nothing, so Sluice neither plans nor "
        "gates it.",
        conclusion="neutral",
    )


def _queue_entry(number: int | None, sign: str = "#") -> str:
    return f"{sign}{number}" if number is not None else "this queue entry's pull request"


def merge_group_unapproved(
    missing: Sequence[tuple[str | None, str, Sequence[int]]],
    number: int | None,
    source: str,
    prod_branch: str,
    forge: str = "github",
) -> tuple[str, str]:
    """(title, summary) of a merge group whose combined plan changes something no gate
    approved: ``missing`` holds (model, content, PRs whose plans change that model), model
    None for the ``sluice:`` settings and content ``removed`` for a removal. On GitLab
    (``forge``), a merge train's entry, its merge requests ``!<iid>``."""
    sign = "!" if forge == "gitlab" else "#"
    lines = []
    for name, content, numbers in missing:
        what = (
            "Sluice's settings (sluice.yaml, or config.yaml's `sluice:`)"
            if name is None
            else md.code(name)
        )
        change = "removal" if content == "removed" else f"content {md.code(content[:12])}"
        by = ", ".join(f"{sign}{n}" for n in numbers[:10])
        more = f" (changed by {by})" if by else ""
        lines.append(f"- {what}: {change}{more}")
    entry = _queue_entry(number, sign)
    title = f"{plural(len(missing), 'unapproved change')} in the combined plan"
    if forge == "gitlab":
        return (
            title,
            "This merge train entry's plan (the target branch with the merge requests "
            f"ahead of it on the train and {entry} merged) changes what no "
            "`sluice/approval` gate approved; each merge request's approval covers its "
            "own plan, and combined the changes differ:\n\n"
            + "\n".join(lines)
            + f"\n\n{REMOVED_FROM_TRAIN} To merge {entry}, update its branch with "
            f"{md.code(prod_branch)} and the merge requests ahead of it, have that combined "
            "plan approved, and add it to the train again. The gate in force is "
            f"`sluice.gate` of {source}.",
        )
    return (
        title,
        "This merge group's plan (the prod branch with the pull requests ahead of it in "
        f"the queue and {entry} merged) changes what no `sluice/approval` gate approved; "
        "each pull request's approval covers its own plan, and combined the changes "
        "differ:\n\n"
        + "\n".join(lines)
        + f"\n\n{REMOVED_FROM_QUEUE} To merge {entry}, update its branch with "
        f"{md.code(prod_branch)} and the pull requests ahead of it, have that combined plan "
        "approved, and add it to the queue again. The gate in force is `sluice.gate` of "
        f"{source}.",
    )


def merge_group_approved(changes: int, requires_approval: bool) -> tuple[str, str]:
    """(title, summary) of a merge group whose combined plan is all approved."""
    if not requires_approval:
        return (
            "No approval required",
            "The gate in force asks for no approval; merging promotes this group's plan.",
        )
    if not changes:
        return "Approved: nothing to approve", "Merging this group changes no model in prod."
    return (
        "Approved: every change of the combined plan",
        f"Each of the {plural(changes, 'change')} merging this group brings to prod was "
        "approved through a pull request's `sluice/approval` gate, as the promotion after "
        "the merge checks again.",
    )


def merge_group_gate(title: str, summary: str, ok: bool) -> Check:
    return Check(APPROVAL, "completed", title, summary, conclusion="success" if ok else "failure")


def merge_group_held(name: str, what: str, approver: str) -> Check:
    """The merge group's build is over the backfill budget: not built, the entry fails."""
    who = md.mention(approver, team="/" in approver)
    return Check(
        name,
        "completed",
        "The combined plan is over the backfill budget",
        f"Building this merge group would compute a {md.text(what)} "
        f"(`sluice.gate.backfill` on the prod branch), which {who} approved for no pull "
        f"request's plan of it, so Sluice did not build it. {REMOVED_FROM_QUEUE}",
        conclusion="failure",
    )


def promoted_later(later: str) -> Check:
    """A merge whose promotion came after that of a later commit of the prod branch."""
    title, summary = promoted_later_words(later)
    return Check(DEPLOY, "completed", title, summary, conclusion="success")


def promoted_later_words(later: str) -> tuple[str, str]:
    return (
        "Already in prod",
        f"Prod was promoted from `{later[:12]}`, a later commit of the prod branch that "
        "holds this one: promoting this commit now would take that commit's changes back "
        "out of prod, so Sluice left prod as it is.",
    )


# -- the drift check (prod branch's head) ------------------------------------------------

DRIFT_ROWS = 50
"""Differences listed in the drift check's text at most (the rest counted)."""


def drift_result(report: DriftReport, environment: str = PROD) -> Check:
    """The ``sluice/drift`` check of a drift report: success when prod is as Sluice
    recorded it, failure naming each difference otherwise, with the "Plan the repair"
    button (:func:`plan_repair_action`). Every name and detail came from the catalog,
    which someone outside Sluice may have written: each is escaped (cells, code spans)."""
    if not report.drifted:
        return Check(
            DRIFT,
            "completed",
            f"No drift: {environment} is as Sluice recorded it",
            md.text(f"{_checked(report)} (plan {report.plan_id[:12]})."),
            conclusion="success",
        )
    models = report.drifted_models
    return Check(
        DRIFT,
        "completed",
        f"Drift: {plural(len(models), 'model')} of {environment} "
        f"{'differs' if len(models) == 1 else 'differ'} from what Sluice recorded",
        md.text(
            f"{_checked(report)} (plan {report.plan_id[:12]}). `sluice drift {environment} "
            "--repair` plans the repair; so does a writer's Plan the repair here, which the "
            "gate's required approvers then approve."
        ),
        conclusion="failure",
        text=drift_rows(report),
        actions=(plan_repair_action(report),),
    )


def _checked(report: DriftReport) -> str:
    read = ", ".join(f"{source}: {n}" for source, n in sorted(report.sources.items()))
    return f"{plural(report.models, 'model')} checked" + (
        f"; last writes read from {read}" if read else ""
    )


def drift_rows(report: DriftReport) -> str:
    """The differences as a Markdown table (at most :data:`DRIFT_ROWS`), each cell escaped."""
    rows = [
        "| model | what differs | since | repair |",
        "| --- | --- | --- | --- |",
    ]
    for difference in report.differences[:DRIFT_ROWS]:
        since = difference.since
        rows.append(
            f"| {md.code(difference.model, table=True)} "
            f"| {md.text(difference.kind)}: {md.text(difference.detail, 500)} "
            f"| {md.text(iso(since)) if since is not None else 'not known'} "
            f"| {md.text(difference.repair)} |"
        )
    more = len(report.differences) - DRIFT_ROWS
    if more > 0:
        rows.append(f"\n… and {plural(more, 'more difference')}.")
    return "\n".join(rows)


# -- the drift repair, through the gate (sluice.bot.flow.drift_repair) ------------------

PLAN_REPAIR = "drift"
"""The identifier of "Plan the repair" on a failed ``sluice/drift`` check: this, ``:`` and
12 hex characters naming the drift report it was shown with (so that a click on a later
report's button is a new event, not a replay of the first)."""
APPROVE_REPAIR = "repair"
"""The identifier of "Approve the repair": this, ``:`` and the first 12 characters of the
repair plan's fingerprint: a click approves the plan its button showed, never another."""
WAIVE_REPAIR = "waive"
"""The identifier of "Override policies": this, ``:`` and the first 12 characters of the
repair plan's fingerprint: a click overrides, for that plan only, the soft policies failing
on it that name the person who clicked (:func:`sluice.bot.flow.repair_gate.waive`)."""
_REPAIR_ID = re.compile(
    rf"({PLAN_REPAIR}|{APPROVE_REPAIR}|{WAIVE_REPAIR}):([0-9a-f]{{{PLAN_IN_ACTION}}})"
)


def report_token(report: DriftReport) -> str:
    """The 12 hex characters naming ``report`` in its "Plan the repair" identifier."""
    kinds = sorted(f"{d.model}:{d.kind}" for d in report.differences)
    text = f"{report.environment}:{report.plan_id}:{report.checked_at}:{kinds}"
    return hashlib.sha256(text.encode()).hexdigest()[:PLAN_IN_ACTION]


def plan_repair_action(report: DriftReport) -> CheckAction:
    """The drift check's "Plan the repair" button (a writer's request)."""
    return CheckAction(
        "Plan the repair",
        "Plan the repair of this drift",
        f"{PLAN_REPAIR}:{report_token(report)}",
    )


def approve_repair_action(fingerprint: str) -> CheckAction:
    """The "Approve the repair" button of the repair plan with ``fingerprint``."""
    return CheckAction(
        "Approve the repair",
        "Approve the repair plan shown here",
        f"{APPROVE_REPAIR}:{fingerprint[:PLAN_IN_ACTION]}",
    )


def waive_repair_action(fingerprint: str) -> CheckAction:
    """The "Override policies" button of the repair plan with ``fingerprint``."""
    return CheckAction(
        "Override policies",
        "Override the soft policies shown here",
        f"{WAIVE_REPAIR}:{fingerprint[:PLAN_IN_ACTION]}",
    )


def repair_click(identifier: str | None) -> tuple[str, str] | None:
    """(:data:`PLAN_REPAIR`, :data:`APPROVE_REPAIR` or :data:`WAIVE_REPAIR`, its 12 hex characters) of a
    ``sluice/drift`` button's identifier; None for anything Sluice never made.

    >>> repair_click("repair:0123456789ab"), repair_click("repair:../prod"), repair_click(None)
    (('repair', '0123456789ab'), None, None)
    """
    match = _REPAIR_ID.fullmatch(identifier or "")
    return (match.group(1), match.group(2)) if match else None


def repair_what(repair: Repair) -> str:
    """What a repair plan does, in Markdown (every name escaped): the views it makes again,
    the tables it drops and builds again over how many intervals, what it leaves."""
    plan = repair.plan
    lines = []
    if plan.repoint:
        names = ", ".join(md.code(n) for n in plan.repoint)
        lines.append(f"- makes {plural(len(plan.repoint), 'view')} again: {names}")
    intervals = {b.name: len(b.intervals) for b in plan.backfill}
    if plan.rebuild:
        names = ", ".join(
            f"{md.code(n)} ({plural(intervals.get(n, 0), 'interval')})" for n in plan.rebuild
        )
        lines.append(f"- drops and builds again {plural(len(plan.rebuild), 'table')}: {names}")
    others = [(n, k) for n, k in intervals.items() if n not in plan.rebuild]
    if others:
        names = ", ".join(f"{md.code(n)} ({plural(k, 'interval')})" for n, k in others)
        lines.append(f"- computes the intervals due of {names}")
    if plan.create_views:
        names = ", ".join(md.code(n) for n in plan.create_views)
        lines.append(f"- makes the views of VIEW models again: {names}")
    for model, why in repair.left:
        lines.append(f"- leaves {md.code(model)}: {md.text(why, 300)}")
    return "\n".join(lines) or "- nothing Sluice can repair"


def _people(users: Sequence[str], teams: Sequence[str]) -> str:
    named = [md.mention(u) for u in users] + [md.mention(t, team=True) for t in teams]
    return ", ".join(named) or "nobody"


def repair_planned(
    report: DriftReport,
    repair: Repair,
    fingerprint: str,
    *,
    requesters: Sequence[str],
    approved_by: Sequence[str],
    needed: int,
    users: Sequence[str],
    teams: Sequence[str],
    environment: str = PROD,
    asks: Sequence[tuple[str, str]] = (),
    held: Sequence[tuple[str, Sequence[str]]] = (),
) -> Check:
    """A repair plan waiting for the gate's required approvers (``needed`` more), the
    approvals ``asks`` still names ((model or the budget exceeded, owner or approver)) and
    the overrides of the soft policies ``held`` holds it by ((name, its override_by))."""
    asked = ", ".join(md.mention(r) for r in requesters)
    given = ", ".join(md.mention(a) for a in approved_by)
    waits = []
    if needed > 0:
        waits.append(
            f"{plural(needed, 'more approval')} of the gate's required approvers "
            f"({_people(users, teams)}, `sluice.gate` on the prod branch) "
            f"{'is' if needed == 1 else 'are'} given with Approve the repair"
        )
    for what, who in asks:
        waits.append(
            f"{md.mention(who, team='/' in who)} approves it with Approve the repair (for "
            f"{md.text(what, 200) if ' ' in what else md.code(what)})"
        )
    for name, named in held:
        people = ", ".join(md.mention(w, team="/" in w) for w in named) or "nobody"
        waits.append(
            f"the soft policy {md.code(name)}, which fails on it, is overridden with "
            f"Override policies by someone it names ({people})"
        )
    summary = (
        f"{asked} asked to repair {environment}'s drift. The repair plan "
        f"{md.code(fingerprint[:PLAN_IN_ACTION])}:\n\n{repair_what(repair)}\n\n"
        "It runs once "
        + "; and once ".join(waits)
        + (f" (approved so far by {given})" if given else "")
        + f". Who asked for it does not approve it ({asked}). If {environment} changes "
        "before, the plan is made again and must be approved again."
    )
    parts = []
    if needed > 0:
        parts.append(f"{plural(needed, 'more approval')} needed")
    if asks:
        parts.append(f"{plural(len(asks), 'approval')} of owners or the budget needed")
    if held:
        parts.append(f"held by {plural(len(held), 'soft policy', 'soft policies')}")
    actions = [plan_repair_action(report)]
    if held:
        actions.insert(0, waive_repair_action(fingerprint))
    if needed > 0 or asks:
        actions.insert(0, approve_repair_action(fingerprint))
    return Check(
        DRIFT,
        "completed",
        "Repair planned: " + ", ".join(parts),
        summary,
        conclusion="failure",
        text=drift_rows(report),
        actions=tuple(actions),
    )


def repair_refused(
    report: DriftReport,
    repair: Repair,
    fingerprint: str,
    refused: Sequence[tuple[str, str, str, str]],
    error: str | None = None,
    environment: str = PROD,
) -> Check:
    """A repair plan the policies in force refuse: each (name, level, file:line, error) of
    a hard policy failing on it or a policy not evaluated; ``error``: the policies could
    not be read. Nobody's approval or override runs it."""
    lines = [
        f"- {md.code(name)} ({md.text(level)}, {md.code(where)})"
        + (f": {md.text(why, 300)}" if why else "")
        for name, level, where, why in refused
    ]
    if error is not None:
        lines.append(f"- the policies in force could not be read: {md.text(error, 600)}")
    summary = (
        f"The repair plan {md.code(fingerprint[:PLAN_IN_ACTION])}:\n\n{repair_what(repair)}"
        f"\n\nis refused by the policies in force on the prod branch (fail closed):\n\n"
        + "\n".join(lines)
        + "\n\nA hard policy is not overridden: change the policy on the prod branch (a "
        f"pull request), or mend {environment} by hand, then plan the repair again."
    )
    return Check(
        DRIFT,
        "completed",
        "Repair refused: blocked by policies",
        summary,
        conclusion="failure",
        text=drift_rows(report),
        actions=(plan_repair_action(report),),
    )


def repair_stale(report: DriftReport, approved: str, now: str, environment: str = PROD) -> Check:
    """An approval of a repair plan that is no longer the plan: ``approved`` the 12
    characters the button named, ``now`` the plan's fingerprint made again."""
    check = drift_result(report, environment)
    note = (
        f"An approval of repair plan {md.code(approved)} was not counted: the repair "
        f"plan is now {md.code(now[:PLAN_IN_ACTION])} ({environment} or its drift changed "
        "since it was shown). Plan the repair again, then approve the new plan.\n\n"
    )
    return dataclasses.replace(check, summary=note + check.summary)


def repaired(
    report: DriftReport,
    fingerprint: str,
    requester: str,
    approved_by: Sequence[str],
    environment: str = PROD,
) -> Check:
    """The drift check after a repair was applied: the check made again, and who."""
    check = drift_result(report, environment)
    by = ", ".join(md.mention(a) for a in approved_by)
    note = (
        f"Repair plan {md.code(fingerprint[:PLAN_IN_ACTION])} was applied, asked by "
        f"{md.mention(requester)}"
        + (f" and approved by {by}" if by else " (the gate requires no approval)")
        + f"; {environment} was then checked again.\n\n"
    )
    return dataclasses.replace(check, summary=note + check.summary)


def repair_failed(error: str, environment: str = PROD) -> Check:
    """The drift check when a repair could not be planned or applied (``error`` scrubbed)."""
    return Check(
        DRIFT,
        "completed",
        f"Sluice could not repair {environment}",
        f"{md.fence(error, 'text')}\n\nPlan the repair again once the cause is fixed.",
        conclusion="failure",
    )


def drift_elsewhere(head: str, branch: str) -> Check:
    """A repair button clicked on an older commit's drift check."""
    return Check(
        DRIFT,
        "completed",
        "Not the prod branch's head: use its drift check",
        f"This commit is no longer the head of {md.code(branch)} (now "
        f"{md.code(head[:12])}): a repair is planned and approved on the drift check of the "
        "head. Nothing was planned or changed.",
        conclusion="neutral",
    )


def drift_failed(error: str, environment: str = PROD) -> Check:
    """The ``sluice/drift`` check when the check itself could not run (``error`` scrubbed)."""
    return Check(
        DRIFT,
        "completed",
        f"Sluice could not check {environment} for drift",
        md.fence(error, "text"),
        conclusion="failure",  # not known to be clean: never green
    )
