"""A project renamed on GitLab, through the whole service (issue 46): the real app, real
Merge Request Hook bodies delivered with the webhook token, GitLab at the wire
(python-gitlab against ``FakeGitLab``, which after ``rename`` answers the project by its
id and new path, and its old path as the project until another project takes it, then as
that one), the queue and its workers, the flows on the scripted warehouse (no Spark).

data/warehouse (id 4242), its prod built and an MR built, is renamed data/warehouse-2: an
MR under the new path keeps the namespace (the same state and prod, a plan of the MR's
change alone), and everything the service asks or posts goes to ``/projects/4242``.
Another project (id 5151) then takes the old path: a late delivery of the renamed
project under it is refused with an ERROR saying why, nothing built, recorded or posted;
the new holder's own delivery takes the path, in a namespace of its own, nothing of the
renamed project's asked or posted for it; the scheduled jobs of the old path are the
holder's, the new path's by the renamed project's id."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.queue.scheduler import Scheduler
from sluice.bot.queue.store import JobQueue
from sluice.core.state import open_state
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.gitlab_hooks import mr_open_hook
from tests.helpers.gitlab_service import (
    CUSTOMERS,
    MR_HOOK,
    ORDERS,
    GitLabService,
    gitlab_world,
    open_mr,
    serve_world,
)
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld
from tests.helpers.renamed import assert_namespace_kept
from tests.helpers.world import sha_of

OLD, NEW = "data/warehouse", "data/warehouse-2"
PID, HOLDER = CASE_REPOSITORY_ID, 5151


@pytest.fixture(params=["one repository", "isolated"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GitLabWorld]:
    """Prod built up to now on a scripted warehouse from main (the example gated by carol):
    in the service's state (the project owns it), or, when the service isolates
    repositories, in data/warehouse's namespace (its own state and Spark schemas)."""
    isolated = request.param == "isolated"
    env = gitlab_world(tmp_path, OLD, PID, members={"alice": 30, "carol": 30}, isolated=isolated)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serve_world(world) as running:
        yield running


def _projects(gitlab: FakeGitLab, since: int) -> list[tuple[str, str]]:
    """(method, project part) of each request about a project since ``since``."""
    return [(m, found.group(1)) for m, path in gitlab.requests[since:]
            if (found := re.match(r"/projects/([^/?]+)", path))]  # fmt: skip


def test_a_project_renamed_on_gitlab_keeps_its_namespace_and_its_old_path_s_holder_gets_nothing(
    world: GitLabWorld, service: GitLabService, caplog: pytest.LogCaptureFixture
) -> None:
    gitlab, warehouse = world.gitlab, world.scripted
    caplog.set_level(logging.INFO)
    prod = world.versions("prod")
    open_mr(world, service, 8, ORDERS)
    assert gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"

    # GitLab renames the project: its id and the new path answer as it, the old path too
    # (GitLab keeps a redirect until another project takes the path).
    gitlab.rename(NEW)
    jobs, asked = len(warehouse.jobs), len(gitlab.requests)
    open_mr(world, service, 9, CUSTOMERS)
    statuses = gitlab.statuses_on(sha_of(9))
    assert statuses["sluice/pr-environment"]["state"] == "success", statuses
    assert "was renamed: it keeps its namespace" in caplog.text
    assert_namespace_kept(world, f"gitlab:{OLD}", f"gitlab:{NEW}", prod, jobs)
    [note] = gitlab.bot_notes(9)
    assert "jaffle.customers" in note["body"] and "jaffle.orders" not in note["body"]
    # Everything it asked of the project or posted to it went to its id: the statuses,
    # the note, the archive, the approvals.
    projects = _projects(gitlab, asked)
    assert projects and {p for _, p in projects} == {str(PID)}, projects
    posted = [path for m, path in gitlab.requests[asked:] if m in ("POST", "PUT")]
    assert any(path.startswith(f"/projects/{PID}/statuses/{sha_of(9)}") for path in posted)
    assert f"/projects/{PID}/merge_requests/9/notes" in posted
    assert any(path.startswith(f"/projects/{PID}/repository/archive") for _, path in
               gitlab.requests[asked:])  # fmt: skip
    assert statuses["sluice/tests"]["target_url"].startswith(f"{gitlab.url}/{NEW}/")

    # Another project takes the old path: GitLab answers it as that one now.
    gitlab.taken[OLD] = HOLDER
    jobs, asked, notes, sent = (
        len(warehouse.jobs),
        len(gitlab.requests),
        len(gitlab.notes),
        len(gitlab.statuses),
    )
    # A late delivery of the renamed project under its old path (MR 10, opened before the
    # rename): GitLab says its id is data/warehouse-2 now.
    world.commit(sha_of(10), world.trees[sha_of(9)])
    gitlab.add_mr(10, sha=sha_of(10), source_branch="feature-10", author="alice")
    late = service.deliver(MR_HOOK, mr_open_hook(gitlab, 10, sha_of(10), OLD, PID))
    assert late.status_code == 202, late.text
    service.idle(timeout=300)
    assert (
        f"gitlab:{OLD}: pull_request job refused: it comes from the repository whose gitlab "
        f"id is {PID}, and gitlab says that repository is {NEW} now" in caplog.text
    ), caplog.text
    # Nothing of the late delivery built or posted; of the holder, nothing asked.
    assert warehouse.jobs[jobs:] == []
    assert [(m, p) for m, p in gitlab.requests[asked:] if m != "GET"] == []
    assert gitlab.bot_notes(10) == [] and gitlab.statuses_on(sha_of(10)) == {}
    # The new holder's own delivery under the path: GitLab says the path is its, so it
    # takes it, in a namespace of its own; nothing of 4242's is asked for it, posted or
    # recorded. (This fake's holder holds nothing but its path: its job fails there.)
    asked = len(gitlab.requests)
    holder = service.deliver(MR_HOOK, mr_open_hook(gitlab, 3, sha_of(3), OLD, HOLDER))
    assert holder.status_code == 202, holder.text
    service.idle(timeout=300)
    theirs = f"gitlab:{OLD}~{HOLDER}"
    assert f"namespace of its own (records keyed {theirs})" in caplog.text, caplog.text
    assert warehouse.jobs[jobs:] == []
    written = [p for m, p in gitlab.requests[asked:] if m != "GET"]
    assert all(p.startswith(f"/projects/{HOLDER}/") for p in written), written
    assert len(gitlab.notes) == notes and len(gitlab.statuses) == sent
    mine = [(m, path) for m, path in gitlab.requests[asked:]
            if re.match(rf"/projects/({PID}|data%2Fwarehouse)(/|\?|$)", path)]  # fmt: skip
    assert mine == [("GET", f"/projects/{PID}")], mine  # which path 4242 has now
    store = open_state(world.url)
    try:
        assert store.get_environment("pr_3") is None and store.get_environment("pr_10") is None
    finally:
        store.close()

    # The scheduled jobs of each path (a scheduler that listed the old one before the
    # rename): the old path is the holder's now, so its jobs are the holder's, by its id;
    # the new path's drift check runs, by the id its path is bound to.
    asked = len(gitlab.requests)
    queue = JobQueue(service.settings.state_url())
    try:
        for path in (OLD, NEW):
            seen: list[tuple[str, int | None]] = [(f"gitlab:{path}", None)]
            Scheduler(queue, repositories=seen.copy, janitor_seconds=3600,
                      drift_seconds=3600).schedule(time.time())  # fmt: skip
    finally:
        queue.close()
    service.idle(timeout=300)
    assert gitlab.statuses_on(sha_of(1))["sluice/drift"]["state"] == "success"
    projects = _projects(gitlab, asked)
    assert projects and {p for _, p in projects} <= {str(PID), str(HOLDER)}, projects
    assert str(PID) in {p for _, p in projects}
