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
served repository (GitLab's webhook token: once one token for the whole service, typed
into each project's webhook by its maintainers; now each project's own, derived from the
service's secret for its id, so she holds her own project's: README, "GitLab merge
requests").

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

import dataclasses
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app, forge_factory
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import dispatch, tenancy
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.core.config import SETTINGS_FILES
from sluice.core.snapshot.naming import schema_prefix
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import CASE_REPOSITORY_ID, load_case
from tests.helpers.github_wire import FakeGitHub, tarball
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_service import GitLabService, gitlab_settings, project_token
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld, build_main, main_tree
from tests.helpers.world import edit, sha_of
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, opened, payload

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
    response = service.deliver(MR_HOOK, mr_open_hook(gitlab, 8, sha_of(8), V_PATH, V_ID))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)
    assert gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"


def _bot_awards(gitlab: FakeGitLab, note_id: int) -> list[str]:
    return [a["name"] for a in gitlab.awards if a["note"] == note_id and a["user"] == gitlab.bot]


@pytest.mark.parametrize("token_of", [MALLORY_ID, V_ID], ids=["her-token", "v-s-token"])
def test_a_served_project_s_maintainer_cannot_run_commands_in_another_project_as_its_writer(
    gl_world: GitLabWorld,
    gl_service: GitLabService,
    caplog: pytest.LogCaptureFixture,
    token_of: int,
) -> None:
    """mallory maintains data/mallory (served: gitlab:data/*), so she holds its webhook's
    token. She writes a harmless note on V's MR !8 (anyone who can read V can), then posts
    a Note Hook of her own making with that token: V's project id and path (which GitLab
    says agree), carol (a writer of V) as its author, her note's id, and a command. A
    sound service runs no command in V that no writer of V wrote. Defended (was finding
    1): the token is data/mallory's, the body's project.id V's (entry/app.py _receive,
    intake/verify.py): 401, nothing stored. Were she a maintainer of V too (V's token),
    the command is still refused: run_command reads the note back by id and finds it
    mallory's."""
    caplog.set_level(logging.INFO)
    gitlab, warehouse = gl_world.gitlab, gl_world.scripted
    _v_builds_mr_8(gl_world, gl_service)
    harmless = gitlab.add_note(8, "nice change!", author="mallory")
    jobs, replies = len(warehouse.jobs), len(gitlab.bot_notes(8))

    forged = _note_hook(8, harmless, "carol", "/sluice plan", V_PATH, V_ID)
    response = gl_service.deliver(NOTE_HOOK, forged, token=project_token(token_of))
    assert response.status_code == (202 if token_of == V_ID else 401), response.text
    gl_service.idle(timeout=300)

    ran = warehouse.jobs[jobs:]
    accepted = _bot_awards(gitlab, harmless)
    assert not accepted and not ran, (
        f"mallory's note {harmless} was taken as carol's command in {V_PATH}: the bot "
        f"awarded {accepted} to it and ran {len(ran)} Spark job(s) in V's namespace; "
        f"{len(gitlab.bot_notes(8)) - replies} new bot note(s)"
    )


def _moment(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + seconds_from_now))


def _mr_event(gitlab: FakeGitLab, action: str, iid: int, head: str, user: str,
              **attributes: Any) -> dict[str, Any]:  # fmt: skip
    """A real Merge Request Hook body of V's MR ``iid`` (alice's) for ``action`` by
    ``user`` at ``head``."""
    payload = mr_open_hook(gitlab, iid, head, V_PATH, V_ID)
    payload["user"].update(username=user, id=gitlab.user_id(user))
    payload["object_attributes"].update(action=action, **attributes)
    return payload


ALICE_ID = 7778  # data/alice-tools: another served project, alice its maintainer


@pytest.mark.parametrize(
    "token_of",
    [
        pytest.param(ALICE_ID, id="another-project-s-token"),
        pytest.param(V_ID, id="v-s-own-token"),
    ],
)
def test_a_forged_approval_hook_does_not_move_an_approval_onto_a_head_its_approver_never_saw(
    gl_world: GitLabWorld, gl_service: GitLabService, token_of: int
) -> None:
    """carol (V's required approver) approves alice's MR !8 at its head. alice, who also
    maintains another served project (so she holds that project's webhook token), or V
    itself (so she holds V's), pushes a further change: carol's approval goes stale, as it
    should. alice then posts an approval hook of carol's naming the new head. A sound gate
    still waits for carol. Defended with another project's token (was finding 2: the token
    is not V's, 401); with V's own (was open): the hook names no head the gate takes,
    approval._bound binds carol's approval from GitLab's approved_at and the MR's versions."""
    gitlab = gl_world.gitlab
    _v_builds_mr_8(gl_world, gl_service)
    gitlab.approve(8, "carol")
    legit = _mr_event(gitlab, "approval", 8, sha_of(8), "carol", updated_at=_moment(1))
    assert gl_service.deliver(MR_HOOK, legit).status_code == 202
    gl_service.idle(timeout=300)
    assert gitlab.statuses_on(sha_of(8))["sluice/approval"]["state"] == "success"

    src = gl_world.root / "mr8b"
    shutil.copytree(gl_world.trees[sha_of(8)], src)
    edit(src / "models" / "customers.sql", "  c.first_name,\n",
         "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip
    gl_world.commit(sha_of(9), src)
    gitlab.add_mr(8, sha=sha_of(9), source_branch="feature-8", author="alice")
    pushed = _mr_event(gitlab, "update", 8, sha_of(9), "alice", oldrev=sha_of(8),
                       updated_at=_moment(0))  # fmt: skip
    assert gl_service.deliver(MR_HOOK, pushed).status_code == 202
    gl_service.idle(timeout=300)
    stale = gitlab.statuses_on(sha_of(9))["sluice/approval"]
    assert stale["state"] == "failed", stale  # carol never saw the new head

    forged = _mr_event(gitlab, "approval", 8, sha_of(9), "carol", updated_at=_moment(2))
    response = gl_service.deliver(MR_HOOK, forged, token=project_token(token_of))
    assert response.status_code == (202 if token_of == V_ID else 401), response.text
    gl_service.idle(timeout=300)
    after = gitlab.statuses_on(sha_of(9))["sluice/approval"]
    assert after["state"] != "success", (
        f"carol's approval of {sha_of(8)} counts for {sha_of(9)}, which she never saw: "
        f"{after['description']}"
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


# == GitHub: names bound for good, ids of objects of another repository ==============

G_NAME, G_KEY = "acme/future", "github:acme/future"
G_V_ID, G_MALLORY_ID = 424242, 990001
HEAD_V, HEAD_M = "b2" * 20, "e5" * 20
G_CONFIG = GATED + "  pr:\n    backfill_days: null\n"
DAY = 86_400_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jaffle_shop"


def _named(body: dict[str, Any], name: str, repository_id: int) -> dict[str, Any]:
    """A GitHub delivery of repository ``name`` (not a fork) whose forge id is
    ``repository_id``."""
    repository = {**body["repository"], "full_name": name, "id": repository_id}
    pull = dict(body["pull_request"])
    pull["head"] = {**pull["head"], "repo": {**pull["head"]["repo"], "full_name": name,
                                             "id": repository_id}}  # fmt: skip
    pull["base"] = {**pull["base"], "repo": {**pull["base"]["repo"], "full_name": name,
                                             "id": repository_id}}  # fmt: skip
    return {**body, "repository": repository, "pull_request": pull}


def _github(tmp_path: Path) -> Bot:
    """A service isolating repositories (octo/warehouse the state owner), on the scripted
    warehouse."""
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=Warehouse().runner,
              isolate=True)  # fmt: skip
    bot.ledger.belongs_to(f"{KEY}#.", NOW)
    return bot


def _repository(bot: Bot, name: str, ids: dict[int, str], created: dict[int, int],
                head: str, number: int, author: str) -> MemoryForge:  # fmt: skip
    """Repository ``name`` on GitHub as GitHub names each id now (``ids``), its prod
    branch at the example and PR ``number`` (``author``'s) at ``head``."""
    forge = bot.repository(name)
    forge.repositories.update(ids)
    forge.created.update(created)
    forge.roles.update({author: "admin"})
    base = "c" * 40
    bot.commit(base, G_CONFIG, forge=forge)
    forge.refs["main"] = base
    bot.commit(head, G_CONFIG, parents=(base,), forge=forge)
    forge.open_pull(number, head_sha=head, base="main", author=author)
    return forge


def test_a_name_squatted_and_left_does_not_lock_out_the_repository_made_under_it(
    tmp_path: Path,
) -> None:
    """mallory, who may create repositories in acme (served: acme/*), makes acme/future,
    opens a PR there (its delivery binds the name to her repository's id), then renames
    her repository away. Her team's colleague later creates acme/future for real (V): a
    sound service serves V's PRs (in a namespace of V's own: nothing of mallory's is V's),
    rather than refusing V until an operator edits the database. (The same holds for a
    served repository renamed into a squatted name: its deliveries under the new name are
    refused, and its old name's scheduled jobs too, the forge naming it otherwise.) Was
    open; closed: once the forge names the bound id otherwise, the name's new holder takes
    it (``dispatch._take_name``, ``Ledger.take_name``)."""
    bot = _github(tmp_path)
    try:
        _repository(bot, G_NAME, {G_MALLORY_ID: G_NAME}, {G_MALLORY_ID: NOW - DAY}, HEAD_M, 11,
                    "mallory")  # fmt: skip
        bot.deliver("pull_request", _named(opened(11, HEAD_M, author="mallory"), G_NAME,
                                           G_MALLORY_ID))  # fmt: skip
        assert bot.ledger.name_binding(G_KEY) == (G_KEY, G_MALLORY_ID)
        # mallory renames hers away; V is created under the name.
        ids = {G_MALLORY_ID: "acme/elsewhere", G_V_ID: G_NAME}
        v = _repository(bot, G_NAME, ids, {G_V_ID: NOW}, HEAD_V, 9, "alice")
        bot.deliver("pull_request", _named(opened(9, HEAD_V), G_NAME, G_V_ID))
        posted = sorted(v.checks.get(HEAD_V, {}))
        assert posted, "V's PR 9 under acme/future was refused: the name is mallory's for good"
        # ... and V inherits nothing of mallory's namespace.
        assert bot.ledger.name_binding(G_KEY) != (G_KEY, G_V_ID)
    finally:
        bot.close()


def test_a_check_run_of_another_repository_s_run_id_and_pull_request_approves_nothing_there(
    tmp_path: Path,
) -> None:
    """Defended (``events/github.py`` takes the repository from ``repository`` alone;
    ``own_checks.refusal`` looks the run id up under the job's own key): mallory's served
    repository acme/m sends a click on "Approve this plan" whose check run id, head and
    pull request (its ``base.repo`` V's) are V's approval run on V's PR 9. The job is
    acme/m's: nothing of V is asked, posted or recorded."""
    bot = _github(tmp_path)
    try:
        v = _repository(bot, G_NAME, {G_V_ID: G_NAME}, {G_V_ID: NOW - DAY}, HEAD_V, 9, "alice")
        bot.deliver("pull_request", _named(opened(9, HEAD_V), G_NAME, G_V_ID))
        run = v.set_check(HEAD_V, Check("sluice/approval", "completed", "gate", "gate",
                                        conclusion="failure"))  # fmt: skip
        assert run is not None
        bot.ledger.record_check_run(G_KEY, HEAD_V, "sluice/approval", run, NOW)
        mine = _repository(bot, "acme/m", {G_MALLORY_ID: "acme/m"}, {G_MALLORY_ID: NOW - DAY},
                           HEAD_M, 3, "mallory")  # fmt: skip
        asked = len(v.calls)
        body = payload("github/check_run/requested_action.payload.json", **{
            "check_run.name": "sluice/approval", "check_run.head_sha": HEAD_V,
            "check_run.id": run, "requested_action.identifier": "approve:fp",
            "sender.login": "mallory",
        })  # fmt: skip
        body["repository"].update(full_name="acme/m", id=G_MALLORY_ID)
        body["check_run"]["pull_requests"] = [
            {"number": 9, "id": 9, "base": {"ref": "main", "sha": "c" * 40,
             "repo": {"id": G_V_ID, "name": "future", "url": f"https://api.github.com/repositories/{G_V_ID}"}}}
        ]  # fmt: skip
        bot.deliver("check_run", body)
        assert v.calls[asked:] == []
        assert bot.ledger.clicks(G_KEY, 9) == []
        assert mine.checks.get(HEAD_V, {}).get("sluice/approval") is None
    finally:
        bot.close()


def test_a_quiet_name_s_scheduled_job_addresses_its_repository_by_id_once_bound(
    tmp_path: Path,
) -> None:
    """A quiet repository (records under acme/v, no delivery since names were bound) gets
    its janitor by name, as the scheduler queues it. GitHub at the wire: the job proves the
    name is V's (made before the records, holding a check run the service made) and binds
    it; a sound job then asks GitHub about V by its id alone (closed: the job is readdressed
    by the id once bound, ``Job.readdress``)."""
    name, key, rid = "acme/v", "github:acme/v", 31337
    github = FakeGitHub(repo=name, repo_id=rid, scoped=True)
    sha = "c" * 40
    github.refs["main"] = sha
    github.files[("main", "config.yaml")] = G_CONFIG
    github.files[(sha, "config.yaml")] = G_CONFIG
    src = tmp_path / "main"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns(".sluice", *SETTINGS_FILES))
    (src / "config.yaml").write_text(G_CONFIG)
    github.trees[sha] = tarball(src, f"acme-v-{sha[:7]}")
    run = github.add_check_run(sha, "sluice/pr-environment", app={"id": 1, "slug": "sluice"})
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = ServiceSettings(
        webhook_secret="s3cr3t", github_token="ghp_redTeamRound4", workdir=tmp_path / "work",
        database_url=url, github_request_interval=0, github_write_interval=0,
        janitor_interval_seconds=0,
    )  # fmt: skip
    deps = make_deps(project_python="on", workdir=tmp_path / "work", state_url=url,
                     clock=lambda: NOW, runner_for=Warehouse().runner,
                     forge_for=forge_factory(settings, binding=None))  # fmt: skip
    # The service's binding reader (a ledger of its own, as create_app's).
    deps = dataclasses.replace(
        deps, forge_for=forge_factory(settings, binding=deps.ledger.name_binding)
    )
    try:
        deps.ledger.seen(key, None, NOW - DAY, sha=sha)
        deps.ledger.record_check_run(key, sha, "sluice/pr-environment", run, NOW - DAY)
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            github.install(mock)
            dispatch.handle(deps, JanitorEvent(forge="github", repo=name, installation_id=None))
        assert deps.ledger.name_binding(key) == (key, rid), github.requests
        proved = next(i for i, (_, u) in enumerate(github.requests) if f"/check-runs/{run}" in u)
        after = [u.split("api.github.com", 1)[-1] for _, u in github.requests[proved + 1 :]]
        assert after, "the job asked nothing after binding the name"
        by_name = [u for u in after if u.startswith(("/repos/", ":443/repos/"))]
        assert by_name == [], f"after binding {name} to {rid}, the job asked by name: {by_name}"
    finally:
        deps.close()
