"""Promotion to prod (on merge, on a release tag, or ``/sluice deploy``) and cleanup.

With promotion tiers (``sluice.deploy.environments``, e.g. ``staging`` on merge and
``prod`` on a release tag) each tier is promoted the same way into its own environment,
reported on its own check (``sluice/deploy-staging``) and deployment record; a tier's plan
reuses the versions the tier before it built, so a later tier is a virtual update where
the earlier one built everything. Only prod's promotion moves the settings in force.

Every job here runs under the repository's prod queue key, so two never overlap. What
prod is (its branch, merge or tag, the tag pattern) and whether a change needs approval
are the trusted settings in force (:mod:`sluice.bot.flow.trust`), never the promoted commit's
own. A promotion plans prod at the promoted commit, against prod as it is now (so a prod
that moved since the PR was planned is re-planned, never overwritten), refuses when any
model change in that plan, or a change of the ``sluice:`` settings, was not approved
through a gate, and otherwise applies it: when the PRs built every version prod needs,
that is a virtual update (views swapped, no data written). The promoted commit's settings
are then the ones in force. The outcome goes to the ``sluice/deploy`` check, the PR's
comment and a forge deployment record for environment ``prod``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.bot.events.neutral import PullRequestEvent, TagEvent
from sluice.bot.flow import audit, policies, trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import REMOVED, Item, own_key, review_of
from sluice.bot.flow.trust import Settings
from sluice.bot.forge.base import Forge
from sluice.bot.present import checks, comment, notify_text
from sluice.core import markdown as md
from sluice.core.errors import (
    ConfigError,
    ConflictError,
    DriverLost,
    FailedAfterViews,
    SluiceError,
)
from sluice.core.gate_settings import Tier
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.state import open_state
from sluice.core.workflow import apply_plan, invalidate_environment, plan_environment

log = logging.getLogger(__name__)

DEPLOY = checks.DEPLOY
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
AUDIT_LOOKBACK = 500
"""Audit rows read (newest first) to find prod's last promotion (:func:`_promoted_since`)."""


@dataclass(frozen=True)
class Outcome:
    """What a promotion did."""

    ok: bool
    title: str
    summary: str
    tables_built: int = 0
    views_swapped: int = 0
    live: frozenset[Item] = frozenset()  # prod's model contents once promoted (when ok)
    plan_id: str | None = None  # the plan it applied or refused (None: none was made)


def on_merge(job: Job, event: PullRequestEvent) -> Outcome | None:
    """A PR was merged into the prod branch: promote it into each tier a merge promotes
    (prod alone with ``deploy.on: merge``); when prod is reached by a tag, remember the PR
    until a tag promotes it."""
    sha = event.merge_sha or event.head_sha
    settings = _settings(job, sha, event.number)
    if settings is None:
        return None
    if event.base_ref != settings.branch:
        log.info(
            "%s#%s merged into %s, not the prod branch %s: not promoted",
            job.forge.repo,
            event.number,
            event.base_ref,
            settings.branch,
        )
        cleanup(job, event.number, "merged into another branch than prod", merged=True)
        return None
    outcome = None
    tiers = settings.deploy.merge_tiers()
    later = _promoted_since(job, sha) if any(t.name == PROD for t in tiers) else None
    if later is not None:
        # A merge delivered after a later one of the branch was promoted (two entries of
        # a merge queue merged at once, a delivery GitHub sent again): prod already holds
        # this commit's changes, and promoting it would take the later ones back out.
        log.info(
            "%s#%s: %s not promoted: prod was promoted from %s, a later commit of %s",
            job.forge.repo,
            event.number,
            sha[:12],
            later[:12],
            settings.branch,
        )
        job.forge.set_check(sha, checks.promoted_later(later))
        audit.record(
            job,
            audit.PROMOTION,
            "already in prod",
            ref=f"#{event.number}",
            detail=_detail(PROD, sha, f"prod was promoted from {later[:12]}, a later commit"),
        )
        cleanup(job, event.number, "promoted to prod", merged=True, promoted=True)
        return Outcome(True, *checks.promoted_later_words(later))
    for tier in tiers:
        outcome = promote(
            job,
            sha,
            settings,
            label=f"#{event.number}",
            number=event.number,
            environment=tier.name,
        )
        if not outcome.ok:
            return outcome
    if any(t.name == PROD for t in tiers):
        cleanup(job, event.number, "promoted to prod", merged=True, promoted=True)
        return outcome
    review = job.ledger.review(job.repo, event.number, event.head_sha)
    items = review.items if review is not None else ()
    job.ledger.merged(job.repo, event.number, items, job.now)
    environment = pr_environment(event.number)
    if tiers:  # its tables now serve the tiers before prod; its own views go
        reached = ", ".join(md.code(t.name) for t in tiers)
        cleanup(job, event.number, f"promoted to {reached}", merged=True)
    prod = settings.deploy.prod_tier()
    sections = comment.waiting_for_tag_sections(
        prod.tag_pattern, settings.deploy.prod_branch, environment
    )
    job.publish(event.number, sections=sections)
    return outcome


def on_tag(job: Job, event: TagEvent) -> Outcome | None:
    """A tag was pushed or a release published: promote its commit into each tier whose
    ``tag_pattern`` it matches, when the commit is on the prod branch and the tag's author
    may release that tier; else log (or say on the commit) and stop.

    The commit is the one the event was pinned to when it was received (the payload's, or
    a release's tag resolved at intake: :mod:`sluice.bot.intake.pin`), never the one the
    tag names now: a tag moved since (a force-push) changes nothing here. An event
    without its commit (a release queued by a version that did not pin) is not promoted.
    """
    sha = event.sha
    if sha is None:
        log.warning(
            "%s: %s of tag %s ignored: the commit it named when it was received was not "
            "recorded, and the tag's name is never resolved later (it may have moved); "
            "push the tag again or publish a new release to promote it",
            job.forge.repo,
            event.source,
            event.tag,
        )
        return None
    settings = _settings(job, sha, None)
    if settings is None:
        return None
    tiers = settings.deploy.tag_tiers(event.tag)
    if not tiers:
        log.info(
            "%s: tag %s ignored: no environment is promoted by it (sluice.deploy)",
            job.forge.repo,
            event.tag,
        )
        return None
    if not job.forge.on_branch(sha, settings.branch):
        log.warning(
            "%s: tag %s ignored: %s is not on the prod branch %s",
            job.forge.repo,
            event.tag,
            sha[:12],
            settings.branch,
        )
        return None
    outcome = None
    for tier in tiers:
        if not _may_release(job.forge, tier, event.actor, event.actor_id, settings.people):
            # A bot in a team released_by names is refused by names_person: say so.
            bot = event.actor and trust.not_a_person(job.forge, event.actor, event.actor_id)
            refused = checks.release_refused(
                tier.name, event.tag, event.actor, tier.released_by, bot=bot or None
            )
            job.forge.set_check(sha, refused)
            audit.record(
                job,
                audit.REFUSAL,
                "release refused",
                actor=event.actor or "?",
                ref=f"tag {event.tag}",
                detail=f"{tier.name} at {sha[:12]}: "
                + (f"a bot account: {bot}" if bot else "not in released_by"),
            )
            who = event.actor or "?"
            log.warning(
                "%s: tag %s by %s refused for %s", job.forge.repo, event.tag, who, tier.name
            )
            return None
        outcome = promote(
            job,
            sha,
            settings,
            label=f"tag {md.code(event.tag)}",  # Markdown: the check's and comment's text
            number=None,
            environment=tier.name,
            actor=event.actor or audit.SERVICE,
        )
        if not outcome.ok:
            return outcome
        if tier.name == PROD:
            _retire_waiting(job, sha, event.tag, outcome)
    return outcome


def _promoted_since(job: Job, sha: str) -> str | None:
    """The commit prod was last promoted from when it is a later commit than ``sha`` on
    the same line of history (``sha`` is one of its ancestors); else None.

    The commit is the one the settings in force were pinned at, when the audit log says
    prod's last promotion was of it: a promotion of prod pins its commit, but the first
    read of the settings pins the prod branch's head, which prod may not hold."""
    pinned = job.ledger.settings_in_force(job.repo)
    if pinned is None or not _COMMIT.fullmatch(pinned.sha) or pinned.sha == sha.lower():
        return None  # never pinned, pinned at a branch's name, or this very commit
    if not _last_promoted(job, pinned.sha):
        return None  # not known to be in prod: promote as ever
    return pinned.sha if job.forge.on_branch(sha, pinned.sha) else None


def _last_promoted(job: Job, sha: str) -> bool:
    """Whether prod's last promotion in the newest :data:`AUDIT_LOOKBACK` rows of the
    repository's audit log was of commit ``sha`` (its detail: :func:`_detail`)."""
    for row in job.ledger.entries(repo=job.repo, newest_first=True, limit=AUDIT_LOOKBACK):
        promoted = row.kind == audit.PROMOTION and row.outcome == "promoted"
        if promoted and row.detail.startswith(f"{PROD} at "):
            return row.detail.startswith(_detail(PROD, sha, ""))
    return False


def _detail(environment: str, sha: str, title: str) -> str:
    """A promotion's audit detail: the environment, the commit, the outcome's title."""
    return f"{environment} at {sha[:12]}: {title}"


def _may_release(
    forge: Forge,
    tier: Tier,
    actor: str,
    actor_id: int | None = None,
    people: Mapping[str, int | None] | None = None,
) -> bool:
    """Whether ``actor`` (account ``actor_id``) is in ``tier.released_by`` (a login, by the
    account it had when the settings came into force: ``people``, see
    :func:`~sluice.bot.flow.trust.names_person`; or a member of a team listed there);
    anyone may when it lists nobody."""
    if not tier.released_by:
        return True
    return bool(actor) and trust.names_person(forge, people, tier.released_by, actor, actor_id)


def _retire_waiting(job: Job, sha: str, tag: str, outcome: Outcome) -> None:
    """The merged PRs a tag brought to prod: their environments go, their comments say so."""
    repo = job.repo
    waiting = job.ledger.waiting(repo).items()
    done = [n for n, items in waiting if set(items) <= outcome.live]
    for number in done:
        cleanup(
            job,
            number,
            f"promoted to prod by tag {md.code(tag)}",
            merged=True,
            promoted=True,
        )
        done_sections = comment.promotion_sections(sha, True, outcome.title, outcome.summary)
        job.publish(number, sections=done_sections[1:])
    job.ledger.promoted(repo, done)


def promote(
    job: Job,
    sha: str,
    settings: Settings,
    *,
    label: str,
    number: int | None,
    environment: str = PROD,
    actor: str = audit.SERVICE,
) -> Outcome:
    """Bring ``environment`` (prod, or another tier of ``sluice.deploy.environments``) to
    the project at ``sha`` (see the module docstring); ``actor`` asked for it (the tag's
    author, the writer of ``/sluice deploy``; a merge's: the service)."""
    job.forge.set_check(sha, checks.promoting(label, environment))
    repo = job.repo
    # A promotion of this commit cut short (its job is being run again) has a record open.
    deployment = job.ledger.deployment(repo, sha, environment)
    if deployment is None:
        deployment = job.forge.start_deployment(
            sha, environment, f"Sluice: promote {label}", settings.branch
        )
        if deployment is not None:
            job.ledger.deploying(repo, sha, environment, deployment, job.now)
    if deployment is not None:
        job.forge.deployment_status(deployment, "in_progress", f"Promoting {label}")
    try:
        outcome = _promote(job, sha, settings, label, environment, number)
    except DriverLost:
        # Prod may be half-way (views partly swapped, the record not yet): the worker runs
        # the promotion again, which re-plans against the unchanged record and finishes it.
        raise
    except SluiceError as exc:
        text = job.scrub(str(exc))
        outcome = Outcome(False, *checks.promotion_failed(label, text, environment))
    job.forge.set_check(
        sha, checks.promotion_result(outcome.ok, outcome.title, outcome.summary, environment)
    )
    audit.record(
        job,
        audit.PROMOTION,
        "promoted" if outcome.ok else "not promoted",
        actor=actor,
        ref=label.replace("`", ""),
        plan_id=outcome.plan_id,
        detail=_detail(environment, sha, outcome.title),
        notify=notify_text.PROMOTION if environment == PROD else None,
    )
    if deployment is not None:
        state = "success" if outcome.ok else "failure"
        job.forge.deployment_status(deployment, state, outcome.title[:140])
        job.ledger.deployed(repo, sha, environment)
    if number is not None:
        sections = comment.promotion_sections(sha, outcome.ok, outcome.title, outcome.summary)
        job.publish(number, sections=sections)
    log.info(
        "%s: promotion of %s (%s) to %s: %s",
        job.forge.repo,
        label,
        sha[:12],
        environment,
        outcome.title,
    )
    return outcome


def _promote(
    job: Job, sha: str, settings: Settings, label: str, environment: str, number: int | None = None
) -> Outcome:
    tree = job.tree(sha)
    project = trust.load_trusted(job, tree, settings)
    source = trust.tree_source(tree, job.deps.config_path)
    own = trust.parse(source)  # the promoted commit's own settings
    repo = job.repo
    # Prod's Python: that of the commit prod was last promoted with (as SLUICE_PROJECT_PYTHON
    # compares); the promoted commit's, when it differs, is an item to find approved.
    prod_python = trust.prod_python_digest(job, tree, settings)
    prod_statements = trust.prod_statements_digest(job, settings)
    store = open_state(job.state_url)
    try:
        for attempt in (1, 2):
            now = job.now
            plan = plan_environment(project, store, environment, end=now, execution_time=now)
            items = to_approve(plan, project, own, settings, prod_python, prod_statements)
            if settings.requires_approval:
                # Approved under the settings in force: a gate changed since approved nothing.
                missing = job.ledger.unapproved(repo, items, settings.generation)
                if missing:
                    listed = [
                        (None if name == trust.SETTINGS_ITEM else name, content == REMOVED)
                        for name, content in missing
                    ]
                    words = checks.unapproved(listed, settings.source, settings.branch, environment)
                    return Outcome(False, *words, plan_id=plan.plan_id)
            if environment == PROD:  # its owners, fixed to accounts as they come into force
                trust.pin_owners(job, project)
            # Policies hold whatever was approved (issue 47): evaluated again on this plan.
            held = policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=prod_python, prod_statements=prod_statements,
                number=number, environment=environment,
            )  # fmt: skip
            if held is not None:
                return Outcome(False, *held, plan_id=plan.plan_id)
            live = frozenset((s.name, own_key(s)) for s in plan.snapshots)
            if not plan.has_changes and not plan.backfill:
                if plan.base_plan_id is not None:  # its plan stays; its project is sha's now
                    store.set_plan_commit(plan.base_plan_id, sha)
                if environment == PROD:
                    trust.pin(job.ledger, repo, sha, own, settings.branch, now)
                words = checks.already_promoted(environment)
                return Outcome(True, *words, live=live, plan_id=plan.plan_id)
            runner = job.deps.spark_runner(project, tree, lambda _event: None)
            try:
                # A tier other than prod is kept until the settings drop it (no expiry).
                result = apply_plan(
                    project, store, plan, runner, now=now, keep=environment != PROD, commit=sha
                )
            except ConflictError:
                if attempt == 2:
                    raise
                log.info("%s: prod moved while promoting %s; planning again", job.forge.repo, label)
                continue
            except FailedAfterViews as exc:
                # Out of time (or an after_all statement failed) once the views were
                # swapped: the record was committed to the plan, so prod is promoted.
                if environment == PROD:
                    trust.pin(job.ledger, repo, sha, own, settings.branch, now)
                words = checks.promoted_then_failed(label, job.scrub(str(exc)), environment)
                return Outcome(True, *words, 0, 0, live, plan.plan_id)
            if environment == PROD:  # the settings in force are prod's
                trust.pin(job.ledger, repo, sha, own, settings.branch, now)
            if result.tables_built == 0:
                words = checks.virtual_update(result.views_swapped, environment)
                return Outcome(True, *words, 0, result.views_swapped, live, plan.plan_id)
            names = [b.name for b in plan.backfill]
            words = checks.backfilled(result.tables_built, names, result.views_swapped, environment)
            built = result.tables_built
            return Outcome(True, *words, built, result.views_swapped, live, plan.plan_id)
    finally:
        store.close()
    raise AssertionError("unreachable")  # pragma: no cover


def to_approve(
    plan: Plan,
    project: Project,
    own: trust.Parsed,
    settings: Settings,
    prod_python: str | None,
    prod_statements: str | None,
) -> list[Item]:
    """What a promotion of ``plan`` (the project at a commit whose own settings are
    ``own``, planned against the environment it promotes) must find approved: its review's
    items (:func:`~sluice.bot.flow.reviewed_plan.review_of`), and a change of the settings
    in force. A merge group's checks ask the same of the plan its merge would promote
    (:mod:`sluice.bot.flow.merge_queue`)."""
    review = review_of(plan, project, prod_python=prod_python, prod_statements=prod_statements)
    items = list(review.items)
    if own.digest != settings.digest:
        items.append(trust.change_item(own.digest, settings.generation))
    return items


def abandon(job: Job, sha: str, text: str) -> None:
    """The promotion of ``sha`` failed on every attempt: close its open deployment records
    (of each tier it may have been promoting into)."""
    repo = job.repo
    try:
        environments = [t.name for t in trust.for_repository(job).deploy.tiers()]
    except ConfigError:
        environments = [PROD]
    for environment in environments:
        deployment = job.ledger.deployment(repo, sha, environment)
        if deployment is not None:
            job.forge.deployment_status(deployment, "failure", text[:140])
            job.ledger.deployed(repo, sha, environment)


def _settings(job: Job, sha: str, number: int | None) -> Settings | None:
    try:
        return trust.for_repository(job)
    except ConfigError as exc:
        text = job.scrub(str(exc))
        job.forge.set_check(sha, checks.deploy_settings_invalid(text))
        if number is not None:
            job.publish(number, section=comment.promotion_error_section(text))
        return None


def cleanup(
    job: Job,
    number: int,
    why: str,
    *,
    merged: bool = False,
    promoted: bool = False,
) -> None:
    """Invalidate the PR's environment now; the janitor drops its views later. The comment
    says so, and what became of the PR (closed, ``merged``, ``promoted``)."""
    environment = pr_environment(number)
    store = open_state(job.state_url)
    try:
        existed = store.get_environment(environment) is not None
        if existed:
            invalidate_environment(store, environment)
    finally:
        store.close()
    sections = comment.closed_sections(
        environment, why, merged=merged, removed=existed, promoted=promoted
    )
    commented = job.ledger.comment(job.repo, number)[0] is not None
    if sections and (existed or commented):  # never a first comment on a PR Sluice left alone
        job.publish(number, sections=sections)
