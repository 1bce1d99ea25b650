"""Prod built from the example project on the scripted warehouse (no Spark:
:mod:`sluice.core.spark.scripted`), for the flow tests that drive the bot of
``tests/security/github_bot.py`` on the in-memory forge: :func:`prod_built` (main at ``C``,
prod planned and applied from it as a promotion's job would), and :func:`filter_orders`
(a pull request's commit that changes orders.sql's SQL, ``ORDERS``).
"""

from __future__ import annotations

from pathlib import Path

from sluice.bot.forge.memory import MemoryForge
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.security.github_bot import NOW, OWNER, Bot, C

ORDERS = (
    "  ON o.order_id = p.order_id",
    "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'",
)
"""orders.sql's text, and what :func:`filter_orders` makes of it: no returned orders."""


def prod_built(root: Path, config: str, forge: MemoryForge | None = None) -> tuple[Bot, Warehouse]:
    """The bot in ``root`` on ``forge`` (an in-memory GitHub of ``OWNER`` unless given), alice
    and bob writers; main at ``C`` (the example project, ``config`` its config.yaml) and
    prod built from it on a scripted warehouse, whose script the caller then sets."""
    warehouse = Warehouse()
    forge = forge if forge is not None else MemoryForge(OWNER, name="github")
    forge.roles.update({"alice": "write", "bob": "write"})
    bot = Bot(root, forge, runner_for=warehouse.runner)
    bot.prod(C, config)
    project = load_project(bot.root / f"tree-{C[:6]}", use_cache=False)
    store = open_state(bot.url)
    try:
        plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW)
    finally:
        store.close()
    return bot, warehouse


def filter_orders(bot: Bot, head: str, config: str) -> Path:
    """Commit ``head`` on ``C`` to the bot's forge: the example project (``config`` its
    config.yaml) with orders.sql's SQL changed (``ORDERS``). Returns its folder."""
    src = bot.commit(head, config, parents=(C,))
    orders = src / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace(*ORDERS))
    bot.github.commit_folder(head, src, parents=(C,))
    return src
