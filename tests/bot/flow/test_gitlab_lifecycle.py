"""The merge request lifecycle through the service and GitLab at the wire, Spark scripted.

MR opened -> the sticky note and the commit statuses -> approvals that must not count
(the author's) and a command from a Reporter that is refused -> an approval by an
eligible reviewer -> merge -> prod promoted by virtual update (prod's views read the MR's
tables, no table file written) with a GitLab deployment record -> the MR environment
invalidated, then gone after the janitor.

Real GitLab payloads from tests/fixtures/webhooks/gitlab are moved to the fake project and
delivered to ``/webhooks/gitlab`` with the token; python-gitlab really runs against
``FakeGitLab``. Spark is the scripted runner (:mod:`sluice.core.spark.scripted`): what the
jobs compute is the forge's business only through the plan, the diffs and the checks, and
the same flow on real Spark is the GitHub lifecycle's (``test_lifecycle.py``), whose jobs
are the same whichever forge asked for them.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.timeutil import to_ms
from tests.helpers.cases import load_case
from tests.helpers.gitlab_service import API_TOKEN, TOKEN, GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.world import edit, sha_of

REPO = Path(__file__).resolve().parents[3]
END = to_ms("2018-04-30")
PROJECT = "data/warehouse"
MR_HOOK, NOTE_HOOK = "Merge Request Hook", "Note Hook"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitLabWorld]:
    root = tmp_path_factory.mktemp("gitlab-lifecycle")
    warehouse = Warehouse(Script(rows={"jaffle.orders": 99}))
    env = GitLabWorld(root, root / "work", f"sqlite:///{root / 'state.db'}", None, {},  # type: ignore[arg-type]
                      warehouse=warehouse)  # fmt: skip
    env.gitlab = FakeGitLab(project=PROJECT)
    build_main(env, main_tree(root), END)
    # The MR drops prod's 4 returned orders: its build of orders holds 95 rows.
    warehouse.script = Script(rows={"jaffle.orders": 95})
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    settings = gitlab_settings(world.root, workdir=world.work, database_url=world.url,
                               spark_mode=world.spark_mode)  # fmt: skip
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        world.gitlab.install(mock)
        with TestClient(create_app(settings, runner_for=world.runner_for)) as client:
            yield GitLabService(client, world.gitlab, settings)


def _mr_hook(gitlab: FakeGitLab, action: str, iid: int, head: str, user: str, author: str,
             **attributes: Any) -> dict[str, Any]:  # fmt: skip
    """GitLab's real MR payload, moved to our project, for ``action`` by ``user`` (their
    account ids the fake GitLab's, as the gate compares people by id)."""
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["user"].update(username=user, id=gitlab.user_id(user))
    attrs = payload["object_attributes"]
    attrs.update(action=action, iid=iid, source_branch=f"feature-{iid}", target_branch="main",
                 author_id=gitlab.user_id(author), **attributes)  # fmt: skip
    attrs["last_commit"]["id"] = head
    # GitLab moves updated_at to the moment of the action (an approval's time, to the gate):
    # a second after now, as a person reads the plan before approving it (the gate counts
    # no approval stamped in the second its plan was published; GitLab's has whole seconds).
    attrs["updated_at"] = attributes.get("updated_at") or time.strftime(
        "%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + 1)
    )
    return payload


def _note_hook(gitlab: FakeGitLab, iid: int, user: str, body: str) -> dict[str, Any]:
    """GitLab's real note payload for ``body`` written by ``user`` on MR ``iid`` (the note
    is added to the fake project too, so it can be reacted to)."""
    note_id = gitlab.add_note(iid, body, author=user)
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["user"]["username"] = user
    payload["object_attributes"].update(note=body, id=note_id)
    payload["merge_request"]["iid"] = iid
    return payload


def _deliver(service: GitLabService, event: str, payload: dict[str, Any]) -> None:
    response = service.deliver(event, payload)
    assert response.status_code == 202, response.text
    service.idle(timeout=900)


def test_open_approve_merge_promote_by_virtual_update_and_clean_up(
    world: GitLabWorld, service: GitLabService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gitlab = world.gitlab
    head = sha_of(2)
    src = world.root / "mr2"
    shutil.copytree(world.trees[sha_of(1)], src)
    edit(src / "models" / "orders.sql", "  ON o.order_id = p.order_id",
         "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    world.commit(head, src)
    gitlab.add_mr(2, sha=head, source_branch="feature-2", author="alice", merge_sha=sha_of(3))
    gitlab.members.update({"alice": 30, "bob": 30, "dave": 20})

    _deliver(service, MR_HOOK, _mr_hook(gitlab, "open", 2, head, "alice", "alice"))
    statuses = gitlab.statuses_on(head)
    assert {name: s["state"] for name, s in statuses.items()} == {
        "sluice/tests": "success", "sluice/pr-environment": "success",
        "sluice/prod-plan": "success", "sluice/approval": "failed",
    }  # fmt: skip
    assert (
        statuses["sluice/prod-plan"]["description"] == "Merging is a virtual update: 0 rows written"
    )
    assert statuses["sluice/approval"]["description"] == "1 more approval needed"
    history = [s["state"] for s in gitlab.statuses if s["name"] == "sluice/pr-environment"]
    assert history[:2] == ["pending", "running"] and history[-1] == "success"
    [note] = gitlab.bot_notes(2)
    body = note["body"]
    assert "jaffle__pr_2.orders" in body  # where to query
    assert "`jaffle.orders`" in body and "**Approval:** ⏳" in body
    assert "4 rows only in prod" in body  # the table diff of orders: the returned orders
    assert (
        statuses["sluice/tests"]["target_url"]
        == f"{gitlab.web_url}/-/merge_requests/2#note_{note['id']}"
    )

    # The author's own approval never counts.
    gitlab.approve(2, "alice")
    _deliver(service, MR_HOOK, _mr_hook(gitlab, "approval", 2, head, "alice", "alice"))
    assert gitlab.statuses_on(head)["sluice/approval"]["state"] == "failed"
    assert "@alice's own approval does not count" in gitlab.bot_notes(2)[0]["body"]

    # dave is a Reporter: his /sluice deploy is refused, nothing merged or deployed.
    _deliver(service, NOTE_HOOK, _note_hook(gitlab, 2, "dave", "/sluice deploy"))
    refusal = gitlab.notes_on(2)[-1]["body"]
    assert refusal.startswith("@dave only users with the Developer role or above"), refusal
    assert gitlab.merges == [] and gitlab.deployments == []
    # bob's /sluice help is acknowledged with an award emoji and answered.
    help_note = _note_hook(gitlab, 2, "bob", "/sluice help")
    _deliver(service, NOTE_HOOK, help_note)
    awards = [(a["iid"], a["note"], a["name"], a["user"]) for a in gitlab.awards]
    assert awards == [(2, help_note["object_attributes"]["id"], "thumbsup", gitlab.bot)]
    assert "/sluice deploy" in gitlab.notes_on(2)[-1]["body"]

    # bob approves in GitLab: the gate passes.
    gitlab.approve(2, "bob")
    _deliver(service, MR_HOOK, _mr_hook(gitlab, "approval", 2, head, "bob", "alice"))
    approval = gitlab.statuses_on(head)["sluice/approval"]
    assert (approval["state"], approval["description"]) == ("success", "Approved")
    assert (
        "**Approval:** ✅ Approved. Approved by @bob (1 of 1 required)."
        in gitlab.bot_notes(2)[0]["body"]
    )

    # Merge: prod is promoted by swapping views to the tables the MR built.
    mr_versions = world.versions("pr_2")
    jobs = len(world.scripted.jobs)
    merge = sha_of(3)
    world.commit(merge, src, branch="main")
    gitlab.merge_requests[2]["state"] = "merged"
    _deliver(service, MR_HOOK, _mr_hook(gitlab, "merge", 2, head, "bob", "alice", state="merged",
                                        merge_commit_sha=merge))  # fmt: skip
    deploy = gitlab.statuses_on(merge)["sluice/deploy"]
    assert (deploy["state"], deploy["description"]) == ("success", "Promoted by virtual update")
    assert not any(step["type"] == "build" for job in world.scripted.jobs[jobs:]
                   for step in job["steps"]), "the promotion built a table"  # fmt: skip
    assert world.scripted.reads("jaffle.orders") == world.scripted.reads("jaffle__pr_2.orders")
    prod_versions = world.versions("prod")
    assert prod_versions["jaffle.orders"] == mr_versions["jaffle.orders"]
    [deployment] = gitlab.deployments
    assert (deployment["environment"], deployment["sha"], deployment["ref"]) == (
        "prod",
        merge,
        "main",
    )
    assert deployment["status"] == "success"
    body = gitlab.bot_notes(2)[0]["body"]
    assert f"**Promotion** of `{merge[:7]}`: 🚀 Promoted by virtual update." in body
    assert "`pr_2` is removed (promoted to prod)" in body

    # The environment was invalidated at once; the janitor drops it.
    world.janitor_drops("pr_2", service.settings, "gitlab", PROJECT)

    # Neither the API token nor the webhook token is in anything the service produced.
    produced = json.dumps([gitlab.notes, gitlab.statuses, gitlab.deployments, gitlab.awards])
    world.assert_secrets_absent(produced + caplog.text, API_TOKEN, TOKEN)
