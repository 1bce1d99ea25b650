"""Hostile GitLab approval hooks: the head an approval counts for is GitLab's word, never a
webhook's.

GitLab's approvals API names no commit. The gate binds each approval to the head of the
merge request's latest version GitLab made before the approval's ``approved_at`` (both
GitLab's clock, read by the service with its own token: ``approval._bound``); a Merge
Request Hook is its sender's word, and whoever maintains the project holds its webhook
token, so a hook may make the gate ask again but never chooses a head. A commit's dates
are its pusher's word too, and count for nothing.

Driven through the whole service: the real app, real Merge Request Hook bodies signed
with the project's own token (what its maintainer holds), GitLab at the wire (python-gitlab
against ``FakeGitLab``, whose versions and approval times run on its own clock), the queue
and the scripted warehouse.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.gitlab_service import (
    CUSTOMERS,
    ORDERS,
    GitLabService,
    gitlab_world,
    model_tree,
    moment,
    mr_hook,
    open_mr,
    send,
    serve_world,
)
from tests.helpers.lifecycle_prod import GitLabWorld
from tests.helpers.world import sha_of

PATH, PID = "data/warehouse", CASE_REPOSITORY_ID
APPROVAL = "sluice/approval"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    """data/warehouse with its prod built on a scripted warehouse; alice and carol write
    to it (alice maintains it), carol the required approver."""
    env = gitlab_world(tmp_path, PATH, PID, members={"alice": 40, "carol": 30})
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serve_world(world, repositories=("gitlab:data/*",)) as running:
        yield running


def _push(world: GitLabWorld, service: GitLabService, sha: str, old: str) -> None:
    """alice pushes ``sha`` (committed already) to MR !8; GitLab's update hook; built."""
    world.gitlab.add_mr(8, sha=sha, source_branch="feature-8", author="alice")
    hook = mr_hook(world.gitlab, 8, "update", sha, "alice", oldrev=old, updated_at=moment(0))
    send(service, hook)


def _opened(world: GitLabWorld, service: GitLabService) -> None:
    """alice's MR !8 (orders changed) at ``sha_of(8)``, opened and built."""
    open_mr(world, service, 8, ORDERS)
    assert world.gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"


def _approves(world: GitLabWorld, service: GitLabService, head: str) -> None:
    """carol approves MR !8 in GitLab now (its head ``head``); GitLab's own hook."""
    world.gitlab.approve(8, "carol")
    send(service, mr_hook(world.gitlab, 8, "approval", head, "carol", updated_at=moment(1)))


def test_a_forged_hook_does_not_move_an_approval_back_onto_an_older_head(
    world: GitLabWorld, service: GitLabService
) -> None:
    """carol approves MR !8 at sha 9 (orders and customers changed). alice, a maintainer
    (she holds the project's webhook token), pushes sha 10: sha 8's tree again (orders
    alone), whose plan carol's approval of sha 9 is not for: stale. alice then posts an
    approval hook of carol's naming sha 8, which carol never approved, but whose plan is
    sha 10's: a gate taking the hook's head would count carol's approval. GitLab says
    carol approved after sha 9's push and before sha 10's: her approval is of sha 9."""
    gitlab = world.gitlab
    _opened(world, service)
    world.commit(sha_of(9), model_tree(world, "mr9", ORDERS, CUSTOMERS))
    _push(world, service, sha_of(9), sha_of(8))
    _approves(world, service, sha_of(9))
    assert gitlab.statuses_on(sha_of(9))[APPROVAL]["state"] == "success"

    world.commit(sha_of(10), model_tree(world, "mr10", ORDERS))  # sha 8's files again
    _push(world, service, sha_of(10), sha_of(9))
    stale = gitlab.statuses_on(sha_of(10))[APPROVAL]
    assert stale["state"] == "failed", stale  # carol approved sha 9's plan, not this one

    send(service, mr_hook(gitlab, 8, "approval", sha_of(8), "carol", updated_at=moment(2)))
    after = gitlab.statuses_on(sha_of(10))[APPROVAL]
    assert after["state"] != "success", (
        f"carol's approval of {sha_of(9)} counts for {sha_of(10)} through {sha_of(8)}, "
        f"which she never approved: {after['description']}"
    )


def test_an_approval_given_before_a_head_was_pushed_does_not_count_for_it(
    world: GitLabWorld, service: GitLabService
) -> None:
    """carol approves MR !8 at sha 8. alice pushes sha 9, its commit dated years before
    carol's approval (a commit's dates are whoever made it's to choose), then posts an
    approval hook of carol's naming sha 9, dated after the push. Both lie alike: GitLab
    made sha 9's version after carol's approval, so it is not of sha 9."""
    gitlab = world.gitlab
    _opened(world, service)
    _approves(world, service, sha_of(8))
    assert gitlab.statuses_on(sha_of(8))[APPROVAL]["state"] == "success"

    world.commit(sha_of(9), model_tree(world, "mr9", ORDERS, CUSTOMERS))
    gitlab.commit_dates[sha_of(9)] = "2020-01-01T00:00:00.000Z"  # before any approval
    _push(world, service, sha_of(9), sha_of(8))
    send(service, mr_hook(gitlab, 8, "approval", sha_of(9), "carol", updated_at=moment(5)))
    after = gitlab.statuses_on(sha_of(9))[APPROVAL]
    assert after["state"] == "failed", (
        f"carol's approval, given before {sha_of(9)} was pushed, counts for it: "
        f"{after['description']}"
    )
    # carol takes it back and approves again, now: GitLab's approved_at is after the push.
    gitlab.unapprove(8, "carol")
    send(service, mr_hook(gitlab, 8, "unapproval", sha_of(9), "carol", updated_at=moment(6)))
    _approves(world, service, sha_of(9))
    assert gitlab.statuses_on(sha_of(9))[APPROVAL]["state"] == "success"


def test_an_approval_a_gitlab_gives_no_time_for_counts_for_no_head(
    world: GitLabWorld, service: GitLabService
) -> None:
    """A GitLab that lists no ``approved_at`` (before 2025) cannot say which version an
    approval came after: it counts for no plan (the gate fails closed, and says so), even
    with GitLab's own approval hook naming the head."""
    gitlab = world.gitlab
    gitlab.lists_approved_at = False
    _opened(world, service)
    _approves(world, service, sha_of(8))
    status = gitlab.statuses_on(sha_of(8))[APPROVAL]
    assert status["state"] == "failed", status
    assert "plan changed" in status["description"], status
