"""The bot's flows end to end in the fast loop: the real plan, job specs, state, checks
and comment, on the scripted runner (:mod:`sluice.core.spark.scripted`: no Spark; what
Spark would compute comes from its script). The same flows on real Spark are the
lifecycle tests (``tests/bot/flow/test_lifecycle.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from sluice.core.errors import DriverLost
from sluice.core.snapshot.naming import PROD, pr_environment, view_name
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.spark.submit import Runner
from sluice.core.state import open_state
from tests.helpers.kept_world import Kept, keep, restore
from tests.helpers.scripted_prod import filter_orders, prod_built
from tests.security.github_bot import GATED, KEY, Bot, C, merged, opened, review

HEAD = "a1" * 20
MERGE = "e" * 40
# The example gated by bob; a PR builds incremental models' whole history, so a merge has
# nothing left to compute.
CONFIG = GATED + "  pr:\n    backfill_days: null\n"


class Transactions:
    """Counts state transactions: every engine's ``begin``, the ledger's and the queue's
    as well as the state store's."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *_args: object) -> None:
        self.count += 1


@pytest.fixture
def transactions() -> Iterator[Transactions]:
    made = Transactions()
    event.listen(Engine, "begin", made)
    yield made
    event.remove(Engine, "begin", made)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """The bot on an in-memory GitHub, main at ``C`` (the example project, gated by bob),
    prod built from it on a scripted warehouse; PR 7 changes orders.sql's SQL at HEAD.
    Built once for the module (tests/helpers/kept_world.py): each test gets a copy of its
    own (:func:`_world`)."""
    folder = tmp_path_factory.mktemp("scripted-world")
    bot, warehouse = prod_built(folder, CONFIG)
    filter_orders(bot, HEAD, CONFIG)
    bot.pull(7, HEAD)
    bot.close()
    return keep(folder, bot.github, warehouse)


def _world(built: Kept, script: Script) -> tuple[Bot, Warehouse]:
    """A copy of its own of the world :func:`built` made, ``script`` scripting its
    warehouse from now on (prod was built as usual; the PR's jobs follow the script)."""
    folder, github, warehouse = restore(built)
    warehouse.script = script
    return Bot(folder, github, runner_for=warehouse.runner), warehouse


@pytest.fixture
def world(built: Kept) -> Iterator[tuple[Bot, Warehouse]]:
    bot, warehouse = _world(built, Script(rows={"jaffle.orders": 99}))
    yield bot, warehouse
    bot.close()


def _comment(bot: Bot) -> str:
    [sticky] = bot.github.comments[7]
    return sticky.body


def _publications(bot: Bot, since: int) -> int:
    return sum(1 for name, _ in bot.github.calls[since:] if name == "upsert_comment")


def test_pr_build_makes_a_virtual_environment_and_reports_it(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    prod_built = set(warehouse.built("apply"))
    bot.deliver("pull_request", opened(7, HEAD))
    built = warehouse.built("preview")
    # The changed model and what reads it are built; the rest of the PR's views read prod's.
    assert "jaffle.orders" in built
    assert "jaffle.stg_customers" not in built and "jaffle.raw_orders" not in built
    environment = pr_environment(7)
    pr_orders = warehouse.reads(view_name("jaffle.orders", environment))
    prod_orders = warehouse.reads(view_name("jaffle.orders", PROD))
    assert pr_orders and prod_orders and pr_orders != prod_orders
    staging = view_name("jaffle.stg_customers", environment)
    assert warehouse.reads(staging) == warehouse.reads(view_name("jaffle.stg_customers", PROD))
    assert prod_built >= {"jaffle.stg_customers", "jaffle.orders"}
    checks = bot.checks_on(HEAD)
    assert checks["sluice/tests"].conclusion == "success"
    assert checks["sluice/pr-environment"].conclusion == "success"
    assert checks["sluice/approval"].conclusion != "success"  # bob has not approved
    body = _comment(bot)
    assert "jaffle.orders" in body and "99" in body  # the rows the build reported


def test_a_push_that_changes_no_model_builds_nothing_and_keeps_the_plan(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    bot.deliver("pull_request", opened(7, HEAD))
    before = len(warehouse.jobs)
    # The same tree at another commit: its environment already holds these versions.
    push = "b2" * 20
    bot.github.commit(push, dict(bot.github.files[HEAD]), parents=(HEAD,))
    bot.github.push(7, push)
    bot.deliver("pull_request", {**opened(7, push), "action": "synchronize"})
    [job] = warehouse.jobs[before:]  # the table diffs again, nothing built
    assert not [step for step in job["steps"] if step["type"] == "build"]
    environment = bot.checks_on(push)["sluice/pr-environment"]
    assert environment.conclusion == "success"
    assert environment.title == "pr_7: 0 tables built, 0 views"
    body = _comment(bot)  # still what the PR changes, against prod
    assert "jaffle.orders" in body and "breaking" in body
    assert "changes no model" not in body and "no model changed" not in body


def test_a_section_another_job_writes_during_a_build_is_kept(built: Kept) -> None:
    """A promotion runs under the repository's prod key while a PR's build runs under the
    PR's: its section of the PR's comment, written mid-build, survives the build's
    publications (red team: a job's cached copy of the comment overwrote it)."""
    bot, warehouse = _world(built, Script())
    other = ("promotion", "**Promotion:** refused: a change was not approved")

    def runner(*args: Any) -> Runner:
        bot.deps.sticky.publish(bot.forge(), 7, section=other)  # another job, meanwhile
        return warehouse.runner(*args)

    bot.deps = dataclasses.replace(bot.deps, spark_runner=runner)
    try:
        bot.deliver("pull_request", opened(7, HEAD))
        assert "refused: a change was not approved" in _comment(bot)
        assert bot.ledger.comment(KEY, 7)[1]["promotion"] == other[1]
    finally:
        bot.close()


def test_a_pr_build_is_one_unit_of_work(
    world: tuple[Bot, Warehouse], transactions: Transactions
) -> None:
    """A PR build opens at most 15 state transactions (the ids of the check runs it makes
    written with its other writes) and publishes the comment at most three times (queued,
    built, final)."""
    bot, _warehouse = world
    since = len(bot.github.calls)
    transactions.count = 0
    bot.deliver("pull_request", opened(7, HEAD))
    assert _publications(bot, since) <= 3, bot.github.calls[since:]
    assert transactions.count <= 15, transactions.count


def test_merge_promotes_by_virtual_update(world: tuple[Bot, Warehouse]) -> None:
    bot, warehouse = world
    bot.deliver("pull_request", opened(7, HEAD))
    pr_orders = warehouse.reads(view_name("jaffle.orders", pr_environment(7)))
    bot.github.add_review(7, "bob", "APPROVED", HEAD)
    bot.deliver("pull_request_review", review(7, "bob", HEAD, 1))
    assert bot.approval(HEAD).conclusion == "success"
    applies = len([job for job in warehouse.jobs if job["kind"] == "apply"])
    bot.github.commit(MERGE, dict(bot.github.files[HEAD]), parents=(C, HEAD), branch="main")
    bot.github.close_pull(7, merged=True)
    bot.deliver("pull_request", merged(7, HEAD, MERGE))
    promotion = [job for job in warehouse.jobs if job["kind"] == "apply"][applies:]
    assert promotion, "no promotion job ran"
    # Nothing recomputed: prod's view now reads the table the PR built.
    assert not [s for job in promotion for s in job["steps"] if s["type"] == "build"]
    assert warehouse.reads(view_name("jaffle.orders", PROD)) == pr_orders


def test_a_failed_build_names_the_model_file_and_sparks_one_line(built: Kept) -> None:
    error = (
        "AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `amout` "
        "cannot be resolved. SQLSTATE: 42703; line 1 pos 9;\n'Project ['amout]\n"
        "+- SubqueryAlias o"
    )
    bot, warehouse = _world(built, Script(fail={"build jaffle.orders": error}))
    try:
        bot.deliver("pull_request", opened(7, HEAD))
        body = _comment(bot)
        assert "models/orders.sql" in body
        assert "UNRESOLVED_COLUMN" in body and "amout" in body
        assert "SubqueryAlias" not in body and "SQLSTATE" not in body
        check = bot.checks_on(HEAD)["sluice/pr-environment"]
        assert check.conclusion == "failure"
        said = f"{check.summary}\n{check.text or ''}"
        assert said.count("models/orders.sql:1") == 1, said  # the location once
        store = open_state(bot.url)
        try:
            assert store.get_environment(pr_environment(7)) is None  # nothing committed
        finally:
            store.close()
        assert "jaffle.orders" in warehouse.built("preview")
    finally:
        bot.close()


def test_a_lost_driver_is_retried_not_reported(built: Kept) -> None:
    bot, _warehouse = _world(built, Script(lose="build jaffle.orders"))
    try:
        with pytest.raises(DriverLost):
            bot.deliver("pull_request", opened(7, HEAD))
        assert bot.checks_on(HEAD)["sluice/pr-environment"].conclusion is None  # still running
    finally:
        bot.close()
