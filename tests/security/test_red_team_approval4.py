"""Red team on the approval gate, round 4: attacks on the fixes of round 3 (a fork's owner
a pusher of its PR, a ``synchronize``'s sender the pusher of its head, the approval more a
bot's push asks under a gate of owners only taken from the owners prod records).

Each test is an attack by someone with write access to the repository who is also one of
the required approvers (``bob``), and asserts what a sound gate would do; an open finding
is ``xfail(strict=True)``. The flows are driven as tests/security/test_red_team_approval3.py
drives them (tests/helpers/gate_world.py): real webhook bodies, the in-memory forge, the
ledger on SQLite, plans recorded as a PR build records them (no Spark).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import PullRequestEvent
from sluice.bot.flow.reviewed_plan import PlanReview
from tests.helpers import gate_world as gw
from tests.helpers.cases import load_case
from tests.helpers.gate_world import (
    GATED,
    GITLAB_KEY,
    KEY,
    OWNER,
    OWNERS_ONLY,
    ROOT,
    TEAM_GATED,
    A,
    B,
    Bot,
    C,
    D,
)

ACTIONS = "github-actions[bot]"  # who a workflow's GITHUB_TOKEN pushes and opens as
ROLES = {"alice": "write", "bob": "write", "carol": "admin", "mallory": "read"}
BOBS = PlanReview("fp-bob", (("s.bobs_change", "k-bob"),), {}, {})


def _make(tmp_path: Path, config: str) -> Bot:
    return gw.make_bot(tmp_path, config, ROLES)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = _make(tmp_path, GATED)
    yield made
    made.close()


def _fork_opened(head: str, owner: str, owner_type: str, *, head_ref: str) -> dict[str, Any]:
    """alice opens PR 7 from ``owner``'s fork (GitHub names its owner's type: ``User`` or
    ``Organization``)."""
    payload = gw.pr_event("opened", head, "alice", head_ref=head_ref,
                          head_repo=f"{owner}/warehouse")  # fmt: skip
    payload["pull_request"]["head"]["repo"]["owner"].update(login=owner, type=owner_type)
    return payload


# -- 1. a fork an organization (or a GitLab group) owns: its owner is no person -------------


def test_an_approver_whose_organization_s_fork_another_opened_does_not_approve_it(
    bot: Bot,
) -> None:
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                        fork=True)  # fmt: skip
    bot.deliver("pull_request", _fork_opened(B, "bobs-org", "Organization", head_ref="bobs"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    gw.approve(bot, "carol", B, 42)
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


def test_an_approver_who_pushed_to_another_s_fork_before_she_opened_it_does_not_approve_it(
    bot: Bot,
) -> None:
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                        fork=True)  # fmt: skip
    bot.deliver("pull_request", _fork_opened(B, "alice", "User", head_ref="bobs"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


def test_an_approver_whose_own_fork_another_opened_does_not_approve_it_in_any_case(
    bot: Bot,
) -> None:
    # Defended: a personal fork, its owner's login in another case than the review's.
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                        fork=True)  # fmt: skip
    bot.deliver("pull_request", _fork_opened(B, "BoB", "User", head_ref="bobs"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    assert "@bob pushed to this pull request" in check.summary


# GitLab: a merge request from a fork, delivered as GitLab delivers it.


def _gitlab_bot(tmp_path: Path) -> Bot:
    return gw.make_gitlab_bot(tmp_path, GATED, ROLES)


def _gitlab_fork_opened(head: str, source: str) -> dict[str, Any]:
    """alice opens MR !7 from the project ``source`` (a fork) into main."""
    payload = load_case("gitlab/merge_request_open_fork.json")
    payload["project"]["path_with_namespace"] = OWNER
    payload["user"]["username"] = "alice"
    attrs = payload["object_attributes"]
    attrs.update(iid=7, action="open", source_branch="bobs", target_branch="main",
                 source_project_id=4242, target_project_id=1, updated_at=gw.iso(gw.NOW))  # fmt: skip
    attrs["source"]["path_with_namespace"] = source
    attrs["target"]["path_with_namespace"] = OWNER
    attrs["last_commit"]["id"] = head
    return payload


@pytest.mark.parametrize("source", ["bobs-group/warehouse", "bobs-group/sub/warehouse"])
def test_an_approver_whose_group_s_fork_another_opened_does_not_approve_it(
    tmp_path: Path, source: str
) -> None:
    bot = _gitlab_bot(tmp_path)
    try:
        bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                            fork=True)  # fmt: skip
        gw.gitlab_deliver(bot, _gitlab_fork_opened(B, source))
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    finally:
        bot.close()


def test_an_approver_whose_own_gitlab_fork_another_opened_does_not_approve_it(
    tmp_path: Path,
) -> None:
    # Defended: a fork in bob's own namespace (his username, in another case).
    bot = _gitlab_bot(tmp_path)
    try:
        bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs",
                            fork=True)  # fmt: skip
        gw.gitlab_deliver(bot, _gitlab_fork_opened(B, "Bob/warehouse"))
        assert bot.ledger.pushers(GITLAB_KEY, 7) == {"alice", "bob"}
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        gw.gitlab_approve(bot, "carol", B)  # a fork's pushes are unknown: one approval more
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        assert "(it comes from a fork)" in bot.approval(B).summary
    finally:
        bot.close()


def test_a_gitlab_fork_s_namespace_is_its_owner_not_its_display_name() -> None:
    # Defended: the source project's `namespace` is a display name anyone picks ("alice");
    # the namespace taken is the path's.
    payload = _gitlab_fork_opened(B, "bob/warehouse")
    payload["object_attributes"]["source"]["namespace"] = "alice"
    event = parse_gitlab("Merge Request Hook", payload)
    assert isinstance(event, PullRequestEvent)
    assert (event.fork, event.head_owner) == (True, "bob")


# -- 2. a login renamed: pushers are recorded by login, reviews come in the login of now ----


# Closed: each push, event, click and review carries the account's id (GitHub sender.id
# and user.id, GitLab user_id and user.id; ledger migration 7), and the gate compares
# people by it (gate_rules: the login decides only where one side has no id).


def test_an_approver_who_pushed_under_another_login_does_not_approve_it(bot: Bot) -> None:
    # bob renames his account `bobx`, pushes `change` (the hook names bobx), renames it back
    # to `bob` (GitHub frees an old login at once); alice opens the PR from `change`.
    bot.forge.rename("bob", "bobx")
    bot.deliver("push", gw.push("change", B, "bobx", (A, B)))
    bot.forge.rename("bobx", "bob")
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)  # his login back
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    assert "Not counted: @bob pushed to this pull request" in bot.approval(B).summary
    gw.approve(bot, "carol", B, 42)  # who pushed nothing
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


def test_an_approver_who_renamed_himself_after_pushing_does_not_approve_it(
    tmp_path: Path,
) -> None:
    # Under a gate of required teams one rename was enough: bob pushes `change` as bob,
    # alice opens the PR, bob renames himself `bobx` (still a member of octo/approvers,
    # which the forge resolves now) and approves as bobx, whom no push names.
    bot = _make(tmp_path, TEAM_GATED)
    try:
        bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol"})
        bot.deliver("push", gw.push("change", B, "bob", (A, B)))
        bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
        gw.plan(bot, B, BOBS)
        gw.approve(bot, "bob", B, 41)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        # bob renames his account: GitHub's teams, roles and reviews now say bobx.
        bot.forge.rename("bob", "bobx")
        assert bot.forge.teams["octo/approvers"] == {"bobx", "carol"}
        assert {r.user for r in bot.forge.review_log[7]} == {"bobx"}
        gw.approve(bot, "bobx", B, 42)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        assert "Not counted: @bobx pushed to this pull request" in bot.approval(B).summary
        gw.approve(bot, "carol", B, 43)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_an_approver_who_pushed_onto_the_pr_and_renamed_himself_does_not_approve_it(
    tmp_path: Path,
) -> None:
    # bob's push onto alice's PR is told by its synchronize (sender.id) alone; he renames
    # his account `bobx` (still in octo/approvers), and GitHub's reviews name him so.
    bot = _make(tmp_path, TEAM_GATED)
    try:
        bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol"})
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
        bot.forge.push(7, B)
        bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
        bot.forge.rename("bob", "bobx")
        gw.plan(bot, B, BOBS)
        gw.approve(bot, "bobx", B, 41)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        assert "Not counted: @bobx pushed to this pull request" in bot.approval(B).summary
        gw.approve(bot, "carol", B, 42)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_pusher_who_renamed_himself_does_not_approve_with_the_check_s_button(
    tmp_path: Path,
) -> None:
    # bob pushes `change`, renames his account `bobx` (still in octo/approvers) and clicks
    # "Approve this plan": the click's sender.id is his account's.
    bot = _make(tmp_path, TEAM_GATED)
    try:
        bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol"})
        bot.deliver("push", gw.push("change", B, "bob", (A, B)))
        bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
        bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
        gw.plan(bot, B, BOBS)
        bot.forge.rename("bob", "bobx")
        gw.click(bot, "bobx", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        assert "Not counted: @bobx pushed to this pull request" in bot.approval(B).summary
        gw.click(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_gitlab_approver_who_pushed_and_renamed_himself_does_not_approve_it(
    tmp_path: Path,
) -> None:
    # GitLab: bob's push onto alice's MR (its update's user.id), then bob renames his
    # account `bobx` (still a member of the required group) and approves (approved_by[]
    # names bobx, with bob's id; the approval hook too).
    bot = gw.make_gitlab_bot(tmp_path, TEAM_GATED, ROLES)
    try:
        bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol"})
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "bob", oldrev=A))
        bot.forge.rename("bob", "bobx")
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bobx", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        assert "Not counted: @bobx pushed to this pull request" in bot.approval(B).summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_new_account_that_took_a_freed_login_is_not_its_old_owner(bot: Bot) -> None:
    # bob pushed, then renamed his account `bobx`; carol's colleague dora takes the freed
    # login `bob`: her approval is hers (no push names her account), bob's is still not.
    bot.deliver("push", gw.push("change", B, "bob", (A, B)))
    bot.forge.rename("bob", "bobx")
    dora = bot.forge.account_id("bob")  # the account that takes `bob` next
    assert dora != bot.forge.account_id("bobx")
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(bot, B, BOBS)
    bot.forge.roles["bob"] = "write"
    gw.approve(bot, "bob", B, 41)  # GATED lists `bob`: the login's new owner approves
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


# -- 3. a push the gate once counted, rebased away ------------------------------------------


def test_a_pusher_the_gate_counted_is_not_forgotten_when_the_branch_is_rebased(
    bot: Bot,
) -> None:
    bot.deliver("push", gw.push("bobs", B, "bob", (A, B)))
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="bobs")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="bobs"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    assert "@bob pushed to this pull request" in check.summary
    # alice rebases the branch onto main: C and D hold A's and B's changes, new commits.
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(ROOT,))
    bot.forge.commit(D, {"config.yaml": GATED}, parents=(C,))
    bot.deliver("push", gw.push("bobs", D, "alice", (C, D)))
    bot.forge.push(7, D)
    bot.deliver("pull_request", gw.pr_event("synchronize", D, "alice", head_ref="bobs"))
    gw.plan(bot, D, BOBS)  # the same change, the same plan
    gw.approve(bot, "bob", D, 42)
    assert bot.approval(D).conclusion != "success", bot.approval(D).summary


def test_a_pusher_named_by_an_event_is_not_forgotten_when_the_branch_is_rebased(
    bot: Bot,
) -> None:
    # Defended: bob's push onto alice's open PR (its synchronize names him) stays his
    # whatever the branch becomes.
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, "bob"))
    bot.forge.commit(C, {"config.yaml": GATED}, parents=(ROOT,))
    bot.forge.commit(D, {"config.yaml": GATED}, parents=(C,))
    bot.forge.push(7, D)
    bot.deliver("pull_request", gw.pr_event("synchronize", D, "alice"))
    gw.plan(bot, D, BOBS)
    gw.approve(bot, "bob", D, 41)
    assert bot.approval(D).conclusion != "success", bot.approval(D).summary


# -- 4. a synchronize of a fork PR, recorded under a branch name the base repository has -----


def test_a_fork_s_synchronize_on_a_branch_of_the_same_name_clears_nobody(bot: Bot) -> None:
    # Defended: mallory's fork PR 8 from her `change` is synchronized (recorded as her push
    # to `change`); bob's own push to the base repository's `change` still counts for PR 7
    # from it, even where the forge cannot list PR 7's commits (every push to `change`).
    bot.deliver("push", gw.push("change", B, "bob", (A, B)))
    fork = gw.pr_event("synchronize", D, "mallory", author="mallory", head_ref="change",
                       head_repo="mallory/warehouse")  # fmt: skip
    fork["number"] = fork["pull_request"]["number"] = 8
    bot.forge.commit(D, {"config.yaml": GATED}, parents=(ROOT,))
    bot.forge.open_pull(8, head_sha=D, base="main", author="mallory", head_ref="change",
                        fork=True)  # fmt: skip
    bot.deliver("pull_request", fork)
    pushes = bot.ledger.branch_pushes(KEY, "change")
    assert ("d" * 40, "mallory") in [(push.sha, push.user) for push in pushes]
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.forge.pull_commits = lambda number: None  # type: ignore[method-assign]
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 5. a pull request whose commits the forge cannot list (over 250 on GitHub) -----------


def test_a_commit_pushed_to_another_branch_counts_where_the_forge_lists_no_commits(
    bot: Bot,
) -> None:
    bot.deliver("push", gw.push("bobs", B, "bob", (A, B)))
    bot.deliver("push", gw.push("change", B, "alice", (A, B)))  # alice takes it over
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.forge.pull_commits = lambda number: None  # type: ignore[method-assign]
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


def test_a_commit_pushed_to_another_branch_counts_where_the_forge_lists_the_commits(
    bot: Bot,
) -> None:
    # Defended (round 3): the same with the commits listed.
    bot.deliver("push", gw.push("bobs", B, "bob", (A, B)))
    bot.deliver("push", gw.push("change", B, "alice", (A, B)))
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 6. commits pushed to the approver's fork, taken to a branch of the repository ---------


@pytest.mark.xfail(
    strict=True,
    reason="red team round 4 (a variant of the open finding 'a push whose hook never "
    "came', which its proposed fix does not close): bob pushes his change to his fork "
    "bob/warehouse, alice fetches it and pushes it to `change` of octo/warehouse and opens "
    "the PR from there (not from the fork, so no fork owner is recorded); bob approves "
    "alone. The base repository's hooks and its activity API name alice alone; the fork's "
    "push is told to the fork. The fix: the commit's verified signature (GitHub "
    "commit.verification, GitLab's signature API) names its signer, to count as a pusher; "
    "a gate that needs it asks for signed commits, or one approval more for a commit no "
    "push to this repository brought first and no verified signature names",
)
def test_commits_from_the_approver_s_fork_pushed_by_another_are_his(bot: Bot) -> None:
    bot.deliver("push", gw.push("change", B, "alice", (A, B)))
    bot.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    bot.deliver("pull_request", gw.pr_event("opened", B, "alice"))
    gw.plan(bot, B, BOBS)
    gw.approve(bot, "bob", B, 41)
    assert bot.approval(B).conclusion != "success", bot.approval(B).summary


# -- 7. a GitLab service account whose username was chosen ---------------------------------


def test_a_gitlab_service_account_with_a_chosen_username_is_a_bot_account(
    tmp_path: Path,
) -> None:
    # Closed (red team round 4): a GitLab service account's username is chosen by whoever
    # makes it (POST /service_accounts, /groups/:id/service_accounts, glab service-account
    # create --username release-bot, since GitLab 16.10): bob pushes his change onto
    # alice's MR with the token of `release-bot` (one he made, or CI's) and approves
    # alone. What the account is, the gate asks the forge by its id (GET /users/:id
    # `bot`), not its name: a bot's push asks one approval more.
    bot = _gitlab_bot(tmp_path)
    bot.forge.bots["release-bot"] = True  # GitLab: GET /users/:id says "bot": true
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, "release-bot", oldrev=A))
        assert bot.ledger.pushers(GITLAB_KEY, 7) == {"alice", "release-bot"}
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "`release-bot` pushed to this pull request: a bot account" in check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_person_whose_username_has_a_bot_s_form_is_a_person_who_pushed(
    tmp_path: Path,
) -> None:
    # Defended: GitLab says `project_1_bot_abc` is a person (GET /users/:id "bot": false),
    # whatever their username's form: a required approver, his push makes him a pusher,
    # whose approval does not count, and asks no approval more than a person's push does.
    person = "project_1_bot_abc"
    gated = GATED.replace("[bob, carol]", f"[carol, {person}]")
    bot = gw.make_gitlab_bot(tmp_path, gated, ROLES)
    bot.forge.bots[person] = False
    bot.forge.roles[person] = "write"
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, person, oldrev=A))
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, person, B)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "a bot account" not in check.summary, check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_service_account_in_the_approvers_group_does_not_approve(tmp_path: Path) -> None:
    # Defended: `release-bot`, a service account, is a member of the approvers' group (to
    # push for CI); bob, who holds its token, approves as himself and as it. A bot's
    # approval is no person's (GitLab: GET /users/:id "bot": true): two of them are bob
    # and carol.
    gated = TEAM_GATED + "      count: 2\n"
    bot = gw.make_gitlab_bot(tmp_path, gated, ROLES)
    bot.forge.teams["octo/approvers"] = frozenset({"bob", "carol", "release-bot"})
    bot.forge.bots["release-bot"] = True
    try:
        bot.forge.open_pull(7, head_sha=B, base="main", author="alice")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", B, "alice"))
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        gw.gitlab_approve(bot, "release-bot", B)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "Approved by @bob (1 of 2 required)" in check.summary, check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_push_by_an_account_the_forge_no_longer_knows_asks_one_approval_more(
    tmp_path: Path,
) -> None:
    # Defended: bob pushes with the token of a service account he made, `release-bot`,
    # then deletes it (or revokes a project token, whose bot user GitLab may delete):
    # GET /users/:id answers 404, so whether it was a bot, or whose, cannot be told now.
    bot = _gitlab_bot(tmp_path)
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        bot.ledger.record_pusher(GITLAB_KEY, 7, "release-bot", bot.clock.now, 1_999_999_999)
        assert bot.forge.account_of(1_999_999_999) is None
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        check = bot.approval(B)
        assert check.conclusion != "success", check.summary
        assert "an account that pushed to it is no longer known to the forge" in check.summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


def test_a_gitlab_service_account_with_its_generated_username_asks_one_approval_more(
    tmp_path: Path,
) -> None:
    # Defended: the same through a service account GitLab named.
    bot = _gitlab_bot(tmp_path)
    try:
        bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
        gw.gitlab_deliver(bot, gw.gitlab_mr("open", A, "alice"))
        bot.forge.push(7, B)
        account = "service_account_group_345_6018816a18e515214e0c34c2b33523fc"
        gw.gitlab_deliver(bot, gw.gitlab_mr("update", B, account, oldrev=A))
        gw.gitlab_plan(bot, B, BOBS)
        gw.gitlab_approve(bot, "bob", B)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        gw.gitlab_approve(bot, "carol", B)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()


# -- 8. the approval more under a gate of owners only ---------------------------------------


def _owners_only_bot_push(bot: Bot, made: PlanReview) -> None:
    """alice's PR 7; bob's workflow pushes his change onto it (github-actions[bot])."""
    bot.forge.open_pull(7, head_sha=A, base="main", author="alice")
    bot.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    bot.forge.push(7, B)
    bot.deliver("pull_request", gw.pr_event("synchronize", B, ACTIONS))
    gw.plan(bot, B, made)


BOBS_MODEL = {"s.bobs_model": "bob"}
BOBS_ITEMS = (("s.bobs_model", "k"),)


def test_owners_only_a_plan_recorded_without_prod_owners_waits_for_a_new_plan(
    tmp_path: Path,
) -> None:
    # Defended: a plan recorded before prod_owners was kept names none: the approval more
    # comes from nobody, so the gate waits (fail closed) however many approve.
    bot = _make(tmp_path, OWNERS_ONLY)
    try:
        _owners_only_bot_push(bot, PlanReview("fp-own", BOBS_ITEMS, BOBS_MODEL, {}))
        gw.approve(bot, "bob", B, 41)
        gw.approve(bot, "carol", B, 42)
        gw.approve(bot, "mallory", B, 43)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    finally:
        bot.close()


def test_owners_only_the_approval_more_is_not_the_author_s_nor_the_approver_s_own(
    tmp_path: Path,
) -> None:
    # Defended: prod's owners are alice (the author), bob (whose bot pushed) and a bot
    # account; none of them makes the approval more with bob's own.
    bot = _make(tmp_path, OWNERS_ONLY)
    try:
        owners = ("alice", "bob", ACTIONS)
        _owners_only_bot_push(
            bot, PlanReview("fp-own", BOBS_ITEMS, BOBS_MODEL, {}, prod_owners=owners)
        )
        gw.approve(bot, "bob", B, 41)
        gw.approve(bot, "alice", B, 42)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
    finally:
        bot.close()


def test_owners_only_the_approval_more_from_a_prod_owner_team(tmp_path: Path) -> None:
    # Defended: prod's owner is a team holding bob: a second member must approve, and a
    # member in another case is the same person.
    bot = _make(tmp_path, OWNERS_ONLY)
    try:
        bot.forge.teams["octo/owners"] = frozenset({"bob", "carol"})
        owned = {"s.bobs_model": "octo/owners"}
        made = PlanReview("fp-own", BOBS_ITEMS, owned, {}, prod_owners=("octo/owners",))
        _owners_only_bot_push(bot, made)
        gw.approve(bot, "bob", B, 41)
        gw.approve(bot, "BOB", B, 42)
        assert bot.approval(B).conclusion != "success", bot.approval(B).summary
        gw.approve(bot, "carol", B, 43)
        assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    finally:
        bot.close()
