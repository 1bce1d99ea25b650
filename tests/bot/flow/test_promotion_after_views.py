"""A promotion whose job fails after prod's views swap (issue 45's crash trials: out of
time once the views were re-pointed): prod's record follows its views (all new, and the
state says so), and the PR and the deploy check say what happened; before, the check said
"Promotion failed; prod is unchanged" while prod's views read the PR's versions.

The bot's real flow on the scripted runner (no Spark: sluice/core/spark/scripted.py); the
step after the views is the project's ``after_all`` statements, failing as Spark reports.
"""

from __future__ import annotations

from pathlib import Path

from sluice.core.snapshot.naming import PROD, pr_environment, view_name
from sluice.core.spark.scripted import Script
from sluice.core.state import open_state
from tests.helpers.scripted_prod import filter_orders, prod_built
from tests.security.github_bot import GATED, NOW, C, merged, opened, review

HEAD = "a1" * 20
MERGE = "e" * 40
CONFIG = (
    GATED
    + "  pr:\n    backfill_days: null\n"
    + "after_all:\n  - CREATE VIEW IF NOT EXISTS ops.last AS SELECT 1 AS x\n"
)
AFTER_ALL = "run the project's after_all statements"


def test_a_promotion_failing_after_the_swap_is_promoted_and_says_so(tmp_path: Path) -> None:
    bot, warehouse = prod_built(tmp_path, CONFIG)
    github = bot.github
    try:
        filter_orders(bot, HEAD, CONFIG)
        bot.pull(7, HEAD)
        bot.deliver("pull_request", opened(7, HEAD))
        pr_orders = warehouse.reads(view_name("jaffle.orders", pr_environment(7)))
        github.clock = lambda: NOW + 2000  # approved after the plan was published
        bot.github.add_review(7, "bob", "APPROVED", HEAD)
        bot.deliver("pull_request_review", review(7, "bob", HEAD, 1))
        # The promotion's job fails once prod's views are swapped.
        warehouse.script = Script(fail={AFTER_ALL: "AnalysisException: ops is not there"})
        github.commit(MERGE, dict(github.files[HEAD]), parents=(C, HEAD), branch="main")
        github.close_pull(7, merged=True)
        bot.deliver("pull_request", merged(7, HEAD, MERGE))
        # prod's views read the PR's table, and prod's record names its version: all new.
        assert warehouse.reads(view_name("jaffle.orders", PROD)) == pr_orders
        store = open_state(bot.url)
        try:
            record = store.get_environment(PROD)
            pr = store.get_environment(pr_environment(7))
        finally:
            store.close()
        assert record is not None and pr is not None
        prod_versions = {r.name: r.version for r in record.snapshots}
        assert (
            prod_versions["jaffle.orders"]
            == {r.name: r.version for r in pr.snapshots}["jaffle.orders"]
        )
        deploy = bot.checks_on(MERGE)["sluice/deploy"]
        assert "prod is unchanged" not in deploy.title
        assert "failed, after the views swap" in deploy.title, deploy.title
        assert "ops is not there" in deploy.summary
        [sticky] = github.comments[7]
        assert "after the views swap" in sticky.body
    finally:
        bot.close()
