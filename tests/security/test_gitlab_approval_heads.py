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

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.flow import tenancy
from sluice.core.snapshot.naming import schema_prefix
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_service import GitLabService, gitlab_settings, project_token
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.world import edit, sha_of

PATH, PID = "data/warehouse", CASE_REPOSITORY_ID
MR_HOOK = "Merge Request Hook"
APPROVAL = "sluice/approval"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    """data/warehouse with its prod built on a scripted warehouse; alice and carol write
    to it, carol the required approver."""
    shared = f"sqlite:///{tmp_path / 'state.db'}"
    url = tenancy.state_url(shared, f"gitlab:{PATH}")
    env = GitLabWorld(tmp_path, tmp_path / "work", url, None, {},  # type: ignore[arg-type]
                      warehouse=Warehouse())  # fmt: skip
    env.gitlab = FakeGitLab(project=PATH, project_id=PID)
    with schema_prefix(tenancy.schema_prefix(f"gitlab:{PATH}")):
        build_main(env, main_tree(tmp_path, approver="carol"), int(time.time() * 1000))
    env.gitlab.members.update({"alice": 40, "carol": 30})  # alice maintains it
    env.shared = shared  # type: ignore[attr-defined]
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    settings = gitlab_settings(
        world.root, workdir=world.work, database_url=world.shared,  # type: ignore[attr-defined]
        isolate_repositories=True, repositories=("gitlab:data/*",),
    )  # fmt: skip
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.gitlab.install(mock)
        with TestClient(create_app(settings, runner_for=world.runner_for)) as client:
            yield GitLabService(client, world.gitlab, settings)


def _moment(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + seconds_from_now))


def _hook(gitlab: FakeGitLab, action: str, head: str, user: str, **attrs: Any) -> dict[str, Any]:
    """A real Merge Request Hook body of MR !8 (alice's) for ``action`` by ``user`` at
    ``head``."""
    payload = mr_open_hook(gitlab, 8, head, PATH, PID)
    payload["user"].update(username=user, id=gitlab.user_id(user))
    payload["object_attributes"].update(action=action, **attrs)
    return payload


def _send(service: GitLabService, payload: dict[str, Any]) -> None:
    """Deliver ``payload`` signed with the project's own webhook token (its maintainer's
    to use) and wait for the queue."""
    response = service.deliver(MR_HOOK, payload, token=project_token(PID))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)


def _tree(world: GitLabWorld, name: str, *edits: tuple[str, str, str]) -> Path:
    """main's tree with ``edits`` (model file, old, new) applied, as ``root/name``."""
    src = world.root / name
    shutil.copytree(world.trees[sha_of(1)], src)
    for model, old, new in edits:
        edit(src / "models" / model, old, new)
    return src


ORDERS = ("orders.sql", "  o.status,\n", "  o.status,\n  o.status = 'completed' AS is_completed,\n")
CUSTOMERS = ("customers.sql", "  c.first_name,\n",
             "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip


def _push(world: GitLabWorld, service: GitLabService, sha: str, old: str) -> None:
    """alice pushes ``sha`` (committed already) to MR !8; GitLab's update hook; built."""
    world.gitlab.add_mr(8, sha=sha, source_branch="feature-8", author="alice")
    _send(service, _hook(world.gitlab, "update", sha, "alice", oldrev=old, updated_at=_moment(0)))


def _opened(world: GitLabWorld, service: GitLabService) -> None:
    """alice's MR !8 (orders changed) at ``sha_of(8)``, opened and built."""
    world.commit(sha_of(8), _tree(world, "mr8", ORDERS))
    world.gitlab.add_mr(8, sha=sha_of(8), source_branch="feature-8", author="alice")
    _send(service, mr_open_hook(world.gitlab, 8, sha_of(8), PATH, PID))
    assert world.gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"


def _approves(world: GitLabWorld, service: GitLabService, head: str) -> None:
    """carol approves MR !8 in GitLab now (its head ``head``); GitLab's own hook."""
    world.gitlab.approve(8, "carol")
    _send(service, _hook(world.gitlab, "approval", head, "carol", updated_at=_moment(1)))


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
    world.commit(sha_of(9), _tree(world, "mr9", ORDERS, CUSTOMERS))
    _push(world, service, sha_of(9), sha_of(8))
    _approves(world, service, sha_of(9))
    assert gitlab.statuses_on(sha_of(9))[APPROVAL]["state"] == "success"

    world.commit(sha_of(10), _tree(world, "mr10", ORDERS))  # sha 8's files again
    _push(world, service, sha_of(10), sha_of(9))
    stale = gitlab.statuses_on(sha_of(10))[APPROVAL]
    assert stale["state"] == "failed", stale  # carol approved sha 9's plan, not this one

    _send(service, _hook(gitlab, "approval", sha_of(8), "carol", updated_at=_moment(2)))
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

    world.commit(sha_of(9), _tree(world, "mr9", ORDERS, CUSTOMERS))
    gitlab.commit_dates[sha_of(9)] = "2020-01-01T00:00:00.000Z"  # before any approval
    _push(world, service, sha_of(9), sha_of(8))
    _send(service, _hook(gitlab, "approval", sha_of(9), "carol", updated_at=_moment(5)))
    after = gitlab.statuses_on(sha_of(9))[APPROVAL]
    assert after["state"] == "failed", (
        f"carol's approval, given before {sha_of(9)} was pushed, counts for it: "
        f"{after['description']}"
    )
    # carol takes it back and approves again, now: GitLab's approved_at is after the push.
    gitlab.unapprove(8, "carol")
    _send(service, _hook(gitlab, "unapproval", sha_of(9), "carol", updated_at=_moment(6)))
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
