"""Red team on prod's drift repair through the service's gate (issue 47,
sluice.bot.flow.drift_repair): a writer's "Plan the repair" on the failed ``sluice/drift``
check, the gate's required approvers' "Approve the repair", the plan applied to prod.

The attacker writes to the repository (pushes, clicks, comments) and may be one of the
required approvers (``bob``); he can also write prod's catalog (a view redefined by hand
is a drift source). Each attack is a test of what a sound service does: an attack that
works is ``xfail(strict=True)`` with the fix proposed; a defended one passes.

The world is tests/bot/flow/test_drift_repair.py's, built here from the shared helpers:
the example project's prod on the scripted warehouse (no Spark), the in-memory GitHub,
real webhook bodies and the ledger on SQLite, with a clock the test moves.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest

from sluice.bot.flow import audit, own_checks
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import ACTIONS_APP, MemoryForge
from sluice.bot.present import checks
from sluice.core import runs, workflow
from sluice.core.errors import SluiceError
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from tests.helpers.cases import realcase, record_prod
from tests.helpers.repair_red_team import (
    DAY,
    GATE,
    HOSTILE,
    KEY,
    NOW,
    ONE,
    OWNER,
    PREAMBLE,
    REPO_ROOT,
    Built,
    C,
    RepairWorld,
    copy_of,
)

M = "e" * 40
TWO = GATE + "      users: [bob, carol, frank]\n      count: 2\n"
TEAM = GATE + "      teams: [octo/approvers]\n"
OWNERS_ONLY = PREAMBLE + "sluice:\n  project: jaffle\n  gate:\n    owners_must_approve: direct\n"


Worlds = Callable[[str], RepairWorld]


@pytest.fixture(scope="module")
def built() -> Built:
    """Each gate's prod, built once for the module when a test first asks for it
    (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def worlds(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    """``worlds(config)``: a copy of its own of prod built with that gate."""
    made: list[RepairWorld] = []

    def make(config: str) -> RepairWorld:
        made.append(copy_of(built, tmp_path_factory.mktemp, config))
        return made[-1]

    yield make
    for world in made:
        world.close()


@pytest.fixture
def world(worlds: Worlds) -> RepairWorld:
    return worlds(ONE)


# -- 1. one approver counted twice: the case of his login --------------------------------


def test_one_approver_is_not_counted_twice_by_the_case_of_his_login(worlds: Worlds) -> None:
    world = worlds(TWO)
    try:
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        assert world.drift().title == "Repair planned: 2 more approvals needed"
        built = world.applied()
        approve = world.button("Approve the repair")
        world.click("bob", approve)
        world.click("Bob", approve)  # the same account, its login's case changed
        assert world.applied() == built, "one person's two approvals ran the repair"
        assert world.drift().title == "Repair planned: 1 more approval needed"
    finally:
        world.close()


def test_the_requester_under_another_case_does_not_approve(world: RepairWorld) -> None:
    world.redefine()
    world.click("bob", world.button("Plan the repair"))
    built = world.applied()
    world.click("BOB", world.button("Approve the repair"))
    assert world.applied() == built
    assert any("itself" in d for w, _, d in world.rows(audit.REFUSAL) if w == "BOB")


# -- 2. the requester renamed: his approval counts ----------------------------------------
# Closed: each request and approval row carries the clicker's account id (check_run
# sender.id; audit migration 2), and requesters are left out of the approvals by it.


def test_a_requester_who_renamed_himself_does_not_approve_his_repair(worlds: Worlds) -> None:
    world = worlds(TEAM)
    try:
        world.github.teams["octo/approvers"] = frozenset({"bob", "carol"})
        world.redefine()
        world.click("bob", world.button("Plan the repair"))
        built = world.applied()
        # bob renames his account: GitHub's team and permission now say bobx.
        world.github.rename("bob", "bobx")
        assert world.github.teams["octo/approvers"] == {"bobx", "carol"}
        world.click("bobx", world.button("Approve the repair"))
        assert world.applied() == built, "the requester, renamed, approved his own repair"
        assert any("itself" in d for w, _, d in world.rows(audit.REFUSAL) if w == "bobx")
        world.click("carol", world.button("Approve the repair"))  # who did not ask
        assert world.applied() == built + 1, world.rows()
    finally:
        world.close()


def test_one_approver_under_two_logins_is_one_approval(worlds: Worlds) -> None:
    # carol approves, renames her account `carolx` (still the team's member) and approves
    # again: one person, one approval, whatever her login.
    world = worlds(GATE + "      teams: [octo/approvers]\n      count: 2\n")
    try:
        world.github.teams["octo/approvers"] = frozenset({"bob", "carol", "frank"})
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        built = world.applied()
        world.click("carol", world.button("Approve the repair"))
        world.github.rename("carol", "carolx")
        world.click("carolx", world.button("Approve the repair"))
        assert world.applied() == built, "one person's two approvals ran the repair"
        assert world.drift().title == "Repair planned: 1 more approval needed"
        world.click("frank", world.button("Approve the repair"))
        assert world.applied() == built + 1, world.rows()
    finally:
        world.close()


# -- 3. a gate of owners only: one writer rebuilds prod alone ----------------------------


def test_a_gate_of_owners_only_does_not_let_one_writer_rebuild_prod(worlds: Worlds) -> None:
    world = worlds(OWNERS_ONLY)
    try:
        world.warehouse.views["jaffle.customers"] = HOSTILE
        orders = next(t for t, v in world.warehouse.tables.items() if v.model == "jaffle.orders")
        del world.warehouse.tables[orders]
        world.check()
        built = world.applied()
        world.click("erin", world.button("Plan the repair"))  # any writer
        assert world.applied() == built, "a writer alone dropped and rebuilt prod's tables"
    finally:
        world.close()


# -- 4. a request of an earlier drift, approved alone when the drift comes back -----------


def test_a_request_of_an_ended_drift_is_not_approved_when_the_drift_comes_back(
    world: RepairWorld,
) -> None:
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    approve = world.button("Approve the repair")  # bob keeps its identifier
    # Prod mended by hand before anyone approved: the next check is green.
    world.warehouse.views["jaffle.customers"] = world.sluices["jaffle.customers"]
    world.clock.now += DAY
    world.check()
    assert world.drift().conclusion == "success"
    # Weeks later bob redefines the view the same way, and approves "alice's" request.
    world.clock.now += 30 * DAY
    world.redefine()
    built = world.applied()
    world.check()  # the request is a month old: the check shows no Approve button
    assert not [a for a in world.drift().actions if a.label == "Approve the repair"]
    world.click("bob", approve)  # the old identifier, sent by hand
    assert world.applied() == built, "bob alone repaired prod on a request of another drift"


# -- 5. prod's jobs run the project prod was promoted from, not the prod branch's head ---


def test_the_repair_runs_no_statement_of_an_unpromoted_head(world: RepairWorld) -> None:
    """A commit on the prod branch no promotion applied (pushed past the gate; the settings
    first pinned after it, at it) puts nothing into prod's repair job: the job loads the
    project of the commit prod's plan records it was promoted from (state migration 6),
    never the branch's head (was an xfail: the head's before_all ran in the repair)."""
    statement = "CREATE SCHEMA IF NOT EXISTS mallory_was_here"
    world.commit(M, ONE + f"before_all:\n  - {statement}\n", parents=(C,))
    world.github.refs["main"] = M  # pushed past the gate: no promotion ran
    world.warehouse.views["jaffle.customers"] = HOSTILE
    world.check()
    world.click("alice", world.button("Plan the repair", M), head=M)
    world.click("bob", world.button("Approve the repair", M), head=M)
    [*_, job] = [j for j in world.warehouse.jobs if j["kind"] == "apply"]
    assert job["plan_id"] != "" and world.drift(M).conclusion == "success"  # the repair ran
    ran = repr(job["steps"])
    assert "mallory_was_here" not in ran, "an unpromoted commit's statement ran in prod's job"


MALLORY = "CREATE SCHEMA IF NOT EXISTS mallory_was_here"
N = "f" * 40


def _push_past_the_gate(world: RepairWorld) -> None:
    """A writer pushes ``M`` (a before_all statement of his) onto main: no promotion runs."""
    world.commit(M, ONE + f"before_all:\n  - {MALLORY}\n", parents=(C,))
    world.github.refs["main"] = M


def _last_apply(world: RepairWorld) -> dict[str, Any]:
    [*_, job] = [j for j in world.warehouse.jobs if j["kind"] == "apply"]
    return job


def _prod_commit(world: RepairWorld) -> tuple[str, str | None] | None:
    store = open_state(world.url)
    try:
        return workflow.plan_commit(store, PROD)
    finally:
        store.close()


def test_a_scheduled_run_runs_no_statement_of_a_commit_pushed_past_the_gate(
    world: RepairWorld,
) -> None:
    _push_past_the_gate(world)
    world.clock.now += 2 * DAY  # the FULL models' new day is due
    built = world.applied()
    world.run()
    assert world.applied() == built + 1  # the run ran ...
    assert MALLORY not in repr(_last_apply(world)["steps"])  # ... C's project, not M's
    found = _prod_commit(world)
    assert found is not None and found[1] == C  # the run's plan keeps the promoted commit
    # Control (the test can fail): prod promoted from M (as a promotion records it), the
    # next run does run M's statement.
    store = open_state(world.url)
    try:
        store.set_plan_commit(found[0], M)
    finally:
        store.close()
    world.clock.now += DAY
    world.run()
    assert world.applied() == built + 2 and MALLORY in repr(_last_apply(world)["steps"])


def _merge(world: RepairWorld, number: int, head: str, merged: str, config: str) -> None:
    """Pull request ``number`` of alice's (``config`` on top of main's head) merged as
    ``merged``, and the merge delivered: a promotion of ``merged``."""
    parent = world.github.refs["main"]
    world.commit(head, config, parents=(parent,))
    world.github.open_pull(number, head_sha=head, base="main", author="alice")
    world.commit(merged, config, parents=(parent, head))
    world.github.close_pull(number, merged=True)
    world.github.refs["main"] = merged
    body = realcase("github/pull_request/woodpecker__HookPullRequestMerged.json", OWNER, **{
        "pull_request.number": number, "number": number,
        "pull_request.merge_commit_sha": merged, "pull_request.head.sha": head,
        "pull_request.base.ref": "main", "pull_request.user.login": "alice",
    })  # fmt: skip
    world.deliver("pull_request", body)


def test_the_next_merge_does_not_promote_a_statement_pushed_past_the_gate(
    world: RepairWorld,
) -> None:
    """After the push, the next merge (a pull request on top of it that changes nothing
    else) is a promotion whose project holds the pushed statement: the gate compares it with
    the statements of the commit prod's plan records (C), so it is a change nobody approved,
    and prod is not promoted; never with the pin, which, first made after the push, is it."""
    _push_past_the_gate(world)
    world.check()  # the settings are first pinned now, at M
    mallory = ONE + f"before_all:\n  - {MALLORY}\n"
    _merge(world, 9, "9" * 40, N, mallory)
    deploy = world.github.checks[N][checks.DEPLOY]
    assert deploy.conclusion == "failure", deploy.title
    found = _prod_commit(world)
    assert found is not None and found[1] == C  # prod still runs C's project
    world.clock.now += 2 * DAY
    world.run()
    assert MALLORY not in repr(_last_apply(world)["steps"])


def test_a_rollback_runs_no_statement_of_a_commit_pushed_past_the_gate(
    world: RepairWorld,
) -> None:
    """``/sluice rollback`` applies a recorded plan too (the one before): its job loads the
    project of the commit prod's plan records, not the pin made after a push past the gate,
    and prod's plan then records the target's commit."""
    tree = world.commit(N, ONE, parents=(C,))  # promoted (recorded as built): a plan to undo
    model = tree / "models" / "stg_customers.sql"
    model.write_text(model.read_text().replace("  last_name\n", "  last_name,\n  1 AS promoted\n"))
    world.github.commit_folder(N, tree, parents=(C,))
    record_prod(tree, world.url, NOW + DAY, commit=N)
    world.github.open_pull(7, head_sha=N, base="main", author="alice")
    world.github.close_pull(7, merged=True)
    world.commit(M, ONE + f"before_all:\n  - {MALLORY}\n", parents=(N,))
    world.github.refs["main"] = M  # pushed past the gate; the settings first pinned after it
    built = world.applied()
    comment = world.github.add_comment(7, "bob", "/sluice rollback")
    body = realcase("github/issue_comment/drone-go-scm__comment.json", OWNER, action="created",
                    **{"issue.number": 7, "comment.user.login": "bob",
                       "comment.body": "/sluice rollback", "comment.id": comment})  # fmt: skip
    world.deliver("issue_comment", body)
    reply = world.github.bot_comments(7)[-1]
    assert reply.startswith("@bob rolled prod back"), reply
    assert world.applied() == built + 1
    assert MALLORY not in repr(_last_apply(world)["steps"])
    found = _prod_commit(world)
    assert found is not None and found[1] == C  # the target's commit, as its promotion recorded


def _before_the_migration(url: str) -> None:
    """The state as a Sluice from before state migration 6 left it: its plans record no
    commit (no such column), its schema at version 5; the next open migrates it."""
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
        conn.execute("ALTER TABLE sluice_plans DROP COLUMN project_commit")
        conn.execute("DELETE FROM sluice_migrations WHERE track = 'state' AND number = 6")
        conn.execute("UPDATE sluice_schema_version SET version = 5")


def test_a_state_from_before_the_migration_repairs_and_runs_nothing_of_the_head(
    world: RepairWorld,
) -> None:
    """Prod applied by a Sluice that recorded no commit, then a push past the gate: nothing
    says which project prod runs, so the repair and the scheduled run refuse (fail closed)
    before any Spark job, saying what to do; neither guesses the head or the pin."""
    _before_the_migration(world.url)
    _push_past_the_gate(world)
    world.redefine()  # the drift check reads only: it still runs
    assert world.drift(M).conclusion == "failure"
    jobs = len(world.warehouse.jobs)
    world.click("alice", world.button("Plan the repair", M), head=M)
    refused = world.drift(M)
    assert "records no commit" in refused.summary and "promote prod once" in refused.summary
    assert len(world.warehouse.jobs) == jobs and world.rows() == []  # nothing ran or asked
    found = _prod_commit(world)
    assert found is not None and found[1] is None  # migrated: its plan from before knows none
    world.clock.now += 2 * DAY
    with pytest.raises(SluiceError, match="records no commit") as failed:
        world.run()
    assert "promote prod once" in str(failed.value)
    assert len(world.warehouse.jobs) == jobs
    store = open_state(world.url)
    try:  # the refused run is in prod's history, as the web UI shows it
        [run], _ = runs.recorded_runs(store, PROD, offset=0, limit=5)
    finally:
        store.close()
    assert not run.ok and "promote prod once" in repr(run.payload)


def test_a_state_from_before_the_migration_runs_again_once_prod_is_promoted(
    world: RepairWorld,
) -> None:
    """The way out the refusal names: a promotion (here a merge that changes nothing, so
    nothing is built) records its commit on prod's plan; the scheduled run then runs."""
    _before_the_migration(world.url)
    world.clock.now += 2 * DAY
    with pytest.raises(SluiceError, match="records no commit"):
        world.run()
    _merge(world, 9, "9" * 40, N, ONE)  # the same project: nothing to build
    deploy = world.github.checks[N][checks.DEPLOY]
    assert (deploy.conclusion, deploy.title) == ("success", "Prod already has this state")
    found = _prod_commit(world)
    assert found is not None and found[1] == N
    built = world.applied()
    world.run()
    assert world.applied() == built + 1


# -- 6. a check run that is not Sluice's ---------------------------------------------------


def test_a_click_on_another_apps_check_of_the_same_name_plans_nothing(world: RepairWorld) -> None:
    """A writer's workflow (the Action's ``on: check_run`` gets every run GitHub Actions'
    App made) makes a run named sluice/drift on main's head, its summary lying about the
    plan and its button Sluice's own "Plan the repair"; a writer clicks it. Sluice takes
    buttons only on the runs it recorded making, whatever their name."""
    world.redefine()
    forged = dataclasses.replace(world.drift(), title="No drift", summary="prod is fine")
    run = world.github.foreign_run(C, forged)  # GitHub Actions' App, as a workflow's token
    jobs = len(world.warehouse.jobs)
    world.click("alice", world.button("Plan the repair"), run_id=run, app=ACTIONS_APP)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    [(who, outcome, detail)] = world.rows(audit.REFUSAL)
    assert (who, outcome) == ("alice", own_checks.REFUSED)
    assert f"check run {run} is not one Sluice made" in detail
    assert world.github.runs[run].check == forged  # never edited by Sluice


def test_an_approval_on_another_apps_run_of_sluices_drift_check_counts_nothing(
    world: RepairWorld,
) -> None:
    """The same run, its button "Approve the repair" of the real plan: bob's click on it
    approves nothing, the request stays waiting for an approval on Sluice's own run."""
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    run = world.github.foreign_run(C, world.drift())
    built = world.applied()
    world.click("bob", world.button("Approve the repair"), run_id=run, app=ACTIONS_APP)
    assert world.applied() == built
    assert world.drift().title == "Repair planned: 1 more approval needed"
    world.click("bob", world.button("Approve the repair"))  # on Sluice's run: it counts
    assert world.applied() == built + 1


def test_as_a_github_app_a_click_on_a_run_another_app_made_is_refused(worlds: Worlds) -> None:
    """As a GitHub App the payload's ``check_run.app.id`` must be the App's own too."""
    world = worlds(ONE)
    try:
        world.deps = dataclasses.replace(world.deps, github_app=world.github.app_id)
        world.redefine()
        jobs = len(world.warehouse.jobs)
        world.click("alice", world.button("Plan the repair"), app=ACTIONS_APP)
        assert len(world.warehouse.jobs) == jobs and world.rows() == []
        [(_, _, detail)] = world.rows(audit.REFUSAL)
        assert f"names App {ACTIONS_APP} as its maker" in detail
        # (alice's click is recorded as handled: the same delivery again is a replay)
        world.click("erin", world.button("Plan the repair"), app=world.github.app_id)
        assert [(w, o) for w, o, _ in world.rows()] == [("erin", "requested")]
    finally:
        world.close()


def test_a_drift_identifier_on_another_check_plans_nothing(world: RepairWorld) -> None:
    world.redefine()
    plan = world.button("Plan the repair")
    jobs = len(world.warehouse.jobs)
    ours = world.github.run_id(C, checks.DRIFT)
    for name in ("sluice/approval", "sluice/drift ", "Sluice/Drift", "sluice/plan"):
        world.click("alice", plan, name=name, run_id=ours)  # Sluice's run, another name
    assert world.rows() == [] and world.applied() == 1
    assert len(world.warehouse.jobs) == jobs


# -- 7. clicks as a denial of service --------------------------------------------------


def test_a_writers_click_replayed_runs_spark_once(world: RepairWorld) -> None:
    world.redefine()
    plan = world.button("Plan the repair")
    jobs = len(world.warehouse.jobs)
    world.click("alice", plan)
    once = len(world.warehouse.jobs)
    assert once > jobs
    for _ in range(5):  # the same delivery content again (GitHub retries, a replay)
        world.click("alice", plan)
    assert len(world.warehouse.jobs) == once
    assert [o for _, o, _ in world.rows()] == ["requested"]


def test_a_readers_clicks_run_no_spark_and_leave_prod_as_it_is(world: RepairWorld) -> None:
    world.redefine()
    before, jobs = world.drift(), len(world.warehouse.jobs)
    for _ in range(10):  # on Sluice's own run: the same click again is a replay
        world.click("dave", world.button("Plan the repair"))
        world.click("dave", "repair:" + "0" * 12)
    assert len(world.warehouse.jobs) == jobs and world.drift() == before
    assert world.rows() == []


def test_an_approval_before_any_request_runs_nothing(world: RepairWorld) -> None:
    world.redefine()
    jobs = world.applied()
    # bob cannot approve the plan he will ask for: he learns its fingerprint by asking, and
    # a plan nobody else asked for has no request to approve.
    for token in ("0" * 12, "f" * 12):
        world.click("bob", f"repair:{token}")
    assert world.applied() == jobs
    assert [o for _, o, _ in world.rows()] == []


# -- 8. a promotion between the approvals ------------------------------------------------


def test_a_promotion_between_request_and_approval_makes_the_approval_stale(
    world: RepairWorld,
) -> None:
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    approve = world.button("Approve the repair")
    # A promotion lands first (queued before bob's click under prod's key): prod's plan is
    # another, with a changed model (recorded as built: no Spark).
    tree = world.commit(M, ONE, parents=(C,))
    model = tree / "models" / "stg_customers.sql"
    model.write_text(model.read_text().replace("  last_name\n", "  last_name,\n  1 AS promoted\n"))
    record_prod(tree, world.url, NOW + DAY, commit=M)
    built = world.applied()
    world.click("bob", approve)
    assert world.applied() == built
    assert [o for _, o, _ in world.rows()] == ["requested"]


# -- 9. the audit log's drift repair rows come from the repair alone --------------------


def test_only_the_drift_repair_module_writes_drift_repair_rows() -> None:
    """A ``drift repair`` row is a request or an approval the tally counts: no other path
    (policy overrides, comments, the web UI) writes rows of that kind."""
    writers = []
    for path in sorted((REPO_ROOT / "sluice").rglob("*.py")):
        text = path.read_text()
        if re.search(r"audit\.REPAIR\b|[\"']drift repair[\"']", text):
            writers.append(path.relative_to(REPO_ROOT).as_posix())
    assert writers == ["sluice/bot/flow/audit.py", "sluice/bot/flow/drift_repair.py"]


def test_a_policy_override_of_the_repair_fingerprint_is_no_approval(world: RepairWorld) -> None:
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    [plan] = {e.plan_id for e in world.ledger.entries(repo=KEY) if e.kind == audit.REPAIR}
    # A row of another kind about the same plan id (as /sluice override writes them).
    world.ledger.append(
        audit.Entry(NOW, KEY, audit.POLICY_OVERRIDE, "carol", "approved", plan_id=plan)
    )
    built = world.applied()
    world.click("bob", world.button("Approve the repair"))
    assert world.applied() == built + 1  # bob's approval alone: carol's row is no approval
    [applied] = [d for _, o, d in world.rows() if o == "applied"]
    assert "approved by bob" in applied and "carol" not in applied


# -- 10. a run of the same name made by someone else, on GitHub's API ----------------------

API = "https://api.github.com:443"
WIDGETS = "octo/widgets"
RUNS = f"{API}/repos/{WIDGETS}"
FOREIGN_APP = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}


def _run_json(rid: int, name: str, app: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": rid, "node_id": f"CR_kwDO{rid}", "name": name, "head_sha": C,
        "external_id": "", "url": f"https://api.github.com/repos/{WIDGETS}/check-runs/{rid}",
        "html_url": f"https://github.com/{WIDGETS}/runs/{rid}", "details_url": None,
        "status": "completed", "conclusion": "success", "started_at": "2026-03-01T10:00:00Z",
        "completed_at": None,
        "output": {"title": "No drift", "summary": "prod is fine", "text": None,
                   "annotations_count": 0, "annotations_url": ""},
        "check_suite": {"id": 5}, "app": app, "pull_requests": [],
    }  # fmt: skip


def test_a_foreign_run_of_the_same_name_does_not_turn_sluices_check_into_a_status() -> None:
    import responses

    from sluice.bot.forge.base import CheckAction
    from sluice.bot.forge.github import GitHubForge, github_client

    check = Check(
        checks.DRIFT, "completed", "Drift: 1 model of prod differs", "differs",
        conclusion="failure", actions=(CheckAction("Plan the repair", "Plan it", "drift:" + "a" * 12),),
    )  # fmt: skip
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rs:
        rs.get(
            f"{RUNS}/commits/{C}/check-runs",
            json={"total_count": 1, "check_runs": [_run_json(77, checks.DRIFT, FOREIGN_APP)]},
        )
        edit = rs.patch(
            f"{RUNS}/check-runs/77",
            status=403,
            json={"message": "Invalid app_id `15368` - check run can only be modified by the "
                  "GitHub App that created it.", "documentation_url": "https://docs.github.com/rest"},
        )  # fmt: skip
        created = rs.post(
            f"{RUNS}/check-runs",
            status=201,
            json=_run_json(78, checks.DRIFT, {"id": 123, "slug": "sluice", "name": "Sluice"}),
        )
        status = rs.post(f"{RUNS}/statuses/{C}", status=201, json={"id": 1, "state": "failure"})
        client = github_client(repo=WIDGETS, api_url="https://api.github.com",
                               token="ghs_" + "x" * 36, seconds_between_requests=None,
                               seconds_between_writes=None)  # fmt: skip
        forge = GitHubForge(client, WIDGETS)
        forge.set_check(C, check)
        assert status.call_count == 0, "Sluice's check became a status, without its button"
        assert edit.call_count == 0 and created.call_count == 1


# -- 11. catalog text that the comparison cannot read ---------------------------------------


DEEP = "SELECT " + "(" * 5000 + "1" + ")" * 5000 + " AS id"  # 10 KB: a view redefined by hand


def test_a_view_too_deep_to_parse_is_reported_as_drift(world: RepairWorld) -> None:
    world.check()
    assert world.drift().conclusion == "success"
    world.warehouse.views["jaffle.customers"] = DEEP
    world.check()
    assert world.drift().conclusion == "failure", "a view redefined by hand hides its drift"
    world.click("alice", world.button("Plan the repair"))
    assert world.drift().title == "Repair planned: 1 more approval needed"


# -- 12. the same approver twice, another repository -------------------------------------


def test_the_same_approver_twice_is_one_approval(worlds: Worlds) -> None:
    world = worlds(TWO)
    try:
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        built = world.applied()
        approve = world.button("Approve the repair")
        world.click("bob", approve)
        # Sluice's check made again in another run (5), clicked by the same person.
        world.ledger.record_check_run(KEY, C, checks.DRIFT, 5, NOW)
        world.click("bob", approve, run_id=5)
        assert world.applied() == built
        assert world.drift().title == "Repair planned: 1 more approval needed"
        world.click("carol", world.button("Approve the repair"))
        assert world.applied() == built + 1
    finally:
        world.close()


def test_a_click_in_another_repository_repairs_nothing_here(world: RepairWorld) -> None:
    other = MemoryForge("octo/other", name="github", clock=world.clock)
    other.roles.update({"alice": "admin", "bob": "admin"})
    world.commit(C, ONE, forge=other)
    other.refs["main"] = C
    world.forges["octo/other"] = other
    world.redefine()
    plan = world.button("Plan the repair")
    jobs = len(world.warehouse.jobs)
    world.click("alice", plan, repo="octo/other")  # its service's state is octo/warehouse's
    world.click("bob", "repair:" + "0" * 12, repo="octo/other", run_id=5)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    assert world.ledger.entries(repo="github:octo/other") == []
    assert checks.DRIFT not in other.checks.get(C, {})
