"""The ``sluice/approval`` check: the gate evaluated from the forge's reviews, no Spark.

Runs after every plan of a PR and on every review event or "Approve this plan" click.
The gate settings are the trusted ones (:mod:`sluice.bot.flow.trust`: the prod branch's, never
the PR's or its base branch's); the plan fingerprints come from the ledger, so an approval
counts only for the plan it was given on. When the gate passes on a PR into the prod
branch, the plan's model contents are recorded as approved, which is what a promotion
checks; a PR into any other branch is gated the same way, but its approvals are not
recorded (they were given on a change into another branch).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sluice.bot.flow import audit, comment_guard, trust
from sluice.bot.flow.gate_rules import (
    ActionApproval,
    GateInput,
    GateResult,
    bot_account,
    budget_to_approve,
    evaluate,
    owners_to_approve,
    same_moment,
    shown_at,
    word_key,
)
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Click, Push
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.flow.trust import Settings
from sluice.bot.forge.base import (
    Account,
    ForgeError,
    PullCommit,
    PullRequest,
    PullVersion,
    PushRecord,
    Review,
    created_ms,
    members,
)
from sluice.bot.present import checks, comment
from sluice.core import markdown as md
from sluice.core.errors import ConfigError

log = logging.getLogger(__name__)

APPROVAL = checks.APPROVAL


@dataclass(frozen=True)
class Verdict:
    """The gate's result, and the trusted settings it was evaluated with."""

    result: GateResult
    settings: Settings


def refresh(job: Job, pr: PullRequest) -> Verdict | None:
    """Evaluate the gate of ``pr`` at its head and set ``sluice/approval``; None when the
    head has no plan yet or the gate settings are invalid (the check says so)."""
    if not pr.open:
        return None
    repo, ledger = job.repo, job.ledger
    commits = _pull_commits(job, pr)
    found = job.forge.own_comments(pr.number)  # the forge, then the ledger
    given = _people_only(job, job.forge.reviews(pr.number))
    with ledger.together("read the PR's plans and approvals"):  # as of one moment
        # Sluice's comment as an approver read it: changed by someone else, kept as a
        # publication of no plan before any approval is counted (comment_guard).
        guarded = comment_guard.check(job, pr.number, found, ledger.comment_writes(repo, pr.number))
        review = ledger.review(repo, pr.number, pr.head_sha)
        plans = ledger.plans(repo, pr.number)
        # By each clock: a review's time is the forge's, a click's the service's.
        plan_times = ledger.plan_times(repo, pr.number, forge=True)
        shown = ledger.plans_shown(repo, pr.number, forge=True)
        planned_here = ledger.plan_times(repo, pr.number)
        shown_here = ledger.plans_shown(repo, pr.number)
        recorded = _recorded_pushes(job, pr, commits)
        asked = ledger.pushes_asked(repo, pr.head_ref, pr.head_sha)
        clicks = ledger.clicks(repo, pr.number)
        approved = ledger.approved_by_pr(repo, pr.number)
        # When the service learnt of each review's word: ordered with the clicks by it. Read
        # now, not when the job started (a build reads reviews minutes after: round 10).
        words = {word_key(r): created_ms(r.submitted_at) for r in given}
        learnt = ledger.learn_words(repo, pr.number, words, job.deps.clock())
    job.deps.sticky.rewrite_copies(job.forge, pr.number, guarded.copies)
    if guarded.section is not None:
        job.publish(pr.number, section=guarded.section)
    if review is None:
        job.forge.set_check(pr.head_sha, checks.waiting_for_plan())
        return None
    try:
        settings = trust.for_repository(job)
    except ConfigError as exc:
        check, text = checks.gate_settings_invalid(job.scrub(str(exc)))
        job.forge.set_check(pr.head_sha, check)
        job.publish(pr.number, section=comment.approval_error_section(text))
        return None
    if review.generation and review.generation != settings.generation:
        # Made under other settings (another PR's settings change was promoted since): who
        # it asks, and what it asks of them, are those settings'. Nothing counts until it
        # is planned again (red team, approval round 2).
        job.forge.set_check(pr.head_sha, checks.replan_needed())
        if approved and pr.base_ref == settings.branch:
            detail = f"planned under settings no longer in force, at {pr.head_sha[:12]}"
            _decide(job, pr, review, None, detail)
        return None
    recorded = _with_head(job, pr, commits, recorded, asked)  # after it: asks the forge
    pushers = _pushers(recorded, job.account_of)
    owners = owners_to_approve(settings.gate, review.direct_owners, review.breaking_owners)
    owners |= budget_to_approve(settings.gate, review.merge_intervals, review.merge_bytes)
    teams = set(settings.gate.required_approvers.teams)
    teams |= {owner for owner in owners.values() if "/" in owner}
    teams |= {owner for owner in review.prod_owners if "/" in owner}
    result = evaluate(
        settings.gate,
        GateInput(
            author=pr.author,
            author_id=pr.author_id,
            reviews=_bound(job, pr.number, given),
            plans=plans,
            current_plan=review.fingerprint,
            team_members={team: job.forge.team_members(team) for team in sorted(teams)},
            owners=owners,
            action_approvals=_clicks_now(job, clicks),
            planned_at=plan_times,
            shown=shown,
            planned_here=planned_here,
            shown_here=shown_here,
            pushers=pushers.people,
            pusher_accounts=pushers.accounts,
            bot_pushers=pushers.bots,
            unknown_pushers=pushers.unknown,
            prod_owners=frozenset(review.prod_owners),
            people=settings.people,
            learnt=learnt,
        ),
    )
    into_prod = pr.base_ref == settings.branch
    title = checks.approval_title(
        result.ok,
        settings.requires_approval,
        result.missing,
        len(result.owners_missing),
        bool(result.stale),
    )
    # A decision that changes what is approved for prod, and its audit row: one transaction
    # (both, or neither and a retry). A gate still waiting changes nothing: no row (and a
    # PR's build stays within its transactions, docs/architecture.md).
    approving = result.ok and into_prod
    # An approval dismissed, changes requested, a new head: what this PR's gate once passed
    # is approved no more, so a merge past the check cannot promote it.
    withdrawing = not approving and into_prod and bool(approved)
    if approving or withdrawing:
        detail = (
            f"{title}; approved by {', '.join(result.approved_by) or 'nobody'}; "
            f"at {pr.head_sha[:12]} into {pr.base_ref}"
        )
        _decide(job, pr, review, (result, settings) if approving else None, detail)
    summary = result.summary
    if not into_prod:
        summary = checks.not_into_prod(pr.base_ref, settings.branch, summary)
    job.forge.set_check(
        pr.head_sha,
        checks.approval_result(title, summary, result.conclusion, result.ok, review.fingerprint),
    )
    sections = comment.approval_sections(
        result.ok,
        summary,
        requires_approval=settings.requires_approval,
        missing=result.missing,
        eligible=result.eligible,
        owners_missing=result.owners_missing,
        approved_by=result.approved_by,
        stale=bool(result.stale),
        into_prod=into_prod,
    )
    job.publish(pr.number, sections=sections)
    return Verdict(result, settings)


def _clicks_now(job: Job, clicks: list[Click]) -> list[ActionApproval]:
    """Each click as the gate judges it: under the login its account has now, never the
    one it was recorded with (a login is renamed at will and freed for anyone to take: an
    approver who takes a reader's old login does not make its click an approver's, red
    team on identity); a click whose account the forge no longer knows counts for
    nothing. A click recorded without an account id keeps its login on the local forge
    (logins only), and counts for nothing on a forge that names accounts (recorded before
    ids were, ledger migration 7: whose it was cannot be told now; approve again)."""
    now = []
    for click in clicks:
        if click.user_id is None:
            if job.forge.name == "local":
                now.append(ActionApproval(click.user, click.sha, click.plan, click.ts))
            else:
                log.info("a click recorded as %s without an account id: not counted", click.user)
            continue
        account = job.account_of(click.user_id)
        if account is None:
            log.info("a click by account %s, which the forge no longer knows: not counted",
                     click.user_id)  # fmt: skip
            continue
        if _bot(click.user, account):
            log.info("a click by %s, a bot account: not counted", account.login)
            continue
        now.append(
            ActionApproval(
                account.login, click.sha, click.plan, click.ts, click.user_id, click.user
            )
        )
    return now


def _people_only(job: Job, reviews: list[Review]) -> list[Review]:
    """``reviews`` less the approvals of bot accounts, as the forge says of each by its id
    (the login's form where there is none): whoever drives a bot is not named, maybe an
    approver or a pusher, so a bot's approval is no person's (a GitLab service account,
    whose username its maker chose, may be a member of a required group)."""
    ids = job.forge.name != "local"
    kept = []
    for review in reviews:
        uid = review.user_id
        if review.state == "APPROVED":
            account = job.account_of(uid) if ids and uid is not None else None
            if _bot(review.user, account):
                log.info("an approval by %s, a bot account: not counted", review.user)
                continue
        kept.append(review)
    return kept


def _decide(
    job: Job,
    pr: PullRequest,
    review: PlanReview,
    passed: tuple[GateResult, Settings] | None,
    detail: str,
) -> None:
    """Record a decision that changes what is approved for prod, and its audit row, in one
    transaction (both, or neither and a retry): the gate ``passed`` (its result, under
    those settings), or what the PR's gate once passed is approved no more (None)."""
    with job.ledger.together("record the gate's decision"):
        if passed is not None:
            result, settings = passed
            job.ledger.approve(
                job.repo,
                pr.number,
                pr.head_sha,
                review.items,
                result.approved_by,
                job.now,
                settings.generation,
            )
        else:
            job.ledger.withdraw(job.repo, pr.number)
        audit.record(
            job,
            audit.APPROVAL,
            "passed" if passed is not None else "withdrawn",
            ref=f"#{pr.number}",
            plan_id=review.fingerprint,
            detail=detail,
        )


def budget_approved(
    job: Job,
    pr: PullRequest,
    approver: str,
    people: Mapping[str, int | None] | None = None,
) -> bool:
    """Whether ``approver`` (a login, or any member of an ``org/team``) approved ``pr`` at
    its head, their latest word (a later "changes requested" or a dismissal cancels it);
    the author's own approval never counts, nor that of anyone who pushed to the PR. A
    login ``people`` pins (:attr:`~sluice.bot.flow.trust.Settings.people`) is that
    account, whatever its login now, and nobody else."""
    put_back = comment_guard.read_back(job, pr.number)  # the hold as the approver read it
    if put_back is not None:
        job.publish(pr.number, section=put_back)
    pushers = pushers_of(job, pr)  # nor anyone who pushed
    eligible = members(job.forge, [approver])
    others: list[tuple[str, int | None]] = [(p, None) for p in pushers.people]
    others += pushers.accounts
    others.append((pr.author, pr.author_id))
    latest: dict[str, Review] = {}  # by account id where the forge says, else by login
    shown = job.ledger.plans_shown(job.repo, pr.number, holds=True, forge=True)  # reviews
    reviews = _people_only(job, job.forge.reviews(pr.number))
    for review in _bound(job, pr.number, reviews):
        if review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            key = f"#{review.user_id}" if review.user_id is not None else review.user.casefold()
            latest[key] = review
    name = approver.strip().removeprefix("@").casefold()
    pinned = people is not None and "/" not in name and name in people
    approved = {
        key
        for key, r in latest.items()
        if (
            (people or {}).get(name) is not None and r.user_id == (people or {}).get(name)
            if pinned
            else r.user.casefold() in eligible
        )
        and not any(_same(r.user, r.user_id, login, uid) for login, uid in others)
        and r.state == "APPROVED"
        and r.commit_sha == pr.head_sha
        # given while this head's hold was shown: what the approver read, not an earlier
        # head's (a push they never saw held), nor a plan of it under the budget (red team
        # round 6); none kept (before ledger migration 14): not asked
        and (not shown or shown_at(shown, pr.head_sha, created_ms(r.submitted_at)))
    }
    # A push through a bot account, or by someone nobody names, may be one approver's own:
    # two of them, as the gate asks one approval more.
    return len(approved) >= (2 if pushers.bots or pushers.unknown else 1)


def _same(login: str, uid: int | None, other: str, other_id: int | None) -> bool:
    """Whether two people are one: by their account ids where both are known, else by
    their logins, case-folded (gate_rules' module doc)."""
    if uid is not None and other_id is not None:
        return uid == other_id
    return login.casefold() == other.casefold()


@dataclass(frozen=True)
class Pushers:
    """Who pushed to a pull request: their approvals do not count. ``people``: those known
    by login only (case-folded: rows recorded before account ids were, a fork's owner,
    the authors and committers the forge names for its commits); ``accounts``: those known
    by (case-folded login, account id), compared by the id. The bot accounts among them
    (not its author) whose pushes some person unnamed drove; and why someone nobody names
    may have pushed to it (a fork's pushes, commits the forge does not list, a push
    recorded by a login alone that no commit names now): each, like a bot's push, asks one
    approval more."""

    people: frozenset[str]
    bots: frozenset[str]
    unknown: tuple[str, ...] = ()
    accounts: frozenset[tuple[str, int]] = frozenset()

    @property
    def logins(self) -> frozenset[str]:
        """Every pusher's login (case-folded), by id or not."""
        return self.people | {login for login, _uid in self.accounts}


@dataclass(frozen=True)
class _Recorded:
    events: frozenset[tuple[str, int | None]]  # senders of its opened, reopened, synchronize
    commits: list[PullCommit] | None  # as the forge lists them; None: it lists only part
    pushes: tuple[Push, ...]  # each recorded push of them
    fork: bool  # its head is in another repository, whose pushes are told to it alone
    ids: bool = True  # its forge names people by account id (not the local forge)
    head: str | None = None  # why whoever pushed its head is not known (None: they are)


def pushers_of(job: Job, pr: PullRequest) -> Pushers:
    """Who pushed to ``pr`` as the gate counts them (:func:`_pushers`)."""
    commits = _pull_commits(job, pr)
    with job.ledger.together("read who pushed to the PR"):
        recorded = _recorded_pushes(job, pr, commits)
        asked = job.ledger.pushes_asked(job.repo, pr.head_ref, pr.head_sha)
    return _pushers(_with_head(job, pr, commits, recorded, asked), job.account_of)


def _pull_commits(job: Job, pr: PullRequest) -> list[PullCommit] | None:
    """``pr``'s commits as the forge lists them; None where it lists only part, or fails."""
    try:
        return job.forge.pull_commits(pr.number)
    except ForgeError as exc:
        log.warning("#%s: counting every push to its branch: %s", pr.number, exc)
        return None


def _recorded_pushes(job: Job, pr: PullRequest, commits: list[PullCommit] | None) -> _Recorded:
    """Who pushed to ``pr`` by the ledger (the caller holds its transaction): its own
    events' senders, and the pushes of its ``commits`` to any branch of the repository (a
    push to a fork is told to the fork only: its events' senders and its commits'
    accounts are all there is). Where the forge cannot list all its commits, every push
    to a branch of its head's name counts."""
    ledger = job.ledger
    events = ledger.pusher_accounts(job.repo, pr.number)
    if commits is None:
        pushes = ledger.branch_pushes(job.repo, pr.head_ref)
        pushes += ledger.pushes_of(job.repo, [push.sha for push in pushes])
    else:
        pushes = ledger.pushes_of(job.repo, [c.sha for c in commits])
    # Whoever is found through its commits is kept as its pusher: a rebase that puts the
    # same change under new commits must not forget them (red team, approval round 4). A
    # bot that authored a commit is not kept: someone else pushed that commit; told by its
    # login's form, which no person can take on GitHub (`<slug>[bot]` is an App's); GitLab
    # names no login there. Kept by the account the forge names (GitHub's author.id), so
    # no row of theirs is a login's alone (red team on identity, round 2).
    pushed = {(push.user.casefold(), push.user_id) for push in pushes}
    named = {(who, uid) for who, uid in _named(commits) if not bot_account(who)}
    # Every (login, account id) pair not recorded yet: a login recorded with another
    # account (given up on a rename, taken by someone else) is no reason to drop this one
    # (red team on identity).
    found = (pushed | named) - events
    for user, uid in sorted(found, key=lambda f: (f[0], f[1] is None, f[1] or 0)):
        ledger.record_pusher(job.repo, pr.number, user, job.now, uid)
    ids = job.forge.name != "local"
    return _Recorded(events | frozenset(found), commits, tuple(pushes), pr.fork, ids)


def _pushers(recorded: _Recorded, account_of: Callable[[int], Account | None]) -> Pushers:
    """Who pushed to the PR (the senders of its events, whoever pushed one of its commits:
    before the PR was opened, or in a ``synchronize`` a newer push superseded in the
    queue) and the authors and committers the forge names for its commits; which of them
    are bots, as the forge says of each account (``account_of``, by its id)."""
    pushed = set(recorded.events) | {(p.user.casefold(), p.user_id) for p in recorded.pushes}
    people = {login for login, uid in pushed if uid is None}
    named = _named(recorded.commits)
    people |= {login for login, uid in named if uid is None}
    accounts = frozenset((login, uid) for login, uid in pushed | named if uid is not None)
    # A push by a bot account (an app's or a workflow's token, the PR's author or not) was
    # driven by someone the forge does not name; a commit's bot author (a generated file)
    # was pushed by another.
    # What an account is, the forge says, asked by its id (GitHub's type Bot, GitLab's
    # bot): its login is no proof (GitLab lets a service account's maker choose its
    # username, and a person may take a login of a bot's form: red team, approval round
    # 4). The login's form decides where there is no id to ask by (the local forge, rows
    # from before ids) or the forge does not say.
    asked = {uid: account_of(uid) for _login, uid in pushed if uid is not None and recorded.ids}
    bots = frozenset(
        login for login, uid in pushed if _bot(login, None if uid is None else asked.get(uid))
    )
    # Pushes nobody tells this repository of: a fork's (whoever its owner let push there,
    # an organization's or a group's members), and those of commits the forge does not
    # list (red team, approval round 4).
    unknown: tuple[str, ...] = ("it comes from a fork",) if recorded.fork else ()
    if recorded.commits is None:
        unknown += ("the forge does not list all its commits",)
    # A push recorded by login alone (before account ids were, ledger migration 7): its
    # login may have been renamed since, so no approver's login of now tells whether it
    # was theirs (red team on identity). A commit naming that login now is no witness: a
    # login freed is anyone's, and a commit's e-mail is moved to another account at will
    # (round 2). One approval more, as for any unknown push (a fork's asks it already).
    if recorded.ids and not unknown and any(uid is None for _login, uid in pushed):
        unknown += ("a push to it was recorded by a login alone, which may have been renamed",)
    if recorded.head is not None:  # a head no hook and no record of the forge names a pusher of
        unknown += (recorded.head,)
    # An account that pushed and is no more (deleted, as a revoked token's bot user may be):
    # whether it was a bot, or whose, cannot be told now.
    if any(account is None for account in asked.values()):
        unknown += ("an account that pushed to it is no longer known to the forge",)
    return Pushers(frozenset(people), bots, unknown, accounts)


def _named(commits: list[PullCommit] | None) -> frozenset[tuple[str, int | None]]:
    """The authors and committers the forge names for ``commits``: (case-folded login,
    account id, None where it gives none)."""
    return frozenset(
        (who.casefold(), uid)
        for commit in commits or ()
        for who, uid in ((commit.author, commit.author_id), (commit.committer, commit.committer_id))
        if who
    )


def _bot(login: str, account: Account | None) -> bool:
    """Whether a pusher recorded as ``login`` is a bot account: as the forge says of its
    ``account`` where it says, else by the form of its login (then or now)."""
    if account is not None and account.bot is not None:
        return account.bot
    return bot_account(login) or (account is not None and bot_account(account.login))


def _with_head(
    job: Job,
    pr: PullRequest,
    commits: list[PullCommit] | None,
    recorded: _Recorded,
    asked: bool,
) -> _Recorded:
    """``recorded``, with whom the forge's own records of pushes to any branch name as
    pushing its commits. A push hook is the pusher's to keep from being sent (GitHub sends
    none for a push of over 5,000 branches at once, nor a payload over 25 MB; GitLab none
    for over 3 branches), and a hooked push of the same commit by someone else, later or
    on top, hides nothing of it: so the forge is asked once per head whatever the hooks
    recorded (:meth:`~sluice.bot.forge.base.Forge.push_records`: GitHub's repository
    activity, GitLab's push events; one listing for all its commits), after the caller's
    transaction, which read whether it was (``asked``). The records of every branch: a
    commit pushed with no hook to another branch, which someone else then brings into the
    PR's (a branch made from it, a merge), was pushed by its first pusher all the same
    (red team, round 5). Each record whose ``after`` is a commit of the PR names its
    pusher for the commits it brought (after its ``before``, up to its ``after``: a push of
    many commits, GitLab's of over 20 included, names its last alone); they (kept as
    pushes to the PR's branch, found again by their commits), and that the head was
    asked, are written with the ledger's next write (no transaction of their own), and a
    job asks once (:attr:`Job.head_pushers`).
    A commit of the PR no recorded push names and the records do not cover (older than
    the newest 300, or the forge could not say) was pushed by someone unknown: one
    approval more, as for a bot's push, and the check says why (red team, approval
    round 3; identity round 2). A fork's head is not asked of (its pushes are the fork's:
    it asks one more already); nor a forge keeping no such records (the local forge)."""
    head = pr.head_sha.lower()
    if pr.fork:
        return recorded
    shas = [commit.sha.lower() for commit in commits or ()]
    shas += [] if head in shas else [head]
    key = (pr.head_ref, head)
    if asked and key not in job.head_pushers:
        job.head_pushers[key] = ([], "")  # an earlier job's: whom it named is recorded
    if key not in job.head_pushers:
        try:
            job.head_pushers[key] = (job.forge.push_records(shas), "")
        except ForgeError as exc:
            log.warning("#%s: who pushed %s is not known: %s", pr.number, head[:12], exc)
            job.head_pushers[key] = ([], job.scrub(str(exc)))
        found, error = job.head_pushers[key]
        if found is not None and not error:
            told = _brought(shas, found)
            job.ledger.record_pushes_asked_later(job.repo, pr.head_ref, head, told, job.now)
    found, error = job.head_pushers[key]
    if found is None:
        return recorded
    pushes = recorded.pushes + tuple(_brought(shas, found))
    named = {push.sha.lower() for push in pushes}
    recorded = dataclasses.replace(recorded, pushes=pushes)
    unnamed = [sha for sha in shas if sha not in named]
    if not unnamed:
        return recorded
    first = head if head in unnamed else unnamed[0]
    what = "its head" if first == head else "its commit"
    more = f" (and {len(unnamed) - 1} more of its commits)" if len(unnamed) > 1 else ""
    at = f"no push hook told of {what} {md.code(first[:12])}{more}, and the forge"
    why = (
        f"could not say who pushed it: {md.text(error, 300)}"
        if error
        else "names nobody who pushed it among its newest pushes"
    )
    return dataclasses.replace(recorded, head=f"{at} {why}")


def _brought(shas: list[str], records: list[PushRecord]) -> list[Push]:
    """Who pushed which of ``shas`` (a PR's commits, oldest first), by the forge's
    ``records`` of pushes whose ``after`` is one of them: each brought the commits after its
    ``before`` up to its ``after`` (all up to it where ``before`` is no commit of the PR:
    the branch made, or moved from elsewhere; its ``after`` alone where ``before`` comes
    later, a push back)."""
    index = {sha: n for n, sha in enumerate(shas)}
    found: dict[Push, None] = {}
    for record in records:
        last = index.get(record.after.lower())
        if last is None:
            continue
        first = index.get((record.before or "").lower(), -1) + 1
        first = last if first > last else first
        for sha in shas[first : last + 1]:
            found[Push(sha, record.login, record.user_id)] = None
    return list(found)


def _bound(job: Job, number: int, reviews: list[Review]) -> list[Review]:
    """``reviews`` with the commit each was given on. A forge whose reviews do not name it
    (GitLab's approvals) says when each was given (``approved_at``) and when each version
    of the pull request was made (:meth:`~sluice.bot.forge.base.Forge.pull_versions`), both
    by its own clock: an approval counts for the head of the latest version made before
    it (:func:`_version_at`). Never from a webhook: a hook is its sender's word, and the
    project's own maintainer holds its token, so a hook naming a head moved an approval
    onto a head its approver never saw (red team, names round 4); a hook now only makes
    the gate ask again. An approval the forge gives no time for (a GitLab before
    ``approved_at``), or that is older than every version it lists, stays unbound: it
    counts for no plan (stale). So does every one where the versions cannot be read
    (the error is raised: the gate fails closed)."""
    if all(review.commit_sha for review in reviews):
        return reviews
    versions = job.forge.pull_versions(number)
    bound = []
    for review in reviews:
        if review.commit_sha or versions is None:
            bound.append(review)
            continue
        at = created_ms(review.submitted_at)
        sha = _version_at(versions, at) if at is not None else None
        if sha is None:
            log.info("#%s: an approval by %s is bound to no head of the forge's versions "
                     "(given at %s): stale", number, review.user, review.submitted_at)  # fmt: skip
        bound.append(dataclasses.replace(review, commit_sha=sha))
    return bound


def _version_at(versions: list[PullVersion], at: int) -> str | None:
    """The head of the latest of ``versions`` made before ``at`` (epoch ms, the forge's
    clock); None when none was, or when one was made in that very moment
    (:func:`~sluice.bot.flow.gate_rules.same_moment`: GitLab writes milliseconds, an
    older one may not): then which head was approved cannot be told, and none is taken."""
    found: PullVersion | None = None
    for version in versions:  # oldest first: a later one of the same time wins
        made = version.created_ms
        if same_moment(made, at):
            return None
        if made < at and (found is None or made >= found.created_ms):
            found = version
    return found.head_sha if found is not None else None
