"""The approval gate's flow without Spark, for attacks on it: real GitHub webhook bodies,
the in-memory forge, the ledger on SQLite, a clock the test moves, and plans recorded as a
PR build records them (the red-team modules tests/security/test_red_team_*.py).

PR 7 of ``octo/warehouse`` is the pull request every helper here speaks of; under
``TEAM_GATED`` the members :func:`make_bot` is given (of ``TEAM``) are its approvers. Its
GitLab twin, merge request !7, is driven by the ``gitlab_*`` helpers on a bot of
:func:`make_gitlab_bot`: GitLab's real Merge Request Hook bodies, the in-memory GitLab.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.flow import approval, dispatch, trust
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case, realcase
from tests.helpers.own_runs import sluices_run

OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
GITLAB_KEY = f"gitlab:{OWNER}"
NOW = 1_800_000_000_000
MINUTE = 60_000
SECOND = 1_000
ROOT, A, B, C, D = "0" * 40, "a" * 40, "b" * 40, "c" * 40, "d" * 40
GATED = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
OWNERS_ONLY = "sluice:\n  project: jaffle\n  gate:\n    owners_must_approve: direct\n"
"""The gate of owners only: no required approvers, every changed model's owner approves."""
TEAM = "octo/approvers"
TEAM_GATED = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      teams: [octo/approvers]\n"
)
"""The gate of one approval from a member of ``TEAM``, as the forge lists it now."""
CHANGE = PlanReview("fpchange0001", (("s.change", "k-change"),), {}, {})
"""A plan that changes one model (no owner), for attacks that care only who approves."""


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Bot:
    """The flow on a SQLite state and the in-memory GitHub, with a clock the test moves."""

    def __init__(self, root: Path, forge: MemoryForge) -> None:
        self.root, self.forge, self.clock = root, forge, Clock(NOW)
        forge.clock = self.clock  # reviews are given at the flow's time
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: forge,
                              workdir=root / "work", state_url=self.url,
                              clock=self.clock)  # fmt: skip
        self.ledger = Ledger(self.url)

    def deliver(self, event: str, payload: dict[str, Any], received: int | None = None) -> bool:
        """Hand a webhook to the flow; False when the service ignores that kind of event.
        ``received``: when the service's intake received it (the flow's clock now unless
        said: a delivery queued behind other jobs is handled later than received)."""
        # Each person the webhook names carries their account's id, as GitHub's do.
        parsed = parse_github(event, accounts.github(payload, self.forge.account_id))
        if parsed is None:
            return False
        at = self.clock.now if received is None else received
        parsed = pin_event(dataclasses.replace(parsed, received_ms=at), self.deps.forge_for)
        assert parsed is not None
        dispatch.handle(self.deps, parsed)
        return True

    def approval(self, sha: str) -> Check:
        return self.forge.checks[sha]["sluice/approval"]

    def in_force(self) -> trust.Settings:
        job = Job.start(self.deps, self.forge)
        try:
            return trust.for_repository(job)
        finally:
            job.close()

    def close(self) -> None:
        self.deps.close()
        self.ledger.close()


def make_bot(
    root: Path, config: str, roles: dict[str, str], *, members: Collection[str] | None = None
) -> Bot:
    """A bot whose ``main`` (ROOT) and the commits A, then B, above it hold ``config``;
    ``members``, when given, the team ``TEAM``."""
    forge = MemoryForge(OWNER, name="github")
    forge.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": config}, branch="main")
    forge.commit(A, {"config.yaml": config}, parents=(ROOT,))
    forge.commit(B, {"config.yaml": config}, parents=(A,))
    forge.roles.update(roles)
    if members is not None:
        forge.teams[TEAM] = frozenset(members)
    return Bot(root, forge)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def pr_event(action: str, head: str, sender: str, *, author: str = "alice",
             updated: int | None = None, draft: bool = False, head_ref: str | None = None,
             head_repo: str = OWNER) -> dict[str, Any]:  # fmt: skip
    """GitHub's ``pull_request`` webhook of PR 7 into main: ``sender`` made ``action`` at
    ``head``; ``head_repo`` other than the base's is a fork (another repository id)."""
    case = "opened" if action == "opened" else "synchronize"
    changes: dict[str, Any] = {
        "number": 7, "pull_request.number": 7, "pull_request.head.sha": head,
        "pull_request.base.ref": "main", "pull_request.user.login": author,
        "pull_request.draft": draft, "pull_request.head.repo.full_name": head_repo,
        "sender.login": sender,
    }  # fmt: skip
    if head_ref is not None:
        changes["pull_request.head.ref"] = head_ref
    payload = realcase(f"github/pull_request/{case}.payload.json", OWNER, action=action,
                       **changes)  # fmt: skip
    if head_repo != OWNER:
        payload["pull_request"]["head"]["repo"]["id"] = 4242
    if updated is not None:
        payload["pull_request"]["updated_at"] = iso(updated)
    return accounts.github(payload)


def review(user: str, state: str, head: str, review_id: int) -> dict[str, Any]:
    """GitHub's ``pull_request_review`` webhook: ``user`` reviewed PR 7 at ``head``."""
    made = realcase("github/pull_request_review/submitted.payload.json", OWNER,
                    action="submitted", **{
        "pull_request.number": 7, "pull_request.head.sha": head, "review.user.login": user,
        "review.state": state.lower(), "review.commit_id": head, "review.id": review_id,
    })  # fmt: skip
    return accounts.github(made)


def push(branch: str, head: str, sender: str, commits: tuple[str, ...] = ()) -> dict[str, Any]:
    """GitHub's push webhook: ``sender`` pushed ``branch`` to ``head``, bringing ``commits``
    (oldest first; by default the head alone), listed as GitHub lists a push's commits."""
    made = realcase("github/push/woodpecker__HookTag.json", OWNER, ref=f"refs/heads/{branch}",
                    after=head, deleted=False)  # fmt: skip
    made["sender"]["login"] = sender
    made["commits"] = [{"id": sha, "distinct": True} for sha in commits or (head,)]
    return accounts.github(made)


def approve(bot: Bot, user: str, head: str, review_id: int) -> None:
    """``user`` approves PR 7 at ``head`` now (after its plan), and its webhook."""
    made = bot.forge.add_review(7, user, "APPROVED", head)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=iso(bot.clock.now))
    bot.deliver("pull_request_review", review(user, "approved", head, review_id))
    bot.clock.now += SECOND  # what happens next happens after it (the gate: shown_at)


def plan(bot: Bot, head: str, made: PlanReview) -> None:
    """The plan a PR build records for PR 7 on ``head`` (no Spark), published now."""
    bot.ledger.record_plan(KEY, 7, head, made, bot.clock.now)
    bot.clock.now += MINUTE


OTHER = PlanReview("fpother0007", (("s.other", "k-other"),), {}, {})
"""Another head's plan: a change to another model, never approved."""


def review_hook(
    user: str,
    state: str,
    head: str,
    review_id: int,
    at: int,
    *,
    action: str = "submitted",
    sender: str | None = None,
) -> dict[str, Any]:
    """GitHub's ``pull_request_review`` webhook of PR 7 (submitted, or dismissed)."""
    case = "dismissed" if action == "dismissed" else "submitted"
    made = realcase(f"github/pull_request_review/{case}.payload.json", OWNER, action=action, **{
        "pull_request.number": 7, "pull_request.head.sha": head, "review.user.login": user,
        "review.state": state.lower(), "review.commit_id": head, "review.id": review_id,
    })  # fmt: skip
    made["review"]["submitted_at"] = iso(at)
    if sender is not None:
        made["sender"]["login"] = sender
    return made


def given(bot: Bot, user: str, state: str, head: str, at: int) -> int:
    """``user`` reviews PR 7 on ``head`` on GitHub, which stamps it ``at`` (its clock, to
    the second); no webhook yet. Returns the review's id."""
    made = bot.forge.add_review(7, user, state, head)
    bot.forge.review_log[7][-1] = dataclasses.replace(made, submitted_at=iso(at))
    return made.id


def published(bot: Bot, head: str, made: PlanReview, forge_at: int) -> None:
    """``head``'s plan published as ``pr_build._build`` records it once its comment is
    posted: by the service's clock now, and GitHub's ``forge_at`` (the comment's
    ``updated_at``)."""
    bot.ledger.record_plan(KEY, 7, head, made, bot.clock.now, forge_at)
    bot.clock.now += MINUTE


def click(bot: Bot, user: str, head: str, received: int | None = None) -> None:
    """``user`` clicks "Approve this plan" on Sluice's sluice/approval run on ``head``;
    ``received``: when the service received it, if before now (its job queued)."""

    def deliver(event: str, payload: dict[str, Any]) -> None:
        bot.deliver(event, payload)

    run = sluices_run(deliver, bot.forge, head)
    made = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head, "check_run.id": run,
        "requested_action.identifier": "approve", "sender.login": user,
    })  # fmt: skip
    made["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    bot.deliver("check_run", made, received)


def refresh(bot: Bot) -> None:
    """The gate of PR 7 evaluated again now (as any later review, click or re-run does)."""
    job = Job.start(bot.deps, bot.forge)
    try:
        approval.refresh(job, bot.forge.pull_request(7))
    finally:
        job.close()


# -- GitLab: merge request !7 of OWNER, from `change` into main -----------------------------


def make_gitlab_bot(
    root: Path, config: str, roles: dict[str, str], *, members: Collection[str] | None = None
) -> Bot:
    """:func:`make_bot` on the in-memory GitLab (its comments unbounded)."""
    forge = MemoryForge(OWNER, name="gitlab", comment_limit=1_000_000)
    forge.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": config}, branch="main")
    forge.commit(A, {"config.yaml": config}, parents=(ROOT,))
    forge.commit(B, {"config.yaml": config}, parents=(A,))
    forge.roles.update(roles)
    if members is not None:
        forge.teams[TEAM] = frozenset(members)
    return Bot(root, forge)


def gitlab_deliver(bot: Bot, payload: dict[str, Any]) -> None:
    """Hand a Merge Request Hook to the flow, each person carrying their account's id."""
    event = parse_gitlab("Merge Request Hook", accounts.gitlab(payload, bot.forge.account_id))
    assert event is not None
    dispatch.handle(bot.deps, event)


def gitlab_mr(action: str, head: str, user: str, **attrs: Any) -> dict[str, Any]:
    """GitLab's Merge Request Hook of MR !7 (from `change` of this project into main):
    ``user`` made ``action`` (``update`` with ``oldrev``: a push) at ``head``."""
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"]["path_with_namespace"] = OWNER
    payload["user"]["username"] = user
    fields = payload["object_attributes"]
    fields.update(iid=7, action=action, source_branch="change", target_branch="main",
                  source_project_id=1, target_project_id=1, author_id=999_999,
                  updated_at=iso(NOW), **attrs)  # fmt: skip
    fields["source"]["path_with_namespace"] = fields["target"]["path_with_namespace"] = OWNER
    fields["last_commit"]["id"] = head
    return payload


def gitlab_plan(bot: Bot, head: str, made: PlanReview) -> None:
    """The plan a build records for MR !7 on ``head`` (no Spark), published now."""
    bot.ledger.record_plan(GITLAB_KEY, 7, head, made, bot.clock.now)
    bot.clock.now += MINUTE


def _gitlab_approval(bot: Bot, user: str, head: str, action: str) -> None:
    payload = load_case("gitlab/merge_request_approved.json")
    payload["project"]["path_with_namespace"] = OWNER
    payload["user"]["username"] = user
    payload["object_attributes"].update(action=action, iid=7,
                                        updated_at=iso(bot.clock.now + 1000))  # fmt: skip
    payload["object_attributes"]["last_commit"]["id"] = head
    gitlab_deliver(bot, payload)
    bot.clock.now += MINUTE


def gitlab_approve(bot: Bot, user: str, head: str) -> None:
    """``user`` approves MR !7 in GitLab (listed naming no commit), then its webhook."""
    bot.forge.add_review(7, user, "APPROVED", unbound=True)
    _gitlab_approval(bot, user, head, "approved")


def gitlab_unapprove(bot: Bot, user: str, head: str) -> None:
    """``user`` takes their approval of MR !7 back in GitLab, then its webhook."""
    bot.forge.withdraw_reviews(7, user)
    _gitlab_approval(bot, user, head, "unapproved")
