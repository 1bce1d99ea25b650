"""The approval gate, comment commands and tag promotions, driven by real GitHub payloads.

Each test parses a real delivery from tests/fixtures/webhooks with ``parse_github`` and hands
it to the flow, whose forge is a :class:`~sluice.bot.forge.memory.MemoryForge` standing in
for GitHub (what PyGithub sends is tested in tests/bot/forge/test_github.py). None of
these paths runs Spark: plans are recorded in the ledger as a PR build would record them
(the Spark-backed flow is in test_lifecycle.py).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.commands import HELP
from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import pr_key
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.intake.pin import pin_event
from sluice.core import workflow
from sluice.core.errors import ExecutionError
from sluice.core.model.loader import load_project
from sluice.core.spark.submit import Runner
from sluice.core.state import open_state
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase, record_prod
from tests.helpers.fold_settings import fold_settings

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
NOW = 1_800_000_000_000
A, B, C = "a" * 40, "b" * 40, "c" * 40
ROOT = "0" * 40  # main's first commit
BASE_CONFIG = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
)


class Bot:
    """A flow on a SQLite state, its ledger, and the in-memory GitHub it talks to."""

    def __init__(self, root: Path, forge: MemoryForge) -> None:
        self.root, self.forge = root, forge
        self.url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: forge, workdir=root / "work",
                              state_url=self.url, clock=lambda: NOW)  # fmt: skip
        self.ledger = Ledger(self.url)

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        parsed = parse_github(event, accounts.github(payload, self.forge.account_id))
        assert parsed is not None, (event, payload.get("action"))
        parsed = pin_event(parsed, self.deps.forge_for)  # as the service's intake does
        assert parsed is not None, (event, "a tag that names no commit")
        dispatch.handle(self.deps, parsed)

    def plan(
        self,
        number: int,
        sha: str,
        fingerprint: str,
        owners: dict[str, str | None] | None = None,
        at: int = 1,
    ) -> None:
        """Record the plan a build of ``sha`` would have recorded (at ``at``, epoch ms)."""
        owners = owners or {}
        items = tuple((name, f"{fingerprint}-{name}") for name in sorted(owners) or ["s.m"])
        review = PlanReview(fingerprint, items, owners, owners)
        self.ledger.record_plan(f"github:{OWNER}", number, sha, review, at)

    def approval(self, sha: str) -> Check:
        return self.forge.checks[sha]["sluice/approval"]

    def run(self, sha: str = A) -> int:
        """The id of Sluice's ``sluice/approval`` run on ``sha``, the check set first if
        Sluice has not set it yet (a button is clicked on a check Sluice showed)."""
        made = self.forge.run_id(sha, "sluice/approval")
        if made is None:
            self.deliver("check_run", _payload("github/check_run/rerequested.payload.json", **{
                "check_run.name": "sluice/approval", "check_run.head_sha": sha,
                "check_run.pull_requests": [{"number": 7, "id": 7}],
            }))  # fmt: skip
            made = self.forge.run_id(sha, "sluice/approval")
        assert made is not None
        return made

    def say(
        self, user: str, body: str, *, action: str = "created", comment_id: int | None = None
    ) -> int:
        """``user`` writes ``body`` on PR 7 (``comment_id``: that id), then its webhook."""
        made = self.forge.add_comment(7, user, body, comment_id=comment_id)
        self.deliver("issue_comment", _comment(user, body, action=action, comment_id=made))
        return made

    def replies(self) -> list[str]:
        """The bot's comments on PR 7, oldest first."""
        return self.forge.bot_comments(7)

    def set_main_config(self, config: str) -> None:
        """A new commit on ``main`` whose config.yaml is ``config``."""
        self.forge.write_file("main", "config.yaml", config)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    forge = MemoryForge(OWNER, name="github")
    forge.repositories[CASE_REPOSITORY_ID] = forge.repo  # the id the bodies carry
    forge.commit(ROOT, {"config.yaml": BASE_CONFIG}, branch="main")
    forge.commit(A, {"config.yaml": BASE_CONFIG}, parents=(ROOT,))
    forge.roles.update({"alice": "write", "bob": "write", "carol": "admin", "dave": "read"})
    forge.open_pull(7, head_sha=A, base="main", author="alice")
    made = Bot(tmp_path, forge)
    yield made
    made.deps.close()
    made.ledger.close()


def _payload(case: str, **changes: Any) -> dict[str, Any]:
    return realcase(case, OWNER, **changes)


def _review(
    user: str, state: str, commit: str, *, head: str = A, action: str = "submitted"
) -> dict[str, Any]:
    case = f"github/pull_request_review/{'dismissed' if action == 'dismissed' else 'submitted'}.payload.json"
    return _payload(case, action=action, **{
        "pull_request.number": 7, "pull_request.head.sha": head, "review.user.login": user,
        "review.state": state.lower(), "review.commit_id": commit,
    })  # fmt: skip


def _click(user: str, run_id: int, head: str = A, identifier: str = "approve") -> dict[str, Any]:
    """``user`` clicks ``identifier`` on check run ``run_id`` (:meth:`Bot.run`: Sluice's)."""
    payload = _payload("github/check_run/requested_action.payload.json", **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head,
        "check_run.id": run_id, "requested_action.identifier": identifier,
        "sender.login": user,
    })  # fmt: skip
    payload["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    return payload


def _comment(
    user: str, body: str, *, action: str = "created", comment_id: int = 900
) -> dict[str, Any]:
    return _payload("github/issue_comment/drone-go-scm__comment.json", action=action, **{
        "issue.number": 7, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip


# -- the gate ------------------------------------------------------------------------------


def test_the_gate_waits_for_an_eligible_approver_and_never_counts_the_author(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "alice", "APPROVED", A)
    bot.deliver("pull_request_review", _review("alice", "approved", A))
    check = bot.approval(A)
    assert check.conclusion == "failure"
    assert check.title == "1 more approval needed"
    # The gate's facts reach the comment's verdict: whom it waits for.
    _body, sections = bot.ledger.comment(f"github:{OWNER}", 7)
    gate = json.loads(sections["facts.gate"])
    assert gate["ok"] is False and gate["missing"] == 1 and gate["eligible"] == ["bob", "carol"]
    summary = check.summary
    assert "1 more approval needed from @bob and @carol." in summary
    assert "@alice's own approval does not count (PR author)." in summary
    # The button names the plan it approves (the gate's plan at this head: fp1).
    assert [a.identifier for a in check.actions] == ["approve:fp1"]
    # The settings were read from the base branch, not from the PR's head.
    read = [args for name, args in bot.forge.calls if name == "read_file"]
    assert ("main", "config.yaml") in read and all(ref != A for ref, _ in read)

    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check.conclusion == "success" and check.title == "Approved"
    assert check.actions == ()
    # The approved plan's models are recorded for promotions.
    assert bot.ledger.unapproved(f"github:{OWNER}", [("s.m", "fp1-s.m")]) == []
    [comment] = bot.replies()
    assert "**Approval:** ✅ Approved. Approved by @bob (1 of 1 required)." in comment
    assert json.loads(bot.ledger.comment(f"github:{OWNER}", 7)[1]["facts.gate"])["ok"] is True


def test_a_push_that_changes_the_plan_makes_approvals_stale(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    assert bot.approval(A).conclusion == "success"
    bot.forge.push(7, B)
    bot.plan(7, B, "fp2")  # the new head plans differently
    bot.deliver("pull_request_review", _review("carol", "commented", B, head=B))
    check = bot.approval(B)
    assert check.conclusion == "failure"
    assert check.title == "1 more approval needed (the plan changed since the last approval)"
    assert f"@bob approved `{A[:7]}`, whose plan differs from the current plan" in check.summary
    assert bot.ledger.unapproved(f"github:{OWNER}", [("s.m", "fp2-s.m")]) == [("s.m", "fp2-s.m")]


def test_a_push_that_keeps_the_plan_keeps_approvals(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.push(7, B)
    bot.plan(7, B, "fp1")  # e.g. a README edit: the same plan
    bot.deliver("pull_request_review", _review("bob", "approved", A, head=B))
    assert bot.approval(B).conclusion == "success"


def test_changes_requested_and_dismissals_withdraw_an_approval(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.forge.add_review(7, "bob", "CHANGES_REQUESTED", A)
    bot.deliver("pull_request_review", _review("bob", "changes_requested", A))
    assert bot.approval(A).conclusion == "failure"
    carols = bot.forge.add_review(7, "carol", "APPROVED", A)
    bot.deliver("pull_request_review", _review("carol", "approved", A))
    assert bot.approval(A).conclusion == "success"
    items = [("s.m", "fp1-s.m")]
    assert bot.ledger.unapproved(f"github:{OWNER}", items) == []
    bot.forge.dismiss_review(7, carols.id)  # GitHub rewrites a dismissed review
    bot.deliver("pull_request_review", _review("carol", "dismissed", A, action="dismissed"))
    assert bot.approval(A).conclusion == "failure"
    # ... and what the gate had passed is withdrawn: an admin merging past the check now
    # finds the plan's items unapproved at promotion (red team: approvals outlived them).
    assert bot.ledger.unapproved(f"github:{OWNER}", items) == items


def test_approving_from_the_check_run_follows_the_same_rules(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.deliver("check_run", _click("alice", bot.run()))  # the author
    bot.deliver("check_run", _click("dave", bot.run()))  # not an approver
    assert bot.approval(A).conclusion == "failure"
    bot.deliver("check_run", _click("carol", bot.run(), identifier="something-else"))
    assert bot.approval(A).conclusion == "failure"
    bot.deliver("check_run", _click("carol", bot.run()))
    check = bot.approval(A)
    assert check.conclusion == "success", check.summary
    assert "Approved by @carol" in check.summary


def test_a_check_run_naming_two_prs_acts_only_for_the_one_its_job_is_queued_under(
    bot: Bot,
) -> None:
    # PR 8 has PR 7's head: GitHub names both on the check's events, and the job is
    # queued under PR 7 only (neutral.pr_key), so it must not approve, plan or build PR 8
    # beside PR 8's own jobs.
    bot.forge.open_pull(8, head_sha=A, base="main", author="alice")
    bot.plan(7, A, "fp1")
    payload = _click("carol", bot.run())
    payload["check_run"]["pull_requests"] = [{"number": 7, "id": 7}, {"number": 8, "id": 8}]
    event = parse_github("check_run", payload)
    assert event is not None and pr_key(event) == f"github:{OWNER}#7"
    bot.deliver("check_run", payload)
    assert bot.approval(A).conclusion == "success"
    assert [(c.user, c.sha) for c in bot.ledger.clicks(f"github:{OWNER}", 7)] == [("carol", A)]
    assert bot.ledger.clicks(f"github:{OWNER}", 8) == [], "PR 8 was acted for"
    assert ("pull_request", (8,)) not in bot.forge.calls


def test_an_approval_counts_only_for_the_plan_its_commit_had_when_it_was_given(bot: Bot) -> None:
    repo = f"github:{OWNER}"
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)  # submitted 2026-01-01, after fp1
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    assert bot.approval(A).conclusion == "success"
    assert bot.ledger.approved_by_pr(repo, 7) == 1
    # Prod (or its settings) moved and `/sluice plan` made A's plan again, differently:
    # bob approved fp1, not fp2, although A is still the head.
    bot.plan(7, A, "fp2", at=NOW)
    # carol clicks the button of the page she had open, which showed fp1.
    bot.deliver("check_run", _click("carol", bot.run(), identifier="approve:fp1"))
    check = bot.approval(A)
    assert check.conclusion == "failure", check.summary
    assert f"@bob approved `{A[:7]}` before it had the plan it has now" in check.summary
    assert f"@carol approved `{A[:7]}`, whose plan differs from the current plan" in check.summary
    assert bot.ledger.approved_by_pr(repo, 7) == 0, "a merge past the check promotes nothing"
    [button] = check.actions
    assert button.identifier == "approve:fp2"
    bot.deliver("check_run", _click("carol", bot.run(), identifier=button.identifier))
    check = bot.approval(A)
    assert check.conclusion == "success", check.summary
    assert "Approved by @carol" in check.summary
    # The same plan made once more keeps its approvals (the replan time stays).
    bot.plan(7, A, "fp2", at=NOW + 5)
    # A reader's click: it refreshes the check, approving nothing.
    bot.deliver("check_run", _click("dave", bot.run(), identifier="approve:fp2"))
    assert bot.approval(A).conclusion == "success"


def test_team_members_and_model_owners(bot: Bot) -> None:
    bot.set_main_config(
        "sluice:\n  gate:\n    required_approvers: {teams: [octo/data]}\n"
        "    owners_must_approve: direct\n"
    )
    bot.forge.teams.update({"octo/data": frozenset({"erin"}), "octo/finance": frozenset({"frank"})})
    bot.forge.roles.update({"erin": "write", "frank": "write"})
    bot.plan(7, A, "fp1", owners={"s.orders": "octo/finance", "s.customers": None})
    bot.forge.add_review(7, "erin", "APPROVED", A)
    bot.deliver("pull_request_review", _review("erin", "approved", A))
    check = bot.approval(A)
    assert check.conclusion == "failure"
    assert "Owners still to approve: `s.orders` (@octo/finance)." in check.summary
    bot.forge.add_review(7, "frank", "APPROVED", A)
    bot.deliver("pull_request_review", _review("frank", "approved", A))
    assert bot.approval(A).conclusion == "success"


def test_a_review_before_the_commit_is_planned_waits_for_the_plan(bot: Bot) -> None:
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check.status == "in_progress" and check.title == "Waiting for the plan"


def test_invalid_gate_settings_on_the_base_branch_fail_the_check_with_the_line(bot: Bot) -> None:
    bot.set_main_config("sluice:\n  gate:\n    required_approvers:\n      usrs: [bob]\n")
    bot.plan(7, A, "fp1")
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check.conclusion == "failure" and check.title == "Invalid gate settings"
    assert "config.yaml:4" in check.summary
    assert "sluice.gate.required_approvers.usrs" in check.summary


# -- commands ------------------------------------------------------------------------------


def test_a_user_without_write_permission_is_told_why_and_nothing_runs(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.say("dave", "/sluice deploy")
    reply = bot.replies()[-1]
    assert reply.startswith("@dave only users with write permission")
    assert "(your permission: read)" in reply
    assert bot.forge.reactions(7) == [] and bot.forge.deployments == []
    bot.say("mallory", "/sluice plan")  # not a collaborator
    assert "(your permission: none)" in bot.replies()[-1]


def test_help_unknown_and_bad_commands_get_answers(bot: Bot) -> None:
    bot.say("bob", "/sluice help", comment_id=901)
    assert bot.forge.reactions(7) == [(901, "+1")]
    assert bot.replies()[-1] == HELP
    bot.say("bob", "/sluice frobnicate", comment_id=902)
    assert bot.replies()[-1].startswith("`/sluice frobnicate` is not a Sluice command.")
    bot.say("bob", "/sluice plan now", comment_id=903)
    reply = bot.replies()[-1]
    assert "`/sluice plan` takes no arguments" in reply and "Usage: `/sluice plan`" in reply
    assert bot.forge.reactions(7)[-1] == (903, "confused")


def test_edited_comments_and_comments_without_commands_do_nothing(bot: Bot) -> None:
    before = len(bot.forge.calls)
    bot.say("bob", "/sluice deploy", action="edited")
    bot.say("bob", "Looks good to me")
    assert bot.forge.writes(before) == []


def test_deploy_refuses_until_the_gate_passes(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.say("bob", "/sluice deploy")
    reply = bot.replies()[-1]
    assert reply.startswith("@bob not deployed: the `sluice/approval` gate has not passed.")
    assert bot.forge.deployments == [] and bot.forge.merges == []


# -- tags and merges -----------------------------------------------------------------------


def _project_commit(
    bot: Bot, sha: str, config_extra: str, *, on_main: bool = False, parents: tuple[str, ...] = ()
) -> str:
    """A commit of the example project with ``config_extra`` in its config.yaml (its text
    returned); with ``on_main`` the prod branch moves to it (where the settings are read)."""
    src = bot.root / f"tree-{sha[:4]}"
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", src, ignore=shutil.ignore_patterns(".sluice")
    )
    fold_settings(src)  # the example's sluice.yaml into config.yaml
    config = (src / "config.yaml").read_text() + config_extra
    (src / "config.yaml").write_text(config)
    bot.forge.commit_folder(sha, src, parents=parents, branch="main" if on_main else None)
    return config


TAG_DEPLOY = """  gate:
    required_approvers: {users: [bob]}
  deploy:
    on: tag
    tag_pattern: "v*"
"""


def test_tags_promote_only_when_they_match_and_are_on_the_prod_branch(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    tag = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/release-1", after=C)
    bot.deliver("push", tag)  # does not match v*
    assert "sluice/deploy" not in bot.forge.checks.get(C, {})
    off_branch = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v1.0", after=B)
    _project_commit(bot, B, TAG_DEPLOY)
    bot.deliver("push", off_branch)  # B is not on main
    assert "sluice/deploy" not in bot.forge.checks.get(B, {})
    assert bot.forge.deployments == []

    # On main and matching, but nothing in it was approved: prod is not touched.
    bot.forge.tag("v1.0", C)
    release = _payload("github/release/published.payload.json", **{"release.tag_name": "v1.0"})
    bot.deliver("release", release)
    deploy = bot.forge.checks[C]["sluice/deploy"]
    assert deploy.conclusion == "failure"
    assert "unapproved changes: prod is unchanged" in deploy.title
    assert "- `jaffle.orders` (change)" in deploy.summary
    assert [state for state, _ in bot.forge.deployments[0].statuses] == ["in_progress", "failure"]


def test_a_deleted_tag_is_not_an_event() -> None:
    deleted = _payload("github/push/payload.json")
    assert deleted["deleted"] is True
    assert parse_github("push", deleted) is None


def _merged_into_main(number: int, *, head: str, merge: str) -> dict[str, Any]:
    """A real "pull request merged" delivery: PR ``number`` of alice's, ``head`` merged
    into main as ``merge``."""
    return _payload("github/pull_request/woodpecker__HookPullRequestMerged.json", **{
        "pull_request.number": number, "number": number, "pull_request.merge_commit_sha": merge,
        "pull_request.head.sha": head, "pull_request.base.ref": "main",
        "pull_request.user.login": "alice",
    })  # fmt: skip


def test_a_merge_into_another_branch_or_with_on_tag_does_not_promote(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    bot.deliver("pull_request", _merged_into_main(7, head=A, merge=C))
    assert "sluice/deploy" not in bot.forge.checks.get(C, {})
    assert bot.ledger.waiting(f"github:{OWNER}") == {7: []}
    body = bot.replies()[-1]
    assert "prod is promoted by the next tag matching `v*` on `main`" in body


DEPLOY_MERGE = """  gate:
    required_approvers: {users: [bob]}
  deploy:
    merge_method: squash
"""


def _prod_at(bot: Bot, sha: str) -> None:
    """Record prod as the project at ``sha`` (its data taken as built: no Spark)."""
    record_prod(bot.root / f"tree-{sha[:4]}", bot.url, NOW)


def test_deploy_promotes_the_approved_head_then_merges(bot: Bot) -> None:
    _project_commit(bot, A, DEPLOY_MERGE, parents=(C,))  # the PR contains main's head
    # main's head C is A's project (prod has it: its Python too).
    bot.forge.commit_folder(C, bot.root / f"tree-{A[:4]}", branch="main")
    _prod_at(bot, A)  # nothing left to promote: the path without Spark
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.say("carol", "/sluice deploy", comment_id=950)
    assert bot.forge.reactions(7) == [(950, "+1")]
    deploy = bot.forge.checks[A]["sluice/deploy"]
    assert deploy.conclusion == "success" and deploy.title == "Prod already has this state"
    [merge] = bot.forge.merges
    assert merge.number == 7 and merge.method == "squash" and merge.sha == A
    reply = bot.replies()[-1]
    assert reply.startswith("@carol deployed to prod (Prod already has this state) and merged as `")
    assert [state for state, _ in bot.forge.deployments[0].statuses] == ["in_progress", "success"]


def test_deploy_refuses_a_pr_behind_the_prod_branch(bot: Bot) -> None:
    # main moved on; the PR's head does not contain C
    bot.forge.commit(C, {"config.yaml": BASE_CONFIG}, branch="main")
    bot.plan(7, A, "fp1")
    bot.forge.add_review(7, "bob", "APPROVED", A)
    bot.say("bob", "/sluice deploy")
    reply = bot.replies()[-1]
    assert "`main` has commits this pull request does not have" in reply
    assert bot.forge.deployments == [] and bot.forge.merges == []


def test_merges_never_supersede_each_other_but_new_heads_do() -> None:
    from sluice.bot.events.neutral import pr_key, supersedes

    merged = parse_github(
        "pull_request", _payload("github/pull_request/woodpecker__HookPullRequestMerged.json")
    )
    opened = parse_github("pull_request", _payload("github/pull_request/opened.payload.json"))
    deploy = parse_github("issue_comment", _comment("bob", "/sluice deploy"))
    assert merged is not None and opened is not None and deploy is not None
    assert not supersedes(merged) and supersedes(opened)
    # Everything that may change prod shares the repository's prod key.
    assert pr_key(merged) == pr_key(deploy) == f"github:{OWNER}:prod"
    assert pr_key(opened) == f"github:{OWNER}#{opened.number}"  # type: ignore[union-attr]


def test_a_job_that_fails_for_good_is_reported_where_it_was_asked(bot: Bot) -> None:
    command = parse_github("issue_comment", _comment("bob", "/sluice diff s.m"))
    assert command is not None
    dispatch.give_up(bot.deps, command, "Spark died")
    reply = bot.replies()[-1]
    assert reply.startswith("@bob Sluice could not run your command") and "Spark died" in reply
    merged = parse_github("pull_request", _payload(
        "github/pull_request/woodpecker__HookPullRequestMerged.json",
        **{"pull_request.number": 7, "number": 7, "pull_request.merge_commit_sha": C},
    ))  # fmt: skip
    assert merged is not None
    dispatch.give_up(bot.deps, merged, "the state database went away")
    deploy = bot.forge.checks[C]["sluice/deploy"]
    assert deploy.conclusion == "failure" and "went away" in deploy.summary


def test_a_matching_tag_promotes_and_retires_the_merged_prs_it_carries(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    _prod_at(bot, C)  # prod has C's content: the promotion finds nothing to build
    # PR 7 was merged with `on: tag`: its environment waits for the tag.
    store = open_state(bot.url)
    try:
        project = load_project(bot.root / f"tree-{C[:4]}", use_cache=False)
        plan = workflow.plan_environment(project, store, "pr_7", end=NOW, execution_time=NOW)
        workflow.commit_plan(store, plan, now=NOW)
    finally:
        store.close()
    bot.ledger.merged(f"github:{OWNER}", 7, [], NOW)
    tag = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v2.0", after=C)
    bot.deliver("push", tag)
    deploy = bot.forge.checks[C]["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert deploy.title == "Prod already has this state"
    assert bot.forge.deployments[0].sha == C
    assert bot.ledger.waiting(f"github:{OWNER}") == {}
    store = open_state(bot.url)
    try:
        record = store.get_environment("pr_7")
        assert record is not None and record.invalidated
    finally:
        store.close()
    assert "`pr_7` is removed (promoted to prod by tag `v2.0`)" in bot.replies()[-1]


# -- the backfill budget holds a PR's own build ----------------------------------------------

BUDGET_CONFIG = (
    BASE_CONFIG
    + "    backfill:\n      max_intervals: 30\n      approver: octo/data-leads\n"
    + "  pr:\n    backfill_days: null\n"
)
DAILY = (
    "MODEL (name s.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2026-01-01');\n"
    "SELECT 1 AS n, DATE '2026-01-01' AS ds WHERE ds BETWEEN @start_ds AND @end_ds\n"
)


def test_a_pr_build_over_the_budget_waits_and_only_the_budget_s_approver_lifts_it(
    bot: Bot,
) -> None:
    from sluice.bot.flow import approval

    bot.forge.commit(C, {"config.yaml": BUDGET_CONFIG, "models/daily.sql": DAILY}, branch="main")
    bot.forge.commit(B, {"config.yaml": BUDGET_CONFIG, "models/daily.sql": DAILY}, parents=(C,))
    bot.forge.clock = lambda: NOW  # reviews given after the hold is shown, as on a forge
    bot.forge.teams["octo/data-leads"] = frozenset({"erin", "alice"})
    bot.forge.roles.update({"erin": "write"})
    bot.forge.push(7, B)
    bot.deliver("pull_request", _payload("github/pull_request/opened.payload.json", **{
        "number": 7, "pull_request.number": 7, "pull_request.head.sha": B,
        "pull_request.user.login": "alice", "pull_request.base.ref": "main",
    }))  # fmt: skip
    # 2026-01-01 .. the clock (2027-01-15): a year of days, above the budget of 30.
    checks = bot.forge.checks[B]
    assert checks["sluice/pr-environment"].conclusion == "action_required", checks
    held = checks["sluice/pr-environment"]
    assert held.title == "Waiting for the backfill budget's approval"
    assert "intervals (budget 30)" in held.summary and "@octo/data-leads approves" in held.summary
    assert bot.approval(B).title == "Waiting for the build"
    store = open_state(bot.url)
    try:
        assert store.get_environment("pr_7") is None  # nothing was built
    finally:
        store.close()
    pr = bot.forge.pull_request(7)
    # The author is in the team, but their own approval never counts; bob is a required
    # approver, not the budget's; erin approved an older commit, then the head but later
    # asked for changes.
    bot.forge.add_review(7, "alice", "APPROVED", B)
    bot.forge.add_review(7, "bob", "APPROVED", B)
    bot.forge.add_review(7, "erin", "APPROVED", A)
    assert not approval.budget_approved(Job.start(bot.deps, bot.forge), pr, "octo/data-leads")
    bot.deliver("pull_request_review", _review("bob", "approved", B, head=B))
    assert bot.forge.checks[B]["sluice/pr-environment"].conclusion == "action_required"
    bot.forge.add_review(7, "erin", "APPROVED", B)
    bot.forge.add_review(7, "erin", "CHANGES_REQUESTED", B)
    assert not approval.budget_approved(Job.start(bot.deps, bot.forge), pr, "octo/data-leads")
    bot.forge.add_review(7, "erin", "APPROVED", B)
    assert approval.budget_approved(Job.start(bot.deps, bot.forge), pr, "octo/data-leads")
    # Her approval's webhook releases the build (no Spark here: it fails), an override,
    # recorded before the build starts.
    bot.deps = dataclasses.replace(bot.deps, spark_runner=_no_spark)
    with pytest.raises(ExecutionError, match="no Spark"):
        bot.deliver("pull_request_review", _review("erin", "approved", B, head=B))
    [override] = [r for r in bot.ledger.entries() if r.kind == "override"]
    assert (override.actor, override.ref, override.outcome) == ("erin", "#7", "held build released")
    assert override.detail == f"backfill budget's approver, at {B[:12]}"


def _no_spark(*_args: Any) -> Runner:
    raise ExecutionError("no Spark in this test")


# -- promotion tiers ---------------------------------------------------------------------

TIERS_CONFIG = BASE_CONFIG + (
    "  deploy:\n    environments:\n      - name: staging\n        on: merge\n"
    "      - name: prod\n        on: tag\n        tag_pattern: 'v*'\n"
    "        released_by: [octo/release]\n"
)


def test_a_merge_reaches_staging_and_a_release_tag_by_a_releaser_reaches_prod(bot: Bot) -> None:
    bot.forge.commit(C, {"config.yaml": TIERS_CONFIG, "models/.keep": ""}, branch="main")
    bot.forge.teams["octo/release"] = frozenset({"rita"})
    bot.deliver("pull_request", _merged_into_main(7, head=A, merge=C))
    staging = bot.forge.checks[C]["sluice/deploy-staging"]
    assert staging.conclusion == "success", staging.summary
    assert staging.title == "Promoted to staging by virtual update"
    assert "sluice/deploy" not in bot.forge.checks[C]  # prod waits for its tag
    assert [d.environment for d in bot.forge.deployments] == ["staging"]
    store = open_state(bot.url)
    try:
        record = store.get_environment("staging")
        assert record is not None and record.expiration_ts is None  # a tier never expires
        assert store.get_environment("prod") is None
    finally:
        store.close()
    assert bot.ledger.waiting(f"github:{OWNER}") == {7: []}
    assert "prod is promoted by the next tag matching `v*` on `main`" in bot.replies()[-1]

    # A matching tag on main, pushed by someone who may not release prod: refused.
    tag = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v1.0", after=C)
    tag["sender"]["login"] = "mallory"
    bot.deliver("push", tag)
    refused = bot.forge.checks[C]["sluice/deploy"]
    assert refused.conclusion == "failure"
    assert refused.title == "Tag not promoted: prod is released by @octo/release only"
    assert "@mallory" in refused.summary
    assert [d.environment for d in bot.forge.deployments] == ["staging"]
    audited = [(r.kind, r.actor, r.ref, r.outcome) for r in bot.ledger.entries()]
    assert audited == [
        ("promotion", "sluice", "#7", "promoted"),  # into staging, by the merge
        ("refusal", "mallory", "tag v1.0", "release refused"),
    ]
    # The same tag by a member of the release team: prod is promoted, the PR retired.
    tag = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v1.1", after=C)
    tag["sender"]["login"] = "rita"
    bot.deliver("push", tag)
    deploy = bot.forge.checks[C]["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    assert [d.environment for d in bot.forge.deployments] == ["staging", "prod"]
    assert bot.ledger.waiting(f"github:{OWNER}") == {}
    released = bot.ledger.entries()[-1]
    assert (released.kind, released.actor, released.ref) == ("promotion", "rita", "tag v1.1")
    assert released.detail.startswith(f"prod at {C[:12]}: Promoted")
    store = open_state(bot.url)
    try:
        assert store.get_environment("prod") is not None
    finally:
        store.close()
