"""The release side of the GitHub lifecycle, through the service and GitHub at the wire,
Spark scripted (:mod:`sluice.core.spark.scripted`): a backfill budget that holds a PR's
build until its approver approves, promotion tiers (a merge reaches staging, a release
tag by a releaser reaches prod), both by settings that an approved PR brought to main, and
two PRs merged back to back (the second re-planned against the first). The
gate, the hold and the virtual updates are the flow's and the plan's; what Spark does for
them is the lifecycle's on real Spark (``test_lifecycle.py``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.helpers import github_lifecycle as gl
from tests.helpers.github_service import Service, serve
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.lifecycle_prod import build_main, main_tree
from tests.helpers.world import World, edit, sha_of

REPO = Path(__file__).resolve().parents[3]
END = to_ms("2018-04-30")


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """Prod built on a scripted warehouse from main, the example project gated by carol:
    its 120 days up to 2018-04-30, or (parametrized ``"now"``) up to now, so that a
    promotion has no interval left to compute."""
    env = World(tmp_path, tmp_path / "work", f"sqlite:///{tmp_path / 'state.db'}",
                FakeGitHub(repo=gl.OWNER), {}, warehouse=Warehouse())  # fmt: skip
    now = int(time.time() * 1000) if getattr(request, "param", None) == "now" else END
    build_main(env, main_tree(tmp_path, approver="carol"), now)
    env.github.permissions.update({"alice": "write", "carol": "write"})
    return env


@pytest.fixture
def service(world: World) -> Iterator[Service]:
    with serve(world.settings(), world.github, world.runner_for) as made:
        yield made


def test_a_pr_build_over_the_backfill_budget_waits_for_the_budget_s_approver(
    world: World, service: Service
) -> None:
    github, warehouse = world.github, world.scripted
    # A PR gives main a budget (more than 100 intervals needs dana's approval); the
    # settings are in force once that PR is approved and promoted.
    merged = gl.settings_pr(world, service, 12, 14, "  gate:\n",
                          "  gate:\n    backfill:\n      max_intervals: 100\n"
                          "      approver: dana\n")  # fmt: skip
    assert merged["sluice/deploy"]["conclusion"] == "success"
    head = sha_of(13)
    pr = gl.tree(world, "pr13", sha_of(14))
    # A breaking change to daily_revenue: its 120 days are computed again.
    edit(pr / "models" / "daily_revenue.sql", "  COUNT(*) AS orders,", "  COUNT(1) + 0 AS orders,")
    world.commit(head, pr)
    github.add_pull(13, head, author="alice", head_ref="feature-13")
    github.permissions.update({"dana": "write"})

    jobs = len(warehouse.jobs)
    gl.deliver(service, "pull_request", gl.pull(13, head, "alice", "opened"))
    assert warehouse.jobs[jobs:] == [], "a held build ran Spark"
    held = github.checks_on(head)
    assert held["sluice/pr-environment"]["conclusion"] == "action_required"
    assert held["sluice/pr-environment"]["output"]["title"] == (
        "Waiting for the backfill budget's approval"
    )
    why = held["sluice/pr-environment"]["output"]["summary"]
    assert "backfill of 120 intervals (budget 100)" in why and "@dana approves" in why
    assert held["sluice/approval"]["conclusion"] == "failure"
    store = open_state(world.url)
    try:
        assert store.get_environment("pr_13") is None, "a held build ran Spark"
    finally:
        store.close()
    [comment] = github.comments_on(13)
    assert "@dana" in comment["body"]

    # carol (the required approver) approving does not lift the hold: only dana does.
    github.add_review(13, "carol", "APPROVED", head)
    gl.deliver(service, "pull_request_review", gl.review(13, head, "carol", "approved", head))
    assert github.checks_on(head)["sluice/pr-environment"]["conclusion"] == "action_required"
    # Forge times have whole seconds, and the gate compares to the second: the build dana's
    # approval releases is published in a later second than carol's approval (which the
    # fake stamps a second after now, as a person reads the plan first).
    time.sleep(2.1)
    github.add_review(13, "dana", "APPROVED", head)
    gl.deliver(service, "pull_request_review", gl.review(13, head, "dana", "approved", head))
    built = github.checks_on(head)
    assert built["sluice/pr-environment"]["conclusion"] == "success", built
    assert (
        world.versions("pr_13")["jaffle.daily_revenue"]
        != world.versions("prod")["jaffle.daily_revenue"]
    )
    # Built on dana's word. The plan exists only now: approvals given before it (carol's,
    # and dana's of the hold) approved no plan, so the gate asks for them again.
    gate = built["sluice/approval"]
    assert gate["conclusion"] == "failure", gate
    assert "before it had the plan it has now" in gate["output"]["summary"]
    for who in ("carol", "dana"):
        github.add_review(13, who, "APPROVED", head)
        again = gl.review(13, head, who, "approved", head)
        again["review"]["id"] += 1  # a review of its own, not the first one delivered again
        gl.deliver(service, "pull_request_review", again)
    gate = github.checks_on(head)["sluice/approval"]
    assert gate["conclusion"] == "success", gate


@pytest.mark.parametrize("world", ["now"], indirect=True)
def test_tiers_a_merge_reaches_staging_then_a_release_tag_reaches_prod_by_virtual_updates(
    world: World, service: Service
) -> None:
    github, warehouse = world.github, world.scripted
    github.permissions.update({"rita": "write"})
    # An approved PR makes main's deploy a two-tier flow: staging on merge, prod on a tag.
    merged = gl.settings_pr(world, service, 15, 16, "    on: merge\n", "    environments:\n"
                          "      - name: staging\n        on: merge\n      - name: prod\n"
                          "        on: tag\n        released_by: [rita]\n")  # fmt: skip
    # Approved, the new settings govern this very merge: it reaches staging only.
    assert merged["sluice/deploy-staging"]["conclusion"] == "success", merged
    assert "sluice/deploy" not in merged

    # A model change, built in its PR; the checks say a merge reaches staging.
    head = sha_of(17)
    pr = gl.tree(world, "pr17", sha_of(16))
    edit(pr / "models" / "customers.sql", "  c.last_name,\n",
         "  c.last_name,\n  LENGTH(c.last_name) AS last_name_length,\n")  # fmt: skip
    world.commit(head, pr)
    github.add_pull(17, head, author="alice", head_ref="feature-17")
    gl.deliver(service, "pull_request", gl.pull(17, head, "alice", "opened"))
    merging = github.checks_on(head)["sluice/prod-plan"]["output"]
    assert merging["title"] == "Merging is a virtual update of staging: 0 rows written", merging
    github.add_review(17, "carol", "APPROVED", head)
    gl.deliver(service, "pull_request_review", gl.review(17, head, "carol", "approved", head))
    built = world.versions("pr_17")["jaffle.customers"]
    pr_table = warehouse.reads("jaffle__pr_17.customers")
    prod_before = world.versions("prod")["jaffle.customers"]
    assert built != prod_before

    # Merge: staging takes the PR's tables; prod is untouched until the release tag.
    jobs = len(warehouse.jobs)
    world.commit(sha_of(18), pr, branch="main")
    github.pulls[17]["state"], github.pulls[17]["merged"] = "closed", True
    gl.deliver(service, "pull_request", gl.pull(17, head, "alice", "closed", merged=True,
                                            merge_commit_sha=sha_of(18)))  # fmt: skip
    staging = github.checks_on(sha_of(18))["sluice/deploy-staging"]
    assert staging["conclusion"] == "success", staging["output"]
    assert staging["output"]["title"] == "Promoted to staging by virtual update"
    assert "sluice/deploy" not in github.checks_on(sha_of(18))
    assert world.versions("staging")["jaffle.customers"] == built
    assert world.versions("prod")["jaffle.customers"] == prod_before
    assert warehouse.reads("jaffle__staging.customers") == pr_table
    assert "prod is promoted by the next tag matching `v*`" in github.comments_on(17)[0]["body"]

    # The release tag: prod takes the tables staging reads, by a virtual update too.
    github.add_tag("v9.0", sha_of(18))
    tag = gl.payload("github/push/woodpecker__HookTag.json", ref="refs/tags/v9.0",
                   after=sha_of(18), **{"sender.login": "rita"})  # fmt: skip
    gl.deliver(service, "push", tag)
    deploy = github.checks_on(sha_of(18))["sluice/deploy"]
    assert deploy["conclusion"] == "success", deploy["output"]
    assert deploy["output"]["title"] == "Promoted by virtual update", deploy["output"]
    assert world.versions("prod") == world.versions("staging")
    assert warehouse.reads("jaffle.customers") == pr_table
    steps = [step["type"] for job in warehouse.jobs[jobs:] for step in job["steps"]]
    assert "views" in steps and "build" not in steps, steps  # views swapped, nothing built
    assert [d["environment"] for d in github.deployments[-2:]] == ["staging", "prod"]


@pytest.mark.parametrize("world", ["now"], indirect=True)
def test_two_prs_merged_back_to_back_both_reach_prod_the_second_re_planned(
    world: World, service: Service
) -> None:
    github, warehouse = world.github, world.scripted
    # PR 8 adds a column to orders; PR 9 adds one to customers, which reads orders: both
    # change what customers holds, and PR 9 was planned before PR 8 reached prod.
    first, second = sha_of(8), sha_of(9)
    pr8 = gl.tree(world, "pr8", github.refs["main"])
    edit(
        pr8 / "models" / "orders.sql",
        "  o.status,\n",
        "  o.status,\n  o.status = 'completed' AS is_completed,\n",
    )
    pr9 = gl.tree(world, "pr9", github.refs["main"])
    edit(
        pr9 / "models" / "customers.sql",
        "  c.first_name,\n",
        "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n",
    )
    world.commit(first, pr8)
    world.commit(second, pr9)
    for number, head in ((8, first), (9, second)):
        github.add_pull(number, head, author="alice", head_ref=f"feature-{number}")
        service.deliver("pull_request", gl.pull(number, head, "alice", "opened"))
    service.idle(timeout=900)
    for number, head in ((8, first), (9, second)):
        github.add_review(number, "carol", "APPROVED", head)
        gl.deliver(
            service, "pull_request_review", gl.review(number, head, "carol", "approved", head)
        )
        gate = github.checks_on(head)["sluice/approval"]
        assert gate["conclusion"] == "success", gate["output"]

    # Both merged, the deliveries arriving back to back.
    jobs = len(warehouse.jobs)
    pr9_customers = warehouse.reads("jaffle__pr_9.customers")
    both = gl.tree(world, "both", github.refs["main"])
    shutil.copy(pr8 / "models" / "orders.sql", both / "models" / "orders.sql")
    world.commit(sha_of(10), pr8, branch="main")
    shutil.copy(pr9 / "models" / "customers.sql", both / "models" / "customers.sql")
    world.commit(sha_of(11), both, branch="main")
    for number, head, merge in ((8, first, sha_of(10)), (9, second, sha_of(11))):
        github.pulls[number]["state"], github.pulls[number]["merged"] = "closed", True
        response = service.deliver("pull_request", gl.pull(number, head, "alice", "closed",
                                                         merged=True, merge_commit_sha=merge))  # fmt: skip
        assert response.status_code == 202
    service.idle(timeout=900)

    first_deploy = github.checks_on(sha_of(10))["sluice/deploy"]
    assert first_deploy["output"]["title"] == "Promoted by virtual update", first_deploy["output"]
    second_deploy = github.checks_on(sha_of(11))["sluice/deploy"]
    assert second_deploy["conclusion"] == "success", second_deploy["output"]
    # customers was built by PR 9 on top of the old orders; against the new prod it is a
    # new version, so the second promotion computed it rather than losing PR 8's change.
    assert second_deploy["output"]["title"] == "Promoted; 1 table backfilled"
    assert "`jaffle.customers`" in second_deploy["output"]["summary"]
    project = load_project(both, use_cache=False)
    store = open_state(world.url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
    finally:
        store.close()
    assert not plan.has_changes and not plan.backfill, "prod is exactly the merged main"
    # The promotions built customers once, against PR 8's orders, and prod reads that table.
    built = [step["model"] for job in warehouse.jobs[jobs:] for step in job["steps"]
             if step["type"] == "build"]  # fmt: skip
    assert built == ["jaffle.customers"], built
    assert warehouse.reads("jaffle.customers") not in (None, pr9_customers)
