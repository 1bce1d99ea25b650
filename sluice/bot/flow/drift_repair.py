"""Prod's drift repaired through the gate (issue 47): ``sluice drift prod --repair
--apply`` as the service runs it, asked for and approved on the ``sluice/drift`` check.

1. A failed ``sluice/drift`` check carries "Plan the repair" (:func:`checks.plan_repair_action`).
   A writer of the repository (forge role write, maintain or admin) clicks it: the service
   checks prod again (one read-only Spark job), makes the repair plan from state alone
   (:func:`sluice.core.drift.plan_repair`, as the CLI does), records the request with the
   plan's :func:`fingerprint` in the audit log and shows the plan on the check, with
   "Approve the repair" naming that fingerprint.
2. Each of the gate's required approvers (``sluice.gate.required_approvers`` of the settings
   in force on the prod branch, :mod:`sluice.bot.flow.trust`; never a pull request's) who
   did not ask for the repair approves it with that button. At each approval the plan is
   made again: its fingerprint must be the one the button named (prod or its drift changed
   since: not counted, plan it again).
3. The plan is judged as a pull request's plan is (:mod:`.repair_gate`): a hard policy
   refuses it; a soft one holds it until someone it names clicks "Override policies"; the
   owners of what it rebuilds (when the gate asks owners) and the backfill budget's
   approver (when it is over the budget) approve it too.
4. Once ``count`` approvers approved that plan and nothing else holds it, it is applied
   (``apply_plan``, the CLI's ``--repair --apply`` path) with the project of the commit
   prod's plan was promoted from (:func:`promoted_project`), prod is checked again and
   ``sluice/drift`` says the outcome. Under a gate requiring nobody (and nothing else
   holding it), the request applies it at once, and the check says so.

The clicks are queued under prod's key (:func:`sluice.bot.events.neutral.pr_key`), so a
repair runs alone among prod's writers (promotions, rollbacks, scheduled runs, the janitor).
The audit log's ``drift repair`` rows are the repair's only record (requests, approvals,
the repair applied): approvals count from the last time that plan was applied on, so a
plan applied once is approved again before it runs again. A click's identifier is the
requester's text: only the shapes Sluice makes are read (:func:`checks.repair_click`),
and the one it names is compared with the plan made again, never looked up by it; the
service repairs only its own repository's prod.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.flow import audit, drift_view, policies, repair_gate, trust
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import Check, writer
from sluice.bot.present import checks, notify_text
from sluice.bot.present.notify_text import Notice
from sluice.core import drift
from sluice.core.drift.compare import DriftReport
from sluice.core.drift.repair import Repair
from sluice.core.errors import PlanError, SluiceError
from sluice.core.gate_settings import RequiredApprovers
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.submit import Runner
from sluice.core.state import StateReader, StateStore, open_state
from sluice.core.workflow import apply_plan, plan_commit, plan_run

log = logging.getLogger(__name__)

REQUESTED, APPROVED, APPLIED = "requested", "approved", "applied"
"""The outcomes of the ``drift repair`` audit rows that make up a repair's record."""
REFUSED = "drift repair refused"
REQUEST_MS = 24 * 3_600_000
"""How long a request (and the approvals given it) stands: a drift mended by hand and
back weeks later is asked for and approved again, never repaired on an old request alone
(red team, drift repair)."""


def fingerprint(plan: Plan) -> str:
    """What a repair plan does, as 32 hex characters: the plan of prod it starts from, the
    views it makes again, the tables it rebuilds and every interval it computes. Made
    again from state, it is the same while prod and its drift are; any change to either
    gives another (its plan id alone would not do: it holds the plan's end, which is the
    time of planning when no table is rebuilt)."""
    value = {
        "environment": plan.environment,
        "base": plan.base_plan_id,
        "versions": sorted((s.name, s.version) for s in plan.snapshots),
        "repoint": list(plan.repoint),
        "rebuild": list(plan.rebuild),
        "views": list(plan.create_views),
        "backfill": [(b.name, b.version, [list(i) for i in b.intervals]) for b in plan.backfill],
    }
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Tally:
    """A repair plan's record since it was last applied: who asked for it, and the
    approvals that count (required approvers now, none of them a requester)."""

    requesters: tuple[str, ...]
    approved_by: tuple[str, ...]
    # Who asked, as (login, forge account id or None): a requester is left out of the
    # approvals by the id where both rows carry one, a rename notwithstanding.
    asked: tuple[tuple[str, int | None], ...] = ()


def same_person(login: str, uid: int | None, other: str, other_id: int | None) -> bool:
    """Whether two rows' actors are one person: by their forge account ids where both rows
    carry one (a login can be renamed, and GitHub frees the old one at once), else by
    their logins, case-folded (rows written before ids were: audit migration 2)."""
    if uid is not None and other_id is not None:
        return uid == other_id
    return login.casefold() == other.casefold()


def window(job: Job, plan: str, rows: list[audit.Entry] | None = None) -> repair_gate.Window:
    """The rows of repair plan ``plan``'s record that count (its repair rows ``rows``, read
    when not given): after its last ``applied`` row, within REQUEST_MS of now. Requests,
    approvals and policy overrides alike."""
    if rows is None:
        rows = job.ledger.plan_entries(job.repo, audit.REPAIR, plan)
    last = max((r.id or 0 for r in rows if r.outcome == APPLIED), default=0)
    return repair_gate.Window(last, job.now - REQUEST_MS)


def tally(job: Job, plan: str, approvers: RequiredApprovers) -> Tally:
    """The record of the repair plan with fingerprint ``plan`` (:class:`Tally`)."""
    rows = job.ledger.plan_entries(job.repo, audit.REPAIR, plan)
    counted = window(job, plan, rows)
    rows = [r for r in rows if counted.holds(r)]
    requesters = tuple(dict.fromkeys(r.actor for r in rows if r.outcome == REQUESTED))
    asked = tuple(dict.fromkeys((r.actor, r.actor_id) for r in rows if r.outcome == REQUESTED))
    # A listed login is the account it had when the settings came into force (their people,
    # as this job read them), never whoever took it since (trust.names_person).
    people = job.trusted.people if job.trusted is not None else None
    listed = [*approvers.users, *approvers.teams]
    # One approval a person: their account id where the row carries it (a row without
    # one, the id its login has in the others, if only one), else the login in any case.
    ids: dict[str, set[int]] = {}
    for r in rows:
        if r.actor_id is not None:
            ids.setdefault(r.actor.casefold(), set()).add(r.actor_id)
    approved: dict[str, str] = {}
    for r in rows:
        if r.outcome != APPROVED or not trust.names_person(
            job.forge, people, listed, r.actor, r.actor_id
        ):
            continue
        if any(same_person(r.actor, r.actor_id, login, uid) for login, uid in asked):
            continue
        known = ids.get(r.actor.casefold(), set())
        uid = r.actor_id if r.actor_id is not None else (min(known) if len(known) == 1 else None)
        approved.setdefault(f"#{uid}" if uid is not None else r.actor.casefold(), r.actor)
    return Tally(requesters, tuple(approved.values()), asked)


def on_click(job: Job, event: CheckRunEvent) -> None:
    """A button of the ``sluice/drift`` check: "Plan the repair" or "Approve the repair"
    (see the module's doc). Who clicked is checked before any Spark job runs: a reader's
    click, or an approval by someone the gate does not name, is refused in the audit log
    and changes nothing."""
    click = checks.repair_click(event.identifier)
    where = " (from the web UI)" if event.origin == WEB else ""
    if event.action != "requested_action" or click is None:
        log.warning(
            "%s: a %s of the drift check by %s that names no repair button: ignored",
            job.forge.repo,
            event.action,
            event.requester,
        )
        return
    what, token = click
    permission = job.forge.permission(event.requester)
    if not writer(permission):
        _refuse(job, event.requester, f"{permission or 'no'} permission: {what}{where}")
        return
    if job.ledger.last_sha(job.repo) is None:
        return  # no project was ever loaded for this repository: nothing built
    try:
        settings = trust.for_repository(job)
    except SluiceError as exc:  # the prod branch's settings do not load
        error = job.scrub(str(exc))
        log.warning("%s: drift repair of prod not planned: %s", job.forge.repo, error)
        job.forge.set_check(event.head_sha, checks.repair_failed(error))
        return
    approvers = settings.gate.required_approvers
    if settings.requires_approval and not approvers.count:
        # Owners approve models a PR changes; a repair has no PR and no author, so a gate
        # of owners only has nobody to ask, and a lone writer must not rebuild prod.
        _refuse(job, event.requester, f"the gate names no required approvers{where}")
        job.forge.set_check(event.head_sha, checks.repair_failed(OWNERS_ONLY_REFUSAL))
        return
    # Required approvers; owners and the budget's approver too, where the repair plan asks
    # them (repair_gate): known before any Spark job, counted once it is planned.
    if what == checks.APPROVE_REPAIR:
        refusal = repair_gate.approver_refusal(job, settings, event.requester, event.requester_id)
        if refusal is not None:  # what keeps them from approving, said as it is
            _refuse(job, event.requester, refusal + where, event.requester_id)
            return
    if what == checks.WAIVE_REPAIR and not repair_gate.may_override(
        job, settings, event.requester, event.requester_id
    ):
        _refuse(job, event.requester, f"not named by a soft policy in force{where}")
        return
    head = job.forge.commit_of(settings.branch)
    if head is None:
        return
    if event.head_sha != head:
        job.forge.set_check(event.head_sha, checks.drift_elsewhere(head, settings.branch))
        return
    tree: Path | None = None
    store = open_state(job.state_url)
    try:
        if store.get_environment(PROD) is None:
            return
        # The repair's job runs the project's statements, audits and table settings: those
        # of the commit prod's plan was promoted from, never a head of the branch no
        # promotion applied (red team, drift repair); checked before any Spark job.
        settings, tree, project = promoted_project(job, store, settings, "drift repair")
        plan_run(project, store, PROD, now=job.now)
        runner = job.deps.spark_runner(project, tree, lambda _event: None)
        report = drift.check(store, PROD, runner, now=job.now)
        if not report.drifted:
            job.forge.set_check(head, checks.drift_result(report))
            show(job, store, report, settings, project, head)
            return
        mend = drift.plan_repair(store, report, now=job.now)
        work = _Work(job, store, project, runner, tree, head, approvers, report, mend, settings)
        if what == checks.PLAN_REPAIR:
            work.request(event.requester, where, event.requester_id)
        elif what == checks.WAIVE_REPAIR:
            work.waive(event.requester, token, where + _why(event), event.requester_id)
        else:
            work.approve(event.requester, token, where, event.requester_id)
        show(job, store, work.report, settings, project, head)
    except SluiceError as exc:
        error = job.scrub(str(exc), tree)
        log.warning("%s: drift repair of prod failed: %s", job.forge.repo, error)
        job.forge.set_check(head, checks.repair_failed(error))
    finally:
        store.close()


def promoted_project(
    job: Job, store: StateReader, settings: trust.Settings, what: str
) -> tuple[trust.Settings, Path, Project]:
    """The trusted settings, tree and project of the commit prod's plan came from, as the
    promotion that applied it recorded in the state (:func:`workflow.plan_commit`): what
    the jobs running prod's recorded plan (a drift repair, a scheduled run) load, never the
    prod branch's head, which may hold commits no promotion applied. The settings' Python
    reference is that commit (prod's Python is its Python).

    Raises:
        SluiceError: prod does not exist, or its plan records no commit (applied before
            Sluice recorded one, or by the CLI): nothing says which project prod runs.
    """
    found = plan_commit(store, PROD)
    if found is None:
        raise PlanError(
            f"environment '{PROD}' does not exist",
            hint="promote to prod first (merge an approved pull request)",
        )
    plan_id, commit = found
    if commit is None:
        raise SluiceError(
            f"the {what} of prod did not run: prod's plan {plan_id[:12]} records no commit "
            "it was promoted from (it was applied by a Sluice from before this record, or by "
            "the CLI), so nothing says which project prod runs, and the prod branch's head "
            "may hold commits no promotion applied, whose before_all/after_all statements "
            "and audits must not run in prod's jobs",
            hint="promote prod once (merge an approved pull request, or push a release tag "
            "where prod is promoted on tags; a promotion that changes nothing records its "
            f"commit too): the {what} then loads the project of that commit",
        )
    pinned = dataclasses.replace(settings, python_ref=commit)
    tree = job.tree(commit)
    return pinned, tree, trust.load_trusted(job, tree, pinned)


def pending(
    job: Job,
    store: StateStore,
    report: DriftReport,
    approvers: RequiredApprovers,
    settings: trust.Settings | None = None,
    project: Project | None = None,
) -> Check | None:
    """The check of a repair plan asked for and still waiting (for approvals, or an
    override of a soft policy; with ``settings`` and ``project``, judged as a click judges
    it: :mod:`.repair_gate`), when the plan made again from ``report`` is that one (the
    scheduled drift check shows it rather than the bare report, so its buttons stay);
    None when there is none."""
    if not report.drifted:
        return None
    try:
        mend = drift.plan_repair(store, report, now=job.now)
    except SluiceError as exc:  # the report is shown all the same; the click says why
        log.warning("%s: the waiting drift repair was not looked for: %s", job.forge.repo, exc)
        return None
    plan = fingerprint(mend.plan)
    record = tally(job, plan, approvers)
    if not record.requesters:
        return None
    needed = approvers.count - len(record.approved_by)
    asks: dict[str, str] = {}
    held: list[tuple[str, tuple[str, ...]]] = []
    if settings is not None and project is not None:
        judged = repair_gate.judge(
            job, settings, project, store, mend.plan, plan, record.requesters, window(job, plan)
        )
        if judged.refusal is not None:
            refused = [(r.name, r.level, r.where, r.error) for r in judged.refused_by]
            error = judged.refusal if not refused else None
            return checks.repair_refused(report, mend, plan, refused, error)
        asks = repair_gate.missing(job, settings, judged.asks, _approvers(job, plan, record))
        named = {p.name: tuple(p.override_by) for p in policies.in_force(settings)[0]}
        held = [(r.name, named.get(r.name, ())) for r in judged.held]
    if not asks and not held:
        if not approvers.count:
            return None
        needed = max(needed, 1)  # approved, yet not applied: its apply failed; approve again
    return checks.repair_planned(
        report, mend, plan, requesters=record.requesters, approved_by=record.approved_by,
        needed=max(needed, 0), users=approvers.users, teams=approvers.teams,
        asks=sorted(asks.items()), held=held,
    )  # fmt: skip


def _approvers(job: Job, plan: str, record: Tally) -> list[tuple[str, int | None]]:
    """Everyone who approved repair plan ``plan`` since it was last applied (within the
    time a request stands), as (login, account id or None) of each row, its requesters
    (``record.asked``, told apart by account id where the rows carry one) excepted:
    owners and the budget's approver among them (:func:`tally` counts the required
    approvers alone; :func:`repair_gate.missing` the others, by the account)."""
    rows = job.ledger.plan_entries(job.repo, audit.REPAIR, plan)
    counted = window(job, plan, rows)
    return [
        (r.actor, r.actor_id)
        for r in rows
        if r.outcome == APPROVED
        and counted.holds(r)
        and not any(same_person(r.actor, r.actor_id, login, uid) for login, uid in record.asked)
    ]


@dataclass
class _Work:
    """One click's repair: prod checked and its repair planned, under prod's queue key."""

    job: Job
    store: StateStore
    project: Project
    runner: Runner
    tree: Path
    head: str
    approvers: RequiredApprovers
    report: DriftReport
    mend: Repair
    settings: trust.Settings

    @property
    def plan(self) -> str:
        return fingerprint(self.mend.plan)

    def _record(self, outcome: str, actor: str, detail: str, actor_id: int | None = None) -> None:
        """A row of the repair's record, with who acted by login and forge account id:
        written, or the click fails (retried)."""
        entry = audit.Entry(
            self.job.now, self.job.repo, audit.REPAIR, self.job.scrub(actor), outcome,
            ref=PROD, plan_id=self.plan, detail=self.job.scrub(detail), actor_id=actor_id,
        )  # fmt: skip
        if not self.job.ledger.append(entry):
            raise SluiceError(
                f"the drift repair's {outcome} row could not be written to the audit log",
                hint="click the button again once the state database is reachable",
            )

    def request(self, requester: str, where: str, requester_id: int | None = None) -> None:
        plan = self.mend.plan
        if not plan.has_changes:
            self.job.forge.set_check(self.head, checks.drift_result(self.report))
            _refuse(self.job, requester, f"nothing Sluice can repair{where}")
            return
        self._record(
            REQUESTED,
            requester,
            f"{len(plan.repoint)} views made again, {len(plan.rebuild)} tables rebuilt{where}",
            requester_id,
        )
        self._settle()

    def approve(
        self, approver: str, token: str, where: str, approver_id: int | None = None
    ) -> None:
        plan = self.plan
        if not plan.startswith(token):
            _refuse(self.job, approver, f"repair plan {token} is now {plan[:12]}{where}")
            self.job.forge.set_check(self.head, checks.repair_stale(self.report, token, plan))
            return
        record = tally(self.job, plan, self.approvers)
        if not record.requesters:
            _refuse(self.job, approver, f"nobody asked for repair plan {plan[:12]}{where}")
            return
        if any(same_person(approver, approver_id, login, uid) for login, uid in record.asked):
            _refuse(self.job, approver, f"asked for repair plan {plan[:12]} itself{where}")
            return
        self._record(APPROVED, approver, f"Approve the repair{where}", approver_id)
        self._settle()

    def waive(self, person: str, token: str, where: str, person_id: int | None = None) -> None:
        """The "Override policies" button: the soft policies failing on the plan it named
        that name ``person``, overridden for that plan (:func:`repair_gate.waive`)."""
        plan = self.plan
        if not plan.startswith(token):
            _refuse(self.job, person, f"repair plan {token} is now {plan[:12]}{where}")
            self.job.forge.set_check(self.head, checks.repair_stale(self.report, token, plan))
            return
        record = tally(self.job, plan, self.approvers)
        if not record.requesters:
            _refuse(self.job, person, f"nobody asked for repair plan {plan[:12]}{where}")
            return
        judged = self._judge(record.requesters)
        lifted = repair_gate.waive(
            self.job, self.settings, judged, person, plan, record.requesters, where, person_id
        )
        if not lifted:
            _refuse(self.job, person, f"no soft policy failing on {plan[:12]} names them{where}")
        self._settle()

    def _judge(self, requesters: tuple[str, ...]) -> repair_gate.RepairJudgement:
        """The repair plan under the rules a PR's plan passes (:mod:`.repair_gate`)."""
        return repair_gate.judge(
            self.job, self.settings, self.project, self.store, self.mend.plan, self.plan,
            requesters, window(self.job, self.plan),
        )  # fmt: skip

    def _settle(self) -> None:
        """Apply the plan when the rules in force pass it (policies, owners, the budget)
        and enough approved it; refuse it when a policy refuses it; else show it, waiting."""
        plan = self.plan
        record = tally(self.job, plan, self.approvers)
        judged = self._judge(record.requesters)
        if judged.refusal is not None:
            refused = [(r.name, r.level, r.where, r.error) for r in judged.refused_by]
            error = judged.refusal if not refused else None
            _refuse(self.job, record.requesters[-1], f"repair plan {plan[:12]}: {judged.refusal}")
            check = checks.repair_refused(self.report, self.mend, plan, refused, error)
            self.job.forge.set_check(self.head, check)
            return
        needed = self.approvers.count - len(record.approved_by)
        given = _approvers(self.job, plan, record)
        asks = repair_gate.missing(self.job, self.settings, judged.asks, given)
        held = judged.held
        if needed > 0 or asks or held:
            named = {p.name: p.override_by for p in policies.in_force(self.settings)[0]}
            check = checks.repair_planned(
                self.report, self.mend, plan, requesters=record.requesters,
                approved_by=record.approved_by, needed=max(needed, 0), users=self.approvers.users,
                teams=self.approvers.teams, asks=sorted(asks.items()),
                held=[(r.name, named.get(r.name, ())) for r in held],
            )  # fmt: skip
            self.job.forge.set_check(self.head, check)
            return
        job = self.job
        approvals = ", ".join(login for login, _uid in given) or "nobody (none required)"
        result = apply_plan(
            self.project, self.store, self.mend.plan, self.runner, url=job.state_url, now=job.now
        )
        requester = record.requesters[-1]
        self._record(
            APPLIED,
            requester,
            f"{result.views_swapped} views swapped, {result.tables_built} tables built; "
            f"approved by {', '.join(record.approved_by) or 'nobody (none required)'}",
        )
        job.tell(
            Notice(
                notify_text.DRIFT_REPAIR, key=f"{PROD} repaired {plan}", repo=job.forge.repo,
                what="repaired", ref=PROD, actor=job.scrub(requester), plan_id=plan,
                detail=job.scrub(
                    f"{result.views_swapped} views swapped, {result.tables_built} tables "
                    f"built; approved by {approvals}"
                ),
            )
        )  # fmt: skip
        log.info(
            "%s: prod's drift repaired (plan %s, asked by %s, approved by %s)",
            job.forge.repo,
            plan[:12],
            requester,
            ", ".join(record.approved_by) or "nobody",
        )
        after = self.report = drift.check(self.store, PROD, self.runner, now=job.deps.clock())
        job.forge.set_check(self.head, checks.repaired(after, plan, requester, record.approved_by))


OWNERS_ONLY_REFUSAL = (
    "The gate on the prod branch asks the owners of changed models only "
    "(`sluice.gate.owners_must_approve`, no `required_approvers`): a repair changes no "
    "model of a pull request, so it has nobody to ask. Name required approvers in "
    "`sluice.gate.required_approvers` on the prod branch, or run `sluice drift --repair` "
    "from a checkout of the prod branch."
)


def _refuse(job: Job, actor: str, detail: str, actor_id: int | None = None) -> None:
    log.info("%s: drift repair refused for %s: %s", job.forge.repo, actor, detail)
    audit.record(
        job, audit.REFUSAL, REFUSED, actor=actor, actor_id=actor_id, ref=PROD, detail=detail
    )


def _why(event: CheckRunEvent) -> str:
    """The reason a web UI's "Override policies" form gave (a button gives none)."""
    reason = " ".join((event.reason or "").split())[:REASON_CHARS]
    if not reason.isprintable():  # the form refuses these; a queued event is read as it is
        reason = "".join(c if c.isprintable() else "?" for c in reason)
    return f": {reason}" if event.origin == WEB and reason else ""


REASON_CHARS = 500
"""The longest reason of an override from the web UI (:mod:`sluice.bot.web.repair`)."""


def show(
    job: Job,
    store: StateStore,
    report: DriftReport,
    settings: trust.Settings,
    project: Project,
    head: str | None,
) -> None:
    """Keep prod's drift as the ``sluice/drift`` check shows it, for the web UI's drift
    page (:mod:`.drift_view`): the report, the repair plan made from it and its
    fingerprint, its record (who asked, who approved, how many more) and the policies'
    verdicts, judged as a click judges them. Never raises: a view that cannot be made
    says why, and the check stands."""
    if head is None:
        return
    view: dict[str, Any] = {
        "head": head, "environment": report.environment, "plan_id": report.plan_id,
        "checked_at": report.checked_at, "models": report.models, "drifted": report.drifted,
        "differences": [
            {"model": d.model, "kind": d.kind, "detail": job.scrub(d.detail), "since": d.since,
             "repair": d.repair}
            for d in report.differences[: drift_view.ROWS]
        ],
        "more": max(len(report.differences) - drift_view.ROWS, 0),
        "repair": None, "error": None,
    }  # fmt: skip
    if report.drifted:
        try:
            view["repair"] = _shown_repair(job, store, report, settings, project)
        except SluiceError as exc:
            view["error"] = job.scrub(str(exc))
    drift_view.save(job.ledger, job.repo, view)


def _shown_repair(
    job: Job,
    store: StateStore,
    report: DriftReport,
    settings: trust.Settings,
    project: Project,
) -> dict[str, Any]:
    mend = drift.plan_repair(store, report, now=job.now)
    plan = fingerprint(mend.plan)
    approvers = settings.gate.required_approvers
    record = tally(job, plan, approvers)
    judged = repair_gate.judge(
        job, settings, project, store, mend.plan, plan, record.requesters, window(job, plan)
    )
    asks = repair_gate.missing(job, settings, judged.asks, _approvers(job, plan, record))
    named = {p.name: list(p.override_by) for p in policies.in_force(settings)[0]}
    intervals = {b.name: len(b.intervals) for b in mend.plan.backfill}
    return {
        "fingerprint": plan, "changes": mend.plan.has_changes,
        "repoint": list(mend.plan.repoint),
        "rebuild": [[n, intervals.get(n, 0)] for n in mend.plan.rebuild],
        "views": list(mend.plan.create_views),
        "left": [[m, job.scrub(why)] for m, why in mend.left],
        "requesters": list(record.requesters), "approved_by": list(record.approved_by),
        "needed": max(approvers.count - len(record.approved_by), 0),
        "required": [*approvers.users, *approvers.teams],
        "asks": [[what, who] for what, who in sorted(asks.items())],
        "refusal": job.scrub(judged.refusal) if judged.refusal else None,
        "held": [r.name for r in judged.held],
        "policies": [
            {"name": r.name, "level": r.level, "where": r.where, "description": r.description,
             "outcome": r.outcome, "blocks": r.blocks, "error": job.scrub(r.error) if r.error else "",
             "overridden_by": r.overridden_by, "reason": r.reason,
             "override_by": named.get(r.name, [])}
            for r in judged.rows
        ],
    }  # fmt: skip
