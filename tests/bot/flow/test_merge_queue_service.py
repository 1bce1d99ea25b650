"""GitHub's merge queue through the running service, GitHub at the wire (PyGithub against
``FakeGitHub``), Spark scripted (:mod:`sluice.core.spark.scripted`): ``merge_group``
deliveries made from GitHub's documented body, signed and posted to the webhook; the
group's checks set on its head over GitHub's check-runs API; the merged entries promoted
after the merge, back to back and delivered out of order. The flow's cases are
``test_merge_queue_flow.py``'s; the same on real Spark, ``test_lifecycle.py``'s."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.core.snapshot.naming import merge_group_environment
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers import github_lifecycle as gl
from tests.helpers.github_service import Service, serve
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.lifecycle_prod import build_main, main_tree
from tests.helpers.merge_queue import merge_group
from tests.helpers.world import World, edit, sha_of

REPO = Path(__file__).resolve().parents[3]
CHECKS = {"sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"}


@pytest.fixture
def world(tmp_path: Path) -> World:
    """Prod built up to now on a scripted warehouse from main (the example gated by carol),
    so that a promotion has no interval left to compute."""
    env = World(tmp_path, tmp_path / "work", f"sqlite:///{tmp_path / 'state.db'}",
                FakeGitHub(repo=gl.OWNER), {}, warehouse=Warehouse())  # fmt: skip
    build_main(env, main_tree(tmp_path, approver="carol"), int(time.time() * 1000))
    env.github.permissions.update({"alice": "write", "carol": "write"})
    return env


@pytest.fixture
def service(world: World) -> Iterator[Service]:
    with serve(world.settings(), world.github, world.runner_for) as made:
        yield made


def _two_approved_prs(world: World, service: Service) -> tuple[Path, Path]:
    """PR 8 adds a column to orders, PR 9 one to customers (which reads orders); both built
    and approved by carol. Their trees."""
    github = world.github
    pr8 = gl.tree(world, "pr8", sha_of(1))
    edit(pr8 / "models" / "orders.sql", "  o.status,\n",
         "  o.status,\n  o.status = 'completed' AS is_completed,\n")  # fmt: skip
    pr9 = gl.tree(world, "pr9", sha_of(1))
    edit(pr9 / "models" / "customers.sql", "  c.first_name,\n",
         "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip
    for number, src in ((8, pr8), (9, pr9)):
        world.commit(sha_of(number), src)
        github.add_pull(number, sha_of(number), author="alice", head_ref=f"feature-{number}")
        gl.deliver(service, "pull_request", gl.pull(number, sha_of(number), "alice", "opened"))
        # Given now, after the build published the head's plan, by GitHub's clock (an
        # approval from before a commit's plan counts for no plan): its webhook says so.
        github.add_review(number, "carol", "APPROVED", sha_of(number))
        given = github.reviews[-1]["submitted_at"]
        approved = gl.review(number, sha_of(number), "carol", "approved", sha_of(number))
        approved["review"]["submitted_at"] = given
        gl.deliver(service, "pull_request_review", approved)
        assert github.checks_on(sha_of(number))["sluice/approval"]["conclusion"] == "success"
    return pr8, pr9


def _queue(world: World, service: Service, pr8: Path, pr9: Path) -> Path:
    """The queue's groups: 20 = main + PR 8, 21 = main + PR 8 + PR 9; their checks asked
    for. The tree of 21."""
    both = gl.tree(world, "both", sha_of(1))
    shutil.copy(pr8 / "models" / "orders.sql", both / "models" / "orders.sql")
    shutil.copy(pr9 / "models" / "customers.sql", both / "models" / "customers.sql")
    world.commit(sha_of(20), pr8)
    world.commit(sha_of(21), both)
    for head, number in ((sha_of(20), 8), (sha_of(21), 9)):
        body = merge_group(gl.OWNER, head, sha_of(1), number)
        response = service.deliver("merge_group", body)
        assert response.status_code == 202, response.text
    service.idle(timeout=900)
    return both


def _conclusions(checks: dict[str, Any]) -> dict[str, str]:
    return {name: run["conclusion"] for name, run in checks.items()}


def test_queued_prs_are_checked_on_their_group_and_promoted_in_queue_order(
    world: World, service: Service
) -> None:
    github, warehouse = world.github, world.scripted
    pr8, pr9 = _two_approved_prs(world, service)
    jobs = len(warehouse.jobs)
    _queue(world, service, pr8, pr9)
    for head in (sha_of(20), sha_of(21)):
        found = github.checks_on(head)
        assert _conclusions(found) == dict.fromkeys(CHECKS, "success"), found
        # Checked on the group's head over GitHub's API: created there, by the App.
        assert found["sluice/approval"]["head_sha"] == head
    merging = github.checks_on(sha_of(21))["sluice/prod-plan"]["output"]
    assert merging["title"] == "Merging is a virtual update: 0 rows written", merging
    # Group 20 is PR 8's plan (all built); group 21's customers reads PR 8's orders: the one
    # version no PR built, computed in the group's environment.
    built = [s["model"] for job in warehouse.jobs[jobs:] for s in job["steps"]
             if s["type"] == "build"]  # fmt: skip
    assert built == ["jaffle.customers"], built
    group = world.versions(merge_group_environment(sha_of(21)))

    # GitHub merges both groups: main moves to each head, both PRs close merged.
    jobs = len(warehouse.jobs)
    world.commit(sha_of(20), pr8, branch="main")
    world.commit(sha_of(21), gl.tree(world, "main21", sha_of(21)), branch="main")
    for number, merge in ((8, sha_of(20)), (9, sha_of(21))):
        github.pulls[number]["state"], github.pulls[number]["merged"] = "closed", True
        response = service.deliver("pull_request", gl.pull(number, sha_of(number), "alice",
                                   "closed", merged=True, merge_commit_sha=merge))  # fmt: skip
        assert response.status_code == 202
    service.idle(timeout=900)
    for merge in (sha_of(20), sha_of(21)):
        deploy = github.checks_on(merge)["sluice/deploy"]
        assert deploy["conclusion"] == "success", deploy["output"]
        assert deploy["output"]["title"] == "Promoted by virtual update", deploy["output"]
    # Unlike two PRs merged back to back without the queue (the second promotion computed
    # customers again), nothing is computed after the merge: prod is the group's.
    steps = [s["type"] for job in warehouse.jobs[jobs:] for s in job["steps"]]
    assert "build" not in steps and "views" in steps, steps
    assert world.versions("prod") == group
    assert [d["environment"] for d in github.deployments[-2:]] == ["prod", "prod"]

    # The queue says the groups are gone: recorded, environments let go, nothing run.
    jobs = len(warehouse.jobs)
    for head, number in ((sha_of(20), 8), (sha_of(21), 9)):
        body = merge_group(gl.OWNER, head, sha_of(1), number, action="destroyed", reason="merged")
        assert service.deliver("merge_group", body).status_code == 202
    service.idle(timeout=900)
    assert warehouse.jobs[jobs:] == []
    store = open_state(world.url)
    try:
        record = store.get_environment(merge_group_environment(sha_of(21)))
        assert record is not None and record.invalidated
    finally:
        store.close()


def test_entries_merged_together_and_delivered_out_of_order_keep_the_later_one_in_prod(
    world: World, service: Service
) -> None:
    """One push moves main to group 21 (PR 8's commit 20 under it); PR 9's close arrives
    first. Prod takes 21; PR 8's promotion then leaves it alone (GitHub's compare says 20
    is under 21)."""
    github = world.github
    pr8, pr9 = _two_approved_prs(world, service)
    both = _queue(world, service, pr8, pr9)
    world.commit(sha_of(20), pr8, branch="main")
    world.commit(sha_of(21), both, branch="main")
    github.branch_commits[sha_of(21)] = {sha_of(20)}  # 21's parent
    for number, merge in ((9, sha_of(21)), (8, sha_of(20))):
        github.pulls[number]["state"], github.pulls[number]["merged"] = "closed", True
        gl.deliver(service, "pull_request", gl.pull(number, sha_of(number), "alice", "closed",
                                                    merged=True, merge_commit_sha=merge))  # fmt: skip
    promoted = github.checks_on(sha_of(21))["sluice/deploy"]
    assert promoted["output"]["title"] == "Promoted by virtual update", promoted["output"]
    late = github.checks_on(sha_of(20))["sluice/deploy"]
    assert (late["conclusion"], late["output"]["title"]) == ("success", "Already in prod")
    assert world.versions("prod") == world.versions(merge_group_environment(sha_of(21)))


def test_an_unapproved_combination_fails_the_group_s_checks_at_the_wire(
    world: World, service: Service
) -> None:
    """Group 21 holds a customers nobody approved (edited beyond PR 9's in the queue's
    merge): its checks fail with the reason, GitHub will drop the entry, nothing runs."""
    github, warehouse = world.github, world.scripted
    pr8, pr9 = _two_approved_prs(world, service)
    both = gl.tree(world, "odd", sha_of(1))
    shutil.copy(pr8 / "models" / "orders.sql", both / "models" / "orders.sql")
    shutil.copy(pr9 / "models" / "customers.sql", both / "models" / "customers.sql")
    edit(
        both / "models" / "customers.sql",
        "  c.last_name,\n",
        "  UPPER(c.last_name) AS last_name,\n",
    )
    world.commit(sha_of(21), both)
    jobs = len(warehouse.jobs)
    gl.deliver(service, "merge_group", merge_group(gl.OWNER, sha_of(21), sha_of(1), 9))
    assert warehouse.jobs[jobs:] == []
    found = github.checks_on(sha_of(21))
    assert _conclusions(found) == dict.fromkeys(CHECKS, "failure"), found
    gate = found["sluice/approval"]["output"]
    assert gate["title"] == "1 unapproved change in the combined plan"
    assert "`jaffle.customers`" in gate["summary"] and "(changed by #9)" in gate["summary"]
    assert "remove this entry from the merge queue" in gate["summary"]
