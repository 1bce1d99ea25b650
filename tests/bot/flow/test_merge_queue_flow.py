"""GitHub's merge queue through the dispatcher, on the in-memory GitHub and the scripted
Spark runner (:mod:`sluice.core.spark.scripted`): a merge group's checks on its head
commit (the combined plan gated as a promotion is, then built in its own environment
reusing what the PRs built), its end, and the promotions of the merged entries in order.
The same at the wire is ``test_merge_queue_service.py``; on real Spark,
``test_lifecycle.py``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.flow import dispatch
from sluice.bot.flow.ledger import Ledger
from sluice.core import markdown as md
from sluice.core.snapshot.naming import PROD, merge_group_environment, view_name
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers.kept_world import Kept, keep, restore
from tests.helpers.merge_queue import merge_group
from tests.helpers.scripted_prod import prod_built
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, merged, opened, review

CONFIG = GATED + "  pr:\n    backfill_days: null\n"
ON = "  ON o.order_id = p.order_id"
FILTER = ("orders.sql", ON, ON + "\nWHERE o.status <> 'returned'")
OTHER_FILTER = ("orders.sql", ON, ON + "\nWHERE o.status <> 'placed'")
COLUMN = ("customers.sql", "  c.last_name,\n", "  c.last_name,\n  LENGTH(c.last_name) AS n,\n")
PR7, PR8, PR9 = "a7" * 20, "a8" * 20, "a9" * 20
GROUP7, GROUP8, GROUP9 = "b7" * 20, "b8" * 20, "b9" * 20
AFTER_THE_PLANS = datetime.fromtimestamp(NOW / 1000 + 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _models(*edits: tuple[str, str, str]) -> dict[str, str]:
    """Model files of the example with ``edits`` (file, old, new) applied in turn."""
    root = Path(__file__).resolve().parents[3] / "examples" / "jaffle_shop" / "models"
    files: dict[str, str] = {}
    for name, old, new in edits:
        text = files.get(name) or (root / name).read_text()
        assert old in text, (name, old)
        files[name] = text.replace(old, new, 1)
    return files


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """main at ``C`` (the example gated by bob), prod built from it on a scripted
    warehouse; PR 7 filters orders, PR 8 adds a column to customers (which reads orders),
    PR 9 filters orders otherwise. Each built and approved by bob. Built once for the
    module (tests/helpers/kept_world.py): each test gets a copy of its own (``world``)."""
    folder = tmp_path_factory.mktemp("merge-queue-world")
    bot, warehouse = prod_built(folder, CONFIG)
    for number, head, edit in ((7, PR7, FILTER), (8, PR8, COLUMN), (9, PR9, OTHER_FILTER)):
        bot.commit(head, CONFIG, models=_models(edit), parents=(C,))
        bot.pull(number, head)
        bot.deliver("pull_request", opened(number, head))
        # Given after the build planned the head (an approval from before a commit's plan
        # counts for none), as GitHub's review and its webhook say.
        given = bot.github.add_review(number, "bob", "APPROVED", head)
        log = bot.github.review_log[number]
        log[log.index(given)] = dataclasses.replace(given, submitted_at=AFTER_THE_PLANS)
        approved = review(number, "bob", head, 100 + number)
        approved["review"]["submitted_at"] = AFTER_THE_PLANS
        bot.deliver("pull_request_review", approved)
        assert bot.approval(head).conclusion == "success", bot.approval(head)
    bot.close()
    return keep(folder, bot.github, warehouse)


@pytest.fixture
def world(built: Kept) -> Iterator[tuple[Bot, Warehouse]]:
    """The world :func:`built` made, a copy of its own for this test."""
    folder, github, warehouse = restore(built)
    bot = Bot(folder, github, runner_for=warehouse.runner)
    yield bot, warehouse
    bot.close()


def _conclusions(bot: Bot, sha: str) -> dict[str, str | None]:
    return {name: check.conclusion for name, check in bot.checks_on(sha).items()}


def _group(bot: Bot, head: str, number: int, *edits: tuple[str, str, str]) -> None:
    """The queue's group of PR ``number``: main with ``edits``, committed at ``head``."""
    bot.commit(head, CONFIG, models=_models(*edits), parents=(C,))


def test_a_merge_group_of_approved_prs_is_gated_built_on_their_tables_and_promoted_in_order(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    pr7_orders = warehouse.reads(view_name("jaffle.orders", "pr_7"))
    # The queue: PR 7 first (its group is main + 7), then PR 8 (main + 7 + 8).
    _group(bot, GROUP7, 7, FILTER)
    _group(bot, GROUP8, 8, FILTER, COLUMN)
    jobs = len(warehouse.jobs)
    bot.deliver("merge_group", merge_group(OWNER, GROUP7, C, 7))
    bot.deliver("merge_group", merge_group(OWNER, GROUP8, C, 8))
    for head in (GROUP7, GROUP8):
        assert _conclusions(bot, head) == {
            "sluice/tests": "success",
            "sluice/pr-environment": "success",
            "sluice/prod-plan": "success",
            "sluice/approval": "success",
        }, bot.checks_on(head)
    gate = bot.checks_on(GROUP8)["sluice/approval"]
    assert gate.title == "Approved: every change of the combined plan", gate
    # Group 7 is PR 7's plan: every table found built. Group 8's customers reads PR 7's
    # orders, a version no PR built: it alone is computed, in the group's environment.
    built = [s["model"] for job in warehouse.jobs[jobs:] for s in job["steps"]
             if s["type"] == "build"]  # fmt: skip
    assert built == ["jaffle.customers"], built
    environment = merge_group_environment(GROUP8)
    assert warehouse.reads(view_name("jaffle.orders", environment)) == pr7_orders
    group_customers = warehouse.reads(view_name("jaffle.customers", environment))
    assert group_customers != warehouse.reads(view_name("jaffle.customers", "pr_8"))
    merging = bot.checks_on(GROUP8)["sluice/prod-plan"]
    assert merging.title == "Merging is a virtual update: 0 rows written", merging

    # GitHub merges the groups: main moves to each group's head, the PRs close merged.
    jobs = len(warehouse.jobs)
    for number, head, group in ((7, PR7, GROUP7), (8, PR8, GROUP8)):
        bot.github.commit(group, dict(bot.github.files[group]), parents=(C,), branch="main")
        bot.github.close_pull(number, merged=True)
        bot.deliver("pull_request", merged(number, head, group))
    for group in (GROUP7, GROUP8):
        deploy = bot.checks_on(group)["sluice/deploy"]
        assert deploy.conclusion == "success", deploy
        assert deploy.title == "Promoted by virtual update", deploy
    # Nothing computed after the merge: prod reads the tables the PR and the group built.
    assert [s for job in warehouse.jobs[jobs:] for s in job["steps"] if s["type"] == "build"] == []
    assert warehouse.reads(view_name("jaffle.orders", PROD)) == pr7_orders
    assert warehouse.reads(view_name("jaffle.customers", PROD)) == group_customers

    # The group ends (merged): recorded, its environment let go; the tables stay (prod's).
    bot.deliver("merge_group", merge_group(OWNER, GROUP8, C, 8, action="destroyed",
                                           reason="merged"))  # fmt: skip
    store = open_state(bot.url)
    try:
        record = store.get_environment(environment)
        assert record is not None and record.invalidated
    finally:
        store.close()
    rows = bot.ledger.entries(repo=f"github:{OWNER}")
    assert [(r.kind, r.outcome, r.ref) for r in rows if r.kind == "merge queue"] == [
        ("merge queue", "group merged", "#8")
    ]


def test_a_combined_plan_no_pr_had_approved_fails_the_queue_entry_and_builds_nothing(
    world: tuple[Bot, Warehouse],
) -> None:
    """PRs 7 and 9 filter orders each their own way; merged together (9 behind 7), orders
    holds both filters: a content nobody approved. Group 9's checks fail (GitHub removes
    it from the queue), saying which model, which content and which PRs change it."""
    bot, warehouse = world
    both = ("orders.sql", ON, ON + "\nWHERE o.status <> 'returned' AND o.status <> 'placed'")
    _group(bot, GROUP9, 9, both)
    jobs = len(warehouse.jobs)
    bot.deliver("merge_group", merge_group(OWNER, GROUP9, C, 9))
    assert warehouse.jobs[jobs:] == [], "an unapproved combination ran Spark"
    assert set(_conclusions(bot, GROUP9).values()) == {"failure"}, bot.checks_on(GROUP9)
    gate = bot.checks_on(GROUP9)["sluice/approval"]
    assert gate.title == "1 unapproved change in the combined plan", gate
    assert "- `jaffle.orders`: content `" in gate.summary
    assert "(changed by #7, #9)" in gate.summary
    assert "remove this entry from the merge queue" in gate.summary
    assert "To merge #9, update its branch" in gate.summary
    assert "not approved" in bot.checks_on(GROUP9)["sluice/pr-environment"].title
    rows = bot.ledger.entries(repo=f"github:{OWNER}")
    [refusal] = [r for r in rows if r.outcome == "merge group refused"]
    assert refusal.ref == "#9" and "jaffle.orders" in refusal.detail
    # The promotion of such a merge (an admin past the check) is refused by the same rule.
    bot.github.commit(GROUP9, dict(bot.github.files[GROUP9]), parents=(C,), branch="main")
    bot.github.close_pull(9, merged=True)
    bot.deliver("pull_request", merged(9, PR9, GROUP9))
    assert bot.checks_on(GROUP9)["sluice/deploy"].conclusion == "failure"


def test_a_merge_delivered_after_a_later_one_was_promoted_leaves_prod_alone(
    world: tuple[Bot, Warehouse],
) -> None:
    """Two entries merged at once: GitHub may deliver PR 8's close before PR 7's. Prod takes
    group 8 (which holds 7); PR 7's promotion then would take PR 8's column back out."""
    bot, warehouse = world
    _group(bot, GROUP7, 7, FILTER)
    _group(bot, GROUP8, 8, FILTER, COLUMN)
    bot.github.commit(GROUP7, dict(bot.github.files[GROUP7]), parents=(C,), branch="main")
    bot.github.commit(GROUP8, dict(bot.github.files[GROUP8]), parents=(GROUP7,), branch="main")
    for number in (7, 8):
        bot.github.close_pull(number, merged=True)
    bot.deliver("pull_request", merged(8, PR8, GROUP8))
    prod = {name: warehouse.reads(view_name(name, PROD)) for name in ("jaffle.orders",
                                                                   "jaffle.customers")}  # fmt: skip
    assert bot.checks_on(GROUP8)["sluice/deploy"].conclusion == "success"
    bot.deliver("pull_request", merged(7, PR7, GROUP7))
    late = bot.checks_on(GROUP7)["sluice/deploy"]
    assert (late.conclusion, late.title) == ("success", "Already in prod"), late
    assert GROUP8[:12] in late.summary
    assert {name: warehouse.reads(view_name(name, PROD)) for name in prod} == prod
    rows = [r for r in bot.ledger.entries(repo=KEY) if r.kind == "promotion"]
    assert [(r.outcome, r.ref) for r in rows] == [("promoted", "#8"), ("already in prod", "#7")]
    store = open_state(bot.url)
    try:
        record = store.get_environment("pr_7")
        assert record is not None and record.invalidated  # its PR is done with
    finally:
        store.close()


def test_a_group_into_another_branch_gets_neutral_checks_and_no_plan(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    _group(bot, GROUP7, 7, FILTER)
    jobs = len(warehouse.jobs)
    bot.deliver("merge_group", merge_group(OWNER, GROUP7, C, 7, base="release"))
    assert set(_conclusions(bot, GROUP7).values()) == {"neutral"}
    assert "not the prod branch `main`" in bot.checks_on(GROUP7)["sluice/approval"].summary
    assert warehouse.jobs[jobs:] == []


def test_a_destroyed_group_is_recorded_once(world: tuple[Bot, Warehouse]) -> None:
    bot, _warehouse = world
    payload = merge_group(OWNER, GROUP7, C, 7, action="destroyed", reason="dequeued")
    bot.deliver("merge_group", payload)
    bot.deliver("merge_group", payload)  # the same delivery sent again
    ledger = Ledger(bot.url)
    try:
        rows = [r for r in ledger.entries(repo=f"github:{OWNER}") if r.kind == "merge queue"]
    finally:
        ledger.close()
    assert [(r.outcome, r.ref) for r in rows] == [("group dequeued", "#7")]


def test_a_group_whose_job_fails_for_good_fails_its_checks(world: tuple[Bot, Warehouse]) -> None:
    """The queue waits for the checks: a job given up (the forge or Spark down on every
    attempt) fails them, with the error, instead of leaving the entry waiting."""
    bot, _warehouse = world
    event = parse_github("merge_group", merge_group(OWNER, GROUP7, C, 7))
    assert event is not None
    dispatch.abandon(bot.deps, event, "the forge answered 502 <b>four times</b>")
    found = bot.checks_on(GROUP7)
    assert {name: check.conclusion for name, check in found.items()} == dict.fromkeys(
        ("sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"),
        "failure",
    )
    gate = found["sluice/approval"]
    assert gate.title == "Sluice gave up on this merge group"
    assert "```text\nthe forge answered 502 <b>four times</b>\n```" in gate.summary
    assert "remove this entry from the merge queue" in gate.summary


def test_a_group_that_changes_the_gate_nobody_approved_is_refused(
    world: tuple[Bot, Warehouse],
) -> None:
    """The group's head is PR content: its own `sluice:` settings (here, a gate of alice,
    the PRs' author) are a change to approve like a model's, never the ones in force."""
    bot, warehouse = world
    config = CONFIG.replace("users: [bob]", "users: [alice]")
    bot.commit(GROUP7, config, models=_models(FILTER), parents=(C,))
    jobs = len(warehouse.jobs)
    bot.deliver("merge_group", merge_group(OWNER, GROUP7, C, 7))
    assert warehouse.jobs[jobs:] == []
    gate = bot.checks_on(GROUP7)["sluice/approval"]
    assert gate.conclusion == "failure", gate
    assert "- Sluice's settings (sluice.yaml, or config.yaml's `sluice:`): content `" in (
        gate.summary
    )
    assert "`jaffle.orders`" not in gate.summary  # PR 7 approved that one
    assert "`sluice.gate` of" in gate.summary


def test_a_group_into_a_hostile_branch_name_is_told_escaped(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, _warehouse = world
    _group(bot, GROUP7, 7, FILTER)
    base = "rel`<img src=x onerror=alert(1)>`@everyone"
    bot.deliver("merge_group", merge_group(OWNER, GROUP7, C, 7, base=base))
    gate = bot.checks_on(GROUP7)["sluice/approval"]
    assert gate.conclusion == "neutral"
    # The name is shown only inside a code span (whose fence outgrows its backticks):
    # nothing of it renders, mentions nobody.
    span = md.code(base)
    assert span.startswith("`` ") and span in gate.summary
    rest = gate.summary.replace(span, "")
    assert "<img" not in rest and "@everyone" not in rest and "<img" not in gate.title


def test_settings_first_read_at_a_later_head_do_not_hold_an_older_merge_back(
    world: tuple[Bot, Warehouse],
) -> None:
    """The settings in force are pinned at the prod branch's head when first read, which
    prod need not hold: only a commit prod was promoted from (the audit log says so)
    leaves an older merge alone."""
    bot, _warehouse = world
    _group(bot, GROUP7, 7, FILTER)
    _group(bot, GROUP8, 8, FILTER, COLUMN)
    bot.github.commit(GROUP7, dict(bot.github.files[GROUP7]), parents=(C,), branch="main")
    bot.github.commit(GROUP8, dict(bot.github.files[GROUP8]), parents=(GROUP7,), branch="main")
    pinned = bot.ledger.settings_in_force(KEY)
    assert pinned is not None
    # As if the service had first read main's settings at 8 (no promotion of it yet).
    bot.ledger.pin_settings(KEY, GROUP8, pinned.digest, pinned.text, pinned.file or "config.yaml",
                            NOW, replace=True)  # fmt: skip
    bot.github.close_pull(7, merged=True)
    bot.deliver("pull_request", merged(7, PR7, GROUP7))
    deploy = bot.checks_on(GROUP7)["sluice/deploy"]
    assert deploy.title == "Promoted by virtual update", deploy
    # 8's promotion follows as ever (customers on 7's orders computed: no group built it).
    bot.github.close_pull(8, merged=True)
    bot.deliver("pull_request", merged(8, PR8, GROUP8))
    assert bot.checks_on(GROUP8)["sluice/deploy"].title == "Promoted; 1 table backfilled"
    rows = bot.ledger.entries(repo=KEY)
    assert [r.outcome for r in rows if r.kind == "promotion"] == ["promoted", "promoted"]
