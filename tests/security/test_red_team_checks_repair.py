"""Red team on check runs known by id (sluice.bot.flow.own_checks) and on the drift
repair's plan judged as a PR's (sluice.bot.flow.repair_gate), and on overrides counted at
promotion under a second fingerprint (policies.held_back).

The attacker writes to the repository (pushes, clicks, workflows making check runs of any
name under the Action, other Apps' runs), may be one of the required approvers, and can
write prod's catalog (a view redefined by hand is a drift). Each attack is a test of what a
sound service does: one that works is ``xfail(strict=True)`` with the code path and the fix
proposed; a defended one passes.

The world (tests/helpers/repair_red_team.py): prod built from the example project on the
scripted warehouse, the in-memory GitHub, real webhook bodies, the ledger on SQLite, a
clock the test moves; GitHub at the wire with ``responses`` where the forge's HTTP matters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.flow import audit, own_checks, repair_gate
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import Check, CheckAction
from sluice.bot.present import checks
from sluice.core import workflow
from sluice.core.policy.facts import plan_facts
from sluice.core.state import open_state
from tests.helpers.repair_red_team import (
    DAY,
    KEY,
    NOBODY,
    NOW,
    ONE,
    OWNER,
    Built,
    C,
    RepairWorld,
    copy_of,
    record_run,
)

CUSTOMERS_SOFT = """\
name: customers-kept
description: Making jaffle.customers again needs marketing's word.
level: soft
override_by: [frank]
rule: '!plan.models.exists(m, m.name == "jaffle.customers")'
"""
CUSTOMERS_SOFT_GRACE = """\
name: customers-grace
description: And grace's word too.
level: soft
override_by: [grace]
rule: '!plan.models.exists(m, m.name == "jaffle.customers")'
"""
CUSTOMERS_BY_AUTHOR = """\
name: customers-asked-by-alice
description: Only alice asks for customers to be made again, or frank says so.
level: soft
override_by: [frank]
rule: '!plan.models.exists(m, m.name == "jaffle.customers") || author == "alice"'
"""
UNEVALUABLE_SOFT = """\
name: broken-soft
description: A soft policy that cannot be evaluated on any plan.
level: soft
override_by: [frank]
rule: 'plan.models.exists(m, m.no_such_fact == 1)'
"""
SMALL_READS = """\
name: small-reads
description: No plan applied to prod reads more than 1 KB.
level: hard
rule: 'plan.backfill.bytes <= 1000'
"""
BYTES_BUDGET = NOBODY + "  gate:\n    backfill:\n      max_bytes: 1000\n      approver: frank\n"
OWNERS = ONE + "    owners_must_approve: direct\n"


Worlds = Callable[..., RepairWorld]


@pytest.fixture(scope="module")
def built() -> Built:
    """Each gate's and policies' prod, built once for the module when a test first asks
    for it (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def worlds(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    """``worlds(config, files)``: a copy of its own of prod built with that gate and
    prod's branch holding ``files``."""
    made: list[RepairWorld] = []

    def make(config: str, files: dict[str, str] | None = None) -> RepairWorld:
        made.append(copy_of(built, tmp_path_factory.mktemp, config, files))
        return made[-1]

    yield make
    for world in made:
        world.close()


@pytest.fixture
def world(worlds: Worlds) -> RepairWorld:
    return worlds(ONE)


# == 1. check runs known by id ============================================================


def test_sluices_own_drift_run_of_an_older_commit_plans_nothing_on_the_head(
    world: RepairWorld,
) -> None:
    """A run id Sluice recorded for sluice/drift on another commit (an older head), named
    in a click whose payload says the current head: refused (the recorded sha must be the
    event's), no Spark job."""
    world.redefine()
    plan = world.button("Plan the repair")
    old = "0" * 40
    record_run(world.ledger, KEY, old, checks.DRIFT, 900, NOW)
    jobs = len(world.warehouse.jobs)
    world.click("alice", plan, run_id=900)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    [(_, outcome, detail)] = world.rows(audit.REFUSAL)
    assert outcome == own_checks.REFUSED and "sluice/drift on 000000000000" in detail


def test_a_run_id_sluice_replaced_is_refused_when_clicked_later(world: RepairWorld) -> None:
    """Replay of an id: Sluice made the check again in a new run (a 403/404 on editing the
    recorded one, GitHub's re-run); a click on the old run, delivered later, is refused."""
    world.redefine()
    old = world.github.run_id(C, checks.DRIFT)
    assert old is not None
    record_run(world.ledger, KEY, C, checks.DRIFT, old + 1000, NOW)  # the new run
    jobs = len(world.warehouse.jobs)
    world.click("alice", world.button("Plan the repair"), run_id=old)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    assert f"check run {old} is not one Sluice made" in world.rows(audit.REFUSAL)[-1][2]


def test_a_run_sluice_made_in_another_repository_counts_nothing_here(world: RepairWorld) -> None:
    """GitHub's run ids are global, Sluice's records are per repository: a run Sluice made
    (and recorded) in octo/other, its id named in a click on octo/warehouse, is refused."""
    world.redefine()
    record_run(world.ledger, "github:octo/other", C, checks.DRIFT, 777, NOW)
    record_run(world.ledger, "gitlab:octo/warehouse", C, checks.DRIFT, 778, NOW)
    jobs = len(world.warehouse.jobs)
    world.click("alice", world.button("Plan the repair"), run_id=777)
    world.click("erin", world.button("Plan the repair"), run_id=778)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    assert len(world.rows(audit.REFUSAL)) == 2


def test_a_run_made_before_the_upgrade_is_refused_and_the_next_check_gives_a_run_that_counts(
    world: RepairWorld,
) -> None:
    """Run ids before migration 8 were never recorded: a click on such a run (Sluice's by
    name, made by its App) is refused, and the next drift check makes a run whose buttons
    count."""
    world.redefine()
    check = world.drift()
    with world.ledger._writing("forget the runs, as before migration 8") as conn:
        from sluice.bot.flow.ledger_schema import check_runs

        conn.execute(check_runs.delete())
    old = world.github.run_id(C, checks.DRIFT)
    world.click("alice", world.button("Plan the repair"), run_id=old)
    assert world.rows() == []
    world.clock.now += 1
    world.check()
    new = world.github.run_id(C, checks.DRIFT)
    assert new is not None and new != old
    assert world.labels() == [a.label for a in check.actions]
    world.click("alice", world.button("Plan the repair"), run_id=new)
    assert [o for _, o, _ in world.rows()] == ["requested"]


def test_a_workflow_run_carrying_sluices_approve_button_under_the_action_counts_nothing(
    world: RepairWorld,
) -> None:
    """The Action's trust limit: Sluice's runs and a writer's workflow's are both GitHub
    Actions' App's (no App id to compare). bob's approval clicked on the workflow's copy of
    the check (same name, head, button) counts nothing: the id is not recorded."""
    assert world.deps.github_app is None  # as under the Action
    world.redefine()
    world.click("alice", world.button("Plan the repair"))
    copy = world.github.foreign_run(C, world.drift(), app=world.github.app_id)  # same App
    built = world.applied()
    world.click("bob", world.button("Approve the repair"), run_id=copy)
    assert world.applied() == built
    assert world.drift().title == "Repair planned: 1 more approval needed"


def test_a_web_click_names_no_run_and_is_not_refused_as_a_foreign_run() -> None:
    """The web UI's form (GitLab's only way to click) is the service's own: refusal() lets
    it through to the flow, which checks the signed-in person itself."""
    event = CheckRunEvent(
        "gitlab", OWNER, None, "requested_action", checks.DRIFT, C, (), "alice",
        identifier="drift:" + "a" * 12, check_run_id=None, origin=WEB,
    )  # fmt: skip

    class _Job:  # refusal reads nothing of the job for a web click
        pass

    assert own_checks.refusal(_Job(), event) is None  # type: ignore[arg-type]


# -- GitHub at the wire: editing the recorded run -----------------------------------------

API = "https://api.github.com:443"
WIDGETS = "octo/widgets"
RUNS = f"{API}/repos/{WIDGETS}"
SLUICE_APP = {"id": 123, "slug": "sluice", "name": "Sluice"}


def _run_json(rid: int, app: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": rid, "node_id": f"CR_kwDO{rid}", "name": checks.DRIFT, "head_sha": C,
        "external_id": "", "url": f"https://api.github.com/repos/{WIDGETS}/check-runs/{rid}",
        "html_url": f"https://github.com/{WIDGETS}/runs/{rid}", "details_url": None,
        "status": "completed", "conclusion": "failure", "started_at": "2026-03-01T10:00:00Z",
        "completed_at": None,
        "output": {"title": "x", "summary": "x", "text": None,
                   "annotations_count": 0, "annotations_url": ""},
        "check_suite": {"id": 5}, "app": app, "pull_requests": [],
    }  # fmt: skip


def _drift_check() -> Check:
    action = CheckAction("Plan the repair", "Plan it", "drift:" + "a" * 12)
    return Check(checks.DRIFT, "completed", "Drift", "differs", conclusion="failure",
                 actions=(action,))  # fmt: skip


def _forge() -> Any:
    from sluice.bot.forge.github import GitHubForge, github_client

    client = github_client(repo=WIDGETS, api_url="https://api.github.com",
                           token="ghs_" + "x" * 36, seconds_between_requests=None,
                           seconds_between_writes=None)  # fmt: skip
    return GitHubForge(client, WIDGETS)


@pytest.mark.parametrize("status", [403, 404])
def test_a_recorded_run_that_may_not_be_edited_gives_a_new_run_never_statuses(status: int) -> None:
    """The recorded id now names a run the credentials may not edit (made by the Action's
    token before the service ran as an App: 403) or that is gone (404): a new run with the
    button, never a commit status without it, and no lookup of runs by name."""
    import responses

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rs:
        listed = rs.get(f"{RUNS}/commits/{C}/check-runs", json={"total_count": 0, "check_runs": []})
        edit = rs.patch(f"{RUNS}/check-runs/55", status=status, json={"message": "no"})
        made = rs.post(f"{RUNS}/check-runs", status=201, json=_run_json(56, SLUICE_APP))
        state = rs.post(f"{RUNS}/statuses/{C}", status=201, json={"id": 1, "state": "failure"})
        assert _forge().set_check(C, _drift_check(), 55) == 56
        assert (edit.call_count, made.call_count) == (1, 1)
        assert state.call_count == 0 and listed.call_count == 0


# == 2. the repair's plan judged as a PR's ================================================


def test_an_override_of_a_repair_does_not_outlive_its_drift(worlds: Worlds) -> None:
    """An override counts as requests and approvals do (repair_gate.Window): within
    REQUEST_MS, after the plan's last application. The same drift made again a month
    later has the same fingerprint; frank's old override lifts nothing."""
    world = worlds(ONE, {"policies/customers-kept.yaml": CUSTOMERS_SOFT})
    try:
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        assert "held by 1 soft policy" in world.drift().title
        world.click("frank", world.button("Override policies"))
        first = world.button("Approve the repair")
        assert world.drift().title == "Repair planned: 1 more approval needed"
        # Nobody approves; prod is mended by hand, the drift ends.
        world.clock.now += DAY
        world.mend()
        assert world.drift().conclusion == "success"
        # A month later the view is redefined the same way; erin asks for the repair.
        world.clock.now += 30 * DAY
        world.redefine()
        world.click("erin", world.button("Plan the repair"))
        assert world.button("Approve the repair") == first  # the same plan, fingerprint
        built = world.applied()
        world.click("bob", first)
        assert world.applied() == built, "frank's month-old override lifted the policy again"
        assert "held by 1 soft policy" in world.drift().title, world.drift().title
    finally:
        world.close()


def test_a_repair_reading_more_than_the_bytes_budget_waits_for_its_approver(
    worlds: Worlds,
) -> None:
    """The repair's plan is estimated as a PR's is (workflow.with_scan_estimate on the
    recorded table sizes): a rebuild reading over max_bytes waits for the budget's
    approver, whoever asked for it under a gate asking nobody else."""
    world = worlds(BYTES_BUDGET)
    try:
        world.drop_orders()
        plan = world.repair().plan
        store = open_state(world.url)
        try:
            versions = [(s.name, s.version) for s in plan.snapshots]
            estimated = workflow.with_scan_estimate(
                store, dataclasses.replace(plan, scan=None), store.get_intervals(versions)
            )
        finally:
            store.close()
        assert plan.scan_bytes == estimated.scan_bytes  # estimated as a PR's plan is
        assert (plan.scan_bytes or 0) > 1000  # and it reads over the budget
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert world.applied() == built, "alice alone rebuilt a table over the bytes budget"
        assert "@frank approves it" in world.drift().summary
    finally:
        world.close()


def test_a_hard_policy_on_bytes_read_refuses_a_big_rebuild(worlds: Worlds) -> None:
    """The repair's facts carry its estimate: a hard 'plan.backfill.bytes <= N' refuses a
    rebuild reading more, whoever approved it."""
    world = worlds(ONE, {"policies/small-reads.yaml": SMALL_READS})
    try:
        world.drop_orders()
        facts = plan_facts(world.repair().plan, {})["plan"]["backfill"]
        assert facts["bytes"] > 1000 and facts["bytes_measured"] is True
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert world.drift().title == "Repair refused: blocked by policies"
        assert "Approve the repair" not in world.labels()
        from sluice.bot.flow.drift_repair import fingerprint

        token = fingerprint(world.repair().plan)[:12]
        world.click("bob", f"repair:{token}")  # the approval's identifier, sent by hand
        assert world.applied() == built, "a rebuild reading 2 KB ran past 'bytes <= 1000'"
        assert world.drift().title == "Repair refused: blocked by policies"
    finally:
        world.close()


def test_the_rebuild_and_repoint_facts_name_what_the_repair_does(worlds: Worlds) -> None:
    """A table dropped by hand: rebuild (destructive, direct) and its backfill intervals;
    a view redefined: repoint, not destructive. A hard 'no destructive' rule sees it."""
    world = worlds(NOBODY)
    try:
        world.warehouse.views["jaffle.customers"] = "SELECT 1 AS id"
        world.drop_orders()
        plan = world.repair().plan
        facts = plan_facts(plan, {})
        models = {m["name"]: m for m in facts["plan"]["models"]}
        assert models["jaffle.orders"]["change"] == "rebuild"
        assert models["jaffle.orders"]["destructive"] is True
        assert models["jaffle.orders"]["backfill_intervals"] >= 1
        assert models["jaffle.customers"]["change"] == "repoint"
        assert models["jaffle.customers"]["destructive"] is False
        assert facts["plan"]["destructive"] == ["jaffle.orders"]
        assert facts["plan"]["modified"] == [] and facts["plan"]["added"] == []
    finally:
        world.close()


def test_a_soft_policy_that_cannot_be_evaluated_refuses_and_no_override_lifts_it(
    worlds: Worlds,
) -> None:
    """Soft held vs refused: a soft policy in error is no soft failure; frank, whom it
    names, cannot lift it; bob's approval runs nothing."""
    world = worlds(ONE, {"policies/broken.yaml": UNEVALUABLE_SOFT})
    try:
        world.redefine()
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert world.drift().title.startswith("Repair refused"), world.drift().title
        assert "Override policies" not in world.labels()
        plan = world.repair().plan
        from sluice.bot.flow.drift_repair import fingerprint

        token = fingerprint(plan)[:12]
        world.click("frank", f"waive:{token}")
        world.click("bob", f"repair:{token}")
        assert world.applied() == built
        assert [r for r in world.rows(audit.POLICY_OVERRIDE)] == []
    finally:
        world.close()


def test_an_override_lifts_only_the_policies_naming_its_giver(worlds: Worlds) -> None:
    files = {
        "policies/customers-kept.yaml": CUSTOMERS_SOFT,
        "policies/customers-grace.yaml": CUSTOMERS_SOFT_GRACE,
    }
    world = worlds(NOBODY, files)
    try:
        world.redefine()
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert "held by 2 soft policies" in world.drift().title, world.drift().title
        world.click("frank", world.button("Override policies"))
        assert world.applied() == built
        assert "held by 1 soft policy" in world.drift().title
        world.click("grace", world.button("Override policies"))
        assert world.applied() == built + 1
    finally:
        world.close()


@pytest.mark.parametrize(
    ("ref", "rule", "lifts"),
    [("#7", True, False), ("prod", False, False), ("prod", True, True)],
    ids=["a-prs-row", "a-row-naming-no-rule", "a-repairs-row"],
)
def test_a_prs_override_row_of_the_repair_fingerprint_lifts_nothing(
    worlds: Worlds, ref: str, rule: bool, lifts: bool
) -> None:
    """An override row written as a PR's is (ref '#7'), of the repair plan's very
    fingerprint and generation: repair_gate.judge takes ref prod only. A row of ref prod
    naming no rule (policies.RULE: written before rules were recorded, or by hand) lifts
    nothing either; the same row naming the rule in force does."""
    world = worlds(NOBODY, {"policies/customers-kept.yaml": CUSTOMERS_SOFT})
    try:
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        from sluice.bot.flow import policies, trust
        from sluice.bot.flow.drift_repair import fingerprint
        from sluice.core.policy.load import parse_policy

        plan = fingerprint(world.repair().plan)
        job = Job.start(world.deps, world.github)
        try:
            generation = trust.for_repository(job).generation
        finally:
            job.close()
        outcome = audit.OVERRODE + "customers-kept" + " under " + generation
        policy = parse_policy("policies/customers-kept.yaml", CUSTOMERS_SOFT)
        detail = policies.override_detail(policy, "x") if rule else "x"
        world.ledger.append(
            audit.Entry(
                world.clock.now,
                KEY,
                audit.POLICY_OVERRIDE,
                "frank",
                outcome,
                ref=ref,
                plan_id=plan,
                detail=detail,
                # frank's account: override_by is pinned to accounts (a row without one
                # counts nothing, whatever it says)
                actor_id=world.github.id_of("frank"),
            )
        )
        built = world.applied()
        world.clock.now += 1
        world.check()
        world.click("erin", world.button("Plan the repair"))
        assert world.applied() == built + lifts
        assert ("held by 1 soft policy" in world.drift().title) is not lifts
    finally:
        world.close()


def test_an_override_of_a_rule_naming_author_is_void_once_another_writer_asks(
    worlds: Worlds,
) -> None:
    """Bound to the requesters: frank lifts 'asked by alice' for erin's request; another
    writer asking for the same plan changes the author facts, and the override no longer
    counts (policies.bound: asked_by(requesters) in the row)."""
    world = worlds(ONE, {"policies/by-author.yaml": CUSTOMERS_BY_AUTHOR})
    try:
        world.redefine()
        world.click("erin", world.button("Plan the repair"))
        assert "held by 1 soft policy" in world.drift().title
        world.click("frank", world.button("Override policies"))
        assert world.drift().title == "Repair planned: 1 more approval needed"
        world.click("carol", world.button("Plan the repair"))  # another requester
        assert "held by 1 soft policy" in world.drift().title, world.drift().title
    finally:
        world.close()


def test_an_owner_of_a_model_the_repair_leaves_alone_does_not_answer_for_one_it_rebuilds(
    worlds: Worlds,
) -> None:
    """owners_must_approve: marketing (customers' owner) may click Approve (an owner prod
    records) but answers only for customers; the orders rebuild still waits for finance."""
    world = worlds(OWNERS)
    world.github.roles.update({"finance": "write", "marketing": "write"})
    try:
        world.drop_orders()
        world.click("alice", world.button("Plan the repair"))
        world.click("bob", world.button("Approve the repair"))
        built = world.applied()
        world.click("marketing", world.button("Approve the repair"))
        assert world.applied() == built
        assert "@finance approves it" in world.drift().summary
        world.click("finance", world.button("Approve the repair"))
        assert world.applied() == built + 1
    finally:
        world.close()


def test_a_requester_named_by_the_budget_does_not_approve_his_own_rebuild(worlds: Worlds) -> None:
    """frank, the budget's approver, asks for a repair over the interval budget: his own
    Approve is refused as the requester's, the repair waits."""
    budget = NOBODY + "  gate:\n    backfill:\n      max_intervals: 0\n      approver: frank\n"
    world = worlds(budget)
    try:
        world.drop_orders()
        built = world.applied()
        world.click("frank", world.button("Plan the repair"))
        world.click("frank", world.button("Approve the repair"))
        assert world.applied() == built
        assert "1 approval of owners or the budget needed" in world.drift().title
    finally:
        world.close()


def test_a_waive_by_a_requester_named_for_no_policy_is_refused_before_spark(
    worlds: Worlds,
) -> None:
    world = worlds(ONE, {"policies/customers-kept.yaml": CUSTOMERS_SOFT})
    try:
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        jobs = len(world.warehouse.jobs)
        world.click("alice", world.button("Override policies"))
        world.click("bob", world.button("Override policies"))  # an approver, not named
        assert len(world.warehouse.jobs) == jobs
        assert world.rows(audit.POLICY_OVERRIDE) == []
    finally:
        world.close()


def test_the_repairs_gate_reads_policies_of_the_prod_branch_not_of_a_pr(
    worlds: Worlds,
) -> None:
    """A writer's branch dropping the soft policy (a PR's policies/ are untrusted): the
    repair is still held by prod's."""
    world = worlds(ONE, {"policies/customers-kept.yaml": CUSTOMERS_SOFT})
    try:
        world.commit("d" * 40, ONE, {})
        world.github.refs["mallory-no-policies"] = "d" * 40
        world.redefine()
        world.click("alice", world.button("Plan the repair"))
        assert "held by 1 soft policy" in world.drift().title
    finally:
        world.close()


def test_may_override_and_may_approve_read_settings_in_force(world: RepairWorld) -> None:
    from sluice.bot.flow import trust

    job = Job.start(world.deps, world.github)
    try:
        settings = trust.for_repository(job)
        assert not repair_gate.may_override(job, settings, "frank")  # no policies in force
        assert repair_gate.may_approve(job, settings, "BOB", world.github.id_of("bob"))
        assert not repair_gate.may_approve(job, settings, "erin", world.github.id_of("erin"))
        # bob's login without his account: the settings name the account it had when they
        # came into force, and this may be anyone's
        assert not repair_gate.may_approve(job, settings, "BOB")
    finally:
        job.close()


# == 3. an override counted at promotion under a second fingerprint =======================

STRICTER = """\
name: orders-need-finance
description: Nothing reaches prod without the finance team's word.
level: soft
override_by: [octo/finance]
rule: 'plan.modified.size() == 0 && plan.added.size() == 0'
"""


def _held_at_promotion(world: Any, sha: str, number: int) -> Any:
    from sluice.bot.flow import policies, trust
    from sluice.core.workflow import plan_environment

    job = world.job()
    try:
        settings = trust.for_repository(job)
        tree = job.tree(sha)
        project = trust.load_trusted(job, tree, settings)
        own = trust.parse(trust.tree_source(tree, job.deps.config_path))
        store = open_state(job.state_url)
        try:
            plan = plan_environment(project, store, "prod", end=job.now, execution_time=job.now)
            return settings, policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                number=number, environment="prod",
            )  # fmt: skip
        finally:
            store.close()
    finally:
        job.close()


def test_an_override_of_a_policy_the_pr_rewrote_does_not_lift_the_new_rule(
    tmp_path: Path,
) -> None:
    """promotion's second fingerprint (the review with the settings change as an item)
    finds fin's override of the old rule; the row names the rule it was given on
    (policies.RULE in its detail), so it does not lift the PR's stricter rule."""
    from sluice.bot.flow import trust
    from tests.helpers.policy_world import World, edit_orders

    world = World(tmp_path)
    try:
        a = "a" * 40

        def change(folder: Path) -> None:
            edit_orders(folder)
            text = (folder / "sluice.yaml").read_text()
            (folder / "sluice.yaml").write_text(text.replace("[bob, carol]", "[bob, carol, eve]"))
            (folder / "policies" / "soft.yaml").write_text(STRICTER)

        world.head(a, change)
        world.open(7, a)
        review = world.build(7)
        assert any(name == trust.SETTINGS_ITEM for name, _ in review.items)
        world.comment(7, "fin", "/sluice override orders-need-finance orders only, agreed")
        assert world.audit("policy override"), "fin's override of the old rule was recorded"
        world.approve_all(7, a, review)
        world.forge.refs["main"] = a  # PR 7 merged
        settings, held = _held_at_promotion(world, a, 7)
        assert dict(settings.policies)["policies/soft.yaml"] == STRICTER  # the new rule
        assert held is not None, "fin's override of the old rule lifted the new one"
    finally:
        world.close()


def test_a_second_pr_of_the_same_plan_and_settings_change_is_not_lifted_by_the_first(
    tmp_path: Path,
) -> None:
    """The second fingerprint is bound to the PR: PR 8 (bob's, same commit) is held."""
    from tests.helpers.policy_world import World, edit_orders

    world = World(tmp_path)
    try:
        a = "a" * 40

        def change(folder: Path) -> None:
            edit_orders(folder)
            text = (folder / "sluice.yaml").read_text()
            (folder / "sluice.yaml").write_text(text.replace("[bob, carol]", "[bob, carol, eve]"))

        world.head(a, change)
        world.open(7, a)
        review = world.build(7)
        world.comment(7, "fin", "/sluice override orders-need-finance agreed")
        world.approve_all(7, a, review)
        world.open(8, a, author="bob")
        world.forge.refs["main"] = a
        _settings, held7 = _held_at_promotion(world, a, 7)
        _settings, held8 = _held_at_promotion(world, a, 8)
        assert held7 is None
        assert held8 is not None and "blocked by policies" in held8[0]
    finally:
        world.close()


# == 4. more forged clicks, and what a repair tells ========================================


def test_a_click_whose_payload_names_no_run_is_refused(world: RepairWorld) -> None:
    """A requested_action without check_run.id (no run to look up): refused, no Spark."""
    from sluice.bot.events.github import parse_github
    from sluice.bot.flow import dispatch
    from tests.helpers.cases import realcase

    world.redefine()
    body = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": checks.DRIFT, "check_run.head_sha": C,
        "requested_action.identifier": world.button("Plan the repair"), "sender.login": "alice",
    })  # fmt: skip
    body["check_run"]["pull_requests"] = []
    del body["check_run"]["id"]
    event = parse_github("check_run", body)
    assert event is not None and event.check_run_id is None
    jobs = len(world.warehouse.jobs)
    dispatch.handle(world.deps, event)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    assert "names no check run" in world.rows(audit.REFUSAL)[-1][2]


def test_the_chat_notice_of_a_repair_carries_no_catalog_text(world: RepairWorld) -> None:
    """The view text a writer of the catalog put in prod is the drift's, never the chat's."""
    import json

    import responses

    from sluice.bot.forge.chat import Channels, Route, Sender, Target
    from sluice.bot.present import notify_text

    url = "https://hooks.slack.com/services/T0/B0/repairs"
    target = Target("slack", url, frozenset({notify_text.DRIFT_REPAIR}), name="slack #1")
    chat = Channels((Route("octo/*", (target,)),), Sender(sleep=lambda _seconds: None))
    world.deps = dataclasses.replace(world.deps, chat=chat)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(url, body="ok")
        world.warehouse.views["jaffle.customers"] = "SELECT '<!channel> secret-ish' AS id"
        world.check()
        world.click("alice", world.button("Plan the repair"))
        world.click("bob", world.button("Approve the repair"))
        [call] = mock.calls
        text = json.dumps(json.loads(call.request.body or b"{}"))
        assert "<!channel>" not in text and "secret-ish" not in text
        assert "approved by bob" in text
