"""Policies as code in the service (issue 47): the prod branch's policies, as in force,
evaluated on a plan; ``/sluice override``; and the verdict a promotion must pass.

Trust: the policies are part of the settings in force (:class:`~.trust.Settings`'s
``policies``, in its digest and its pin), never a pull request's own. A PR that adds,
changes or removes ``policies/*.yaml`` changes the settings: its build is judged by the
policies in force, and the change is the settings item its gate must approve; once
promoted, the settings' generation moves and approvals (and overrides) under the old ones
are void.

- :func:`judge`: a PR build's verdicts (recorded with its plan's review, the raw outcome of
  each policy), its ``sluice/policy`` check and comment section;
- :func:`override`: ``/sluice override POLICY reason`` by someone the soft policy names,
  for the plan the PR's head has (its review's fingerprint): the audit row is the
  override (:meth:`~.audit.AuditLog.policy_overrides`), read back and checked again (is
  the actor still named, the policy still soft) whenever verdicts are made;
- :func:`promotion_verdict`: what a promotion (or a merge group) must pass: the policies
  evaluated again on the plan it applies, overrides counting only for that plan.

A policy that cannot be read or evaluated blocks (fail closed), naming its file and line.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.bot.flow import audit, trust
from sluice.bot.flow.approval import pushers_of
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview, review_of
from sluice.bot.flow.trust import Settings
from sluice.bot.forge.base import Check, ForgeError, PullRequest
from sluice.bot.present import policy_text
from sluice.bot.present.policy_text import Shown
from sluice.core.errors import ConfigError, SluiceError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.policy.facts import plan_facts, with_prods
from sluice.core.policy.load import Policy, parse_policies
from sluice.core.policy.verdict import Outcome, Verdict, evaluate
from sluice.core.snapshot.naming import PROD
from sluice.core.state import StateReader
from sluice.core.workflow import read_environment

log = logging.getLogger(__name__)

Raw = tuple[tuple[str, str, str], ...]
"""Each policy's outcome on a plan as recorded with its review: (name, outcome, error)."""


@dataclass(frozen=True)
class Judgement:
    """The policies in force on one plan: each one's verdict (overrides counted), or why
    they could not be read (``error``: every plan is blocked)."""

    rows: tuple[Shown, ...]
    error: str | None = None

    @property
    def blocks(self) -> bool:
        return self.error is not None or any(r.blocks for r in self.rows)

    @property
    def blocking(self) -> list[str]:
        return [r.name for r in self.rows if r.blocks]


def in_force(settings: Settings) -> tuple[list[Policy], str | None]:
    """The policies in force (none: no ``policies/`` on the prod branch as in force), or
    the error that keeps them from being read (file:line and hint)."""
    if not settings.policies:
        return [], None
    try:
        return parse_policies(dict(settings.policies)), None
    except ConfigError as exc:
        return [], str(exc)


def facts_of(
    plan: Plan,
    project: Project,
    store: StateReader,
    *,
    author: str,
    pushers: Iterable[str] = (),
    files: Iterable[str] = (),
    now: int,
) -> dict[str, Any]:
    """The facts policies see of ``plan`` (:func:`~sluice.core.policy.facts.plan_facts`):
    the models as ``project`` has them, prod's for what it removes, and prod's say kept
    for a model prod has (:func:`with_prods`)."""
    base = {n: s.model for n, s in read_environment(store, PROD).snapshots.items()}
    moment = dt.datetime.fromtimestamp(now / 1000, dt.UTC)
    facts = plan_facts(
        plan, project.models, base, author=author, pushers=pushers, files=files, now=moment
    )
    return with_prods(facts, project.models, base)


def raw_of(verdicts: Sequence[Verdict]) -> Raw:
    """Verdicts as a review records them (no overrides: those are read when shown)."""
    return tuple((v.policy.name, v.outcome, v.error) for v in verdicts)


UNDER = " under "
"""Between a ``policy override`` row's policy and the settings generation it was given
under (its outcome: ``overrode NAME under GENERATION``, then :data:`AT` and the head
commit for a rule naming a fact a push changes without changing the plan)."""
AT = " at "
"""Between a ``policy override`` row's generation and the PR head commit it binds to."""
_BOUND = re.compile(r"\b(files|author|pushers)\b")
"""A rule naming one of these facts: its override holds for the head it was given on only
(a push changes the files or who pushed, not the plan's fingerprint)."""


RULE = "rule "
"""A ``policy override`` row's detail starts with this and :func:`rule_digest` of the
rule it overrode, then ``": "`` and the reason: the override counts only while the policy
in force has that rule (a PR rewriting the rule, its settings promoted under the same
generation, voids it; a row without it, from before, counts nothing)."""


def rule_digest(policy: Policy) -> str:
    """16 hex characters naming ``policy``'s rule text."""
    return hashlib.sha256(policy.rule.text.encode()).hexdigest()[:16]


def override_detail(policy: Policy, reason: str) -> str:
    """A ``policy override`` row's detail: the rule it overrides (:data:`RULE`), then
    ``reason``."""
    return f"{RULE}{rule_digest(policy)}: {reason}"


def given_on(row: audit.Entry) -> tuple[str, str]:
    """A ``policy override`` row's rule digest ("" for a row without one) and reason."""
    head, sep, reason = row.detail.partition(": ")
    if sep and head.startswith(RULE) and len(head) == len(RULE) + 16:
        return head.removeprefix(RULE), reason
    return "", row.detail


def bound(policy: Policy) -> bool:
    """Whether ``policy``'s rule names ``files``, ``author`` or ``pushers``: an override of
    it holds for what gave those facts only (a PR's head; a drift repair's requesters)."""
    return _BOUND.search(policy.rule.text) is not None


def valid_overrides(
    job: Job,
    policies: Sequence[Policy],
    fingerprint: str,
    number: int | None,
    generation: str,
    head: str | None = None,
    counts: Callable[[audit.Entry], bool] | None = None,
    people: Mapping[str, int | None] | None = None,
) -> dict[str, audit.Entry]:
    """Policy name -> the override of plan ``fingerprint`` that counts: the first given by
    someone the policy, soft, names now (a policy made hard since, or whose
    ``override_by`` no longer names them, drops it); with ``number``, given on that pull
    request only (another PR with the same plan, by another author, asks again), and under
    the settings in force (``generation``: policies changed since void it) and on the rule
    the policy has now (:data:`RULE`). A promotion
    without a PR (a tag) takes any PR's override of the very plan it applies. An override
    of a rule naming ``files``, ``author`` or ``pushers`` counts on the head commit it was
    given on only (``head``: PR ``number``'s, asked of the forge when not given), so a
    push changing those facts voids it. ``counts``: only the rows it holds true of count
    (a drift repair's: those of its record since it was last applied, within the time a
    request stands). ``people``: who the logins the settings name are
    (:attr:`~sluice.bot.flow.trust.Settings.people`), the row's actor by its account id."""
    soft = {p.name: p for p in policies if p.level == "soft"}
    if (
        head is None
        and number is not None
        and any(_BOUND.search(p.rule.text) for p in soft.values())
    ):
        head = job.forge.pull_request(number).head_sha
    found: dict[str, audit.Entry] = {}
    for row in job.ledger.policy_overrides(job.repo, fingerprint):
        if counts is not None and not counts(row):
            continue
        name, _, under = row.outcome.removeprefix(audit.OVERRODE).partition(UNDER)
        under, _, at = under.partition(AT)
        if under != generation:
            continue
        policy = soft.get(name)
        if policy is None or name in found:
            continue
        if _BOUND.search(policy.rule.text) and (head is None or at != head):
            continue
        if given_on(row)[0] != rule_digest(policy):
            continue  # given on another rule of that name (or before rules were recorded)
        if number is not None and row.ref != f"#{number}":
            continue
        if trust.names_person(job.forge, people, policy.override_by, row.actor, row.actor_id):
            found[name] = row
    return found


def shown(
    policies: Sequence[Policy], raw: Raw, overrides: Mapping[str, audit.Entry]
) -> tuple[Shown, ...]:
    """The rows to show: each policy in force with its recorded outcome (a policy the
    record does not name could not have been evaluated: it blocks)."""
    outcomes = {name: (outcome, error) for name, outcome, error in raw}
    rows = []
    for policy in policies:
        outcome, error = outcomes.get(
            policy.name, ("error", "this policy was not evaluated on this plan: plan again")
        )
        override = overrides.get(policy.name) if outcome == "fail" else None
        who = override.actor if override is not None else None
        kind: Outcome = "pass" if outcome == "pass" else "fail" if outcome == "fail" else "error"
        verdict = Verdict(policy, kind, error=error, overridden_by=who)
        rows.append(
            Shown(
                name=policy.name,
                level=policy.level,
                where=f"{policy.path}:{policy.line}",
                description=policy.description,
                outcome=verdict.outcome,
                blocks=verdict.blocks,
                error=error,
                overridden_by=who,
                reason=given_on(override)[1] if override is not None else "",
            )
        )
    return tuple(rows)


def judge(
    job: Job,
    settings: Settings,
    plan: Plan,
    project: Project,
    store: StateReader,
    author: str,
    number: int | None = None,
) -> tuple[Raw, str | None]:
    """The policies in force evaluated on PR ``number``'s ``plan``: (the raw outcomes its
    review records, the error that keeps the policies from being read)."""
    policies, error = in_force(settings)
    if error is not None or not policies:
        return (), error
    return raw_of(_verdicts(job, policies, plan, project, store, author, number)), None


_FILES = re.compile(r"\bfiles\b")
_AUTHOR = re.compile(r"\bauthor\b")
_PEOPLE = re.compile(r"\b(author|pushers)\b")
_WORSE: dict[Outcome, int] = {"pass": 0, "fail": 1, "error": 2}


def _verdicts(
    job: Job,
    policies: Sequence[Policy],
    plan: Plan,
    project: Project,
    store: StateReader,
    author: str,
    number: int | None,
) -> list[Verdict]:
    """``policies`` on ``plan``'s facts. The fact ``files`` is asked of the forge (the
    paths PR ``number`` changes) only when a rule names it; when the forge cannot list
    them all, each rule that names it could not be evaluated (fail closed), never judged
    on a partial list."""
    wanted = [p for p in policies if _FILES.search(p.rule.text)]
    files: list[str] | None = []
    if wanted:
        files = None
        if number is not None:
            try:
                files = job.forge.changed_files(number)
            except ForgeError as exc:
                log.warning("%s#%s: changed files not listed: %s", job.forge.repo, number, exc)
    # Who pushed to the PR, as the gate counts them: a rule keyed on `author` holds for
    # each of them too (a writer pushing to a PR finance opened is not finance).
    pushers: list[str] = []
    if number is not None and any(_PEOPLE.search(p.rule.text) for p in policies):
        pushers = sorted(pushers_of(job, job.forge.pull_request(number)).logins)
    facts = facts_of(
        plan, project, store, author=author, pushers=pushers, files=files or (), now=job.now
    )
    verdicts = evaluate(policies, facts)
    naming = [p for p in policies if _AUTHOR.search(p.rule.text)]
    for person in pushers if naming else ():
        if person == author.casefold():
            continue
        again = {v.policy.name: v for v in evaluate(naming, {**facts, "author": person})}
        verdicts = [
            again[v.policy.name]
            if v.policy.name in again and _WORSE[again[v.policy.name].outcome] > _WORSE[v.outcome]
            else v
            for v in verdicts
        ]
    if files is not None:
        return verdicts
    why = (
        "the rule names `files`, and the forge could not list every file this pull request changes"
        if number is not None
        else "the rule names `files`, and this promotion has no pull request to list them of"
    )
    return [
        Verdict(v.policy, "error", error=f"{v.policy.rule.path}:{v.policy.rule.line}: {why}")
        if v.policy in wanted
        else v
        for v in verdicts
    ]


def report(
    job: Job, sha: str, settings: Settings, review: PlanReview, number: int
) -> Judgement | None:
    """Set the ``sluice/policy`` check on ``sha`` for ``review`` (PR ``number``'s head's
    plan, its raw outcomes recorded) and return the judgement, with the overrides of its
    plan; None when no policies are in force (no check: nothing to say)."""
    judgement = judgement_of(job, settings, review, number, sha)
    if judgement is None:
        return None
    job.forge.set_check(sha, check_of(judgement))
    return judgement


def judgement_of(
    job: Job, settings: Settings, review: PlanReview, number: int, head: str | None = None
) -> Judgement | None:
    """The judgement of ``review`` (of PR ``number``'s head) by its recorded outcomes under
    the policies in force (None: none in force). A review made under other settings was
    judged by other policies: every policy then blocks until the PR is planned again."""
    policies, error = in_force(settings)
    if error is not None:
        return Judgement((), error)
    if not policies:
        return None
    raw = review.policies
    if review.generation != settings.generation:
        raw = tuple(
            (p.name, "error", "the policies in force changed since this plan: plan again")
            for p in policies
        )
    overrides = valid_overrides(
        job, policies, review.fingerprint, number, settings.generation, head,
        people=settings.people,
    )  # fmt: skip
    return Judgement(shown(policies, raw, overrides))


def check_of(judgement: Judgement) -> Check:
    """The ``sluice/policy`` check of ``judgement``."""
    return policy_text.check_of(judgement.rows, judgement.error)


def section(judgement: Judgement | None) -> tuple[str, str | None]:
    """The PR comment's policies section (None: removes it)."""
    if judgement is None:
        return policy_text.SECTION, None
    return policy_text.section_of(judgement.rows, judgement.error)


def override(
    job: Job, pr: PullRequest, name: str, reason: str, author: str, author_id: int | None = None
) -> str:
    """``author`` (a writer; account ``author_id``) overrides policy ``name`` for the plan
    ``pr``'s head has, because ``reason``: the reply to post. Only a soft policy that fails
    on that plan, by someone its ``override_by`` names (a user, by the account the login
    had when the settings came into force: :func:`~sluice.bot.flow.trust.names_person`;
    or a member of an ``org/team``); recorded in the audit log, which is the override's
    record. The check and the comment's section are set again."""
    review = job.ledger.review(job.repo, pr.number, pr.head_sha)
    if review is None:
        return policy_text.no_plan(author)
    try:
        settings = trust.for_repository(job)
    except ConfigError as exc:
        return policy_text.policies_unreadable(author, job.scrub(str(exc)))
    policies, error = in_force(settings)
    if error is not None:
        return policy_text.policies_unreadable(author, job.scrub(error))
    policy = next((p for p in policies if p.name == name), None)
    if policy is None:
        return policy_text.no_such_policy(author, name, [p.name for p in policies])
    if policy.level != "soft":
        _refused(job, pr, author, name, f"{policy.level} policies cannot be overridden")
        return policy_text.not_soft(author, name, policy.level)
    if not trust.names_person(job.forge, settings.people, policy.override_by, author, author_id):
        bot = trust.not_a_person(job.forge, author, author_id)
        why = f"a bot account: {bot}" if bot else "not named by its override_by"
        _refused(job, pr, author, name, why)
        return policy_text.not_allowed(author, name, policy.override_by, bot)
    if review.generation != settings.generation:
        return policy_text.plan_stale(author)
    outcome = next((o for n, o, _e in review.policies if n == name), "error")
    if outcome != "fail":
        return policy_text.not_failing(author, name, outcome)
    written = job.ledger.append(
        audit.Entry(
            job.now,
            job.repo,
            audit.POLICY_OVERRIDE,
            job.scrub(author),
            audit.OVERRODE
            + name
            + UNDER
            + settings.generation
            + (AT + pr.head_sha if _BOUND.search(policy.rule.text) else ""),
            ref=f"#{pr.number}",
            plan_id=review.fingerprint,
            detail=override_detail(policy, job.scrub(reason)),
            actor_id=author_id,
        )
    )
    if not written:  # the row is the override: without it there is none
        raise SluiceError("the override could not be recorded in the audit log", hint="retry")
    judgement = report(job, pr.head_sha, settings, review, pr.number)
    job.publish(pr.number, section=section(judgement))
    blocking = judgement.blocking if judgement is not None else []
    return policy_text.overridden(author, name, review.fingerprint, blocking)


def _refused(job: Job, pr: PullRequest, author: str, name: str, why: str) -> None:
    audit.record(
        job,
        audit.REFUSAL,
        "policy override refused",
        actor=author,
        ref=f"#{pr.number}",
        detail=f"{name}: {why}",
    )


def held_back(
    job: Job,
    settings: Settings,
    plan: Plan,
    project: Project,
    own: trust.Parsed,
    store: StateReader,
    *,
    prod_python: str | None,
    prod_statements: str | None,
    number: int | None,
    environment: str,
) -> tuple[str, str] | None:
    """Why ``plan`` (what a promotion or a merge group applies, of a commit whose own
    settings are ``own``) may not be applied: (title, summary) when a policy in force
    blocks it; None when none does (or none is in force). The overrides that count are
    those given for this very plan (a review of it made as a PR's build makes one, with
    the settings change if any); the author fact is PR ``number``'s author."""
    policies, error = in_force(settings)
    if error is None and not policies:
        return None
    extra = settings.change_to(own.digest)
    prints = [
        review_of(
            plan, project, prod_python=prod_python, prod_statements=prod_statements, extra=extra
        ).fingerprint
    ]
    if extra is None:
        # The commit's settings may be in force already because a gate approved them: a
        # PR changing them, approved and merged (trust.settings_for takes them at once).
        # That PR's plan was reviewed, and overridden, with the change as an item.
        change = trust.change_item(own.digest, settings.generation)
        prints.append(
            review_of(
                plan, project, prod_python=prod_python, prod_statements=prod_statements,
                extra=change,
            ).fingerprint
        )  # fmt: skip
    author = job.forge.pull_request(number).author if number is not None else ""
    judgement = promotion_verdict(job, settings, plan, project, store, prints, author, number)
    if judgement is None or not judgement.blocks:
        return None
    return policy_text.blocked_words(judgement.blocking, judgement.error, environment)


def promotion_verdict(
    job: Job,
    settings: Settings,
    plan: Plan,
    project: Project,
    store: StateReader,
    fingerprint: str | Sequence[str],
    author: str,
    number: int | None = None,
) -> Judgement | None:
    """The policies in force evaluated on ``plan`` (what a promotion or a merge group
    applies), its overrides those given for the same plan (``fingerprint``, a review of
    it made as a PR's build makes one; several: the ways that review may have been made,
    the first override found of each policy counting); None: no policies in force. An
    approval does not lift a policy."""
    policies, error = in_force(settings)
    if error is not None:
        return Judgement((), error)
    if not policies:
        return None
    raw = raw_of(_verdicts(job, policies, plan, project, store, author, number))
    overrides: dict[str, audit.Entry] = {}
    for made in (fingerprint,) if isinstance(fingerprint, str) else fingerprint:
        for name, row in valid_overrides(
            job, policies, made, number, settings.generation, people=settings.people
        ).items():
            overrides.setdefault(name, row)
    return Judgement(shown(policies, raw, overrides))
