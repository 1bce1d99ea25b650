"""The service's janitor drops views a PR build cut short left with no record, unless the
queue says a job runs for that PR (issue 45's crash trials): the bot's real flow on the
scripted runner (no Spark: sluice/core/spark/scripted.py), the queue's running keys given
as the service gives them (``Deps.running_keys``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import dispatch
from sluice.core.errors import DriverLost
from sluice.core.spark.scripted import Script
from tests.helpers.scripted_prod import filter_orders, prod_built
from tests.security.github_bot import GATED, KEY, NOW, OWNER, opened

HEAD = "a1" * 20
LATER = NOW + 10 * 60_000  # past twice the job time limit below


def test_the_janitor_drops_a_cut_builds_views_unless_its_pr_runs(tmp_path: Path) -> None:
    bot, warehouse = prod_built(tmp_path, GATED)
    try:
        filter_orders(bot, HEAD, GATED)
        bot.pull(7, HEAD)
        # PR 7's build is cut after its views step, before its record (its retry never
        # comes: the PR was closed, or the job failed for good).
        warehouse.script = Script(lose="table diff *")
        with pytest.raises(DriverLost):
            bot.deliver("pull_request", opened(7, HEAD))
        warehouse.script = Script()
        leaked = sorted(v for v in warehouse.views if "__pr_7." in v)
        assert leaked, "the cut build made no views"
        prod = {v: sql for v, sql in warehouse.views.items() if "__" not in v.split(".")[0]}
        running = {f"{KEY}#7"}
        deps = dataclasses.replace(
            bot.deps, clock=lambda: LATER, job_timeout=60.0, running_keys=lambda: frozenset(running)
        )
        janitor = JanitorEvent(forge="github", repo=OWNER, installation_id=None)
        dispatch.handle(deps, janitor)  # PR 7's job runs: its views stay
        assert sorted(v for v in warehouse.views if "__pr_7." in v) == leaked
        running.clear()
        running.add(f"{KEY}#8")  # another PR's build: not PR 7's
        dispatch.handle(deps, janitor)
        assert [v for v in warehouse.views if "__pr_7." in v] == []
        assert {v: sql for v, sql in warehouse.views.items() if v in prod} == prod
    finally:
        bot.close()
