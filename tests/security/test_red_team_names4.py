"""Red team on names bound to repository ids, round 4: the binding of a repository's name
to the forge's id (``dispatch.handle``, ``_admitted``, ``_confirmed``, ``_named_now``,
``_admit``, ``_still_named``, ``_unbound_still_named``, ``give_up``, ``_key_of``;
``Ledger.bind_repository``, ``name_binding``, ``queue_keys``) and the by-id addressing of
the forge (``forge_factory``: which id a job's forge addresses; ``GitHubForge`` and
``GitLabForge`` with ``repo_id``), as the code stood after round 3's fixes (every event
with an id confirmed by ``Forge.repository_of`` before anything is bound or run).

The attacker owns or can create repositories on the same forge, one of them served by the
service (``SLUICE_REPOSITORIES`` a pattern such as ``gitlab:data/*``), can rename and
transfer them, comment on other repositories' pull requests, resend old deliveries of
their own repositories, and sign in to the web UI with their own account; not the
service's secrets or database, except what the forge shows them as the maintainer of a
served repository (GitLab's webhook token is one token for the whole service, typed into
each project's webhook by its maintainers: README, "GitLab merge requests").

Each test asserts what a sound service does. An attack that works against the code as it
is is a ``xfail(strict=True)`` naming the code path and the fix proposed; the others are
attacks tried and defended, each saying which defence holds. GitLab is driven through
the whole service (the real app, real Note and Merge Request Hook bodies, GitLab at the
wire: python-gitlab against ``FakeGitLab``, the queue, the scripted warehouse); GitHub
through :func:`sluice.bot.flow.dispatch.handle` with real webhook bodies parsed as the
service parses them, on the in-memory forge, and ``GitHubForge`` against ``FakeGitHub``
at the wire for what a forge made by ``forge_factory`` addresses.
"""

from __future__ import annotations

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
from sluice.bot.flow import tenancy
from sluice.core.snapshot.naming import schema_prefix
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case
from tests.helpers.gitlab_service import GitLabService, gitlab_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.world import edit, sha_of

V_PATH = "data/warehouse"  # the victim project, served
V_ID = CASE_REPOSITORY_ID
MALLORY_ID = 7777  # data/mallory: the attacker's project, served too (gitlab:data/*)
MR_HOOK, NOTE_HOOK = "Merge Request Hook", "Note Hook"


# == GitLab: one webhook token for every project the service serves ==================


@pytest.fixture
def gl_world(tmp_path: Path) -> Iterator[GitLabWorld]:
    """data/warehouse (V) with its prod built on a scripted warehouse, in its own namespace
    (the service isolates the projects ``gitlab:data/*`` admits); alice and carol write to
    it (carol the required approver), mallory is no member of it."""
    shared = f"sqlite:///{tmp_path / 'state.db'}"
    url = tenancy.state_url(shared, f"gitlab:{V_PATH}")
    env = GitLabWorld(tmp_path, tmp_path / "work", url, None, {},  # type: ignore[arg-type]
                      warehouse=Warehouse())  # fmt: skip
    env.gitlab = FakeGitLab(project=V_PATH, project_id=V_ID)
    with schema_prefix(tenancy.schema_prefix(f"gitlab:{V_PATH}")):
        build_main(env, main_tree(tmp_path, approver="carol"), int(time.time() * 1000))
    env.gitlab.members.update({"alice": 30, "carol": 30})
    env.shared = shared  # type: ignore[attr-defined]
    yield env
    env.close()


@pytest.fixture
def gl_service(gl_world: GitLabWorld) -> Iterator[GitLabService]:
    settings = gitlab_settings(
        gl_world.root, workdir=gl_world.work, database_url=gl_world.shared,  # type: ignore[attr-defined]
        isolate_repositories=True, repositories=("gitlab:data/*",),
    )  # fmt: skip
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        gl_world.gitlab.install(mock)
        with TestClient(create_app(settings, runner_for=gl_world.runner_for)) as client:
            yield GitLabService(client, gl_world.gitlab, settings)


def _mr_hook(gitlab: FakeGitLab, iid: int, head: str, path: str, project_id: int) -> dict[str, Any]:
    """GitLab's real Merge Request Hook body: alice opens MR ``iid`` (head ``head``) in the
    project ``path`` of id ``project_id``."""
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"].update(id=project_id, path_with_namespace=path)
    payload["user"].update(username="alice", id=gitlab.user_id("alice"))
    attrs = payload["object_attributes"]
    attrs.update(action="open", iid=iid, source_branch=f"feature-{iid}", target_branch="main",
                 author_id=gitlab.user_id("alice"), source_project_id=project_id,
                 target_project_id=project_id,
                 updated_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))  # fmt: skip
    for side in ("source", "target"):
        attrs[side].update(id=project_id, path_with_namespace=path)
    attrs["last_commit"]["id"] = head
    return payload


def _note_hook(iid: int, note_id: int, user: str, body: str, path: str, project_id: int
               ) -> dict[str, Any]:  # fmt: skip
    """GitLab's real Note Hook body: note ``note_id`` by ``user`` saying ``body`` on MR
    ``iid`` of the project ``path`` of id ``project_id``."""
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["project"].update(id=project_id, path_with_namespace=path)
    payload["project_id"] = project_id
    payload["user"]["username"] = user
    payload["object_attributes"].update(note=body, id=note_id, project_id=project_id,
                                        created_at=time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                 time.gmtime()))  # fmt: skip
    payload["merge_request"]["iid"] = iid
    return payload


def _v_builds_mr_8(world: GitLabWorld, service: GitLabService) -> None:
    """V's own MR !8 (alice's, changing orders), delivered by GitLab and built."""
    src = world.root / "mr8"
    shutil.copytree(world.trees[sha_of(1)], src)
    edit(src / "models" / "orders.sql", "  o.status,\n",
         "  o.status,\n  o.status = 'completed' AS is_completed,\n")  # fmt: skip
    world.commit(sha_of(8), src)
    gitlab = world.gitlab
    gitlab.add_mr(8, sha=sha_of(8), source_branch="feature-8", author="alice")
    response = service.deliver(MR_HOOK, _mr_hook(gitlab, 8, sha_of(8), V_PATH, V_ID))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)
    assert gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"


def _bot_awards(gitlab: FakeGitLab, note_id: int) -> list[str]:
    return [a["name"] for a in gitlab.awards if a["note"] == note_id and a["user"] == gitlab.bot]


@pytest.mark.xfail(
    strict=True,
    reason=(
        "sluice/bot/entry/app.py _receive checks X-Gitlab-Token against one "
        "SLUICE_GITLAB_WEBHOOK_SECRET for every project, and every maintainer of a served "
        "project types it into their webhook; the body's project.id and "
        "path_with_namespace (events/gitlab.py) and user are then the sender's word, and "
        "dispatch._confirmed only checks that the id and the path agree on GitLab (V's own "
        "do), run_command._still_there only that a note of that id exists on the MR. Fix: a "
        "token per project (SLUICE_GITLAB_WEBHOOK_SECRETS: a secret per pattern, or "
        "HMAC(master, project id) given to each project) checked against the body's "
        "project.id before the id is used; and read a command's note back by id "
        "(GET /projects/:id/merge_requests/:iid/notes/:note_id) and act on its author and "
        "body as GitLab has them, never the hook's"
    ),
)
def test_a_served_project_s_maintainer_cannot_run_commands_in_another_project_as_its_writer(
    gl_world: GitLabWorld, gl_service: GitLabService, caplog: pytest.LogCaptureFixture
) -> None:
    """mallory maintains data/mallory (served: gitlab:data/*), so she typed the service's
    one webhook token into its webhook. She writes a harmless note on V's MR !8 (anyone who
    can read V can), then posts a Note Hook of her own making with that token: V's
    project id and path (which GitLab says agree), carol (a writer of V) as its author,
    her note's id, and a command. A sound service runs no command in V that no writer
    of V wrote."""
    caplog.set_level(logging.INFO)
    gitlab, warehouse = gl_world.gitlab, gl_world.scripted
    _v_builds_mr_8(gl_world, gl_service)
    harmless = gitlab.add_note(8, "nice change!", author="mallory")
    jobs, replies = len(warehouse.jobs), len(gitlab.bot_notes(8))

    forged = _note_hook(8, harmless, "carol", "/sluice plan", V_PATH, V_ID)
    response = gl_service.deliver(NOTE_HOOK, forged)
    assert response.status_code == 202, response.text
    gl_service.idle(timeout=300)

    ran = warehouse.jobs[jobs:]
    accepted = _bot_awards(gitlab, harmless)
    assert not accepted and not ran, (
        f"mallory's note {harmless} was taken as carol's command in {V_PATH}: the bot "
        f"awarded {accepted} to it and ran {len(ran)} Spark job(s) in V's namespace; "
        f"{len(gitlab.bot_notes(8)) - replies} new bot note(s)"
    )


def test_a_forged_gitlab_body_pairing_v_s_id_with_another_path_is_refused(
    gl_world: GitLabWorld, gl_service: GitLabService, caplog: pytest.LogCaptureFixture
) -> None:
    """Defended (``dispatch._confirmed`` → ``_named_now``): with the token, mallory pairs
    V's project id with her own path (to reach V's namespace from a path she holds), and
    her project's id with V's path; GitLab names each id otherwise, so both are refused
    before anything is bound, recorded, built or posted."""
    caplog.set_level(logging.INFO)
    gitlab, warehouse = gl_world.gitlab, gl_world.scripted
    _v_builds_mr_8(gl_world, gl_service)
    jobs, asked = len(warehouse.jobs), len(gitlab.requests)
    harmless = gitlab.add_note(8, "nice change!", author="mallory")
    for path, pid in (("data/mallory", V_ID), (V_PATH, MALLORY_ID)):
        body = _note_hook(8, harmless, "carol", "/sluice plan", path, pid)
        response = gl_service.deliver(NOTE_HOOK, body)
        assert response.status_code == 202, response.text
        gl_service.idle(timeout=300)
    refused = [r.getMessage() for r in caplog.records if "job refused" in r.getMessage()]
    assert any(m.startswith("gitlab:data/mallory: comment job refused") for m in refused), refused
    assert any(m.startswith(f"gitlab:{V_PATH}: comment job refused") for m in refused), refused
    assert warehouse.jobs[jobs:] == [] and _bot_awards(gitlab, harmless) == []
    assert [(m, p) for m, p in gitlab.requests[asked:] if m != "GET"] == []
