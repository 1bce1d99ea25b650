"""A drift repair's plan judged as a pull request's plan is (issue 47), before it runs.

The repair (:mod:`sluice.bot.flow.drift_repair`) changes no model, but it drops and builds
tables again and makes views again in prod: the same rules hold it as hold a PR's plan,
all of them the prod branch's as in force (:mod:`sluice.bot.flow.trust`).

- **Policies** (:mod:`sluice.bot.flow.policies`): the policies in force evaluated on the
  repair plan's facts. A repair changes no file and has no PR: ``files`` is empty,
  ``author`` each requester in turn (the worst outcome counts, as for a PR's pushers) and
  ``pushers`` the requesters; each model it rebuilds is a ``plan.models`` entry of change
  ``rebuild`` (``destructive``: its table is dropped first), each view it only makes
  again one of change ``repoint`` (:func:`sluice.core.policy.facts.plan_facts`). A hard
  policy that fails, a policy that cannot be evaluated, or policies that cannot be read
  refuse the repair, with the reason, whoever approved it. A soft one that fails holds it
  until someone the policy's ``override_by`` names clicks "Override policies" on the
  ``sluice/drift`` check (:func:`waive`): a ``policy override`` row for that repair plan's
  fingerprint, counted while its requests stand (:class:`Window`), with ``ref`` prod (a PR's override, of a review's fingerprint, never
  counts here, nor the other way round), under the settings in force; for a rule naming
  ``author``, ``pushers`` or ``files``, for the same requesters only. A button carries no
  text: the row's reason says it was given on the drift check. An approval does not lift
  a policy, as on a PR.
- **Owners** (``sluice.gate.owners_must_approve``): unless ``never``, the owners prod
  records of every model the repair rebuilds or makes again must approve it (a repair
  has no breaking change of its own: ``direct`` and ``breaking`` ask the same owners).
- **Backfill budget** (``sluice.gate.backfill``): a repair computing more intervals (or
  reading more bytes) than the budget allows waits for the budget's approver, as a PR's
  build does, whether or not the gate otherwise asks anyone.

Owners and the budget's approver approve with "Approve the repair", as required approvers
do; nobody who asked for the repair approves it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sluice.bot.flow import audit, policies, trust
from sluice.bot.flow.gate_rules import budget_to_approve, owners_to_approve
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import prod_owners
from sluice.bot.flow.trust import Settings
from sluice.bot.present.policy_text import Shown
from sluice.core.errors import SluiceError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.policy.load import Policy
from sluice.core.policy.verdict import Verdict, repair_verdicts
from sluice.core.snapshot.naming import PROD
from sluice.core.state import StateStore
from sluice.core.workflow import read_environment


@dataclass(frozen=True)
class RepairJudgement:
    """The rules on one repair plan.

    Attributes:
        rows: Each policy in force, as shown (overrides of this repair plan counted).
        refusal: Why the repair may not run at all (a hard policy fails, a policy cannot be
            evaluated, the policies cannot be read); None: it may, once ``held`` and
            ``asks`` are met.
        asks: What needs whose approval besides the required approvers: model -> owner,
            and the backfill budget exceeded -> its approver.
    """

    rows: tuple[Shown, ...] = ()
    refusal: str | None = None
    asks: Mapping[str, str] = field(default_factory=dict)

    @property
    def held(self) -> tuple[Shown, ...]:
        """The soft policies failing on the plan, not overridden for it."""
        return tuple(r for r in self.rows if r.blocks and _liftable(r))

    @property
    def refused_by(self) -> tuple[Shown, ...]:
        """The policies that refuse the plan (hard, or not evaluated)."""
        return tuple(r for r in self.rows if r.blocks and not _liftable(r))


def _liftable(row: Shown) -> bool:
    return row.level == "soft" and row.outcome == "fail"


@dataclass(frozen=True)
class Window:
    """The rows of a repair plan's record that count, as requests and approvals do
    (:func:`sluice.bot.flow.drift_repair.tally`): written after its last application (the
    ``applied`` row of id ``after_id``, 0: none) and after ``after_at`` (epoch ms: the time
    a request stands, back from now). An override outside it lifts nothing: a drift mended
    by hand and made again later has the same fingerprint, and is judged afresh."""

    after_id: int
    after_at: int

    def holds(self, row: audit.Entry) -> bool:
        """Whether ``row`` (appended: it has an id) is in the window."""
        return row.id is not None and row.id > self.after_id and row.at > self.after_at


def asked_by(requesters: Iterable[str]) -> str:
    """The requesters, as a token an override of a rule naming ``author``, ``pushers`` or
    ``files`` is bound to (another requester: other facts, asked again)."""
    people = sorted({r.casefold() for r in requesters})
    return "asked-" + hashlib.sha256("\n".join(people).encode()).hexdigest()[:12]


def judge(
    job: Job,
    settings: Settings,
    project: Project,
    store: StateStore,
    plan: Plan,
    fingerprint: str,
    requesters: Sequence[str],
    window: Window,
) -> RepairJudgement:
    """The repair ``plan`` (its fingerprint ``fingerprint``, asked for by ``requesters``)
    under the prod branch's ``settings`` (see the module's doc); the overrides counted are
    those of its record in ``window``."""
    touched = prod_owners(store)
    models = {name: touched.get(name) for name in (*plan.rebuild, *plan.repoint)}
    asks = owners_to_approve(settings.gate, models, models)
    asks |= budget_to_approve(settings.gate, plan.backfill_intervals, plan.scan_bytes)
    in_force, error = policies.in_force(settings)
    if error is not None:
        return RepairJudgement((), f"the policies in force could not be read: {error}", asks)
    if not in_force:
        return RepairJudgement((), None, asks)
    raw = policies.raw_of(_verdicts(job, in_force, plan, project, store, requesters))
    overrides = {
        name: row
        for name, row in policies.valid_overrides(
            job,
            in_force,
            fingerprint,
            None,
            settings.generation,
            asked_by(requesters),
            counts=window.holds,
            people=settings.people,
        ).items()
        if row.ref == PROD
    }
    rows = policies.shown(in_force, raw, overrides)
    refused = [r for r in rows if r.blocks and not _liftable(r)]
    refusal = None
    if refused:
        refusal = "blocked by " + ", ".join(
            f"{r.name} ({r.level}, {r.where})" + (f": {r.error}" if r.error else "")
            for r in refused
        )
    return RepairJudgement(rows, refusal, asks)


def _verdicts(
    job: Job,
    in_force: Sequence[Policy],
    plan: Plan,
    project: Project,
    store: StateStore,
    requesters: Sequence[str],
) -> list[Verdict]:
    """The policies on the repair's facts, each requester as ``author`` in turn: the
    worst outcome of each policy counts (:func:`~sluice.core.policy.verdict.repair_verdicts`,
    which ``sluice drift --repair`` judges with too)."""
    prod = {n: s.model for n, s in read_environment(store, PROD).snapshots.items()}
    moment = dt.datetime.fromtimestamp(job.now / 1000, dt.UTC)
    return repair_verdicts(in_force, plan, project.models, prod, requesters, moment)


def missing(
    job: Job,
    settings: Settings,
    asks: Mapping[str, str],
    approvers: Iterable[tuple[str, int | None]],
) -> dict[str, str]:
    """The ``asks`` no one of ``approvers`` (who approved the repair plan, requesters
    excluded: login and account id of each row) answers: a login by the account the
    settings' people pin it to, never whoever took it since, or a member of an ``org/team``;
    never a bot (:func:`~sluice.bot.flow.trust.names_person`, as :func:`may_approve`)."""
    given = list(approvers)
    return {
        what: who
        for what, who in asks.items()
        if not any(
            trust.names_person(job.forge, settings.people, [who], login, uid)
            for login, uid in given
        )
    }


def may_approve(job: Job, settings: Settings, person: str, person_id: int | None = None) -> bool:
    """Whether ``person`` (account ``person_id``) may ever approve a repair (before any
    Spark job): a required approver, an owner prod records (when the gate asks owners) or
    the backfill budget's approver; a login the settings name by the account it had when
    they came into force (:func:`~sluice.bot.flow.trust.names_person`)."""
    return trust.names_person(
        job.forge, settings.people, _approving_names(job, settings), person, person_id
    )


def _approving_names(job: Job, settings: Settings) -> list[str]:
    """Who may approve a repair (:func:`may_approve`): logins and ``org/team``s."""
    gate = settings.gate
    names = [*gate.required_approvers.users, *gate.required_approvers.teams]
    if gate.owners_must_approve != "never":
        store = job.state()
        names += [owner.strip().removeprefix("@") for owner in prod_owners(store).values() if owner]
    if gate.backfill is not None:
        names.append(gate.backfill.approver)
    return [n for n in names if n]


def approver_refusal(
    job: Job, settings: Settings, person: str, person_id: int | None = None
) -> str | None:
    """Why ``person`` (account ``person_id``) may not approve a repair, for the refusal's
    audit row; None when they may (:func:`may_approve`). A bot account; a login named but
    pinned to the account that held it when the settings came into force, another than
    the clicker's (or to none); else the roles the gate in force lets approve."""
    names = _approving_names(job, settings)
    if trust.names_person(job.forge, settings.people, names, person, person_id):
        return None
    bot = trust.not_a_person(job.forge, person, person_id)
    if bot is not None:
        return f"a bot account: {bot}"
    login = person.strip().removeprefix("@").casefold()
    listed = {n.strip().removeprefix("@").casefold() for n in names if "/" not in n}
    people = settings.people or {}
    if login in listed and login in people:
        pinned = people[login]
        if pinned is None:
            return (
                f"the login {person} is named, but no account held it when the settings in "
                "force came into force (a login named is fixed to its account then), so it "
                "names nobody"
            )
        clicker = "unknown" if person_id is None else f"account {person_id}"
        return (
            f"the login {person} is named for the account that held it when the settings "
            f"in force came into force (account {pinned}), and this click is another "
            f"account's ({clicker}): a login freed by a rename and taken since approves "
            "nothing; the account named approves under its login of now"
        )
    gate = settings.gate
    roles = ["a required approver"]
    if gate.owners_must_approve != "never":
        roles.append("an owner of a model prod records")
    if gate.backfill is not None:
        roles.append("the backfill budget's approver")
    return "not " + (
        " or ".join(roles) if len(roles) < 3 else ", ".join(roles[:-1]) + " or " + roles[-1]
    )


def may_override(job: Job, settings: Settings, person: str, person_id: int | None = None) -> bool:
    """Whether ``person`` (account ``person_id``) is named by a soft policy in force (before
    any Spark job), as :func:`~sluice.bot.flow.trust.names_person` tells."""
    in_force, error = policies.in_force(settings)
    if error is not None:
        return False
    names = [who for p in in_force if p.level == "soft" for who in p.override_by]
    return trust.names_person(job.forge, settings.people, names, person, person_id)


def waive(
    job: Job,
    settings: Settings,
    judged: RepairJudgement,
    person: str,
    fingerprint: str,
    requesters: Sequence[str],
    where: str,
    person_id: int | None = None,
) -> list[str]:
    """``person`` (account ``person_id``) overrides, for the repair plan ``fingerprint``,
    each soft policy failing on it that names them: the policies lifted (none: nothing
    written). Each override is its ``policy override`` row (with the account id), written
    or the click fails (retried)."""
    in_force, _error = policies.in_force(settings)
    by_name = {p.name: p for p in in_force}
    lifted = []
    for row in judged.held:
        policy = by_name.get(row.name)
        if policy is None or not trust.names_person(
            job.forge, settings.people, policy.override_by, person, person_id
        ):
            continue
        outcome = (
            audit.OVERRODE + policy.name + policies.UNDER + settings.generation
            + (policies.AT + asked_by(requesters) if policies.bound(policy) else "")
        )  # fmt: skip
        entry = audit.Entry(
            job.now, job.repo, audit.POLICY_OVERRIDE, job.scrub(person), outcome, ref=PROD,
            plan_id=fingerprint,
            detail=policies.override_detail(policy, job.scrub(
                f"Override policies on the drift check (repair plan {fingerprint[:12]}){where}"
            )), actor_id=person_id,
        )  # fmt: skip
        if not job.ledger.append(entry):
            raise SluiceError(
                "the override could not be recorded in the audit log",
                hint="click the button again once the state database is reachable",
            )
        lifted.append(policy.name)
    return lifted
