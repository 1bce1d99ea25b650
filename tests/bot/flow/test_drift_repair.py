"""Prod's drift repaired through the service's gate (issue 47, sluice.bot.flow.drift_repair):
a writer's "Plan the repair" on the failed ``sluice/drift`` check, a required approver's
"Approve the repair" of that very plan, the repair applied under prod's queue key and the
check set again. The flow on the in-memory GitHub with the scripted runner (no Spark: its
warehouse is prod's catalog, changed by hand here); the same on real Spark is
tests/core/spark/test_drift_spark.py's service test.

The hostile cases: a reader asking, a requester approving their own repair, a writer the
gate does not name approving, an approval of a plan made before prod drifted further, a
button naming a plan that is not the one now (or no plan Sluice made), an old approval
replayed after its plan was applied, and text that must be escaped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.events.neutral import CheckRunEvent, DriftCheckEvent, pr_key
from sluice.bot.flow import audit, dispatch, drift_repair
from sluice.bot.forge.base import Check
from sluice.bot.forge.chat import Channels, Route, Sender, Target
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import checks, notify_text
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.kept_world import Kept, keep, restore
from tests.security.github_bot import GATED, KEY, NOW, OWNER, PREAMBLE, Bot, C, payload

APPROVERS = GATED.replace("users: [bob]", "users: [bob, carol]")
NOBODY = PREAMBLE + "sluice:\n  project: jaffle\n"
HOSTILE = "SELECT '</details><img src=x onerror=1> @org/team [x](http://evil)' AS id"
EVIL = "evil](http://x.test)<img>"  # a login no forge allows; a web UI may pass anything


def _build(root: Path, config: str, files: dict[str, str] | None) -> Kept:
    """Prod built from the example at ``C`` with ``config`` (and ``files``) on a scripted
    warehouse, the bot's state in ``root``: the world :class:`World` starts from."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    roles = {"alice": "write", "bob": "write", "carol": "write", "erin": "write"}
    github.roles.update({**roles, "dave": "read", EVIL: "write"})
    bot = Bot(root, github, runner_for=warehouse.runner)
    try:
        bot.commit(C, config, files=files)  # prod's branch (and its policies)
        github.refs["main"] = C
        project = load_project(root / f"tree-{C[:6]}", use_cache=False)
        store = open_state(bot.url)
        try:
            plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
            workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW, commit=C)
        finally:
            store.close()
        bot.ledger.claim_name(KEY, CASE_REPOSITORY_ID, KEY, NOW)  # bound by deliveries
        bot.ledger.seen(KEY, None, NOW, sha=C)  # prod was promoted from C
    finally:
        bot.close()
    return keep(root, github, warehouse)


class World:
    """Prod built from the example at ``C`` on a scripted warehouse, the bot on an
    in-memory GitHub whose ``main`` is ``C``; alice, bob, carol and erin write, dave reads;
    the gate names bob and carol (one approval). Each settings' prod is built once for the
    module (:func:`worlds`, tests/helpers/kept_world.py); each test gets a copy of its own."""

    def __init__(self, kept: Kept) -> None:
        root, self.github, self.warehouse = restore(kept)
        self.bot = Bot(root, self.github, runner_for=self.warehouse.runner)
        self.sluices = dict(self.warehouse.views)

    def check(self) -> None:
        """The scheduled drift check."""
        dispatch.handle(self.bot.deps, DriftCheckEvent("github", OWNER, None))

    @property
    def drift(self) -> Check:
        return self.github.checks[C][checks.DRIFT]

    def button(self, label: str) -> str:
        [identifier] = [a.identifier for a in self.drift.actions if a.label == label]
        return identifier

    def click(
        self, user: str, identifier: str, *, head: str = C, run_id: int | None = None
    ) -> None:
        """``user`` clicks the drift check's button ``identifier`` (GitHub's webhook) on
        Sluice's run of the check; with ``run_id``, Sluice's check was made again in that
        run (another delivery, as GitHub's re-run makes)."""
        if run_id is None:
            run_id = self.github.run_id(head, checks.DRIFT)
        else:
            self.bot.ledger.record_check_run(KEY, head, checks.DRIFT, run_id, NOW)
        body: dict[str, Any] = payload("github/check_run/requested_action.payload.json", **{
            "check_run.name": checks.DRIFT, "check_run.head_sha": head, "check_run.id": run_id,
            "requested_action.identifier": identifier, "sender.login": user,
        })  # fmt: skip
        body["check_run"]["pull_requests"] = []
        self.bot.deliver("check_run", body)

    def rows(self, kind: str = audit.REPAIR) -> list[tuple[str, str, str]]:
        return [
            (e.actor, e.outcome, e.detail)
            for e in self.bot.ledger.entries(repo=KEY)
            if e.kind == kind
        ]

    def applied(self) -> int:
        """Apply jobs the warehouse ran (prod's build and each repair)."""
        return sum(1 for job in self.warehouse.jobs if job["kind"] == "apply")


Worlds = Callable[..., World]


@pytest.fixture(scope="module")
def built() -> dict[tuple[str, str], Kept]:
    """Each settings' prod, built once for the module when a test first asks for it."""
    return {}


@pytest.fixture
def worlds(
    built: dict[tuple[str, str], Kept], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worlds]:
    """``worlds(config, files)``: a copy of its own of prod built with those settings."""
    made: list[World] = []

    def make(config: str, files: dict[str, str] | None = None) -> World:
        key = (config, json.dumps(files, sort_keys=True))
        if key not in built:
            built[key] = _build(tmp_path_factory.mktemp("drift-world"), config, files)
        made.append(World(built[key]))
        return made[-1]

    yield make
    for world in made:
        world.bot.close()


@pytest.fixture
def world(worlds: Worlds) -> World:
    return worlds(APPROVERS)


def _drift(world: World) -> None:
    """Prod changed outside Sluice: a view redefined, a table dropped."""
    world.warehouse.views["jaffle.customers"] = HOSTILE
    orders = next(t for t, v in world.warehouse.tables.items() if v.model == "jaffle.orders")
    del world.warehouse.tables[orders]
    world.check()


def test_a_writer_asks_an_approver_approves_and_prod_is_repaired(world: World) -> None:
    _drift(world)
    assert world.drift.conclusion == "failure"
    built = world.applied()
    world.click("alice", world.button("Plan the repair"))
    check = world.drift
    assert check.title == "Repair planned: 1 more approval needed"
    assert "makes 2 views again: `jaffle.customers`, `jaffle.orders`" in check.summary
    assert "drops and builds again 1 table: `jaffle.orders` (1 interval)" in check.summary
    assert "@bob, @carol" in check.summary and "(@alice)" in check.summary
    assert world.applied() == built  # planned, not applied
    [(who, outcome, _)] = world.rows()
    assert (who, outcome) == ("alice", "requested")
    world.click("bob", world.button("Approve the repair"))
    assert world.applied() == built + 1
    check = world.drift
    assert check.conclusion == "success", check.summary
    assert check.title == "No drift: prod is as Sluice recorded it"
    assert "asked by @alice and approved by @bob" in check.summary and not check.actions
    assert world.warehouse.views["jaffle.customers"] == world.sluices["jaffle.customers"]
    assert [(w, o) for w, o, _ in world.rows()] == [
        ("alice", "requested"), ("bob", "approved"), ("alice", "applied"),
    ]  # fmt: skip
    entries = [e for e in world.bot.ledger.entries(repo=KEY) if e.kind == audit.REPAIR]
    assert len({e.plan_id for e in entries}) == 1 and entries[0].ref == PROD


def test_the_requester_cannot_approve_their_own_repair(world: World) -> None:
    _drift(world)
    world.click("bob", world.button("Plan the repair"))
    built = world.applied()
    world.click("bob", world.button("Approve the repair"))
    assert world.applied() == built
    assert world.drift.title == "Repair planned: 1 more approval needed"
    assert ("bob", "drift repair refused") in [(w, o) for w, o, _ in world.rows(audit.REFUSAL)]
    world.click("carol", world.button("Approve the repair"))
    assert world.applied() == built + 1
    assert world.drift.conclusion == "success"


def test_a_reader_cannot_ask_and_runs_no_spark(world: World) -> None:
    _drift(world)
    before, jobs = world.drift, len(world.warehouse.jobs)
    world.click("dave", world.button("Plan the repair"))
    assert len(world.warehouse.jobs) == jobs  # no drift check, no plan: refused first
    assert world.drift == before and world.rows() == []
    [(who, outcome, detail)] = world.rows(audit.REFUSAL)
    assert (who, outcome) == ("dave", "drift repair refused") and "read permission" in detail


def test_a_writer_the_gate_does_not_name_does_not_approve(world: World) -> None:
    _drift(world)
    world.click("alice", world.button("Plan the repair"))
    built, jobs = world.applied(), len(world.warehouse.jobs)
    world.click("erin", world.button("Approve the repair"))
    assert world.applied() == built and len(world.warehouse.jobs) == jobs
    assert [w for w, _, d in world.rows(audit.REFUSAL) if "not a required approver" in d] == [
        "erin"
    ]


def test_an_approval_of_the_plan_before_prod_drifted_further_is_not_counted(
    world: World,
) -> None:
    world.warehouse.views["jaffle.customers"] = HOSTILE
    world.check()
    world.click("alice", world.button("Plan the repair"))
    old = world.button("Approve the repair")
    # Prod changes again before the approval: another table dropped by hand.
    orders = next(t for t, v in world.warehouse.tables.items() if v.model == "jaffle.orders")
    del world.warehouse.tables[orders]
    built = world.applied()
    world.click("bob", old)
    assert world.applied() == built
    check = world.drift
    assert check.conclusion == "failure" and "was not counted" in check.summary
    assert f"`{old.split(':')[1]}`" in check.summary
    assert [a.label for a in check.actions] == ["Plan the repair"]
    assert world.rows()[-1][1] == "requested"  # no approval recorded
    # Planned again and approved again, the new plan runs.
    world.click("alice", world.button("Plan the repair"), run_id=5)
    new = world.button("Approve the repair")
    assert new != old
    world.click("bob", new)
    assert world.applied() == built + 1 and world.drift.conclusion == "success"


def test_an_approval_replayed_after_its_plan_was_applied_does_not_run_it_again(
    world: World,
) -> None:
    world.warehouse.views["jaffle.customers"] = HOSTILE
    world.check()
    world.click("alice", world.button("Plan the repair"))
    approve = world.button("Approve the repair")
    world.click("bob", approve)
    built = world.applied()
    # The same drift again. Carol's click of the old button (and bob's, from another
    # check run) names the plan applied: prod moved on with it (a repair is a plan of
    # prod), so the plan made now is another, which nobody asked for.
    world.warehouse.views["jaffle.customers"] = HOSTILE
    world.check()
    world.click("carol", approve)
    world.click("bob", approve, run_id=9)
    assert world.applied() == built and world.drift.conclusion == "failure"
    refused = [d for _, _, d in world.rows(audit.REFUSAL)]
    assert sum(f"repair plan {approve.split(':')[1]} is now" in d for d in refused) == 2


@pytest.mark.parametrize(
    "identifier",
    ["repair:" + "0" * 12, "repair:../../prod", "approve:0123456789ab", "drift:", "repair:PROD"],
)
def test_a_button_naming_no_plan_of_now_changes_nothing(world: World, identifier: str) -> None:
    world.warehouse.views["jaffle.customers"] = HOSTILE
    world.check()
    world.click("alice", world.button("Plan the repair"))
    built = world.applied()
    world.click("bob", identifier)
    assert world.applied() == built
    assert [w for w, o, _ in world.rows()] == ["alice"]  # the request only
    assert "nothing" not in world.drift.title  # never green


def test_what_the_requester_and_the_catalog_wrote_is_escaped(world: World) -> None:
    _drift(world)
    world.click(EVIL, world.button("Plan the repair"))
    check = world.drift
    quoted = "`evil](http://x.test)<img>`"  # quoted as code, never a link or a tag
    assert quoted in check.summary
    shown = (check.summary + (check.text or "")).replace(quoted, "")
    assert "<img" not in shown and "</details>" not in shown
    assert "](http://evil)" not in shown and "](http://x.test)" not in shown
    assert "@org/team" not in shown and "&lt;img src=x onerror=1&gt;" in shown


def test_under_a_gate_that_requires_nobody_the_request_runs_it(worlds: Worlds) -> None:
    world = worlds(NOBODY)
    try:
        _drift(world)
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert world.applied() == built + 1
        check = world.drift
        assert check.conclusion == "success"
        assert "(the gate requires no approval)" in check.summary
        assert [o for _, o, _ in world.rows()] == ["requested", "applied"]
        world.click("bob", "repair:" + "0" * 12)  # nothing to approve
        assert world.applied() == built + 1
    finally:
        world.bot.close()


def test_the_scheduled_check_keeps_a_waiting_repair_and_its_button(world: World) -> None:
    _drift(world)
    world.click("alice", world.button("Plan the repair"))
    waiting = world.drift
    world.check()  # the next period's check: the same drift, the same plan
    assert world.drift.title == waiting.title
    assert world.button("Approve the repair") == waiting.actions[0].identifier


def test_a_click_on_an_older_commit_plans_nothing(world: World) -> None:
    _drift(world)
    identifier = world.button("Plan the repair")
    world.bot.commit("f" * 40, APPROVERS, parents=(C,))
    world.github.refs["main"] = "f" * 40
    jobs = len(world.warehouse.jobs)
    world.click("alice", identifier)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    assert world.drift.conclusion == "neutral" and "`ffffffffffff`" in world.drift.summary


def test_drift_clicks_are_queued_under_prods_key() -> None:
    click = CheckRunEvent("github", OWNER, None, "requested_action", checks.DRIFT, C, (7,),
                          "alice", "drift:" + "a" * 12, 1)  # fmt: skip
    assert pr_key(click) == f"github:{OWNER}:prod"  # never beside a promotion
    other = CheckRunEvent("github", OWNER, None, "requested_action", checks.APPROVAL, C, (7,),
                          "alice", "approve:" + "a" * 12, 1)  # fmt: skip
    assert pr_key(other) == f"github:{OWNER}#7"


def test_identifiers_fit_githubs_limit_and_only_sluices_shapes_are_read() -> None:
    action = checks.approve_repair_action("f" * 32)
    assert len(action.identifier) <= 20 and len(action.label) <= 20
    assert len(action.description) <= 40
    assert checks.repair_click(action.identifier) == ("repair", "f" * 12)
    for hostile in (
        "repair:FFFFFFFFFFFF",
        "repair:fff",
        "repair:" + "f" * 13,
        " drift:" + "f" * 12,
    ):
        assert checks.repair_click(hostile) is None


def test_the_fingerprint_names_prod_and_what_the_plan_does(world: World) -> None:
    store = open_state(world.bot.url)
    try:
        world.warehouse.views["jaffle.customers"] = HOSTILE
        from sluice.core import drift

        report = drift.check(store, PROD, world.warehouse.runner(), now=NOW)
        plan = drift.plan_repair(store, report, now=NOW).plan
        later = drift.plan_repair(store, report, now=NOW + 86_400_000).plan
    finally:
        store.close()
    assert drift_repair.fingerprint(plan) == drift_repair.fingerprint(later)
    moved = dataclasses.replace(plan, base_plan_id="x" * 32)
    assert drift_repair.fingerprint(moved) != drift_repair.fingerprint(plan)
    more = dataclasses.replace(plan, repoint=(*plan.repoint, "jaffle.orders"))
    assert drift_repair.fingerprint(more) != drift_repair.fingerprint(plan)


def test_approvers_come_from_the_prod_branch_never_from_a_pull_request(world: World) -> None:
    # PR 7 names erin an approver in its own config.yaml: that is not the gate in force.
    head = "7" * 40
    world.bot.commit(head, APPROVERS.replace("users: [bob, carol]", "users: [erin]"), parents=(C,))
    world.bot.pull(7, head, author="erin")
    _drift(world)
    world.click("alice", world.button("Plan the repair"))
    built = world.applied()
    world.click("erin", world.button("Approve the repair"))
    assert world.applied() == built
    assert [w for w, _, d in world.rows(audit.REFUSAL) if "not a required approver" in d] == [
        "erin"
    ]


def test_unloadable_prod_settings_plan_nothing_and_say_why(world: World) -> None:
    _drift(world)
    identifier = world.button("Plan the repair")
    world.bot.commit("f" * 40, "sluice:\n  gate: [not, a, mapping]\n", parents=(C,))
    world.github.refs["main"] = "f" * 40
    jobs = len(world.warehouse.jobs)
    world.click("alice", identifier)
    assert len(world.warehouse.jobs) == jobs and world.rows() == []
    check = world.drift  # the click's commit's check says why
    assert check.title == "Sluice could not repair prod"
    assert "invalid setting 'sluice.gate'" in check.summary


def test_a_click_whose_job_failed_for_good_says_so_on_the_check(world: World) -> None:
    _drift(world)
    run = world.github.run_id(C, checks.DRIFT)
    click = CheckRunEvent("github", OWNER, None, "requested_action", checks.DRIFT, C, (),
                          "alice", world.button("Plan the repair"), run)  # fmt: skip
    dispatch.give_up(world.bot.deps, click, "state database down: <b>boom</b>")
    check = world.drift
    assert (check.title, check.conclusion) == ("Sluice could not repair prod", "failure")
    assert "<b>boom</b>" in check.summary.split("```")[1]  # fenced only


# -- the repair plan judged as a PR's plan is (sluice.bot.flow.repair_gate) ---------------

NO_REBUILDS = """\
name: no-rebuilds
description: Prod's tables are never dropped by a repair.
level: hard
rule: '!plan.models.exists(m, m.change == "rebuild")'
"""
ORDERS_KEPT = """\
name: orders-kept
description: Dropping jaffle.orders needs the finance team's word.
level: soft
override_by: [octo/finance]
rule: '!("jaffle.orders" in plan.destructive)'
"""
OWNERS = APPROVERS + "    owners_must_approve: direct\n"
BUDGET = NOBODY + "  gate:\n    backfill:\n      max_intervals: 0\n      approver: frank\n"


def _orders_dropped(world: World) -> None:
    orders = next(t for t, v in world.warehouse.tables.items() if v.model == "jaffle.orders")
    del world.warehouse.tables[orders]
    world.check()


def test_a_hard_policy_refuses_the_repair_with_the_reason_whoever_approves(
    worlds: Worlds,
) -> None:
    world = worlds(APPROVERS, {"policies/no-rebuilds.yaml": NO_REBUILDS})
    try:
        _drift(world)
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        check = world.drift
        assert (check.title, check.conclusion) == ("Repair refused: blocked by policies", "failure")
        assert "`no-rebuilds` (hard, `policies/no-rebuilds.yaml:1`)" in check.summary
        assert [a.label for a in check.actions] == ["Plan the repair"]  # nothing to approve
        [(who, _, detail)] = world.rows(audit.REFUSAL)
        assert who == "alice" and "blocked by no-rebuilds (hard" in detail
        # An approval of that very plan (its button made by hand) does not run it either.
        store = open_state(world.bot.url)
        try:
            from sluice.core import drift

            report = drift.check(store, PROD, world.warehouse.runner(), now=NOW)
            plan = drift_repair.fingerprint(drift.plan_repair(store, report, now=NOW).plan)
        finally:
            store.close()
        world.click("bob", f"repair:{plan[:12]}")
        assert world.applied() == built and world.drift.title.startswith("Repair refused")
    finally:
        world.bot.close()


def test_a_hard_policy_judges_what_the_repair_does_not_that_it_is_one(worlds: Worlds) -> None:
    # Only a view made again: no table is dropped, so no-rebuilds passes and bob's approval
    # runs it (the facts name each model the repair rebuilds or makes again).
    world = worlds(APPROVERS, {"policies/no-rebuilds.yaml": NO_REBUILDS})
    try:
        world.warehouse.views["jaffle.customers"] = HOSTILE
        world.check()
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        assert world.drift.title == "Repair planned: 1 more approval needed"
        world.click("bob", world.button("Approve the repair"))
        assert world.applied() == built + 1 and world.drift.conclusion == "success"
    finally:
        world.bot.close()


def test_a_soft_policy_holds_the_repair_until_someone_it_names_overrides_it(
    worlds: Worlds,
) -> None:
    world = worlds(APPROVERS, {"policies/orders-kept.yaml": ORDERS_KEPT})
    world.github.teams["octo/finance"] = frozenset({"frank"})
    world.github.roles["frank"] = "write"
    try:
        _orders_dropped(world)
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        check = world.drift
        assert check.title == "Repair planned: 1 more approval needed, held by 1 soft policy"
        assert "the soft policy `orders-kept`" in check.summary and "@octo/finance" in check.summary
        assert [a.label for a in check.actions] == [
            "Approve the repair", "Override policies", "Plan the repair",
        ]  # fmt: skip
        world.click("bob", world.button("Approve the repair"))
        assert world.applied() == built  # approved, still held: an approval lifts no policy
        assert world.drift.title == "Repair planned: held by 1 soft policy"
        world.check()  # the next scheduled check keeps the held repair and its button
        assert world.drift.title == "Repair planned: held by 1 soft policy"
        assert [a.label for a in world.drift.actions] == ["Override policies", "Plan the repair"]
        # erin writes but the policy does not name her: refused before any Spark job.
        jobs = len(world.warehouse.jobs)
        world.click("erin", world.button("Override policies"))
        assert len(world.warehouse.jobs) == jobs and world.applied() == built
        assert "not named by a soft policy" in world.rows(audit.REFUSAL)[-1][2]
        world.click("frank", world.button("Override policies"))
        assert world.applied() == built + 1
        assert world.drift.conclusion == "success", world.drift.summary
        [row] = [e for e in world.bot.ledger.entries(repo=KEY) if e.kind == audit.POLICY_OVERRIDE]
        assert (row.actor, row.ref) == ("frank", PROD)
        assert row.outcome.startswith("overrode orders-kept under ")
        applied = [e for e in world.bot.ledger.entries(repo=KEY) if e.kind == audit.REPAIR]
        assert row.plan_id == applied[-1].plan_id  # that repair plan's, no other
    finally:
        world.bot.close()


def test_an_override_of_one_repair_plan_does_not_lift_the_next(worlds: Worlds) -> None:
    world = worlds(NOBODY, {"policies/orders-kept.yaml": ORDERS_KEPT})
    world.github.teams["octo/finance"] = frozenset({"frank"})
    world.github.roles["frank"] = "write"
    try:
        _orders_dropped(world)
        world.click("alice", world.button("Plan the repair"))
        world.click("frank", world.button("Override policies"))
        built = world.applied()
        assert world.drift.conclusion == "success"
        _orders_dropped(world)  # the same drift again: prod moved on, another plan
        world.click("alice", world.button("Plan the repair"), run_id=6)
        assert world.applied() == built
        assert world.drift.title == "Repair planned: held by 1 soft policy"
    finally:
        world.bot.close()


def test_a_repair_over_the_backfill_budget_waits_for_its_approver(worlds: Worlds) -> None:
    # The gate asks nobody else, yet a repair computing more than the budget waits for
    # its approver, as a PR's build does.
    world = worlds(BUDGET)
    world.github.roles["frank"] = "write"
    try:
        _orders_dropped(world)
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        check = world.drift
        assert world.applied() == built
        assert check.title == "Repair planned: 1 approval of owners or the budget needed"
        assert "@frank approves it with Approve the repair (for backfill of 1 interval" in (
            check.summary
        )
        world.click("erin", world.button("Approve the repair"))  # not the budget's approver
        assert world.applied() == built
        world.click("frank", world.button("Approve the repair"))
        assert world.applied() == built + 1 and world.drift.conclusion == "success"
    finally:
        world.bot.close()


def test_owners_of_the_models_the_repair_changes_approve_it_when_the_gate_asks(
    worlds: Worlds,
) -> None:
    world = worlds(OWNERS)  # prod: orders owned by finance, customers by marketing
    world.github.roles.update({"finance": "write", "marketing": "write"})
    try:
        _drift(world)
        built = world.applied()
        world.click("alice", world.button("Plan the repair"))
        world.click("bob", world.button("Approve the repair"))
        check = world.drift
        assert world.applied() == built
        assert check.title == "Repair planned: 2 approvals of owners or the budget needed"
        assert "@finance approves it with Approve the repair (for `jaffle.orders`)" in (
            check.summary
        )
        world.click("finance", world.button("Approve the repair"))
        assert world.applied() == built
        assert world.drift.title == "Repair planned: 1 approval of owners or the budget needed"
        world.click("marketing", world.button("Approve the repair"))
        assert world.applied() == built + 1 and world.drift.conclusion == "success"
    finally:
        world.bot.close()


def test_an_owner_who_asked_for_the_repair_does_not_approve_it(worlds: Worlds) -> None:
    world = worlds(OWNERS)
    world.github.roles.update({"finance": "write"})
    try:
        _orders_dropped(world)
        world.click("finance", world.button("Plan the repair"))
        built = world.applied()
        world.click("finance", world.button("Approve the repair"))
        world.click("bob", world.button("Approve the repair"))
        assert world.applied() == built  # finance's own request: still waiting for an owner
        assert "1 approval of owners or the budget needed" in world.drift.title
    finally:
        world.bot.close()


def test_a_repair_applied_is_told_in_chat_once(world: World) -> None:
    url = "https://hooks.slack.com/services/T0/B0/repairs"
    target = Target("slack", url, frozenset({notify_text.DRIFT_REPAIR}), name="slack #1")
    chat = Channels((Route("octo/*", (target,)),), Sender(sleep=lambda _seconds: None))
    world.bot.deps = dataclasses.replace(world.bot.deps, chat=chat)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post(url, body="ok")
        _drift(world)
        world.click("alice", world.button("Plan the repair"))
        assert len(mock.calls) == 0  # asked, not applied: nothing to tell
        approve = world.button("Approve the repair")
        world.click("bob", approve)
        [call] = mock.calls
        text = json.loads(call.request.body or b"{}")["blocks"][0]["text"]["text"]
        assert "Prod's drift repaired through the gate" in text
        assert "alice" in text and "approved by bob" in text, text
        world.click("carol", approve)  # the plan was applied: nothing more to tell
        assert len(mock.calls) == 1
