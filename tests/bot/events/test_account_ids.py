"""Each event names its people by the forge's account id as well as their login (the gate
tells people apart by the id: a login can be renamed, and GitHub frees the old one at
once). Real payloads, as the forges send them; an id that is no account id is refused
with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.events.neutral import (
    BranchPushEvent,
    CheckRunEvent,
    CommentEvent,
    PullRequestEvent,
    ReviewEvent,
    event_from_json,
)
from sluice.bot.events.payload import PayloadError
from tests.helpers.cases import load_case, realcase

OWNER = "octo/warehouse"


def test_github_events_carry_their_people_s_account_ids() -> None:
    pushed = parse_github("pull_request", load_case("github/pull_request/synchronize.payload.json"))
    assert isinstance(pushed, PullRequestEvent)
    assert (pushed.pusher, pushed.pusher_id, pushed.author_id) == ("Codertocat", 21031067, 21031067)
    closed = parse_github("pull_request", load_case("github/pull_request/closed.payload.json"))
    assert isinstance(closed, PullRequestEvent)
    assert (closed.pusher, closed.pusher_id) == (None, None), "a close pushes nothing"
    review = parse_github(
        "pull_request_review", load_case("github/pull_request_review/submitted.payload.json")
    )
    assert isinstance(review, ReviewEvent) and review.reviewer_id == 21031067
    click = parse_github("check_run", load_case("github/check_run/requested_action.payload.json"))
    assert isinstance(click, CheckRunEvent) and click.requester_id == 2036040
    comment = parse_github(
        "issue_comment", load_case("github/issue_comment/drone-go-scm__comment.json")
    )
    assert isinstance(comment, CommentEvent) and comment.author_id == 10278482
    push = realcase("github/push/woodpecker__HookTag.json", OWNER, ref="refs/heads/change",
                    after="b" * 40, deleted=False)  # fmt: skip
    branch = parse_github("push", push)
    assert isinstance(branch, BranchPushEvent)
    assert (branch.pusher, branch.pusher_id) == (push["sender"]["login"], push["sender"]["id"])


def test_gitlab_events_carry_their_people_s_account_ids() -> None:
    approved = parse_gitlab("Merge Request Hook", load_case("gitlab/merge_request_approved.json"))
    assert isinstance(approved, ReviewEvent)
    assert (approved.reviewer, approved.reviewer_id) == ("anbraten", 2251488)
    update = load_case("gitlab/merge_request_update.json")
    update["object_attributes"]["oldrev"] = "1" * 40
    pushed = parse_gitlab("Merge Request Hook", update)
    assert isinstance(pushed, PullRequestEvent) and pushed.action == "synchronize"
    assert (pushed.pusher, pushed.pusher_id, pushed.author_id) == ("anbraten", 2251488, 2251488)
    push = parse_gitlab("Push Hook", load_case("gitlab/push.json"))
    assert isinstance(push, BranchPushEvent)
    assert (push.pusher, push.pusher_id) == ("test", 2)


def test_an_event_s_account_ids_survive_the_queue() -> None:
    event = parse_github("check_run", load_case("github/check_run/requested_action.payload.json"))
    assert event is not None
    assert event_from_json(event.to_json()) == event
    older = {k: v for k, v in event.to_json().items() if k != "requester_id"}
    again = event_from_json(older)  # queued by a version before ids were read
    assert isinstance(again, CheckRunEvent) and again.requester_id is None


@pytest.mark.parametrize("bad", [0, -5, "21031067", True, 2**63, 1.5])
def test_an_id_that_is_no_account_id_is_refused_naming_the_field(bad: Any) -> None:
    payload = load_case("github/pull_request_review/submitted.payload.json")
    payload["review"]["user"]["id"] = bad
    with pytest.raises(PayloadError, match=r"review\.user\.id"):
        parse_github("pull_request_review", payload)
    hook = load_case("gitlab/push.json")
    hook["user_id"] = bad
    with pytest.raises(PayloadError, match="user_id"):
        parse_gitlab("Push Hook", hook)


FORK_PR = "github/pull_request/nodejs-github-bot__pull-request-opened-mapproxy.json"


def test_a_fork_pr_names_its_head_owner_by_account_id() -> None:
    # jasnell/node -> nodejs/node: the fork's owner counts as having pushed (dispatch), by
    # the id a rename of the owner does not change.
    event = parse_github("pull_request", load_case(FORK_PR))
    assert isinstance(event, PullRequestEvent) and event.fork
    assert (event.head_owner, event.head_owner_id) == ("jasnell", 439929)
    assert event_from_json(event.to_json()) == event
    older = {k: v for k, v in event.to_json().items() if k != "head_owner_id"}
    again = event_from_json(older)  # queued by a version before the owner's id was read
    assert isinstance(again, PullRequestEvent) and again.head_owner_id is None


def test_a_pr_from_the_base_repository_names_no_head_owner_id() -> None:
    event = parse_github("pull_request", load_case("github/pull_request/opened.payload.json"))
    assert isinstance(event, PullRequestEvent) and not event.fork
    assert (event.head_owner, event.head_owner_id) == (None, None)


def test_a_head_owner_id_is_never_paired_with_another_login() -> None:
    # The id is the owner's only while the payload's owner.login is the owner full_name
    # names; else the login alone decides, as before ids were read.
    payload = load_case(FORK_PR)
    payload["pull_request"]["head"]["repo"]["owner"]["login"] = "someone-else"
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert (event.head_owner, event.head_owner_id) == ("jasnell", None)
    del payload["pull_request"]["head"]["repo"]["owner"]["login"]
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent) and event.head_owner_id is None


@pytest.mark.parametrize("bad", [0, -5, "439929", True, 2**63, 1.5])
def test_a_head_owner_id_that_is_no_account_id_is_refused_naming_the_field(bad: Any) -> None:
    payload = load_case(FORK_PR)
    payload["pull_request"]["head"]["repo"]["owner"]["id"] = bad
    with pytest.raises(PayloadError, match=r"pull_request\.head\.repo\.owner\.id"):
        parse_github("pull_request", payload)


def test_a_gitlab_fork_mr_names_its_source_namespace_by_path_alone() -> None:
    # GitLab's Merge Request Hook names the source project's namespace by its path (and
    # display name), never by an owner's id: the login decides there.
    event = parse_gitlab("Merge Request Hook", load_case("gitlab/merge_request_open_fork.json"))
    assert isinstance(event, PullRequestEvent) and event.fork
    assert (event.head_owner, event.head_owner_id) == ("sourceorg", None)


def test_a_missing_id_is_none_and_the_login_decides() -> None:
    payload = load_case("github/check_run/requested_action.payload.json")
    del payload["sender"]["id"]
    event = parse_github("check_run", payload)
    assert isinstance(event, CheckRunEvent) and event.requester_id is None
