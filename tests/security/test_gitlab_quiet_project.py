"""A quiet GitLab project (its path has records, bound to no project id: served before names
were bound) proves it is the one served by a commit status the service made under the
path, as a GitHub repository does by a check run (``dispatch._claim``, ``_continues``;
``GitLabForge.set_check`` returns the status's id, the flow records it, and
``GitLabForge.made_check_run`` asks whether a project lists it, by the project's id).

Through the whole service: the real app, real Merge Request Hook bodies delivered with the
webhook token, GitLab at the wire (python-gitlab against ``FakeGitLab``), the queue and
its workers, the flows on the scripted warehouse (no Spark), repositories isolated.
data/warehouse (id 4242, made in 2020) has its prod built and MR 8 built; then its path's
binding is taken away, as on a service that served it before names were bound:

- its own next delivery (MR 9) keeps its namespace: it lists the status MR 8's build made;
- a project renamed or transferred into the path (id 5151, made in 2019, older than the
  records too, but holding none of those statuses) is refused with the statement that
  binds it, nothing built, recorded or posted;
- its scheduled drift check binds the path to it while GitLab still names it so.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from sluice.bot.flow.ledger import Ledger
from sluice.bot.queue.scheduler import Scheduler
from sluice.bot.queue.store import JobQueue
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
KEY = f"gitlab:{OLD}"
PID, HOLDER = CASE_REPOSITORY_ID, 5151
MADE = "2020-03-01T10:00:00.000Z"  # data/warehouse: long before the service's records
HOLDER_MADE = "2019-05-01T10:00:00.000Z"  # the project that takes its path: older still


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    """Prod built up to now on a scripted warehouse from main (the example gated by
    carol), in data/warehouse's namespace (its own state and Spark schemas)."""
    env = gitlab_world(tmp_path, OLD, PID, members={"alice": 30, "carol": 30}, created_at=MADE)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serve_world(world) as running:
        yield running


@pytest.fixture
def ledger(service: GitLabService) -> Iterator[Ledger]:
    opened = Ledger(service.settings.state_url())
    yield opened
    opened.close()


def _served_then_quiet(world: GitLabWorld, service: GitLabService, ledger: Ledger) -> set[int]:
    """MR 8 built (its statuses' ids recorded as the service's), then the path's binding
    taken away: a name with records bound to no id, as before names were bound. The ids
    of the statuses MR 8's build made."""
    open_mr(world, service, 8, ORDERS)
    gitlab = world.gitlab
    assert gitlab.statuses_on(sha_of(8))["sluice/pr-environment"]["state"] == "success"
    made = {s["id"] for s in gitlab.statuses if s["sha"] == sha_of(8)}
    recorded = ledger.newest_check_runs(KEY)
    assert recorded and {sha for sha, _ in recorded} == {sha_of(8)}, recorded
    assert {run for _, run in recorded} <= made, (recorded, made)
    assert ledger.name_binding(KEY) == (KEY, PID)
    engine = create_engine(service.settings.state_url())
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM sluice_repositories WHERE name = :name"), {"name": KEY})
    engine.dispose()
    assert ledger.name_binding(KEY) is None and ledger.history(KEY) is not None
    return made


def _proofs(gitlab: FakeGitLab, since: int) -> list[str]:
    """The project part of each listing of a commit's statuses since ``since``."""
    return [found.group(1) for m, path in gitlab.requests[since:]
            if m == "GET" and "all=true" in path
            and (found := re.match(r"/projects/([^/?]+)/repository/commits/\w+/statuses",
                                   path))]  # fmt: skip


def test_a_quiet_gitlab_project_s_own_delivery_keeps_its_namespace_by_its_status(
    world: GitLabWorld, service: GitLabService, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    gitlab, warehouse = world.gitlab, world.scripted
    caplog.set_level(logging.INFO)
    prod = world.versions("prod")
    _served_then_quiet(world, service, ledger)
    jobs, asked = len(warehouse.jobs), len(gitlab.requests)
    open_mr(world, service, 9, CUSTOMERS)
    statuses = gitlab.statuses_on(sha_of(9))
    assert statuses["sluice/pr-environment"]["state"] == "success", statuses
    assert "a check run the service made under it): it keeps its namespace" in caplog.text
    assert ledger.name_binding(KEY) == (KEY, PID)
    assert _proofs(gitlab, asked) == [str(PID)]  # one status asked of, by the project's id
    # Built in its namespace, none of its own made (``<name>~<id>``, a newer project's).
    assert_namespace_kept(world, KEY, f"{KEY}~{PID}", prod, jobs)


def test_a_project_renamed_into_a_quiet_path_without_its_statuses_is_refused(
    world: GitLabWorld, service: GitLabService, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    gitlab, warehouse = world.gitlab, world.scripted
    caplog.set_level(logging.INFO)
    _served_then_quiet(world, service, ledger)
    # data/warehouse moves away; another project, made before the service's records of
    # the path (older is no proof), is renamed or transferred into it.
    gitlab.rename(NEW)
    gitlab.taken[OLD] = HOLDER
    gitlab.taken_created[HOLDER] = HOLDER_MADE
    jobs, asked = len(warehouse.jobs), len(gitlab.requests)
    notes, sent = len(gitlab.notes), len(gitlab.statuses)
    response = service.deliver(MR_HOOK, mr_open_hook(gitlab, 3, sha_of(3), OLD, HOLDER))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    refusal = next((m for m in said if m.startswith(f"{KEY}: pull_request event refused")), "")
    assert f"this delivery comes from repository id {HOLDER}" in refusal, said
    assert "shows none of the check runs the service made under this name" in refusal, refusal
    assert (
        "INSERT INTO sluice_repositories (name, forge, repo_id, canonical, spelled, "
        f"first_seen_ts, last_seen_ts) VALUES ('{KEY}', 'gitlab', {HOLDER}, '{KEY}', '{KEY}', "
        "0, 0)" in refusal
    ), refusal
    assert ledger.name_binding(KEY) is None
    # It was asked which project it is and whether it lists the service's statuses (no:
    # they are data/warehouse's); nothing was built, recorded or posted.
    assert _proofs(gitlab, asked) == [str(HOLDER)] * len(ledger.newest_check_runs(KEY))
    assert warehouse.jobs[jobs:] == []
    assert [(m, p) for m, p in gitlab.requests[asked:] if m != "GET"] == []
    assert len(gitlab.notes) == notes and len(gitlab.statuses) == sent
    assert not any(path.startswith(f"/projects/{PID}") for _, path in gitlab.requests[asked:])


def test_a_quiet_gitlab_project_s_drift_check_binds_its_path_by_its_status(
    world: GitLabWorld, service: GitLabService, ledger: Ledger
) -> None:
    # No delivery since: the scheduler's drift check (no id) asks GitLab which project has
    # the path now, and binds it to that one as it lists a status the service made.
    gitlab = world.gitlab
    _served_then_quiet(world, service, ledger)
    asked = len(gitlab.requests)
    queue = JobQueue(service.settings.state_url())
    try:
        seen: list[tuple[str, int | None]] = [(KEY, None)]
        Scheduler(queue, repositories=seen.copy, janitor_seconds=3600,
                  drift_seconds=3600).schedule(time.time())  # fmt: skip
    finally:
        queue.close()
    service.idle(timeout=300)
    assert ledger.name_binding(KEY) == (KEY, PID)
    assert _proofs(gitlab, asked) == [str(PID)]
    assert gitlab.statuses_on(sha_of(1))["sluice/drift"]["state"] == "success"
