"""The GitHub lifecycle's events and steps, shared by the real-Spark lifecycle
(``tests/bot/flow/test_lifecycle.py``) and the scripted one (``test_release_lifecycle.py``):
real payloads moved to ``OWNER`` (a PR, a review, a check-run click, a comment), ``deliver``
(and wait for the queue), ``tree`` (a copy of a commit's tree to edit) and ``settings_pr``
(a PR that changes main's config.yaml, approved and merged).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from tests.helpers import accounts
from tests.helpers.cases import realcase
from tests.helpers.github_service import Service
from tests.helpers.world import World, edit, sha_of

OWNER = "octo/warehouse"


def tree(world: World, name: str, base: str) -> Path:
    """A copy of commit ``base``'s tree, to edit and commit."""
    src = world.root / name
    shutil.copytree(world.trees[base], src)
    return src


def payload(case: str, **changes: Any) -> dict[str, Any]:
    """Real payload ``case`` moved to ``OWNER`` with ``changes``, each person it names
    given the account id of their login (as the fake GitHub knows them)."""
    return accounts.github(realcase(case, OWNER, **changes))


def pull(number: int, head: str, author: str, action: str, **more: Any) -> dict[str, Any]:
    """PR ``number``'s ``action`` event, sent by its ``author`` (a person the fake GitHub
    knows: the gate asks it what each pusher's account is)."""
    case = "github/pull_request/opened.payload.json"
    event = payload(case, action=action, number=number, **{
        "pull_request.number": number, "pull_request.head.sha": head,
        "pull_request.user.login": author, "pull_request.base.ref": "main", "sender.login": author,
        "pull_request.head.ref": f"feature-{number}",
    })  # fmt: skip
    for key, value in more.items():
        event["pull_request"][key] = value
    return event


def review(number: int, head: str, user: str, state: str, commit: str) -> dict[str, Any]:
    # Each review has its own id, as on GitHub: the same id twice is the same review (a
    # replayed delivery), which Sluice handles once.
    review_id = int(hashlib.sha256(f"{number}:{head}:{user}:{state}".encode()).hexdigest()[:8], 16)
    return payload("github/pull_request_review/submitted.payload.json", **{
        "pull_request.number": number, "pull_request.head.sha": head,
        "review.user.login": user, "review.state": state.lower(), "review.commit_id": commit,
        "review.id": review_id,
    })  # fmt: skip


def click(number: int, head: str, user: str, run_id: int) -> dict[str, Any]:
    """``user`` clicks "Approve this plan" on check run ``run_id`` (Sluice's, as GitHub
    sends it: a button counts only on a run Sluice made)."""
    event = payload("github/check_run/requested_action.payload.json", **{
        "check_run.name": "sluice/approval", "check_run.head_sha": head, "check_run.id": run_id,
        "requested_action.identifier": "approve", "sender.login": user,
    })  # fmt: skip
    event["check_run"]["pull_requests"] = [{"number": number, "id": number}]
    event.pop("organization", None)
    return event


def comment(number: int, user: str, body: str, comment_id: int) -> dict[str, Any]:
    event = payload("github/issue_comment/created.payload.json", **{
        "issue.number": number, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip
    event["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{OWNER}/pulls/{number}"}
    return event


def deliver(service: Service, event: str, body: dict[str, Any]) -> None:
    """Deliver ``event`` and wait until the queue is idle."""
    response = service.deliver(event, body)
    assert response.status_code == 202, response.text
    service.idle(timeout=900)


def settings_pr(
    world: World, service: Service, number: int, merge: int, old: str, new: str,
    approver: str = "carol",
) -> dict[str, Any]:  # fmt: skip
    """PR ``number`` changes main's config.yaml (``old`` -> ``new``); ``approver``, the
    gate's, approves it and it is merged as ``sha_of(merge)``: the merge's checks."""
    github = world.github
    head = sha_of(number)
    src = tree(world, f"pr{number}", github.refs["main"])
    edit(src / "config.yaml", old, new)
    world.commit(head, src)
    github.add_pull(number, head, author="alice", head_ref=f"feature-{number}")
    deliver(service, "pull_request", pull(number, head, "alice", "opened"))
    github.add_review(number, approver, "APPROVED", head)
    deliver(service, "pull_request_review", review(number, head, approver, "approved", head))
    assert github.checks_on(head)["sluice/approval"]["conclusion"] == "success"
    world.commit(sha_of(merge), src, branch="main")
    github.pulls[number]["state"], github.pulls[number]["merged"] = "closed", True
    deliver(service, "pull_request", pull(number, head, "alice", "closed", merged=True,
                                          merge_commit_sha=sha_of(merge)))  # fmt: skip
    checks: dict[str, Any] = github.checks_on(sha_of(merge))
    return checks
