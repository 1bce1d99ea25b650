"""A GitLab merge train's promotion on real Spark, through the service: python-gitlab at the
wire against ``FakeGitLab``, GitLab's own hooks (a Merge Request Hook of each kind, the
Pipeline Hook of the train's pipeline: :mod:`tests.helpers.merge_train`).

A merge request is opened (built in its environment on Spark) and approved; it joins the
merge train, whose pipeline runs on the train's merge commit: Sluice plans and gates that
commit reusing every version the merge request's environment built (its statuses go into
the pipeline; no table file is written). The merge then promotes prod by virtual update:
prod's view reads the merge request's physical table, no table is built, and prod's rows
are the merge request's.

The smallest world that shows it (Spark's cost is JVM starts and jobs: one server start,
for the whole module, and a handful of jobs on it): two FULL models of literal rows, the
merge request changing the one downstream. The flow's cases on the scripted runner are
``test_merge_train_flow.py`` and ``test_merge_train_service.py``; GitHub's merge queue on
real Spark is ``test_lifecycle.py``'s.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.core.snapshot.naming import PROD, merge_group_environment
from sluice.core.spark import connect
from tests.helpers.gitlab_service import GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main
from tests.helpers.merge_train import merge_request, train_pipeline
from tests.helpers.world import edit, sha_of

pytestmark = pytest.mark.spark

PROJECT = "data/warehouse"
MR_HOOK, PIPELINE_HOOK = "Merge Request Hook", "Pipeline Hook"
CHECKS = ("sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval")
CONFIG = """model_defaults:
  dialect: spark
  start: '2024-01-01'
  cron: '@daily'
sluice:
  pr:
    backfill_days: null
  gate:
    required_approvers:
      users: [bob]
  deploy:
    prod_branch: main
    on: merge
"""
ITEMS = """MODEL (name shop.items, kind FULL);

SELECT * FROM VALUES (1, 'apple', 3), (2, 'pear', 5) AS t(id, name, qty)
"""
TOTALS = """MODEL (name shop.totals, kind FULL);

SELECT name, qty FROM shop.items
"""
DOUBLED = ("SELECT name, qty FROM", "SELECT name, qty, qty * 2 AS doubled FROM")
IID, HEAD, TRAIN, PIPELINE = 12, sha_of(12), sha_of(13), 612


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitLabWorld]:
    """Prod built up to now on a warm Spark Connect server from main (gated by bob)."""
    root = tmp_path_factory.mktemp("train")
    env = GitLabWorld(root, root / "work", f"sqlite:///{root / 'state.db'}",
                     None, {}, "connect")  # type: ignore[arg-type]  # fmt: skip
    env.gitlab = FakeGitLab(project=PROJECT)
    env.gitlab.members.update({"alice": 30, "bob": 30})
    main = root / "main"
    (main / "models").mkdir(parents=True)
    (main / "config.yaml").write_text(CONFIG)
    (main / "models" / "items.sql").write_text(ITEMS)
    (main / "models" / "totals.sql").write_text(TOTALS)
    build_main(env, main, int(time.time() * 1000))
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    settings = gitlab_settings(
        world.root, workdir=world.work, database_url=world.url, spark_mode="connect"
    )
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.gitlab.install(mock)
        with TestClient(create_app(settings)) as client:
            yield GitLabService(client, world.gitlab, settings)


def _deliver(service: GitLabService, hook: str, payload: dict[str, Any]) -> None:
    response = service.deliver(hook, payload)
    assert response.status_code == 202, response.text
    service.idle(timeout=900)


def _moment(offset: float = 0.0) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + offset))


def test_a_merge_train_promotes_prod_by_virtual_update_to_the_mr_s_tables(
    world: GitLabWorld, service: GitLabService
) -> None:
    gitlab = world.gitlab
    mr = world.root / "mr"
    shutil.copytree(world.trees[sha_of(1)], mr)
    edit(mr / "models" / "totals.sql", *DOUBLED)
    world.commit(HEAD, mr)
    gitlab.add_mr(IID, sha=HEAD, source_branch=f"mr-{IID}", author="alice")

    # Opened: its environment built on Spark; approved by bob after its plan.
    _deliver(service, MR_HOOK, merge_request(PROJECT, IID, HEAD, "open", updated_at=_moment()))
    states = {name: s["state"] for name, s in gitlab.statuses_on(HEAD).items()}
    assert states == {**dict.fromkeys(CHECKS, "success"), "sluice/approval": "failed"}, states
    gitlab.approve(IID, "bob")
    _deliver(service, MR_HOOK, merge_request(PROJECT, IID, HEAD, "approval", user="bob",
                                             updated_at=_moment(1),
                                             uid=gitlab.user_id("bob")))  # fmt: skip
    assert gitlab.statuses_on(HEAD)["sluice/approval"]["state"] == "success"

    # The train: main with the MR merged, at TRAIN; its pipeline's hook asks for Sluice's
    # statuses there. Every version is the MR environment's: nothing is written.
    mr_versions = world.versions(f"pr_{IID}")
    files = world.table_files()
    world.commit(TRAIN, mr)
    _deliver(service, PIPELINE_HOOK, train_pipeline(PROJECT, IID, TRAIN, PIPELINE))
    train = gitlab.statuses_on(TRAIN)
    assert {name: s["state"] for name, s in train.items()} == dict.fromkeys(CHECKS, "success")
    assert {(s["ref"], s["pipeline_id"]) for s in gitlab.statuses if s["sha"] == TRAIN} == {
        (f"refs/merge-requests/{IID}/train", PIPELINE)
    }
    assert train["sluice/approval"]["description"] == "Approved: every change of the combined plan"
    assert world.versions(merge_group_environment(TRAIN)) == mr_versions
    assert world.table_files() == files, "the train's plan wrote table files"

    # The pipeline passes and GitLab merges: main moves to the train's commit, and prod is
    # promoted by swapping its view to the table the MR built.
    _deliver(service, PIPELINE_HOOK,
             train_pipeline(PROJECT, IID, TRAIN, PIPELINE, status="success"))  # fmt: skip
    world.commit(TRAIN, mr, branch="main")
    gitlab.merge_requests[IID]["state"] = "merged"
    _deliver(service, MR_HOOK, merge_request(PROJECT, IID, HEAD, "merge", merge_sha=TRAIN))
    deploy = gitlab.statuses_on(TRAIN)["sluice/deploy"]
    assert (deploy["state"], deploy["description"]) == ("success", "Promoted by virtual update")
    assert [(d["sha"], d["environment"], d["status"]) for d in gitlab.deployments] == [
        (TRAIN, PROD, "success")
    ]
    assert world.table_files() == files, "the promotion wrote table files"
    assert world.versions(PROD) == mr_versions
    # Prod's view reads the MR's physical table: its rows, its new column.
    assert world.query(PROD, "SELECT name, qty, doubled FROM shop.totals ORDER BY name") == [
        ["apple", 3, 6], ["pear", 5, 10],
    ]  # fmt: skip
    # Every job of the module, prod's build, the service's and the queries, ran on the one
    # warm server the module started (Spark's cost in CI is JVM starts).
    server = connect._SERVERS[(world.work / "spark").resolve()]
    assert server.starts == 1
