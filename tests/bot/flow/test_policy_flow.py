"""Policies as code in the service (issue 47): the prod branch's policies judge a PR's
plan (``sluice/policy`` check, comment section), ``/sluice override`` lifts a soft one for
one plan, and a promotion is held back by a failing policy even when approved.

Driven on the in-memory forge and SQLite with no Spark (tests/helpers/policy_world.py):
the PR build's policy part on a plan made by core's planner against a prod recorded as
built; comments through real ``issue_comment`` webhook bodies and the dispatcher.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import audit, policies, trust
from sluice.core.policy.load import DIRECTORY
from tests.helpers.kept_world import KeptFolder, keep_folder, restore_folder
from tests.helpers.policy_world import ADVISORY, POLICIES, World, edit_orders

# The rule of orders-need-finance (policy_world.SOFT), as an override row names it.
_SOFT_RULE = hashlib.sha256(b'!("jaffle.orders" in plan.modified)').hexdigest()[:16]

A = "a" * 40


Worlds = Callable[..., World]


@pytest.fixture(scope="module")
def built() -> dict[str, KeptFolder]:
    """Each set of prod policies' world, built once for the module when a test first asks
    for it (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def worlds(
    built: dict[str, KeptFolder], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worlds]:
    """``worlds(prod_policies)``: a copy of its own of the world built with those policies
    (tests/helpers/policy_world.py's ``World(root, prod_policies)``)."""
    made: list[World] = []

    def make(prod_policies: dict[str, str] | None = None) -> World:
        key = json.dumps(prod_policies, sort_keys=True)
        if key not in built:
            folder = tmp_path_factory.mktemp("policy-world")
            first = World(folder, prod_policies)
            first.close()
            built[key] = keep_folder(folder, first.forge)
        folder, forge = restore_folder(built[key])
        made.append(World(folder, built=forge))
        return made[-1]

    yield make
    for world in made:
        world.close()


@pytest.fixture
def world(worlds: Worlds) -> World:
    return worlds()


def test_the_policies_in_force_judge_a_prs_plan_and_the_check_says_why(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    assert ("orders-need-finance", "fail", "") in review.policies
    assert ("no-new-models", "pass", "") in review.policies
    check = world.check(A)
    assert check is not None and check.conclusion == "failure"
    assert check.title == "1 of 2 policies block"
    assert check.text is not None
    assert "`orders-need-finance`" not in check.title
    assert "A change to jaffle.orders needs the finance team" in check.text
    assert "failed (blocks until overridden)" in check.text
    assert "policies/soft.yaml:1" in check.text
    body = world.forge.bot_comments(7)[0]
    assert "**Policies:** ❌" in body and "`orders-need-finance` (soft)" in body


def test_an_override_by_a_named_team_member_lifts_the_soft_failure_for_that_plan(
    world: World,
) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    [reply] = world.comment(7, "fin", "/sluice override orders-need-finance quarter-end fix")
    assert reply.startswith("@fin overrode `orders-need-finance` for this plan")
    assert "No policy blocks this plan now" in reply
    check = world.check(A)
    assert check is not None and check.conclusion == "success", check.summary
    assert (
        check.text is not None and "Overridden for this plan by @fin: quarter-end fix" in check.text
    )
    [row] = world.audit(audit.POLICY_OVERRIDE)
    assert (row.actor, row.outcome, row.ref, row.plan_id, policies.given_on(row)) == (
        "fin", f"overrode orders-need-finance under {review.generation}", "#7",
        review.fingerprint, (_SOFT_RULE, "quarter-end fix"),
    )  # fmt: skip
    assert row.detail == f"rule {_SOFT_RULE}: quarter-end fix"  # the rule it lifts
    assert "**Policies:** ✅" in world.forge.bot_comments(7)[0]


def test_a_promotion_is_held_back_by_a_failing_policy_even_when_approved(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    world.approve_all(7, A, review)
    outcome = world.promote(A, 7)
    assert not outcome.ok
    assert outcome.title == "Not promoted to prod: blocked by policies"
    assert "`orders-need-finance`" in outcome.summary
    deploy = world.forge.checks[A]["sluice/deploy"]
    assert deploy.conclusion == "failure"
    [row] = [e for e in world.audit(audit.PROMOTION) if e.outcome == "not promoted"]
    assert "blocked by policies" in row.detail


def test_the_override_of_the_plan_counts_at_promotion(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    world.build(7)
    world.comment(7, "fin", "/sluice override orders-need-finance agreed in standup")
    job = world.job()
    try:
        from sluice.bot.flow import policies
        from sluice.core.state import open_state
        from sluice.core.workflow import plan_environment

        settings = trust.for_repository(job)
        tree = job.tree(A)
        project = trust.load_trusted(job, tree, settings)
        own = trust.parse(trust.tree_source(tree, job.deps.config_path))
        store = open_state(job.state_url)
        try:
            plan = plan_environment(project, store, "prod", end=job.now, execution_time=job.now)
            held = policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                number=7, environment="prod",
            )  # fmt: skip
        finally:
            store.close()
    finally:
        job.close()
    assert held is None  # the PR's plan is the plan the merge promotes: its override holds


def test_an_advisory_failure_shows_and_does_not_block(worlds: Worlds) -> None:
    world = worlds({f"{DIRECTORY}/advice.yaml": ADVISORY})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        world.build(7)
        check = world.check(A)
        assert check is not None and check.conclusion == "success"
        assert check.title == "1 policies: none blocks"
        assert check.text is not None and "failed (advisory: does not block)" in check.text
    finally:
        world.close()


def test_no_policies_in_force_no_check_and_no_section(worlds: Worlds) -> None:
    world = worlds({})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        review = world.build(7)
        assert review.policies == ()
        assert world.check(A) is None
        assert "Policies:" not in world.forge.bot_comments(7)[0]
    finally:
        world.close()


def test_the_policies_are_read_from_the_prod_branch_through_the_forge(world: World) -> None:
    job = world.job()
    try:
        settings = trust.for_repository(job)
    finally:
        job.close()
    assert [path for path, _ in settings.policies] == sorted(POLICIES)
    assert ("list_dir", ("main", "policies")) in world.forge.calls


FILES = """\
name: no-seed-edits
description: Seeds change only through the data team.
level: hard
rule: files.all(f, !f.startsWith("seeds/"))
"""
ORDERS_FILE = """\
name: orders-file
description: models/orders.sql is frozen.
level: hard
rule: '!("models/orders.sql" in files)'
"""


def test_the_files_fact_is_what_the_forge_says_the_pr_changes(worlds: Worlds) -> None:
    world = worlds({"policies/seeds.yaml": FILES, "policies/orders.yaml": ORDERS_FILE})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        review = world.build(7)
        assert sorted(review.policies) == [
            ("no-seed-edits", "pass", ""),
            ("orders-file", "fail", ""),
        ]
        assert ("changed_files", (7,)) in world.forge.calls
    finally:
        world.close()


def test_files_unknown_to_the_forge_block_the_rules_that_name_them(worlds: Worlds) -> None:
    world = worlds({"policies/seeds.yaml": FILES, "policies/hard.yaml": POLICIES[
        "policies/hard.yaml"]})  # fmt: skip
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        world.forge.changed_files = lambda number: None  # type: ignore[method-assign]
        review = world.build(7)
        outcomes = {name: (outcome, error) for name, outcome, error in review.policies}
        assert outcomes["no-new-models"] == ("pass", "")  # names no files: judged as ever
        outcome, error = outcomes["no-seed-edits"]
        assert outcome == "error"
        assert error.startswith("policies/seeds.yaml:4: the rule names `files`")
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"
    finally:
        world.close()


def test_no_rule_naming_files_asks_the_forge_nothing(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    world.build(7)
    assert not [call for call in world.forge.calls if call[0] == "changed_files"]


def test_a_merge_group_is_held_back_by_a_failing_policy_even_when_approved(world: World) -> None:
    from sluice.bot.events.neutral import MergeGroupEvent
    from sluice.bot.flow import merge_queue

    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    world.approve_all(7, A, review)
    group = "c" * 40  # prod's head with PR 7 merged in: its files are A's
    world.forge.commit(group, world.forge.files[A], parents=(A,))
    event = MergeGroupEvent(
        forge="github", repo=world.forge.repo, installation_id=None, action="checks_requested",
        head_sha=group, head_ref=f"gh-readonly-queue/main/pr-7-{'0' * 40}", base_ref="main",
        base_sha="0" * 40, number=7,
    )  # fmt: skip
    job = world.job()
    try:
        merge_queue.check_group(job, event)
    finally:
        job.close()
    gate = world.forge.checks[group]["sluice/approval"]
    assert gate.conclusion == "failure"
    assert gate.title == "Not promoted to prod: blocked by policies"
    assert "`orders-need-finance`" in gate.summary


def test_the_override_counts_at_promotion_when_the_pr_also_changed_the_settings(
    world: World,
) -> None:
    # PR 7 breaks orders (the soft policy fails) and adds an approver to sluice.yaml: its
    # review has the settings change as an item, and fin overrides that plan. Once merged,
    # the approved settings are in force at once, so the promotion's plan no longer has a
    # settings change to approve: the override of the PR's plan must still count.
    def change(folder: Path) -> None:
        edit_orders(folder)
        text = (folder / "sluice.yaml").read_text()
        (folder / "sluice.yaml").write_text(text.replace("[bob, carol]", "[bob, carol, eve]"))

    world.head(A, change)
    world.open(7, A)
    review = world.build(7)
    assert any(name == trust.SETTINGS_ITEM for name, _ in review.items)
    world.comment(7, "fin", "/sluice override orders-need-finance agreed in standup")
    world.approve_all(7, A, review)
    world.open(8, A, author="bob")  # the same commit in another PR, never overridden
    world.forge.refs["main"] = A  # PR 7 merged
    job = world.job()
    try:
        from sluice.bot.flow import policies
        from sluice.core.state import open_state
        from sluice.core.workflow import plan_environment

        settings = trust.for_repository(job)
        assert settings.gate.required_approvers.users == ("bob", "carol", "eve")  # in force
        tree = job.tree(A)
        project = trust.load_trusted(job, tree, settings)
        own = trust.parse(trust.tree_source(tree, job.deps.config_path))
        store = open_state(job.state_url)
        try:
            plan = plan_environment(project, store, "prod", end=job.now, execution_time=job.now)
            held = policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                number=7, environment="prod",
            )  # fmt: skip
            # Through PR 8, without fin's override, the same promotion is held.
            other = policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                number=8, environment="prod",
            )  # fmt: skip
        finally:
            store.close()
    finally:
        job.close()
    assert held is None, held
    assert other is not None and "blocked by policies" in other[0]
