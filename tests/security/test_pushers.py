"""Who pushed a pull request's head does not approve it (red team, approval round): a
required approver pushing their own change onto another person's PR and approving it
alone passed the gate. The pusher is the sender of the PR's opened, reopened or
synchronize event (GitHub) or of the MR's update with new commits (GitLab), recorded by the
ledger; their approval then counts no more than the author's, in the gate and for the
backfill budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import PullRequestEvent
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.cases import load_case
from tests.security.github_bot import NOW, OWNER, PREAMBLE, Bot, opened, payload, review

A, B, C = "a" * 40, "b" * 40, "c" * 40
TWO = PREAMBLE + (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "write"})
    made = Bot(tmp_path, github)
    made.prod(C, TWO)
    yield made
    made.close()


def _synchronize(number: int, head: str, pusher: str) -> dict[str, object]:
    return payload("github/pull_request/synchronize.payload.json", **{
        "number": number, "pull_request.number": number, "pull_request.head.sha": head,
        "pull_request.base.ref": "main", "pull_request.user.login": "alice",
        "pull_request.draft": False, "pull_request.head.repo.full_name": OWNER,
        "sender.login": pusher,
    })  # fmt: skip


def test_an_approver_who_pushed_to_the_pr_does_not_approve_it(bot: Bot) -> None:
    bot.commit(A, TWO)
    bot.pull(7, A)
    first = opened(7, A)
    first["sender"]["login"] = "alice"
    bot.deliver("pull_request", first)
    # bob, a required approver, pushes his own commit onto alice's PR ...
    bot.commit(
        B, TWO, models={"zz_bob.sql": "MODEL (name jaffle.zz_bob, kind VIEW);\nSELECT 1 AS x\n"}
    )
    bot.github.push(7, B)
    bot.deliver("pull_request", _synchronize(7, B, "bob"))
    assert bot.ledger.pushers(f"github:{OWNER}", 7) == {"alice", "bob"}
    # This Bot runs no Spark: B's plan is recorded as its build would record it.
    item = ("jaffle.zz_bob", "k1")
    plan = PlanReview("fp-b", (item,), {"jaffle.zz_bob": None}, {})
    bot.ledger.record_plan(f"github:{OWNER}", 7, B, plan, NOW)
    # ... and approves it: not counted, and the check says why.
    bot.github.add_review(7, "bob", "APPROVED", B)
    bot.deliver("pull_request_review", review(7, "bob", B, 41))
    check = bot.approval(B)
    assert check.conclusion == "failure", check.summary
    assert "Not counted: @bob pushed to this pull request" in check.summary
    assert "needed from @carol." in check.summary, "bob is no longer offered as an approver"
    # carol, who pushed nothing, approves: the gate passes.
    bot.github.add_review(7, "carol", "APPROVED", B)
    bot.deliver("pull_request_review", review(7, "carol", B, 42))
    check = bot.approval(B)
    assert check.conclusion == "success", check.summary
    assert "Approved by @carol" in check.summary


def test_the_pusher_is_read_from_each_forges_events() -> None:
    synchronize = parse_github("pull_request", _synchronize(7, B, "Bob"))
    assert isinstance(synchronize, PullRequestEvent) and synchronize.pusher == "Bob"
    closing = payload("github/pull_request/closed.payload.json", **{"sender.login": "bob"})
    closed = parse_github("pull_request", closing)
    assert isinstance(closed, PullRequestEvent) and closed.pusher is None, "a close pushes nothing"
    # GitLab: an MR update with new commits (oldrev) is a push by the hook's user.
    hook = load_case("gitlab/merge_request_open.json")
    hook["object_attributes"].update(action="update", oldrev="1" * 40)
    hook["user"]["username"] = "dora"
    pushed = parse_gitlab("Merge Request Hook", hook)
    assert isinstance(pushed, PullRequestEvent) and pushed.action == "synchronize"
    assert pushed.pusher == "dora"
