"""A repository renamed on GitHub, through the whole service (issue 46): the real app,
signed deliveries made from real bodies, GitHub at the wire (PyGithub against
``FakeGitHub``, which answers the repository's id and new name with the new name and its
old name with a 301, then as the repository that took it), the queue and its workers, the
flows on the scripted warehouse (no Spark). octo/warehouse, its prod built and a PR built,
is renamed octo/warehouse2: a PR under the new name keeps the namespace (the same state
and prod, a plan of the PR's change alone) and the web UI lists its jobs under the new
name; a repository of another id that takes the old name is served in a namespace of its
own (nothing of the renamed one's), its jobs on no page of the renamed one's, and the
scheduled jobs of the old name are its, under its id."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from sluice.bot.flow import tenancy
from sluice.bot.queue.scheduler import Scheduler
from sluice.core.snapshot.naming import schema_prefix
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers import github_lifecycle as gl
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.github_service import Service, serve
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.lifecycle_prod import build_main, main_tree
from tests.helpers.renamed import assert_namespace_kept
from tests.helpers.world import World, edit, sha_of

OLD, NEW = gl.OWNER, "octo/warehouse2"
SUCCESSOR_ID = 5151


@pytest.fixture(params=["one repository", "isolated"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """Prod built up to now on a scripted warehouse from main (the example gated by carol):
    in the service's state (the repository owns it), or, when the service isolates
    repositories, in octo/warehouse's namespace (its own state and Spark schemas)."""
    shared = f"sqlite:///{tmp_path / 'state.db'}"
    isolated = request.param == "isolated"
    url = tenancy.state_url(shared, f"github:{OLD}") if isolated else shared
    env = World(tmp_path, tmp_path / "work", url, FakeGitHub(repo=OLD), {},
                warehouse=Warehouse())  # fmt: skip
    prefix = tenancy.schema_prefix(f"github:{OLD}") if isolated else ""
    with schema_prefix(prefix):
        build_main(env, main_tree(tmp_path, approver="carol"), int(time.time() * 1000))
    env.github.permissions.update({"alice": "write", "carol": "write"})
    env.shared = shared  # type: ignore[attr-defined]
    env.isolated = isolated  # type: ignore[attr-defined]
    return env


@pytest.fixture
def service(world: World) -> Iterator[Service]:
    settings = world.settings().model_copy(update={
        "ui_public": True, "database_url": SecretStr(world.shared),  # type: ignore[attr-defined]
        "isolate_repositories": world.isolated,  # type: ignore[attr-defined]
    })  # fmt: skip
    with serve(settings, world.github, world.runner_for) as made:
        yield made


def _as(event: dict[str, Any], full_name: str, repository_id: int) -> dict[str, Any]:
    """``event`` delivered by repository ``full_name`` of GitHub id ``repository_id``."""
    event["repository"]["full_name"] = full_name
    event["repository"]["id"] = repository_id
    for side in ("head", "base"):
        event["pull_request"][side]["repo"]["full_name"] = full_name
    return event


def _open(world: World, service: Service, number: int, model: str, old: str, new: str) -> None:
    """PR ``number`` (head ``sha_of(number)``) changes ``model`` on main, opened by alice
    under the name GitHub has now (the fake's)."""
    src = gl.tree(world, f"pr{number}", sha_of(1))
    edit(src / "models" / f"{model}.sql", old, new)
    world.commit(sha_of(number), src)
    world.github.add_pull(number, sha_of(number), author="alice", head_ref=f"feature-{number}")
    event = gl.pull(number, sha_of(number), "alice", "opened")
    gl.deliver(service, "pull_request", _as(event, world.github.repo, CASE_REPOSITORY_ID))


def _since(world: World, start: int) -> list[tuple[str, str]]:
    return world.github.requests[start:]


def _by_name(requests: list[tuple[str, str]], name: str = "[^/]+/[^/?]+") -> list[str]:
    """The URLs of ``requests`` made under repository name ``name`` (a pattern: any)."""
    return [url for _, url in requests if re.search(rf"/repos/{name}([/?]|$)", url)]


def test_a_renamed_repository_keeps_its_namespace_and_the_old_name_s_successor_gets_none_of_it(
    world: World, service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    github, warehouse = world.github, world.scripted
    caplog.set_level(logging.INFO)
    prod = world.versions("prod")
    _open(world, service, 8, "orders", "  o.status,\n",
          "  o.status,\n  o.status = 'completed' AS is_completed,\n")  # fmt: skip
    assert github.checks_on(sha_of(8))["sluice/pr-environment"]["conclusion"] == "success"

    # GitHub renames the repository: its id and the new name say octo/warehouse2, the old
    # name moved (301).
    github.rename(NEW)
    jobs, asked = len(warehouse.jobs), len(github.requests)
    _open(world, service, 9, "customers", "  c.first_name,\n",
          "  c.first_name,\n  LENGTH(c.first_name) AS first_name_length,\n")  # fmt: skip
    built = github.checks_on(sha_of(9))
    assert built["sluice/pr-environment"]["conclusion"] == "success", built
    assert "was renamed: it keeps its namespace" in caplog.text
    assert_namespace_kept(world, f"github:{OLD}", f"github:{NEW}", prod, jobs)
    [comment] = github.comments_on(9)
    assert "jaffle.customers" in comment["body"] and "jaffle.orders" not in comment["body"]
    # Everything it asked GitHub went under the repository's id (the delivery's): no name.
    renamed = asked
    assert _by_name(_since(world, asked)) == []
    by_id = [url for _, url in _since(world, asked) if f"/repositories/{CASE_REPOSITORY_ID}" in url]
    assert any(url.endswith("/check-runs") for url in by_id), by_id

    # The web UI lists the repository under its new name, with its jobs under each name.
    listed = service.client.get("/api/v1/repositories")
    assert listed.status_code == 200, listed.text
    assert f"github:{NEW}" in listed.text and f'github:{OLD}"' not in listed.text
    page = service.client.get("/api/v1/jobs", params={"repo": f"github:{NEW}"}).json()
    mine = {job["key"] for job in page["queue"]["items"]}
    assert mine == {f"github:{OLD}#8", f"github:{OLD}#9"}, mine  # its namespace's key
    html = service.client.get("/ui/jobs", params={"repo": f"github:{NEW}"})
    assert html.status_code == 200 and f"github:{OLD}#9" in html.text
    assert NEW in html.text
    assert service.client.get("/ui/jobs", params={"repo": f"github:{OLD}"}).status_code == 404

    # Another repository (another id) takes the old name: GitHub says so, so its delivery
    # binds the name to it, in a namespace of its own; nothing of it reaches the renamed
    # repository, nor is its job on any page of the renamed one's. (This fake's successor
    # holds nothing but its name: its job fails there, under its own id.)
    github.taken[OLD] = SUCCESSOR_ID
    asked = len(github.requests)
    src = gl.tree(world, "pr3", sha_of(1))
    world.commit(sha_of(3), src)
    event = _as(gl.pull(3, sha_of(3), "alice", "opened"), OLD, SUCCESSOR_ID)
    gl.deliver(service, "pull_request", event)
    theirs = f"github:{OLD}~{SUCCESSOR_ID}"
    assert f"namespace of its own (records keyed {theirs})" in caplog.text
    written = [url for m, url in _since(world, asked) if m != "GET"]
    assert written and all(f"/repositories/{SUCCESSOR_ID}/" in url for url in written), written
    assert github.comments_on(3) == [] and github.checks_on(sha_of(3)) == {}
    store = open_state(world.url)
    try:
        assert store.get_environment("pr_3") is None
    finally:
        store.close()
    page = service.client.get("/api/v1/jobs", params={"repo": f"github:{NEW}"}).json()
    assert {job["key"] for job in page["queue"]["items"]} == mine
    assert page["queue"]["total"] == 2
    html = service.client.get("/ui/jobs", params={"repo": f"github:{NEW}"}).text
    assert f"~{SUCCESSOR_ID}" not in html

    # The scheduled jobs of the old name (a scheduler that listed it before the rename):
    # the name is the successor's now, so they are its, under its id (failing on this
    # fake, which holds nothing of it); under the new name the drift check runs.
    asked = len(github.requests)
    queue = service.queue()
    try:
        for name in (OLD, NEW):
            seen: list[tuple[str, int | None]] = [(f"github:{name}", None)]
            Scheduler(queue, repositories=seen.copy, janitor_seconds=3600,
                      drift_seconds=3600).schedule(time.time())  # fmt: skip
    finally:
        queue.close()
    service.idle(timeout=300)
    assert github.checks_on(sha_of(1))["sluice/drift"]["conclusion"] == "success"
    # The scheduled jobs say no id: the forge addresses the one their name is bound to.
    runs = [url for m, url in _since(world, asked) if m == "POST" and "/check-runs" in url]
    mine_runs = [url for url in runs if f"/repositories/{CASE_REPOSITORY_ID}/" in url]
    assert mine_runs and all(
        f"/repositories/{CASE_REPOSITORY_ID}/" in url or f"/repositories/{SUCCESSOR_ID}/" in url
        for url in runs
    ), runs
    # Since the rename, nothing asked or posted under the old name (nor the new one).
    assert _by_name(_since(world, renamed), OLD) == [], _by_name(_since(world, renamed), OLD)
    assert _by_name(_since(world, renamed)) == []
