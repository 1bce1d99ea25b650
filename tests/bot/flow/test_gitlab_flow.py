"""The approval gate on GitLab: MR approvals bound to the plan they were given on.

GitLab's approvals API lists who approved and when (``approved_at``), not on which
commit; the flow binds each approval to the head of the merge request's latest version
made before it (its versions API, GitLab's clock), never to the head a webhook names (a
webhook is its sender's word). Each test parses a real
GitLab delivery with ``parse_gitlab`` and hands it to the flow, whose forge is a
:class:`~sluice.bot.forge.memory.MemoryForge` standing in for GitLab: its reviews name no
commit, as GitLab's approvals list. How statuses, award emoji, access levels, approvals,
merges and deployments map to GitLab's API is tested in tests/bot/forge/test_gitlab.py.
No Spark: plans are recorded in the ledger as a build would record them (the
Spark-backed flow is test_gitlab_lifecycle.py).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case, record_prod
from tests.helpers.fold_settings import fold_settings

REPO = Path(__file__).resolve().parents[3]
PROJECT = "data/warehouse"
NOW = 1_800_000_000_000
A, B = "a" * 40, "b" * 40
ROOT = "0" * 40  # main's first commit
NOTE = "Note Hook"
CONFIG = ("sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n"
          "      users: [bob]\n      teams: [data/platform/reviewers]\n")  # fmt: skip


class Bot:
    def __init__(self, root: Path, forge: MemoryForge) -> None:
        self.forge = forge
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: forge, workdir=root / "work",
                              state_url=self.url, clock=lambda: NOW)  # fmt: skip
        self.ledger = Ledger(self.url)

    def plan(self, sha: str, fingerprint: str) -> None:
        review = PlanReview(fingerprint, (("s.m", f"{fingerprint}-m"),), {}, {})
        self.ledger.record_plan(f"gitlab:{PROJECT}", 7, sha, review, 1)

    def approval(self, user: str, head: str, action: str = "approval") -> None:
        """``user`` approves (or, with ``unapproval``, takes it back) while the head is
        ``head``: in GitLab, then its webhook."""
        if action == "approval":
            approve(self.forge, user)
        else:
            self.forge.withdraw_reviews(7, user)
        payload = load_case("gitlab/merge_request_approved.json")
        payload["project"]["path_with_namespace"] = PROJECT
        payload["user"]["username"] = user
        payload["object_attributes"].update(action=action, iid=7)
        payload["object_attributes"]["last_commit"]["id"] = head
        self.deliver(payload)

    def deliver(self, payload: dict[str, Any], hook: str = "Merge Request Hook") -> None:
        # Each person the webhook names carries their account's id, as GitLab's do.
        event = parse_gitlab(hook, accounts.gitlab(payload, self.forge.account_id))
        assert event is not None
        dispatch.handle(self.deps, event)

    def deliver_tag(self, payload: dict[str, Any]) -> None:
        self.deliver(payload, "Tag Push Hook")

    def gate(self, sha: str) -> Check:
        return self.forge.checks[sha]["sluice/approval"]

    def note(self) -> str:
        [note] = self.forge.bot_comments(7)
        return note


def approve(forge: MemoryForge, user: str) -> None:
    """``user`` approves MR 7 in GitLab: listed once, naming no commit."""
    if all(review.user != user for review in forge.reviews(7)):
        forge.add_review(7, user, "APPROVED", unbound=True)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    forge = MemoryForge(PROJECT, name="gitlab", comment_limit=1_000_000)
    forge.repositories[CASE_REPOSITORY_ID] = PROJECT  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": CONFIG}, branch="main")
    forge.commit(A, {"config.yaml": CONFIG}, parents=(ROOT,))
    forge.teams["data/platform/reviewers"] = frozenset({"erin"})
    forge.open_pull(7, head_sha=A, base="main", author="alice")
    made = Bot(tmp_path, forge)
    yield made
    made.deps.close()
    made.ledger.close()


def test_an_approval_counts_for_the_plan_it_was_given_on(bot: Bot) -> None:
    bot.plan(A, "fp1")
    bot.approval("bob", A)
    assert (bot.gate(A).conclusion, bot.gate(A).title) == ("success", "Approved")

    # A push that keeps the plan keeps the approval (GitLab kept it too).
    bot.forge.push(7, B)
    bot.plan(B, "fp1")
    dispatch.handle(bot.deps, _review_refresh(B))
    assert bot.gate(B).conclusion == "success"

    # A push that changes the plan makes it stale, though GitLab still lists bob.
    bot.plan(B, "fp2")
    dispatch.handle(bot.deps, _review_refresh(B))
    gate = bot.gate(B)
    assert gate.conclusion == "failure"
    assert gate.title == "1 more approval needed (the plan changed since the last approval)"
    assert "@bob" in bot.note() and "stale" in bot.note().lower()

    # bob's approval hook naming the new head binds nothing: he approved A, not B.
    bot.approval("bob", B)
    assert bot.gate(B).conclusion == "failure"
    # He takes it back and approves again (GitLab lists him once): now, after B's push.
    bot.approval("bob", B, action="unapproval")
    approve(bot.forge, "bob")  # its hook is the one above again (a replay: not run twice)
    dispatch.handle(bot.deps, _review_refresh(B))
    assert bot.gate(B).conclusion == "success"


def test_an_approval_taken_back_no_longer_counts(bot: Bot) -> None:
    bot.plan(A, "fp1")
    bot.approval("bob", A)
    assert bot.gate(A).conclusion == "success"
    bot.approval("bob", A, action="unapproval")
    assert bot.gate(A).conclusion == "failure"


def test_an_approval_no_webhook_told_of_counts_for_the_head_gitlab_says(bot: Bot) -> None:
    bot.plan(A, "fp1")
    approve(bot.forge, "bob")  # given while Sluice was not receiving webhooks
    bot.approval("erin", A, action="unapproval")  # any MR event re-evaluates the gate
    assert bot.gate(A).conclusion == "success"  # bound from GitLab's versions: A


def test_an_approval_older_than_every_version_gitlab_lists_is_stale(bot: Bot) -> None:
    bot.plan(A, "fp1")
    approve(bot.forge, "bob")
    bot.forge.versions[7].clear()  # GitLab lists none from before the approval
    bot.forge.push(7, B)
    bot.forge.push(7, A)  # back to A: its version is newer than the approval
    bot.approval("erin", A, action="unapproval")
    gate = bot.gate(A)
    assert gate.conclusion == "failure" and "plan changed" in gate.title


def test_an_approval_gitlab_gives_no_time_for_is_stale(bot: Bot) -> None:
    bot.plan(A, "fp1")
    approve(bot.forge, "bob")
    log = bot.forge.review_log[7]
    log[-1] = dataclasses.replace(log[-1], submitted_at=None)  # no approved_at (older GitLab)
    bot.approval("erin", A, action="unapproval")
    gate = bot.gate(A)
    assert gate.conclusion == "failure" and "plan changed" in gate.title


def test_a_group_member_may_approve_and_the_author_may_not(bot: Bot) -> None:
    bot.plan(A, "fp1")
    bot.approval("alice", A)
    assert bot.gate(A).conclusion == "failure"
    assert "@alice's own approval does not count (PR author)." in bot.note()
    bot.approval("erin", A)  # a member of data/platform/reviewers
    assert bot.gate(A).conclusion == "success"
    assert "Approved by @erin" in bot.note()


def _review_refresh(head: str) -> Any:
    """What GitLab sends when someone else approves: here erin's approval and its revocation
    arrive as one re-evaluation (no approval recorded for bob)."""
    from sluice.bot.events.neutral import ReviewEvent

    return ReviewEvent(forge="gitlab", repo=PROJECT, installation_id=None, action="dismissed",
                       number=7, reviewer="erin", state="DISMISSED", commit_sha=head,
                       head_sha=head)  # fmt: skip


# -- tags ------------------------------------------------------------------------------------

TAG_DEPLOY = """  gate:
    required_approvers: {users: [bob]}
  deploy:
    on: tag
    tag_pattern: "v*"
"""


def _commit(
    bot: Bot,
    root: Path,
    sha: str,
    extra: str = TAG_DEPLOY,
    *,
    parents: tuple[str, ...] = (),
    branch: str | None = None,
) -> Path:
    src = root / f"tree-{sha[:4]}"
    shutil.copytree(REPO / "examples" / "jaffle_shop", src,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(src)  # the example's sluice.yaml into config.yaml
    config = (src / "config.yaml").read_text() + extra
    (src / "config.yaml").write_text(config)
    bot.forge.commit_folder(sha, src, parents=parents, branch=branch)
    return src


def _tag_push(tag: str, sha: str) -> dict[str, Any]:
    payload = load_case("gitlab/tag_push.json")
    payload["project"]["path_with_namespace"] = PROJECT
    payload.update(ref=f"refs/tags/{tag}", checkout_sha=sha)
    return payload


def test_a_tag_promotes_only_when_it_matches_and_is_on_the_prod_branch(
    bot: Bot, tmp_path: Path
) -> None:
    # The prod branch says `on: tag` (what a tagged commit says of itself does not count).
    src = _commit(bot, tmp_path, B, branch="main")
    bot.deliver_tag(_tag_push("release-1", B))  # does not match v*
    bot.deliver_tag(_tag_push("v0.9", A))  # A is not on main
    assert bot.forge.checks == {} and bot.forge.deployments == []
    deleted = load_case("gitlab/tag_push_delete.drone-go-scm.json")
    assert parse_gitlab("Tag Push Hook", deleted) is None

    # On main and matching; prod already has B's content, so nothing is built (no Spark).
    record_prod(src, bot.url, NOW)
    bot.deliver_tag(_tag_push("v1.0", B))
    deploy = bot.forge.checks[B]["sluice/deploy"]
    assert (deploy.conclusion, deploy.title) == ("success", "Prod already has this state")
    [deployment] = bot.forge.deployments
    assert (deployment.sha, deployment.ref, deployment.statuses[-1][0]) == (B, "main", "success")


# -- /sluice deploy --------------------------------------------------------------------------


def test_deploy_promotes_the_approved_head_then_merges_the_mr(bot: Bot, tmp_path: Path) -> None:
    src = _commit(bot, tmp_path, A, "  gate:\n    required_approvers: {users: [bob]}\n"
                  "  deploy:\n    merge_method: squash\n", parents=(B,))  # fmt: skip
    # main's head B is A's project (prod has it: its Python too); the MR contains it.
    bot.forge.commit_folder(B, src, branch="main")
    bot.forge.roles.update({"carol": "maintain", "dave": "read"})  # Maintainer, Reporter
    record_prod(src, bot.url, NOW)  # nothing left to promote: the path without Spark
    bot.plan(A, "fp1")
    bot.approval("bob", A)
    assert bot.gate(A).conclusion == "success"

    bot.deliver(_note(bot, "dave", "/sluice deploy"), NOTE)  # a Reporter
    assert bot.forge.merges == [] and bot.forge.deployments == []
    withdrawn = _note(bot, "carol", "/sluice deploy")
    # deleted before the job ran: the command is withdrawn
    bot.forge.delete_comment(7, withdrawn["object_attributes"]["id"])
    notes = len(bot.forge.comments[7])
    bot.deliver(withdrawn, NOTE)
    assert bot.forge.merges == [] and bot.forge.deployments == [] and bot.forge.reactions(7) == []
    assert len(bot.forge.comments[7]) == notes
    note = _note(bot, "carol", "/sluice deploy")
    bot.deliver(note, NOTE)
    assert bot.forge.reactions(7) == [(note["object_attributes"]["id"], "+1")]
    deploy = bot.forge.checks[A]["sluice/deploy"]
    assert (deploy.conclusion, deploy.title) == ("success", "Prod already has this state")
    [merge] = bot.forge.merges
    assert (merge.number, merge.sha, merge.method) == (7, A, "squash")
    reply = bot.forge.bot_comments(7)[-1]
    assert reply.startswith("@carol deployed to prod (Prod already has this state) and merged")
    [deployment] = bot.forge.deployments
    assert (deployment.ref, deployment.statuses[-1][0]) == ("main", "success")


def _note(bot: Bot, user: str, body: str) -> dict[str, Any]:
    note_id = bot.forge.add_comment(7, user, body)
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["user"]["username"] = user
    payload["object_attributes"].update(note=body, id=note_id)
    payload["merge_request"]["iid"] = 7
    return payload
