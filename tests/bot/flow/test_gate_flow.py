"""The approval gate, comment commands and tag promotions, driven by real GitHub payloads.

Each test parses a real delivery from tests/fixtures/webhooks with ``parse_github`` and hands
it to the flow, which talks to ``FakeGitHub`` at the wire through PyGithub. None of
these paths runs Spark: plans are recorded in the ledger as a PR build would record them
(the Spark-backed flow is in test_lifecycle.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.entry.app import forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.commands import HELP
from sluice.bot.events.github import parse_github
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.state import open_state
from tests.helpers.cases import realcase, record_prod
from tests.helpers.github_wire import FakeGitHub, tarball

REPO = Path(__file__).resolve().parents[3]
OWNER = "octo/warehouse"
NOW = 1_800_000_000_000
A, B, C = "a" * 40, "b" * 40, "c" * 40
BASE_CONFIG = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"
)


class Bot:
    """A flow on a SQLite state, its ledger, and the fake GitHub it talks to."""

    def __init__(self, root: Path, github: FakeGitHub) -> None:
        self.root, self.github = root, github
        self.url = f"sqlite:///{root / 'state.db'}"
        settings = ServiceSettings(
            webhook_secret="s", github_token="ghp_gateToken", workdir=root / "work",
            database_url=self.url, github_request_interval=0, github_write_interval=0,
        )  # type: ignore[arg-type]  # fmt: skip
        self.deps = make_deps(forge_for=forge_factory(settings), workdir=root / "work",
                          state_url=self.url, clock=lambda: NOW)  # fmt: skip
        self.ledger = Ledger(self.url)

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        parsed = parse_github(event, payload)
        assert parsed is not None, (event, payload.get("action"))
        dispatch.handle(self.deps, parsed)

    def plan(
        self, number: int, sha: str, fingerprint: str, owners: dict[str, str | None] | None = None
    ) -> None:
        """Record the plan a build of ``sha`` would have recorded."""
        owners = owners or {}
        items = tuple((name, f"{fingerprint}-{name}") for name in sorted(owners) or ["s.m"])
        review = PlanReview(fingerprint, items, owners, owners)
        self.ledger.record_plan(f"github:{OWNER}", number, sha, review, 1)

    def approval(self, sha: str) -> dict[str, Any]:
        return self.github.checks_on(sha)["sluice/approval"]


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = FakeGitHub(repo=OWNER)
    github.files[("main", "config.yaml")] = BASE_CONFIG
    github.permissions.update({"alice": "write", "bob": "write", "carol": "admin", "dave": "read"})
    github.add_pull(7, A, author="alice")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        made = Bot(tmp_path, github)
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


def _click(user: str, head: str = A, identifier: str = "approve") -> dict[str, Any]:
    payload = _payload("github/check_run/requested_action.payload.json", **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head,
        "requested_action.identifier": identifier, "sender.login": user,
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
    bot.github.add_review(7, "alice", "APPROVED", A)
    bot.deliver("pull_request_review", _review("alice", "approved", A))
    check = bot.approval(A)
    assert check["conclusion"] == "failure"
    assert check["output"]["title"] == "1 more approval needed"
    summary = check["output"]["summary"]
    assert "1 more approval needed from @bob and @carol." in summary
    assert "@alice's own approval does not count (PR author)." in summary
    assert [a["identifier"] for a in check["actions"]] == ["approve"]
    # The settings were read from the base branch, not from the PR's head.
    assert any(
        "contents/config.yaml" in url and "ref=main" in url for _, url in bot.github.requests
    )

    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check["conclusion"] == "success" and check["output"]["title"] == "Approved"
    assert check["actions"] == []
    # The approved plan's models are recorded for promotions.
    assert bot.ledger.unapproved(f"github:{OWNER}", [("s.m", "fp1-s.m")]) == []
    [comment] = bot.github.comments_on(7)
    assert "**Approval:** ✅ Approved. Approved by @bob (1 of 1 required)." in comment["body"]


def test_a_push_that_changes_the_plan_makes_approvals_stale(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    assert bot.approval(A)["conclusion"] == "success"
    bot.github.pulls[7]["head_sha"] = B
    bot.plan(7, B, "fp2")  # the new head plans differently
    bot.deliver("pull_request_review", _review("carol", "commented", B, head=B))
    check = bot.approval(B)
    assert check["conclusion"] == "failure"
    assert (
        check["output"]["title"]
        == "1 more approval needed (the plan changed since the last approval)"
    )
    assert (
        f"@bob approved `{A[:7]}`, whose plan differs from the current plan"
        in check["output"]["summary"]
    )
    assert bot.ledger.unapproved(f"github:{OWNER}", [("s.m", "fp2-s.m")]) == [("s.m", "fp2-s.m")]


def test_a_push_that_keeps_the_plan_keeps_approvals(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.github.pulls[7]["head_sha"] = B
    bot.plan(7, B, "fp1")  # e.g. a README edit: the same plan
    bot.deliver("pull_request_review", _review("bob", "approved", A, head=B))
    assert bot.approval(B)["conclusion"] == "success"


def test_changes_requested_and_dismissals_withdraw_an_approval(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.github.add_review(7, "bob", "CHANGES_REQUESTED", A)
    bot.deliver("pull_request_review", _review("bob", "changes_requested", A))
    assert bot.approval(A)["conclusion"] == "failure"
    bot.github.add_review(7, "carol", "APPROVED", A)
    bot.deliver("pull_request_review", _review("carol", "approved", A))
    assert bot.approval(A)["conclusion"] == "success"
    bot.github.reviews[-1]["state"] = "DISMISSED"  # GitHub rewrites a dismissed review
    bot.deliver("pull_request_review", _review("carol", "dismissed", A, action="dismissed"))
    assert bot.approval(A)["conclusion"] == "failure"


def test_approving_from_the_check_run_follows_the_same_rules(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.deliver("check_run", _click("alice"))  # the author
    bot.deliver("check_run", _click("dave"))  # not an approver
    assert bot.approval(A)["conclusion"] == "failure"
    bot.deliver("check_run", _click("carol", identifier="something-else"))
    assert bot.approval(A)["conclusion"] == "failure"
    bot.deliver("check_run", _click("carol"))
    check = bot.approval(A)
    assert check["conclusion"] == "success", check["output"]["summary"]
    assert "Approved by @carol" in check["output"]["summary"]


def test_team_members_and_model_owners(bot: Bot) -> None:
    bot.github.files[("main", "config.yaml")] = (
        "sluice:\n  gate:\n    required_approvers: {teams: [octo/data]}\n"
        "    owners_must_approve: direct\n"
    )
    bot.github.teams.update({"octo/data": ["erin"], "octo/finance": ["frank"]})
    bot.github.permissions.update({"erin": "write", "frank": "write"})
    bot.plan(7, A, "fp1", owners={"s.orders": "octo/finance", "s.customers": None})
    bot.github.add_review(7, "erin", "APPROVED", A)
    bot.deliver("pull_request_review", _review("erin", "approved", A))
    check = bot.approval(A)
    assert check["conclusion"] == "failure"
    assert "Owners still to approve: `s.orders` (@octo/finance)." in check["output"]["summary"]
    bot.github.add_review(7, "frank", "APPROVED", A)
    bot.deliver("pull_request_review", _review("frank", "approved", A))
    assert bot.approval(A)["conclusion"] == "success"


def test_a_review_before_the_commit_is_planned_waits_for_the_plan(bot: Bot) -> None:
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check["status"] == "in_progress" and check["output"]["title"] == "Waiting for the plan"


def test_invalid_gate_settings_on_the_base_branch_fail_the_check_with_the_line(bot: Bot) -> None:
    bot.github.files[("main", "config.yaml")] = (
        "sluice:\n  gate:\n    required_approvers:\n      usrs: [bob]\n"
    )
    bot.plan(7, A, "fp1")
    bot.deliver("pull_request_review", _review("bob", "approved", A))
    check = bot.approval(A)
    assert check["conclusion"] == "failure" and check["output"]["title"] == "Invalid gate settings"
    assert "config.yaml:4" in check["output"]["summary"]
    assert "sluice.gate.required_approvers.usrs" in check["output"]["summary"]


# -- commands ------------------------------------------------------------------------------


def test_a_user_without_write_permission_is_told_why_and_nothing_runs(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.deliver("issue_comment", _comment("dave", "/sluice deploy"))
    reply = bot.github.comments_on(7)[-1]["body"]
    assert reply.startswith("@dave only users with write permission")
    assert "(your permission: read)" in reply
    assert bot.github.reactions == [] and bot.github.deployments == []
    bot.deliver("issue_comment", _comment("mallory", "/sluice plan"))  # not a collaborator
    assert "(your permission: none)" in bot.github.comments_on(7)[-1]["body"]


def test_help_unknown_and_bad_commands_get_answers(bot: Bot) -> None:
    bot.deliver("issue_comment", _comment("bob", "/sluice help", comment_id=901))
    assert bot.github.reactions == [{"comment": 901, "content": "+1"}]
    assert bot.github.comments_on(7)[-1]["body"] == HELP
    bot.deliver("issue_comment", _comment("bob", "/sluice frobnicate", comment_id=902))
    assert bot.github.comments_on(7)[-1]["body"].startswith(
        "`/sluice frobnicate` is not a Sluice command."
    )
    bot.deliver("issue_comment", _comment("bob", "/sluice plan now", comment_id=903))
    reply = bot.github.comments_on(7)[-1]["body"]
    assert "`/sluice plan` takes no arguments" in reply and "Usage: `/sluice plan`" in reply
    assert bot.github.reactions[-1] == {"comment": 903, "content": "confused"}


def test_edited_comments_and_comments_without_commands_do_nothing(bot: Bot) -> None:
    before = len(bot.github.requests)
    bot.deliver("issue_comment", _comment("bob", "/sluice deploy", action="edited"))
    bot.deliver("issue_comment", _comment("bob", "Looks good to me"))
    assert [r for r in bot.github.requests[before:] if r[0] != "GET"] == []


def test_deploy_refuses_until_the_gate_passes(bot: Bot) -> None:
    bot.plan(7, A, "fp1")
    bot.deliver("issue_comment", _comment("bob", "/sluice deploy"))
    reply = bot.github.comments_on(7)[-1]["body"]
    assert reply.startswith("@bob not deployed: the `sluice/approval` gate has not passed.")
    assert bot.github.deployments == [] and bot.github.merges == []


# -- tags and merges -----------------------------------------------------------------------


def _project_commit(bot: Bot, sha: str, config_extra: str, *, on_main: bool = False) -> None:
    """A commit of the example project with ``config_extra`` in its config.yaml; with
    ``on_main`` the prod branch has that config.yaml too (where the settings are read)."""
    src = bot.root / f"tree-{sha[:4]}"
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", src, ignore=shutil.ignore_patterns(".sluice")
    )
    config = (src / "config.yaml").read_text() + config_extra
    (src / "config.yaml").write_text(config)
    bot.github.trees[sha] = tarball(src, f"octo-warehouse-{sha[:7]}")
    bot.github.files[(sha, "config.yaml")] = config
    if on_main:
        bot.github.files[("main", "config.yaml")] = config


TAG_DEPLOY = """  gate:
    required_approvers: {users: [bob]}
  deploy:
    on: tag
    tag_pattern: "v*"
"""


def test_tags_promote_only_when_they_match_and_are_on_the_prod_branch(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    bot.github.refs["main"] = C
    tag = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/release-1", after=C)
    bot.deliver("push", tag)  # does not match v*
    assert "sluice/deploy" not in bot.github.checks_on(C)
    off_branch = _payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v1.0", after=B)
    _project_commit(bot, B, TAG_DEPLOY)
    bot.deliver("push", off_branch)  # B is not on main
    assert "sluice/deploy" not in bot.github.checks_on(B)
    assert bot.github.deployments == []

    # On main and matching, but nothing in it was approved: prod is not touched.
    bot.github.branch_commits["main"] = {C}
    bot.github.add_tag("v1.0", C, annotated=True)
    release = _payload("github/release/published.payload.json", **{"release.tag_name": "v1.0"})
    bot.deliver("release", release)
    deploy = bot.github.checks_on(C)["sluice/deploy"]
    assert deploy["conclusion"] == "failure"
    assert "unapproved change(s): prod is unchanged" in deploy["output"]["title"]
    assert "- `jaffle.orders` (change)" in deploy["output"]["summary"]
    assert [s["state"] for s in bot.github.deployments[0]["statuses"]] == ["in_progress", "failure"]


def test_a_deleted_tag_is_not_an_event() -> None:
    deleted = _payload("github/push/payload.json")
    assert deleted["deleted"] is True
    assert parse_github("push", deleted) is None


def test_a_merge_into_another_branch_or_with_on_tag_does_not_promote(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    merged = _payload("github/pull_request/woodpecker__HookPullRequestMerged.json", **{
        "pull_request.number": 7, "number": 7, "pull_request.merge_commit_sha": C,
        "pull_request.head.sha": A, "pull_request.base.ref": "main",
        "pull_request.user.login": "alice",
    })  # fmt: skip
    bot.deliver("pull_request", merged)
    assert "sluice/deploy" not in bot.github.checks_on(C)
    assert bot.ledger.waiting(f"github:{OWNER}") == {7: []}
    body = bot.github.comments_on(7)[-1]["body"]
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
    _project_commit(bot, A, DEPLOY_MERGE)
    bot.github.files[("main", "config.yaml")] = bot.github.files[(A, "config.yaml")]
    bot.github.refs["main"] = C
    bot.github.branch_commits[A] = {C}  # the PR contains main's head
    _prod_at(bot, A)  # nothing left to promote: the path without Spark
    bot.plan(7, A, "fp1")
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("issue_comment", _comment("carol", "/sluice deploy", comment_id=950))
    assert bot.github.reactions == [{"comment": 950, "content": "+1"}]
    deploy = bot.github.checks_on(A)["sluice/deploy"]
    assert (
        deploy["conclusion"] == "success"
        and deploy["output"]["title"] == "Prod already has this state"
    )
    [merge] = bot.github.merges
    assert merge["number"] == 7 and merge["method"] == "squash" and merge["sha"] == A
    reply = bot.github.comments_on(7)[-1]["body"]
    assert reply.startswith("@carol deployed to prod (Prod already has this state) and merged as `")
    assert [s["state"] for s in bot.github.deployments[0]["statuses"]] == ["in_progress", "success"]


def test_deploy_refuses_a_pr_behind_the_prod_branch(bot: Bot) -> None:
    bot.github.refs["main"] = C  # main moved on; the PR's head does not contain C
    bot.plan(7, A, "fp1")
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("issue_comment", _comment("bob", "/sluice deploy"))
    reply = bot.github.comments_on(7)[-1]["body"]
    assert "`main` has commits this pull request does not have" in reply
    assert bot.github.deployments == [] and bot.github.merges == []


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
    reply = bot.github.comments_on(7)[-1]["body"]
    assert reply.startswith("@bob Sluice could not run your command") and "Spark died" in reply
    merged = parse_github("pull_request", _payload(
        "github/pull_request/woodpecker__HookPullRequestMerged.json",
        **{"pull_request.number": 7, "number": 7, "pull_request.merge_commit_sha": C},
    ))  # fmt: skip
    assert merged is not None
    dispatch.give_up(bot.deps, merged, "the state database went away")
    deploy = bot.github.checks_on(C)["sluice/deploy"]
    assert deploy["conclusion"] == "failure" and "went away" in deploy["output"]["summary"]


def test_a_matching_tag_promotes_and_retires_the_merged_prs_it_carries(bot: Bot) -> None:
    _project_commit(bot, C, TAG_DEPLOY, on_main=True)
    bot.github.refs["main"] = C
    bot.github.branch_commits["main"] = {C}
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
    deploy = bot.github.checks_on(C)["sluice/deploy"]
    assert deploy["conclusion"] == "success", deploy["output"]
    assert deploy["output"]["title"] == "Prod already has this state"
    assert bot.github.deployments[0]["ref"] == C
    assert bot.ledger.waiting(f"github:{OWNER}") == {}
    store = open_state(bot.url)
    try:
        record = store.get_environment("pr_7")
        assert record is not None and record.invalidated
    finally:
        store.close()
    assert (
        "`pr_7` is removed (promoted to prod by tag `v2.0`)"
        in bot.github.comments_on(7)[-1]["body"]
    )
