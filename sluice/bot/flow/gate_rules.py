"""Who must approve a pull request's plan, and whether it has happened (pure).

The settings are :mod:`sluice.core.gate_settings`' (``sluice.gate`` of the prod
branch: a pull request cannot edit its own approvers, nor pick a base branch whose
settings suit it).
:func:`evaluate` turns the reviews (and the check run's "Approve this plan" clicks) into
the ``sluice/approval`` check. An approval counts for the plan it was given on: the
caller records the plan's content hash per head commit, and an approval whose commit's
plan differs from the current one is *stale*: a push that changes the plan needs a fresh
approval, one that leaves the plan unchanged keeps it. An approval also counts only if it
was given once its commit had the plan it has now (its first, or one made again
differently by ``/sluice plan`` after prod or its settings moved): before, it approved
another plan, or none (a review by when it was submitted, a click by the plan its button
named). Each person's approvals, objections and dismissals are taken in the order given.

People are told apart by their forge account id (GitHub's ``user.id`` / ``sender.id``,
GitLab's ``user.id``), never by their login alone: a login is renamed at will, and GitHub
frees the old one at once, so the login a push was recorded with may be another's now, and
one person may approve under a login no push names. Where both sides of a comparison carry
an id (a reviewer and a pusher, an approver and the author), the ids decide. The login,
case-folded, decides only where one side has none: a row recorded before ids were (ledger
migration 7), a commit's author as the forge names it, the local forge (logins only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from sluice.bot.forge.base import Review
from sluice.bot.present.checks import PLAN_IN_ACTION
from sluice.core import markdown as md
from sluice.core.gate_settings import GateSettings


def owners_to_approve(
    settings: GateSettings,
    directly_modified: Mapping[str, str | None],
    breaking_reached: Mapping[str, str | None],
) -> dict[str, str]:
    """Model -> owner (login or ``org/team``) for the models whose owner must approve.

    Args:
        settings: The prod branch's gate settings.
        directly_modified: Each directly modified model -> its ``owner`` (None: none).
        breaking_reached: Each model a breaking change reaches (the changed model and
            its downstream) -> its owner.

    ``never``: none. ``direct``: owners of directly modified models. ``breaking``: those
    too, and the owners of every model a breaking change reaches. Models without an
    owner need nobody's approval beyond the required approvers.
    """
    rule = settings.owners_must_approve
    if rule == "never":
        return {}
    models = dict(directly_modified)
    if rule == "breaking":
        models.update(breaking_reached)
    return {
        model: owner.strip().removeprefix("@")
        for model, owner in sorted(models.items())
        if owner and owner.strip().removeprefix("@")
    }


def budget_to_approve(
    settings: GateSettings, merge_intervals: int, merge_bytes: int | None = None
) -> dict[str, str]:
    """``{what: approver}`` when merging would backfill more in prod than the budget
    allows (the approver then approves as an owner does), else nothing."""
    budget = settings.backfill
    what = budget.exceeded(merge_intervals, merge_bytes) if budget is not None else None
    return {what: budget.approver} if budget is not None and what else {}


class ActionApproval(NamedTuple):
    """A click on the check run's "Approve this plan" (or the web UI's).

    ``user`` is the login its account has now (the caller asks the forge: whether the
    clicker is an approver or an owner is decided by it, never by the login recorded then,
    which anyone may have taken since); ``recorded`` the login it was recorded with, which
    only ever adds to who the clicker may be (an author's or a pusher's old login)."""

    user: str
    sha: str  # the commit it was given on
    plan: str | None = None  # the plan its button showed: its first PLAN_IN_ACTION characters
    ts: int | None = None  # when it was handled (epoch ms)
    user_id: int | None = None  # who clicked, by account id (None: not known)
    recorded: str | None = None  # the login it was recorded with (None: ``user``)


@dataclass(frozen=True)
class GateInput:
    """What the gate is evaluated on; the caller gathers it from the forge and state.

    Attributes:
        author: The pull request's author; their own approval never counts.
        reviews: Every review of the pull request, oldest first.
        plans: Head commit sha -> the content hash of the plan computed on it.
        current_plan: The content hash of the plan at the current head.
        team_members: ``org/team`` -> member logins, for the teams in the settings and
            the owners that are teams (resolved by the caller).
        owners: Model -> owner (login or ``org/team``) whose approval is also needed;
            see :func:`owners_to_approve`.
        action_approvals: Each click on the check run's "Approve this plan", oldest
            first. Each is an approval given on its commit with the same rules as a
            review, and only of the plan its button named where it named one; it does not
            lift a standing "changes requested" from the same user (only a new review
            does, as on GitHub).
        planned_at: Head commit sha -> when (epoch ms, by the forge's clock: a review's
            time is the forge's) it got the plan it has; an approval on it from before then
            (or of unknown time), naming no plan, approved another plan or none. A commit
            not in it: any time.
        shown: (when, lower-case head sha) of each publication of the pull request's
            plan, oldest first, by the forge's clock: that head's plan was the one shown
            from then on. An approval naming no plan counts only when the last publication
            before it (to the second where its time has no finer) was its commit's: given
            while another head's plan was shown (the PR pushed away and back), the
            reviewer read that one. Empty (a PR planned before these were kept): not asked.
        planned_here, shown_here: The same by the service's clock, what a click's time
            (the service's: when it was handled) is compared with. Never a time of one
            clock with one of the other: a forge whose clock runs ahead would make an
            approval given before a plan was shown count for it (red team, approvals
            round 5).
        pushers: Who pushed a head of the pull request, known by login only (recorded
            before account ids were, a commit's author or committer): like the author, their
            own approval never counts (their change is not theirs to approve).
        pusher_accounts: Who pushed, as (login, account id): compared by the id with
            anyone who has one, a rename notwithstanding.
        author_id: The author's account id (None: not known; the login then decides).
        bot_pushers: Bot accounts that pushed to it or opened it: whoever drove the push
            is unknown, maybe an approver, so the gate asks one approval more than it
            would (from a required approver; under a gate of owners only, an owner prod
            records), and a lone person can never approve their own push made through a
            bot.
        unknown_pushers: Why someone nobody names may have pushed to it (a fork's pushes,
            commits the forge does not list): one approval more, as for a bot's push.
        prod_owners: Every owner prod records (logins or ``org/team``): under a gate of
            owners only, the approval more comes from them, never from an owner a new
            model's header in the pull request names.
        learnt: Each review's word (:func:`word_key`) -> when the service first read it
            (epoch ms, the service's clock): a person's reviews and clicks are taken in the
            order the service learnt of them, one clock for both (a review's own time is
            the forge's). A review not in it: by its own time (red team round 7).
        people: Who the logins the settings and prod's models name are
            (:attr:`~sluice.bot.flow.trust.Settings.people`): case-folded login -> the
            account id it had when it came into force (None: no account had it). A listed
            user, owner or budget approver whose login is in it is that account, whatever
            its login now, and nobody else: an account that took the login since is not
            them. A login not in it (a new model's owner its header names) is compared as
            a login; team members are the forge's logins of now, as the approvers' are.
            None: logins only (the local forge).
    """

    author: str
    reviews: Sequence[Review]
    plans: Mapping[str, str]
    current_plan: str
    team_members: Mapping[str, frozenset[str]] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)
    action_approvals: Sequence[ActionApproval] = ()
    planned_at: Mapping[str, int] = field(default_factory=dict)
    shown: Sequence[tuple[int, str]] = ()
    planned_here: Mapping[str, int] = field(default_factory=dict)
    shown_here: Sequence[tuple[int, str]] = ()
    pushers: frozenset[str] = frozenset()
    pusher_accounts: frozenset[tuple[str, int]] = frozenset()
    author_id: int | None = None
    bot_pushers: frozenset[str] = frozenset()
    unknown_pushers: tuple[str, ...] = ()
    prod_owners: frozenset[str] = frozenset()
    people: Mapping[str, int | None] | None = None
    learnt: Mapping[str, int] = field(default_factory=dict)


def word_key(review: Review) -> str:
    """One word of a review, as the forge holds it now: its id, state and time (a review
    dismissed, or a GitLab approval given again, is a new word)."""
    return f"{review.id}:{review.state.upper()}:{review.submitted_at or ''}"


_GITLAB_BOT = re.compile(
    r"(project|group)_[0-9]+_bot(_[0-9a-f]+|[0-9]*)|service_account(_group_[0-9]+)?_[0-9a-f]+"
)


def bot_account(login: str) -> bool:
    """Whether ``login`` is a bot account whose pushes some person drives unnamed: a GitHub
    App's (``<slug>[bot]``: ``github-actions[bot]`` for a workflow's token) or a GitLab
    project's or group's access token user (``project_<id>_bot_<hex>``) or service
    account (``service_account_<hex>``, ``service_account_group_<id>_<hex>``), by the form
    of the login alone. Where the forge gives an account id, what the account is the forge
    says (:meth:`~sluice.bot.forge.base.Forge.account_of`): a GitLab service account's
    username is its maker's choice, and a person may take a login of this form. This rule
    decides only where there is no id to ask by (the local forge, rows from before ids, a
    commit's author) or the forge does not say."""
    name = login.casefold()
    return name.endswith("[bot]") or _GITLAB_BOT.fullmatch(name) is not None


@dataclass(frozen=True)
class GateResult:
    """The ``sluice/approval`` check: failure (never neutral) until the gate is satisfied.

    Attributes:
        conclusion: ``success`` or ``failure``.
        approved_by: Eligible approvers whose approval of the current plan counts.
        missing: Approvals from required approvers still needed.
        eligible: Who may still approve (listed users and members of listed teams, minus
            the author and those already counted), sorted.
        owners_missing: Model -> owner whose approval is still needed.
        stale: Users whose approval was for a commit with a different (or unknown) plan.
        summary: One Markdown paragraph saying all of the above, for the check run.
    """

    conclusion: Literal["success", "failure"]
    approved_by: tuple[str, ...]
    missing: int
    eligible: tuple[str, ...]
    owners_missing: dict[str, str]
    stale: tuple[str, ...]
    summary: str

    @property
    def ok(self) -> bool:
        """Whether the gate is satisfied."""
        return self.conclusion == "success"


class _Given(NamedTuple):
    """One approval: the commit it was given on, what plan it named, when (by the
    forge's clock; ``here``: by the service's, a click's)."""

    sha: str | None
    plan: str | None
    ts: int | None
    here: bool = False


class _Planned(NamedTuple):
    """Head sha (lower case) -> when it got the plan it has, by each clock."""

    forge: Mapping[str, int]
    here: Mapping[str, int]


@dataclass
class _Standing:
    """One person's last word: their approvals since, and whether an objection stands."""

    login: str  # as the forge spells it now (a review's, else their latest click's account's)
    approved: list[_Given] = field(default_factory=list)
    objection: bool = False  # latest decisive review is CHANGES_REQUESTED
    user_id: int | None = None  # their account id, when any of their words carried it
    logins: set[str] = field(default_factory=set)  # every login (case-folded) they used


def _epoch_ms(moment: str | None) -> int | None:
    """An ISO 8601 time (the forge's ``submitted_at``) in epoch ms; None if absent or bad."""
    try:
        return int(datetime.fromisoformat(moment).timestamp() * 1000) if moment else None
    except ValueError:
        return None


class _Word(NamedTuple):
    at: int
    order: int  # at one time: a click first, then the reviews the service learnt with it
    user: str
    user_id: int | None
    state: str
    given: _Given
    recorded: str | None = None  # a click's login as recorded, where not ``user``


def _person_keys(words: Sequence[_Word]) -> list[str]:
    """Whom each word is from: ``#<id>`` where it carries an account id; a word without
    one, the id its login goes with in the others (one id only: a login that changed
    hands names nobody for sure), else its case-folded login."""
    ids: dict[str, set[int]] = {}
    for word in words:
        if word.user_id is not None:
            ids.setdefault(word.user.casefold(), set()).add(word.user_id)
    keys = []
    for word in words:
        known = ids.get(word.user.casefold(), set())
        uid = word.user_id if word.user_id is not None else (
            next(iter(known)) if len(known) == 1 else None
        )  # fmt: skip
        keys.append(f"#{uid}" if uid is not None else word.user.casefold())
    return keys


def _standings(gate: GateInput) -> dict[str, _Standing]:
    """Each person's last word, their reviews and clicks taken in the order the service
    learnt of them (:attr:`GateInput.learnt`; a review not in it by its own time; those of
    unknown time first; at one time a click before a review learnt with it, reviews by
    their order, the forge's): a later "changes requested" or dismissal takes back every
    earlier approval, a click included. A person is their account id where their words
    carry it (:func:`_person_keys`)."""
    words: list[_Word] = []
    clicks = len(gate.action_approvals)
    for index, review in enumerate(gate.reviews):
        at = _epoch_ms(review.submitted_at)
        given = _Given(review.commit_sha, None, at)
        # When the service learnt of it (its clock, as a click's), else its own time.
        learnt = gate.learnt.get(word_key(review))
        when = learnt if learnt is not None else at if at is not None else -1
        order = index + clicks if learnt is not None else index - len(gate.reviews)
        words.append(
            _Word(when, order, review.user, review.user_id, review.state.upper(), given)
        )  # fmt: skip
    for index, click in enumerate(gate.action_approvals):
        at = click.ts if click.ts is not None else -1
        given = _Given(click.sha, click.plan, click.ts, here=True)
        words.append(_Word(at, index, click.user, click.user_id, "CLICK", given, click.recorded))
    words.sort(key=lambda w: (w.at, w.order))
    by_user: dict[str, _Standing] = {}
    named: dict[str, str] = {}  # key -> the login of their latest review (the forge's now)
    for key, word in zip(_person_keys(words), words, strict=True):
        user, state, given = word.user, word.state, word.given
        if state != "CLICK":
            named[key] = user
        before = by_user.get(key)
        if state == "APPROVED":
            by_user[key] = _Standing(user, [given])
        elif state in {"CHANGES_REQUESTED", "DISMISSED"}:
            by_user[key] = _Standing(user, [], objection=state == "CHANGES_REQUESTED")
        elif state == "CLICK":
            standing = by_user.setdefault(key, _Standing(user))
            if not standing.objection:
                standing.approved.append(given)
        # COMMENTED (and PENDING, a draft review) changes nobody's standing, but says who.
        now = by_user.get(key)
        if now is None:
            continue
        if before is not None and before is not now:
            now.logins |= before.logins
            now.user_id = before.user_id
        now.logins.add(user.casefold())
        if word.recorded is not None:  # who they were then: an author's or pusher's login
            now.logins.add(word.recorded.casefold())
        if word.user_id is not None:
            now.user_id = word.user_id
        elif key.startswith("#"):
            now.user_id = int(key[1:])
        now.login = named.get(key, user)
    return by_user


def _is(standing: _Standing, login: str, uid: int | None) -> bool:
    """Whether ``standing``'s person is the account ``uid`` (login ``login``): by the ids
    where both are known, else by login (any they used, case-folded)."""
    if standing.user_id is not None and uid is not None:
        return standing.user_id == uid
    return login.casefold() in standing.logins


def _approves(
    gate: GateInput, plans: Mapping[str, str], planned: _Planned, given: _Given
) -> str | None:
    """None when ``given`` approves the current plan, else why not (for the stale list);
    ``plans`` and ``planned`` are the gate's, keyed by lower-case sha."""
    if given.sha is None:
        return (
            "approved, but the forge does not say on which commit (GitLab: no approval "
            "time given, or one before the merge request's versions or at the moment one "
            "was made): approve again, or use Approve this plan"
        )
    sha = given.sha.lower()
    short = f"`{given.sha[:7]}`"
    if sha not in plans:
        return f"approved {short}, for which no plan was recorded"
    if plans[sha] != gate.current_plan or (
        given.plan is not None and given.plan != gate.current_plan[:PLAN_IN_ACTION]
    ):
        return f"approved {short}, whose plan differs from the current plan"
    since = (planned.here if given.here else planned.forge).get(sha)
    if given.plan is None and since is not None:
        # To the second where the forge's time has no finer (GitHub's submitted_at, most
        # GitLab times): an approval in the very second the plan was published may have
        # been given before it, for the plan before, and does not count (red team round
        # 2). A time with milliseconds (the local forge's) compares as it is.
        precise = given.ts is not None and given.ts % 1000 != 0
        if given.ts is None or (given.ts < since if precise else given.ts // 1000 < since // 1000):
            return f"approved {short} before it had the plan it has now"
        if not precise and given.ts // 1000 == since // 1000:
            return (
                f"approved {short} in the second its plan was published "
                "(maybe the plan before): approve again"
            )
    shown = gate.shown_here if given.here else gate.shown
    if given.plan is None and shown and not shown_at(shown, sha, given.ts):
        if _last_before(shown, given.ts).startswith(":"):  # a publication of no plan
            return (
                f"approved {short} while Sluice's comment showed no plan (someone else "
                "changed it, or a post of it failed): approve again once Sluice shows "
                "this commit's plan"
            )
        return (
            f"approved {short} while another commit's plan was shown: approve again "
            "once Sluice shows this commit's plan"
        )
    return None


def _last_before(shown: Sequence[tuple[int, str]], ts: int | None) -> str:
    """The head (or ``:<kind>``, no plan) of the last of ``shown`` made before ``ts``;
    empty when none is."""
    before = [head for at, head in shown if ts is not None and at < ts]
    return before[-1] if before else ""


def same_moment(one: int, other: int) -> bool:
    """Whether two times (epoch ms) cannot be told apart: the same millisecond where both
    have one (neither a whole second), else the same second (most forges' times have no
    finer). Which of two things of one moment came first is not known: an approval and a
    plan's publication (:func:`shown_at`), an approval and a push (``approval._version_at``)."""
    return one == other if one % 1000 and other % 1000 else one // 1000 == other // 1000


def shown_at(shown: Sequence[tuple[int, str]], sha: str, ts: int | None) -> bool:
    """Whether ``sha``'s plan (or hold) was the one shown at ``ts`` (epoch ms; None: not
    known, so no): the last of ``shown`` ((when, lower-case head sha) of each publication,
    in the order made) before it is ``sha``'s, and no other head's was published in that
    moment (:func:`same_moment`: it may be before or after it). Publications of one
    moment before it are one (a frozen clock; the queue runs one PR's jobs one at a
    time): ``sha``'s among them is shown."""
    if ts is None:
        return False
    sha = sha.lower()
    if any(same_moment(at, ts) and head != sha for at, head in shown):
        return False
    # The last made before it (in the order made, which a row's time of another clock,
    # kept before the forge's times were, may not follow).
    last = max((n for n, (at, _) in enumerate(shown) if at < ts and not same_moment(at, ts)),
               default=None)  # fmt: skip
    if last is None:
        return False
    return sha in {head for at, head in shown if at == shown[last][0]}


def _by_name(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(items, key=lambda item: item[0].casefold())


def _mention(login: str) -> str:
    """A user, or an owner that is a team (``org/slug``); never raw text of a model file."""
    return str(md.mention(login, team="/" in login))


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def evaluate(settings: GateSettings, gate: GateInput) -> GateResult:
    """Whether the pull request's current plan has the approvals ``settings`` require.

    An approval counts when its author is eligible (a listed user or a member of a listed
    team; for an owner, the owner or a member of the owner team), is not the PR author,
    is that user's latest word (a later CHANGES_REQUESTED or DISMISSED review cancels it,
    a COMMENTED one does not), and was given on a commit whose recorded plan equals
    ``current_plan``. People compare by account id where both sides have one, else by
    login (see the module's doc); logins and team names compare case-insensitively.
    """
    required = settings.required_approvers
    author = gate.author.casefold()
    members = {
        team.casefold(): {m.casefold(): m for m in logins}
        for team, logins in gate.team_members.items()
    }
    plans = {sha.lower(): plan for sha, plan in gate.plans.items()}
    planned = _Planned(
        {sha.lower(): ts for sha, ts in gate.planned_at.items()},
        {sha.lower(): ts for sha, ts in gate.planned_here.items()},
    )

    eligible_names: dict[str, str] = {}
    for user in required.users:
        eligible_names.setdefault(user.casefold(), user)
    unresolved_teams = []
    for team in required.teams:
        team_logins = members.get(team.casefold(), {})
        if not team_logins:
            unresolved_teams.append(team)
        for key, login in team_logins.items():
            eligible_names.setdefault(key, login)

    # Who fills a place is told by a tagged key: ``u:<login>`` the person a listed login
    # (a user, an owner, the budget's approver) names, by the account it was pinned to
    # where it was (gate.people); ``t:<login>`` a team's member, by their login of now.
    pinned = {login.casefold(): uid for login, uid in (gate.people or {}).items()}
    team_people = {key for logins in members.values() for key in logins}

    def holds(standing: _Standing, name: str) -> bool:
        if name in pinned:
            return pinned[name] is not None and standing.user_id == pinned[name]
        return standing.login.casefold() == name

    def owner_keys(owner: str) -> set[str]:
        owner = owner.strip().removeprefix("@")
        if "/" in owner:
            return {f"t:{m}" for m in members.get(owner.casefold(), {})}
        return {f"u:{owner.casefold()}"}

    named = {user.casefold() for user in required.users}  # logins the gate asks as people
    for owner in (*gate.owners.values(), *gate.prod_owners):
        named |= {key[2:] for key in owner_keys(owner) if key.startswith("u:")}

    def places(standing: _Standing) -> set[str]:
        found = {f"u:{name}" for name in named if holds(standing, name)}
        now = standing.login.casefold()
        return found | ({f"t:{now}"} if now in team_people else set())

    listed = {f"u:{u.casefold()}" for u in required.users}
    listed |= {f"t:{m}" for team in required.teams for m in members.get(team.casefold(), {})}
    owner_people: set[str] = set()
    for owner in gate.owners.values():
        owner_people |= owner_keys(owner)

    # Keyed by person (an account id, or a case-folded login: _standings).
    valid: dict[str, str] = {}  # person -> login: approvals of the current plan
    stale: dict[str, tuple[str, str]] = {}  # person -> (login, why)
    ignored: dict[str, str] = {}  # person -> login: valid, but nobody asked for it
    filled: dict[str, set[str]] = {}  # person -> the places they fill (valid approvals)
    taken: dict[str, str] = {}  # person -> login: a listed login, pinned to another account
    self_approved = False
    pushers = [(p, None) for p in gate.pushers] + list(gate.pusher_accounts)
    pushed: dict[str, str] = {}  # person -> login: pushers who approved
    for key, standing in _standings(gate).items():
        if not standing.approved:
            continue
        if _is(standing, gate.author, gate.author_id):
            self_approved = True
            continue
        if any(_is(standing, login, uid) for login, uid in pushers):
            pushed[key] = standing.login
            continue
        name = standing.login.casefold()
        mine = places(standing)
        relevant = bool(mine & (listed | owner_people))
        login = standing.login
        reasons = [_approves(gate, plans, planned, given) for given in standing.approved]
        if name in named and name in pinned and not mine & (listed | owner_people):
            taken[key] = login  # a listed login another account holds now: never theirs
        if None in reasons:
            valid[key] = login
            filled[key] = mine
            if not relevant and key not in taken:
                ignored[key] = login
        elif relevant:
            stale[key] = (login, str(reasons[-1]))

    # A push through a bot account may be an approver's own: one approval more than the
    # gate asks (its count, or the one owner's under a gate of owners only), from an
    # approver or an owner; where it asks nobody, nobody.
    base = required.count or (1 if gate.owners else 0)
    extra = 1 if (gate.bot_pushers or gate.unknown_pushers) and base else 0
    # The approval more comes from the required approvers (the prod branch's settings),
    # never from an owner a new model's header in the PR names; a gate of owners only has
    # the owners prod records.
    pool = set(listed)
    if extra and not pool:
        pool = set().union(*(owner_keys(owner) for owner in gate.prod_owners))
    # One login is one person: two entries under it (an id's and one recorded without)
    # are one approval, never two.
    counted: dict[str, str] = {}
    for key in sorted(valid, key=lambda k: valid[k].casefold()):
        if filled[key] & pool:
            counted.setdefault(valid[key].casefold(), valid[key])
    approved_by = tuple(counted.values())
    need = required.count + extra * (base - required.count + 1)
    missing = max(0, need - len(approved_by))
    approvers = {login.casefold() for login in valid.values()}
    approvers |= {place[2:] for places_of in filled.values() for place in places_of}
    pusher_logins = {login.casefold() for login, _uid in pushers}
    unheld = sorted(
        (login for login in {*required.users, *(o for o in gate.owners.values() if "/" not in o)}
         if pinned.get(login.strip().removeprefix("@").casefold(), 0) is None),
        key=str.casefold,
    )  # fmt: skip
    nobody = {login.strip().removeprefix("@").casefold() for login in unheld}
    eligible = tuple(
        sorted(
            (
                login
                for key, login in eligible_names.items()
                if key != author
                and key not in approvers
                and key not in pusher_logins
                and key not in nobody
            ),
            key=str.casefold,
        )
    )

    done = set().union(*filled.values()) if filled else set()
    owners_missing: dict[str, str] = {}
    owner_is_author: set[str] = set()
    for model, owner in sorted(gate.owners.items()):
        keys = owner_keys(owner)
        if not keys & done:
            owners_missing[model] = owner
            name = owner.strip().removeprefix("@").casefold()
            if "/" not in name and (
                pinned[name] is not None and pinned[name] == gate.author_id
                if name in pinned and gate.author_id is not None
                else name == author
            ):
                owner_is_author.add(owner)

    ok = missing == 0 and not owners_missing
    summary = _summary(
        settings=settings,
        gate=gate,
        approved_by=approved_by,
        missing=missing,
        eligible=eligible,
        unresolved_teams=unresolved_teams,
        owners_missing=owners_missing,
        owner_is_author=owner_is_author,
        stale_reasons=[f"{_mention(login)} {why}" for login, why in _by_name(stale.values())],
        ignored=tuple(sorted(ignored.values(), key=str.casefold)),
        self_approved=self_approved,
        pushed=tuple(sorted(pushed.values(), key=str.casefold)),
        need=need,
        ok=ok,
        taken=tuple(sorted(taken.values(), key=str.casefold)),
        unheld=tuple(unheld),
    )
    return GateResult(
        conclusion="success" if ok else "failure",
        approved_by=approved_by,
        missing=missing,
        eligible=eligible,
        owners_missing=owners_missing,
        stale=tuple(login for login, _ in _by_name(stale.values())),
        summary=summary,
    )


def _summary(
    *,
    settings: GateSettings,
    gate: GateInput,
    approved_by: tuple[str, ...],
    missing: int,
    eligible: tuple[str, ...],
    unresolved_teams: list[str],
    owners_missing: dict[str, str],
    owner_is_author: set[str],
    stale_reasons: list[str],
    ignored: tuple[str, ...],
    self_approved: bool,
    pushed: tuple[str, ...],
    need: int,
    ok: bool,
    taken: tuple[str, ...] = (),
    unheld: tuple[str, ...] = (),
) -> str:
    required = settings.required_approvers
    if required.count == 0 and not gate.owners:
        why = (
            "no required approvers are configured"
            if settings.owners_must_approve == "never"
            else "no changed model has an owner whose approval is required"
        )
        return f"No approval is required: {why} in `sluice.gate` on the prod branch."

    sentences: list[str] = []
    if need > required.count:
        whom = "a required approver (under a gate of owners only, an owner prod records)"
        if gate.bot_pushers:
            bots = _join([md.code(b) for b in sorted(gate.bot_pushers)])
            sentences.append(
                f"{bots} pushed to this pull request: a bot account, driven by someone the "
                "forge does not name (maybe an approver), so one approval more than the gate "
                f"asks is needed, from {whom}."
            )
        if gate.unknown_pushers:
            why = _join(list(gate.unknown_pushers))
            sentences.append(
                f"Someone the forge does not name may have pushed to this pull request ({why}),"
                f" maybe an approver, so one approval more than the gate asks is needed, from "
                f"{whom}."
            )
    if need:
        who = _join([_mention(u) for u in approved_by]) if approved_by else "nobody yet"
        sentences.append(f"Approved by {who} ({len(approved_by)} of {need} required).")
        if missing:
            pool = [_mention(u) for u in eligible]
            pool += [f"any member of {md.mention(t, team=True)}" for t in unresolved_teams]
            if pool:
                more = "approval" if missing == 1 else "approvals"
                sentences.append(f"{missing} more {more} needed from {_join(pool)}.")
            else:
                sentences.append(
                    f"{missing} more approval(s) needed, but nobody else may approve: change "
                    "`sluice.gate.required_approvers` on the prod branch."
                )
    if gate.owners:
        if owners_missing:
            parts = [
                f"{md.code(model)} ({_mention(owner)})" for model, owner in owners_missing.items()
            ]
            sentences.append(f"Owners still to approve: {_join(parts)}.")
            for owner in sorted(owner_is_author):
                sentences.append(
                    f"{_mention(owner)} owns a changed model but is the author, whose own approval "
                    "does not count: another owner or an admin must approve."
                )
        else:
            sentences.append("Every changed model's owner has approved.")
    if stale_reasons:
        sentences.append(
            f"Stale: {'; '.join(stale_reasons)}. An approval counts only for the plan it "
            "was given on, so approve the current one again."
        )
    if ignored:
        sentences.append(
            f"Not counted: {_join([_mention(u) for u in ignored])} "
            "(not a required approver or owner)."
        )
    if self_approved:
        sentences.append(f"{_mention(gate.author)}'s own approval does not count (PR author).")
    if pushed:
        who = _join([_mention(u) for u in pushed])
        sentences.append(
            f"Not counted: {who} pushed to this pull request, so approving it is not theirs "
            "(as the author's own approval is not)."
        )
    if taken:
        sentences.append(
            f"Not counted: {_join([_mention(u) for u in taken])}: the settings name that login,"
            " but it was another account's when they came into force (renamed since, and the "
            "login taken by another account). An admin should correct the settings on the "
            "prod branch to name the person's login of now."
        )
    if unheld:
        sentences.append(
            f"{_join([_mention(u) for u in unheld])}: named by the settings, but no account "
            "had that login when they came into force, so it counts for nobody. An admin "
            "should correct the settings on the prod branch."
        )
    sentences.insert(0, "Approved." if ok else "Waiting for approval.")
    return " ".join(sentences)
