"""GitLab's merge trains through the running service, python-gitlab at the wire against
``FakeGitLab``, Spark scripted (:mod:`sluice.core.spark.scripted`): two merge requests
built and approved through their hooks; the train's pipelines' hooks (GitLab's documented
Pipeline Hook moved to train refs, :mod:`tests.helpers.merge_train`) get Sluice's statuses
into each pipeline on the train's commit; the merges then promote in train order, by
virtual update, with a deployment record each. A combination no merge request had fails
its pipeline's statuses and says why on the merge request. The flow's cases are
``test_merge_train_flow.py``'s; GitHub's merge queue the same way is
``test_merge_queue_service.py``."""

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
from sluice.core.snapshot.naming import merge_group_environment
from sluice.core.spark.scripted import Warehouse
from tests.helpers.gitlab_service import GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.merge_train import merge_request, train_pipeline
from tests.helpers.world import edit, sha_of

REPO = Path(__file__).resolve().parents[3]
PROJECT = "data/warehouse"
MR_HOOK, PIPELINE_HOOK = "Merge Request Hook", "Pipeline Hook"
CHECKS = {"sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"}


class TrainWorld(GitLabWorld):
    """``GitLabWorld`` with main's tree edited on demand."""

    def tree(self, name: str, *edits: tuple[str, str, str]) -> Path:
        """main's tree with ``edits`` (model file, old, new) made, as folder ``name``."""
        src = self.root / name
        shutil.copytree(self.trees[sha_of(1)], src)
        for file, old, new in edits:
            edit(src / "models" / file, old, new)
        return src


ORDERS = ("orders.sql", "  o.status,\n", "  o.status,\n  o.status = 'completed' AS is_completed,\n")
CUSTOMERS = ("customers.sql", "  c.first_name,\n",
             "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip
ORDERS_AGAIN = ("orders.sql", "  o.status,\n", "  o.status,\n  o.status = 'placed' AS is_placed,\n")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[TrainWorld]:
    """Prod built up to now on a scripted warehouse from main (the example gated by bob)."""
    env = TrainWorld(tmp_path, tmp_path / "work", f"sqlite:///{tmp_path / 'state.db'}",
                     None, {}, warehouse=Warehouse())  # type: ignore[arg-type]  # fmt: skip
    env.gitlab = FakeGitLab(project=PROJECT)
    env.gitlab.members.update({"alice": 30, "bob": 30})
    build_main(env, main_tree(tmp_path), int(time.time() * 1000))
    yield env
    env.close()


@pytest.fixture
def service(world: TrainWorld) -> Iterator[GitLabService]:
    settings = gitlab_settings(world.root, workdir=world.work, database_url=world.url)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.gitlab.install(mock)
        with TestClient(create_app(settings, runner_for=world.runner_for)) as client:
            yield GitLabService(client, world.gitlab, settings)


def _deliver(service: GitLabService, hook: str, payload: dict[str, Any]) -> None:
    response = service.deliver(hook, payload)
    assert response.status_code == 202, response.text
    service.idle(timeout=900)


def _moment(offset: float = 0.0) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + offset))


def _approved_mr(world: TrainWorld, service: GitLabService, iid: int, src: Path) -> None:
    """Merge request ``iid`` at ``sha_of(iid)`` (``src``): opened, built, approved by bob
    (after its plan: GitLab's approval hook names the head and the moment)."""
    gitlab = world.gitlab
    world.commit(sha_of(iid), src)
    gitlab.add_mr(iid, sha=sha_of(iid), source_branch=f"mr-{iid}", author="alice")
    _deliver(service, MR_HOOK, merge_request(PROJECT, iid, sha_of(iid), "open",
                                             updated_at=_moment()))  # fmt: skip
    gitlab.approve(iid, "bob")
    _deliver(service, MR_HOOK, merge_request(PROJECT, iid, sha_of(iid), "approval", user="bob",
                                             updated_at=_moment(1),
                                             uid=gitlab.user_id("bob")))  # fmt: skip
    assert gitlab.statuses_on(sha_of(iid))["sluice/approval"]["state"] == "success"


def _in_pipeline(gitlab: FakeGitLab, sha: str) -> set[tuple[str, int]]:
    return {(s["ref"], s["pipeline_id"]) for s in gitlab.statuses if s["sha"] == sha}


def test_a_train_s_statuses_go_into_its_pipelines_and_the_merges_promote_in_train_order(
    world: TrainWorld, service: GitLabService
) -> None:
    gitlab, warehouse = world.gitlab, world.scripted
    mr8, mr9 = world.tree("mr8", ORDERS), world.tree("mr9", CUSTOMERS)
    _approved_mr(world, service, 8, mr8)
    _approved_mr(world, service, 9, mr9)
    # The train: 8 (main + 8 at sha 20), then 9 (main + 8 + 9 at sha 21).
    world.commit(sha_of(20), mr8)
    world.commit(sha_of(21), world.tree("both", ORDERS, CUSTOMERS))
    jobs = len(warehouse.jobs)
    for iid, train, pipeline in ((8, sha_of(20), 508), (9, sha_of(21), 509)):
        _deliver(service, PIPELINE_HOOK, train_pipeline(PROJECT, iid, train, pipeline))
        states = {name: s["state"] for name, s in gitlab.statuses_on(train).items()}
        assert states == dict.fromkeys(CHECKS, "success"), states
        assert _in_pipeline(gitlab, train) == {(f"refs/merge-requests/{iid}/train", pipeline)}
    # Only train 9's customers (on 8's orders) is a version no merge request built.
    built = [s["model"] for job in warehouse.jobs[jobs:] for s in job["steps"]
             if s["type"] == "build"]  # fmt: skip
    assert built == ["jaffle.customers"], built
    train_customers = warehouse.reads(f"jaffle__{merge_group_environment(sha_of(21))}.customers")

    # Both pipelines pass; GitLab merges in train order, main moving to each train commit.
    for iid, train, pipeline in ((8, sha_of(20), 508), (9, sha_of(21), 509)):
        _deliver(service, PIPELINE_HOOK,
                 train_pipeline(PROJECT, iid, train, pipeline, status="success"))  # fmt: skip
    jobs = len(warehouse.jobs)
    for iid, train in ((8, sha_of(20)), (9, sha_of(21))):
        world.commit(train, world.trees[train], branch="main")
        gitlab.merge_requests[iid]["state"] = "merged"
        _deliver(service, MR_HOOK, merge_request(PROJECT, iid, sha_of(iid), "merge",
                                                 merge_sha=train))  # fmt: skip
        deploy = gitlab.statuses_on(train)["sluice/deploy"]
        assert (deploy["state"], deploy["description"]) == ("success", "Promoted by virtual update")
    assert [(d["sha"], d["environment"], d["status"]) for d in gitlab.deployments] == [
        (sha_of(20), "prod", "success"), (sha_of(21), "prod", "success"),
    ]  # fmt: skip
    assert [s for job in warehouse.jobs[jobs:] for s in job["steps"] if s["type"] == "build"] == []
    assert warehouse.reads("jaffle.customers") == train_customers


def test_a_combination_no_merge_request_had_fails_its_pipeline_and_says_why_on_the_mr(
    world: TrainWorld, service: GitLabService
) -> None:
    """MRs 8 and 10 each add a column to orders; on the train (10 behind 8) orders has both,
    a text no merge request's plan had."""
    gitlab, warehouse = world.gitlab, world.scripted
    _approved_mr(world, service, 8, world.tree("mr8", ORDERS))
    _approved_mr(world, service, 10, world.tree("mr10", ORDERS_AGAIN))
    both = ("orders.sql", "  o.status,\n", "  o.status,\n  o.status = 'completed' AS "
            "is_completed,\n  o.status = 'placed' AS is_placed,\n")  # fmt: skip
    world.commit(sha_of(22), world.tree("train10", both))
    jobs, notes = len(warehouse.jobs), len(gitlab.bot_notes(10))
    _deliver(service, PIPELINE_HOOK, train_pipeline(PROJECT, 10, sha_of(22), 510))
    states = {name: s["state"] for name, s in gitlab.statuses_on(sha_of(22)).items()}
    assert states == dict.fromkeys(CHECKS, "failed"), states
    assert _in_pipeline(gitlab, sha_of(22)) == {("refs/merge-requests/10/train", 510)}
    assert gitlab.statuses_on(sha_of(22))["sluice/approval"]["description"] == (
        "1 unapproved change in the combined plan"
    )
    assert warehouse.jobs[jobs:] == []
    [note] = gitlab.bot_notes(10)[notes:]
    assert "- `jaffle.orders`: content `" in note["body"]
    assert "(changed by !8, !10)" in note["body"]
