"""The PR build: a pull request's environment built, diffed against prod and reported
(checks and the sticky comment), then its gate evaluated on the new plan.

Handles a pull request opened, pushed to, reopened or made ready (:func:`on_opened`) and
a re-run of one of its checks (:func:`on_check_run`); ``/sluice plan`` calls
:func:`preview`. Spark work goes through core (one job per build); this process never
starts a JVM.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.bot.events.neutral import WEB, CheckRunEvent, PullRequestEvent
from sluice.bot.flow import approval, audit, policies, trust
from sluice.bot.flow.deps import Deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview, prod_owners, review_of
from sluice.bot.forge.base import Check, PullRequest, UnusableTree
from sluice.bot.present import checks, comment, notify_text
from sluice.bot.present.comment import CommentState
from sluice.core.errors import ConfigError, DriverLost, JobCancelled, SluiceError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.preview import PreviewResult, preview_environment
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.spark.events import Event
from sluice.core.tablediff.result import DiffOptions
from sluice.core.timeutil import DAY_MS
from sluice.core.workflow import plan_environment

log = logging.getLogger(__name__)

PR_CHECKS = checks.PR_CHECKS
PREVIEW_ACTIONS = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})
PROGRESS_EVERY_S = 10.0


def on_opened(job: Job, event: PullRequestEvent) -> None:
    """A PR opened, pushed to, reopened or made ready: build it and evaluate its gate."""
    pr = _pull(event)
    if not pr.author:  # the payload did not say (GitLab: someone else pushed)
        pr = dataclasses.replace(pr, author=job.forge.pull_request(pr.number).author)
    plan_and_gate(job, pr)


@dataclass(frozen=True)
class Held:
    """A build that waits: its backfill is over ``sluice.gate.backfill`` (``what``) and
    the budget's ``approver`` has not approved the PR's head yet."""

    what: str
    approver: str


def plan_and_gate(job: Job, pr: PullRequest) -> None:
    """Build ``pr``'s environment, then evaluate its gate on the new plan."""
    result = preview(job, pr)
    if isinstance(result, Held):
        job.forge.set_check(pr.head_sha, checks.approval_held(result.what, result.approver))
    elif result is not None:
        try:
            approval.refresh(job, pr)
        except SluiceError as exc:  # the build is done: do not redo it for the gate
            log.warning("%s#%s: gate not evaluated: %s", job.forge.repo, pr.number, exc)
            job.forge.set_check(pr.head_sha, checks.gate_not_evaluated(job.scrub(str(exc))))
    elif not pr.draft and not pr.fork:
        job.forge.set_check(pr.head_sha, checks.nothing_to_approve())


def on_approved(job: Job, pr: PullRequest, reviewer: str) -> bool:
    """``reviewer`` approved ``pr``'s head: when its build waits for the backfill budget
    and they are the budget's approver, build it now (True); else nothing (False)."""
    if not pr.open or job.ledger.review(job.repo, pr.number, pr.head_sha) is not None:
        return False  # built (or not held) at this head: the gate takes the approval
    try:
        settings = trust.for_repository(job)
    except ConfigError:
        return False  # the gate's refresh says what is wrong with the settings
    budget = settings.gate.backfill
    if budget is None or not approval.budget_approved(job, pr, budget.approver, settings.people):
        return False
    log.info("%s#%s: %s approved the held build", job.forge.repo, pr.number, reviewer)
    audit.record(
        job,
        audit.OVERRIDE,
        "held build released",
        actor=reviewer,
        ref=f"#{pr.number}",
        detail=f"backfill budget's approver, at {pr.head_sha[:12]}",
    )
    plan_and_gate(job, pr)
    return True


def on_check_run(job: Job, event: CheckRunEvent) -> None:
    """A check's button or re-run, for the pull request the event is queued under: the
    first it names (``neutral.pr_key``), so that it never runs beside that PR's own jobs.
    GitHub names every open PR whose head is the commit; the check run is the commit's
    and so the same on each of them, and another PR's jobs run under another key, which
    this job must not act for (two builds of one environment at once)."""
    for number in event.numbers[:1]:
        pr = job.forge.pull_request(number)
        if not pr.open or pr.head_sha != event.head_sha:
            continue  # an older commit's check: its plan is not the one to act on
        if event.action == "rerequested" and event.check_name in (*PR_CHECKS, ""):
            plan_and_gate(job, pr)
        elif event.action == "rerequested" and event.check_name == checks.APPROVAL:
            approval.refresh(job, pr)
        elif event.action == "requested_action" and checks.approved_plan(event.identifier)[0]:
            _click(job, event, number)
            approval.refresh(job, pr)


def _click(job: Job, event: CheckRunEvent, number: int) -> None:
    """Record ``event``'s "Approve this plan" (the check's button, or the web UI's form: the
    same event) on its head, of the plan its button showed, and its audit row with who
    clicked, in one transaction; the gate, evaluated next, decides whether it counts (never
    the author's own, never for a plan made again on the commit since)."""
    _, plan = checks.approved_plan(event.identifier)
    review = job.ledger.review(job.repo, number, event.head_sha)
    current = review.fingerprint if review is not None else None
    if plan is not None and current is not None and current[: checks.PLAN_IN_ACTION] == plan:
        plan_id: str | None = current
    else:
        plan_id = plan or current
    where = "the web UI's" if event.origin == WEB else "the check's"
    with job.ledger.together("record an approval click"):
        # When the service received it, before any job queued ahead of it ran (a build that
        # read its clicker's later objection: red team round 10); else when handled.
        at = event.received_ms if event.received_ms is not None else job.now
        job.ledger.click(
            job.repo, number, event.requester, event.head_sha, plan, at, event.requester_id
        )
        audit.record(
            job,
            audit.APPROVAL,
            "given",
            actor=event.requester,
            actor_id=event.requester_id,
            ref=f"#{number}",
            plan_id=plan_id,
            detail=f"{where} Approve this plan at {event.head_sha[:12]}",
        )


def preview(job: Job, pr: PullRequest) -> PreviewResult | Held | None:
    """Build ``pr``'s environment, diff it, and report; None when nothing was built,
    :class:`Held` when the build waits for the backfill budget's approval."""
    environment = pr_environment(pr.number)
    post = _Poster(job, pr, footer(job.deps, pr.head_sha))
    if pr.draft:
        post.comment(
            CommentState(
                None,
                environment,
                pr.head_sha,
                "neutral",
                "draft",
                progress="This PR is a draft: Sluice builds its environment once it is ready for review.",
            )
        )
        return None
    if pr.fork:
        post.comment(
            CommentState(
                None,
                environment,
                pr.head_sha,
                "neutral",
                "fork PR not built",
                progress="This PR comes from a fork, so Sluice does not run its code "
                "until a user with write permission comments `/sluice plan`.",
            )
        )
        return None
    for name in PR_CHECKS:
        post.check(checks.queued(name))
    post.comment(
        CommentState(
            None, environment, pr.head_sha, "queued", "queued", progress="Fetching the project"
        ),
        reset=True,
    )
    try:
        tree = job.tree(pr.head_sha)
    except UnusableTree as exc:  # permanent: tell the PR now rather than retry
        _failed(post, environment, checks.FILES_REFUSED, str(exc))
        return None
    job.ledger.seen_later(job.repo, None, job.now, sha=pr.head_sha)  # with its next write
    try:
        settings = trust.for_repository(job)
    except ConfigError as exc:
        _failed(post, environment, checks.SETTINGS_INVALID, job.scrub(str(exc)))
        return None
    try:
        project = trust.load_trusted(job, tree, settings)
        own_source = trust.tree_source(tree, job.deps.config_path)
        own = trust.parse(own_source)
    except SluiceError as exc:
        _failed(post, environment, checks.PROJECT_DOES_NOT_LOAD, job.scrub(str(exc), tree))
        return None
    post.pending.append(
        _settings_notice(settings, own, own_source.shown)
    )  # with the next publication
    post.project = project.config.sluice.project  # one project per repository: pr_<n>
    post.recent_days = project.config.sluice.pr.backfill_days
    return _build(job, post, project, environment, tree, settings, own)


def _held(job: Job, post: _Poster, settings: trust.Settings, plan: Plan) -> Held | None:
    """The build's hold when ``plan`` (what building the PR computes) is over the
    backfill budget and the budget's approver has not approved this head yet."""
    budget = settings.gate.backfill
    what = budget.exceeded(plan.backfill_intervals, plan.scan_bytes) if budget else None
    if budget is None or what is None:
        return None
    if approval.budget_approved(job, post.pr, budget.approver, settings.people):
        return None
    return Held(what, budget.approver)


def _build(
    job: Job,
    post: _Poster,
    project: Project,
    environment: str,
    tree: Path,
    trusted: trust.Settings,
    own: trust.Parsed,
) -> PreviewResult | Held | None:
    settings = project.config.sluice.pr
    now = job.now
    store = job.state()
    start = now - settings.backfill_days * DAY_MS if settings.backfill_days is not None else None
    try:
        # Against prod: the plan says what the PR changes, also when its environment
        # already holds this commit (a re-run, a push that only edits other files).
        with store.together(f"plan {environment}"):
            plan = plan_environment(
                project, store, environment, start=start, end=now, execution_time=now,
                against=PROD,
            )  # fmt: skip
    except SluiceError as exc:
        _failed(post, environment, checks.PLAN_FAILED, job.scrub(str(exc), tree))
        return None
    held = _held(job, post, trusted, plan)
    if held is not None:
        audit.record(  # once per head: a re-run of a held head holds it again, silently
            job,
            audit.HOLD,
            f"held at {post.pr.head_sha[:12]}",
            ref=f"#{post.pr.number}",
            detail=f"over the backfill budget ({held.what}); waits for {held.approver}",
            once=True,
            notify=notify_text.BUDGET_HOLD,
        )
        shown = _neutral(
            post,
            environment,
            plan,
            [checks.build_held(name, held.what, held.approver) for name in PR_CHECKS],
            checks.BUILD_HELD,
            checks.held_text(held.what, held.approver),
        )
        # Shown from its publication: the budget's approver approves what they read
        # (approval.budget_approved counts an approval given while this hold was shown).
        job.ledger.record_shown(job.repo, post.pr.number, post.pr.head_sha, *shown)
        return held
    for name in PR_CHECKS:
        post.check(checks.running(name))
    progress = _Progress(post, environment, plan)
    runner = job.deps.spark_runner(project, tree, progress.on_event)
    try:
        result = preview_environment(
            project,
            store,
            plan,
            runner,
            url=job.state_url,
            now=now,
            diff_cap=settings.diff_limit,
            diff_options=DiffOptions(decimals=settings.decimals, sample=settings.diff_sample),
        )
    except DriverLost:
        # Not this commit's fault: the worker runs the job again (and reports on the PR
        # only after its last attempt). The checks stay in progress meanwhile.
        raise
    except JobCancelled as exc:
        # A newer head superseded this one (the worker stopped the job): say so on this
        # head's checks and the comment; the worker ends the job, and the newer head's
        # build publishes the comment again.
        reason = exc.message.removeprefix("the job was stopped: ")
        _neutral(
            post,
            environment,
            plan,
            [checks.build_superseded(name, reason) for name in PR_CHECKS],
            checks.BUILD_SUPERSEDED,
            checks.superseded_text(reason),
        )
        raise
    except SluiceError as exc:
        _failed(
            post,
            environment,
            checks.BUILD_FAILED,
            job.scrub(str(exc), tree),
            plan,
        )
        return None
    # What a merge promotes: prod, or the first tier of sluice.deploy.environments.
    tiers = trusted.deploy.merge_tiers()
    reaches = tiers[0].name if tiers else PROD
    with store.together(f"plan {reaches}"):
        prod = plan_environment(project, store, reaches, end=now, execution_time=now)
        # Owners as prod has them (a PR cannot name its own owner).
        owners = prod_owners(store)
    # The settings change if any; the PR's Python is an item when it differs from prod's
    # (the last promoted commit's).
    extra = trusted.change_to(own.digest)
    review = review_of(
        result.plan,
        project,
        prod_python=trust.prod_python_digest(job, tree, trusted),
        prod_statements=trust.prod_statements_digest(job, trusted),
        owners=owners,
        extra=extra,
        # A gate of owners only: a change of the settings (which could drop the gate), the
        # Python or the statements is every owner's to approve (red team, settings round 3
        # and approval round: it needed nobody).
        owners_only=trusted.gate.required_approvers.count == 0,
    )
    review = dataclasses.replace(
        review,
        merge_intervals=prod.backfill_intervals,
        merge_bytes=prod.scan_bytes,
        generation=trusted.generation,
    )
    # The policies in force judge the PR's plan (never its own policies: issue 47).
    raw, _unread = policies.judge(
        job, trusted, result.plan, project, store, post.pr.author, post.pr.number
    )
    review = dataclasses.replace(review, policies=raw)
    _policies(job, post, trusted, review)
    # Recorded once published, as of then, by each clock (the job may have built for
    # minutes: an approval given meanwhile saw the commit's plan before this one, or
    # none; a review is compared with the forge's time of the publication, a click with
    # the service's). Not published (the forge failed): not recorded, the gate waits.
    shown = _report(post, environment, result, prod)
    job.ledger.record_plan(job.repo, post.pr.number, post.pr.head_sha, review, *shown)
    return result


def _policies(job: Job, post: _Poster, settings: trust.Settings, review: PlanReview) -> None:
    """The ``sluice/policy`` check and the comment's section for the recorded ``review``
    (no check when no policies are in force)."""
    judgement = policies.judgement_of(job, settings, review, post.pr.number, post.pr.head_sha)
    if judgement is not None:
        post.check(policies.check_of(judgement))
    post.pending.append(policies.section(judgement))


def _report(
    post: _Poster, environment: str, result: PreviewResult, prod: Any
) -> tuple[int, int | None]:
    """The build's checks and its comment; when the comment was published
    (:meth:`_Poster.comment`)."""
    title, body = comment.tests_summary(result.tests)
    post.check(checks.tests_result(title, body, result.tests_passed))
    plan = result.plan
    details = comment.details_markdown(result, prod)
    post.check(
        checks.environment_result(
            environment, plan.changes_models, result.built, result.views, details
        )
    )
    reads = prod.scan.reads() if prod.scan is not None and prod.scan.bytes else ""
    writes = prod.output.writes() if prod.output is not None else ""
    reads = " and ".join(w for w in (reads, writes) if w)
    post.check(
        checks.merge_result(checks.backfills_of(prod), prod.has_changes, reads, prod.environment)
    )
    failed = not result.tests_passed or bool(result.diff_errors)
    return post.comment(
        CommentState(
            post.project,
            environment,
            post.pr.head_sha,
            "failure" if failed else "success",
            "built",  # the verdict words it (sluice.bot.present.verdict)
            preview=result,
            checks=tuple((n, c) for n, c in post.conclusions.items()),
            prod_plan=prod,
        )
    )


def _neutral(
    post: _Poster, environment: str, plan: Plan, posted: list[Check], title: str, text: str
) -> tuple[int, int | None]:
    """A build that did not run (held for an approver, or stopped by a newer head):
    ``posted`` on the checks, ``title`` and ``text`` on a neutral comment; when it was
    published (:meth:`_Poster.comment`)."""
    for check in posted:
        post.check(check)
    return post.comment(
        CommentState(
            post.project, environment, post.pr.head_sha, "neutral", title, progress=text, plan=plan
        )
    )


def _failed(post: _Poster, environment: str, title: str, text: str, plan: Any = None) -> None:
    for name in PR_CHECKS:
        post.check(checks.build_failed(name, title, text))
    post.comment(
        CommentState(
            post.project,
            environment,
            post.pr.head_sha,
            "failure",
            title,
            error=(title, text),
            plan=plan,
            checks=tuple(post.conclusions.items()),
        )
    )


def _settings_notice(
    settings: trust.Settings, own: trust.Parsed, own_file: str
) -> tuple[str, str | None]:
    """The comment's section telling the PR when its own settings (in ``own_file``), or
    newer ones on the prod branch, are not the ones its build used (none: removes it)."""
    policies_changed = own.policies != settings.policies
    with_prods = trust.digest(own.sluice, own.gate, own.deploy, settings.policies)
    return comment.settings_section(
        own_file,
        settings.digest not in (own.digest, with_prods),
        settings.source,
        settings.note,
        settings.branch,
        settings.ignored_spark(),
        drops_gate=settings.gate.asks_approval() and not own.gate.asks_approval(),
        policies_changed=policies_changed,
    )


def footer(deps: Deps, sha: str) -> str:
    """The comment's last line: the commit, when, and the limits its Spark job ran under."""
    memory = deps.spark.conf.get("spark.driver.memory", "1g")
    return comment.footer(sha, deps.clock(), deps.job_timeout, memory)


def _pull(event: PullRequestEvent) -> PullRequest:
    return PullRequest(
        number=event.number,
        head_sha=event.head_sha,
        head_ref=event.head_ref,
        base_ref=event.base_ref,
        base_sha=event.base_sha,
        author=event.author,
        draft=event.draft,
        fork=event.fork,
        open=True,
        merged=False,
        title=event.title,
    )


class _Poster:
    """Posts to one PR, remembering each check's last state for the comment's table; the
    comment's sections found on the way (``pending``) go with its next publication."""

    def __init__(self, job: Job, pr: PullRequest, footer: str) -> None:
        self.job, self.forge, self.pr, self.footer = job, job.forge, pr, footer
        self.project: str | None = None
        self.recent_days: int | None = None
        self.conclusions: dict[str, str] = {}
        self.pending: list[tuple[str, str | None]] = []

    def check(self, check: Check) -> None:
        self.forge.set_check(self.pr.head_sha, check)
        label = check.conclusion or check.status.replace("_", " ")
        self.conclusions[check.name] = f"{label}: {check.title}"

    def comment(self, state: CommentState, *, reset: bool = False) -> tuple[int, int | None]:
        """Post ``state`` as the comment's body, with its facts for the verdict; ``reset``:
        a new build starts, so what became of an earlier one (closed) no longer holds.
        Returns when it was published: by the service's clock once the forge answered,
        and by the forge's (None: it says no time)."""
        state = _with(state, project=self.project, footer=self.footer, recent_days=self.recent_days)
        body = comment.comment(
            state, limit=self.forge.comment_limit, marker=self.job.deps.sticky.marker
        )
        sections = [comment.facts_section(state), *(comment.reset_sections() if reset else [])]
        sections += self.pending
        forge_at = self.job.publish(self.pr.number, body=body, sections=sections)
        self.pending = []
        return self.job.deps.clock(), forge_at


def _with(state: CommentState, **changes: Any) -> CommentState:
    return dataclasses.replace(state, **changes)


class _Progress:
    """Turns the Spark job's events into "building 3 of 7 models" on the comment, at most
    once every :data:`PROGRESS_EVERY_S`."""

    def __init__(self, post: _Poster, environment: str, plan: Any) -> None:
        self.post, self.environment, self.plan = post, environment, plan
        self.builds = 0
        self.total = len(plan.backfill) + len(plan.create_views)
        # The first word after PROGRESS_EVERY_S: a quick build publishes only its result.
        self.last = time.monotonic()

    def state(self, text: str) -> CommentState:
        return CommentState(
            self.post.project,
            self.environment,
            self.post.pr.head_sha,
            "running",
            "building",
            progress=text,
            plan=self.plan,
        )

    def on_event(self, event: Event) -> None:
        if event["event"] != "step_start":
            return
        kind = event.get("type")
        if kind == "build":
            self.builds += 1
        text = comment.progress(kind, self.builds, self.total, event.get("label"))
        if text is None:
            return
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        try:
            self.post.comment(self.state(text))
        except SluiceError as exc:  # progress is best effort; the result is posted anyway
            log.warning("could not post progress: %s", exc)
