"""Policies as code through the real PR build, end to end in the fast loop (issue 47): the
pull request's webhook, the build on the scripted runner (:mod:`sluice.core.spark.scripted`:
no Spark), the ``sluice/policy`` check and the comment's section, ``/sluice override`` from
its comment's webhook, and the merge's promotion.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.forge.memory import MemoryForge
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.state import open_state
from tests.helpers.policy_world import SOFT
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, merged, opened

HEAD = "a1" * 20
MERGE = "e" * 40
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
ORDERS = (
    "  ON o.order_id = p.order_id",
    "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'",
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    """main at ``C``: the example gated by bob, with a soft policy on jaffle.orders that
    octo/finance (fin) may override; prod built; PR 7 changes orders.sql at HEAD."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "fin": "write"})
    github.teams["octo/finance"] = frozenset({"fin"})
    made = Bot(tmp_path, github, runner_for=warehouse.runner)
    src = made.commit(C, CONFIG)
    (src / "policies").mkdir()
    (src / "policies" / "orders.yaml").write_text(SOFT)
    github.commit_folder(C, src)
    github.refs["main"] = C
    project = load_project(src, use_cache=False)
    store = open_state(made.url)
    try:
        plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW)
    finally:
        store.close()
    warehouse.script = Script(rows={"jaffle.orders": 99})
    head = made.commit(HEAD, CONFIG, parents=(C,))
    (head / "policies").mkdir()
    (head / "policies" / "orders.yaml").write_text(SOFT)
    orders = head / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace(*ORDERS))
    github.commit_folder(HEAD, head, parents=(C,))
    made.pull(7, HEAD)
    yield made
    made.close()


def test_the_pr_build_sets_the_policy_check_and_an_override_lifts_it(bot: Bot) -> None:
    bot.deliver("pull_request", opened(7, HEAD))
    check = bot.github.checks[HEAD]["sluice/policy"]
    assert (check.conclusion, check.title) == ("failure", "1 of 1 policies block")
    [sticky] = bot.github.comments[7]
    assert "**Policies:** ❌" in sticky.body
    assert "`sluice/policy`" in sticky.body  # in the comment's table of checks
    bot.say(7, "fin", "/sluice override orders-need-finance agreed", comment_id=9001)
    check = bot.github.checks[HEAD]["sluice/policy"]
    assert check.conclusion == "success"
    assert "**Policies:** ✅" in bot.github.comments[7][0].body
    assert bot.github.bot_comments(7)[-1].startswith("@fin overrode `orders-need-finance`")


def _approved_and_merged(bot: Bot) -> None:
    """bob's approval of PR 7's plan recorded as its gate records it, then the merge."""
    review = bot.deps.ledger.review(KEY, 7, HEAD)
    assert review is not None
    bot.deps.ledger.approve(KEY, 7, HEAD, review.items, ["bob"], NOW, review.generation)
    bot.github.commit_folder(MERGE, bot.root / f"tree-{HEAD[:6]}", parents=(C, HEAD))
    bot.github.refs["main"] = MERGE
    bot.github.close_pull(7, merged=True)
    bot.deliver("pull_request", merged(7, HEAD, MERGE))


def test_an_approved_merge_is_not_promoted_while_the_policy_blocks(bot: Bot) -> None:
    bot.deliver("pull_request", opened(7, HEAD))
    _approved_and_merged(bot)
    deploy = bot.github.checks[MERGE]["sluice/deploy"]
    assert deploy.conclusion == "failure"
    assert deploy.title == "Not promoted to prod: blocked by policies"


def test_an_approved_merge_whose_policy_was_overridden_is_promoted(bot: Bot) -> None:
    bot.deliver("pull_request", opened(7, HEAD))
    bot.say(7, "fin", "/sluice override orders-need-finance agreed", comment_id=9001)
    _approved_and_merged(bot)
    deploy = bot.github.checks[MERGE]["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary


def test_a_pr_loosening_the_policy_is_still_judged_by_prods_and_told_so(bot: Bot) -> None:
    head = bot.root / f"tree-{HEAD[:6]}"
    (head / "policies" / "orders.yaml").write_text(SOFT.replace("'!(", "'true || !("))
    bot.github.commit_folder(HEAD, head, parents=(C,))
    bot.deliver("pull_request", opened(7, HEAD))
    check = bot.github.checks[HEAD]["sluice/policy"]
    assert check.conclusion == "failure"
    body = bot.github.comments[7][0].body
    assert "This PR changes the policies in `policies/`" in body
    assert "This PR changes Sluice's settings in" not in body  # its sluice: section is prod's
