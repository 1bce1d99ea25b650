"""GitLab's merge trains through the dispatcher, on an in-memory GitLab (a
:class:`~sluice.bot.forge.memory.MemoryForge` named ``gitlab``) and the scripted Spark
runner: each train pipeline's Pipeline Hook (GitLab's documented example moved to a train
ref, :mod:`tests.helpers.merge_train`) gets its statuses on the train's commit, the combined
plan gated as a promotion is and built reusing what the merge requests built; a plan no
merge request had approved fails the entry, the reason posted on the merge request, until
the combined plan is approved; the merges promote in train order. The flow is GitHub's
merge queue's (``test_merge_queue_flow.py``); how the statuses go into the train's
pipeline at the wire is ``tests/bot/forge/test_gitlab.py``'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.gitlab import parse_gitlab
from sluice.bot.flow import dispatch
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge
from sluice.core.snapshot.naming import PROD, merge_group_environment, view_name
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.helpers.kept_world import Kept, keep, restore
from tests.helpers.merge_train import merge_request, train_pipeline
from tests.helpers.scripted_prod import prod_built
from tests.security.github_bot import GATED, NOW, OWNER, Bot, C

KEY = f"gitlab:{OWNER}"
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
ON = "  ON o.order_id = p.order_id"
FILTER = ("orders.sql", ON, ON + "\nWHERE o.status <> 'returned'")
OTHER_FILTER = ("orders.sql", ON, ON + "\nWHERE o.status <> 'placed'")
BOTH = ("orders.sql", ON, ON + "\nWHERE o.status <> 'returned' AND o.status <> 'placed'")
COLUMN = ("customers.sql", "  c.last_name,\n", "  c.last_name,\n  LENGTH(c.last_name) AS n,\n")
MR7, MR8, MR9, MR9B = "a7" * 20, "a8" * 20, "a9" * 20, "aa" * 20
TRAIN7, TRAIN8, TRAIN9, TRAIN9B = "b7" * 20, "b8" * 20, "b9" * 20, "ba" * 20
CHECKS = ("sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval")
LATER = datetime.fromtimestamp(NOW / 1000 + 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _models(*edits: tuple[str, str, str]) -> dict[str, str]:
    """Model files of the example with ``edits`` (file, old, new) applied in turn."""
    root = Path(__file__).resolve().parents[3] / "examples" / "jaffle_shop" / "models"
    files: dict[str, str] = {}
    for name, old, new in edits:
        text = files.get(name) or (root / name).read_text()
        assert old in text, (name, old)
        files[name] = text.replace(old, new, 1)
    return files


def _deliver(bot: Bot, hook: str, payload: dict[str, Any]) -> None:
    event = parse_gitlab(hook, payload)
    assert event is not None, (hook, payload.get("object_kind"))
    dispatch.handle(bot.deps, event)


def _train(bot: Bot, iid: int, sha: str, pipeline: int, status: str = "running") -> None:
    """GitLab's hook of the train pipeline ``pipeline`` of merge request ``iid``."""
    _deliver(bot, "Pipeline Hook", train_pipeline(OWNER, iid, sha, pipeline, status=status))


def _approved(bot: Bot, iid: int, head: str) -> None:
    """Merge request ``iid`` built at ``head``, then approved by bob (in GitLab, whose
    approvals name no commit, and its hook, which names the head), after the plan."""
    gitlab = bot.github  # the Bot's forge: here, GitLab
    gitlab.withdraw_reviews(iid, "bob")
    given = gitlab.add_review(iid, "bob", "APPROVED", unbound=True)
    log = gitlab.review_log[iid]
    # GitLab's approved_at: after the plan, and after the head's version (the forge's own
    # stamp, when that is later still: the approval binds to the latest version before it).
    at = max(LATER, str(given.submitted_at))
    log[log.index(given)] = dataclasses.replace(given, submitted_at=at)
    _deliver(bot, "Merge Request Hook",
             merge_request(OWNER, iid, head, "approval", user="bob", updated_at=LATER,
                           uid=gitlab.account_id("bob")))  # fmt: skip
    assert bot.approval(head).conclusion == "success", bot.approval(head)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """main at ``C`` (the example gated by bob), prod built from it on a scripted
    warehouse; MR 7 filters orders, MR 8 adds a column to customers (which reads orders),
    MR 9 filters orders otherwise. Each built and approved by bob. Built once for the
    module (tests/helpers/kept_world.py): each test gets a copy of its own (``world``)."""
    gitlab = MemoryForge(OWNER, name="gitlab", comment_limit=1_000_000)
    folder = tmp_path_factory.mktemp("merge-train-world")
    bot, warehouse = prod_built(folder, CONFIG, gitlab)
    for iid, head, edit in ((7, MR7, FILTER), (8, MR8, COLUMN), (9, MR9, OTHER_FILTER)):
        bot.commit(head, CONFIG, models=_models(edit), parents=(C,))
        bot.pull(iid, head)
        # By alice's account as the forge knows it (the gate asks it what a pusher is).
        alice = gitlab.account_id("alice")
        _deliver(bot, "Merge Request Hook", merge_request(OWNER, iid, head, "open", uid=alice))
        _approved(bot, iid, head)
    bot.close()
    return keep(folder, gitlab, warehouse)


@pytest.fixture
def world(built: Kept) -> Iterator[tuple[Bot, Warehouse]]:
    """The world :func:`built` made, a copy of its own for this test."""
    folder, gitlab, warehouse = restore(built)
    bot = Bot(folder, gitlab, runner_for=warehouse.runner)
    yield bot, warehouse
    bot.close()


def _states(bot: Bot, sha: str) -> dict[str, str | None]:
    return {name: check.conclusion for name, check in bot.checks_on(sha).items()}


def _merged(bot: Bot, iid: int, head: str, train: str) -> None:
    """GitLab merges merge request ``iid``: main moves to its train's commit."""
    gitlab = bot.github
    gitlab.commit(train, dict(gitlab.files[train]), parents=(gitlab.refs["main"],), branch="main")
    gitlab.close_pull(iid, merged=True)
    _deliver(bot, "Merge Request Hook", merge_request(OWNER, iid, head, "merge", merge_sha=train))


def test_a_train_of_approved_merge_requests_passes_is_built_on_their_tables_and_promoted_in_order(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    gitlab = bot.github
    mr7_orders = warehouse.reads(view_name("jaffle.orders", "pr_7"))
    # The train: 7 first (its pipeline's commit is main + 7), then 8 (main + 7 + 8).
    bot.commit(TRAIN7, CONFIG, models=_models(FILTER), parents=(C,))
    bot.commit(TRAIN8, CONFIG, models=_models(FILTER, COLUMN), parents=(C,))
    jobs = len(warehouse.jobs)
    _train(bot, 7, TRAIN7, 1007, "created")
    _train(bot, 8, TRAIN8, 1008, "created")
    for train in (TRAIN7, TRAIN8):
        assert _states(bot, train) == dict.fromkeys(CHECKS, "success"), bot.checks_on(train)
    gate = bot.checks_on(TRAIN8)["sluice/approval"]
    assert gate.title == "Approved: every change of the combined plan", gate
    # Train 7's plan is MR 7's: every table found built. Train 8's customers reads MR 7's
    # orders, a version no merge request built: it alone is computed, in its environment.
    built = [s["model"] for job in warehouse.jobs[jobs:] for s in job["steps"]
             if s["type"] == "build"]  # fmt: skip
    assert built == ["jaffle.customers"], built
    environment = merge_group_environment(TRAIN8)
    assert warehouse.reads(view_name("jaffle.orders", environment)) == mr7_orders
    train_customers = warehouse.reads(view_name("jaffle.customers", environment))
    assert bot.checks_on(TRAIN8)["sluice/prod-plan"].title == (
        "Merging is a virtual update: 0 rows written"
    )

    # GitLab sends a hook at each change of the pipeline's status (the statuses Sluice set
    # changed it): the same pipeline's statuses are set once, nothing runs again.
    calls, jobs = len(gitlab.calls), len(warehouse.jobs)
    for status in ("pending", "running"):
        _train(bot, 8, TRAIN8, 1008, status)
    assert gitlab.writes(calls) == [] and len(warehouse.jobs) == jobs

    # The pipelines pass; GitLab merges in train order: main moves to each train commit.
    for iid, train, pipeline in ((7, TRAIN7, 1007), (8, TRAIN8, 1008)):
        _train(bot, iid, train, pipeline, "success")
    jobs = len(warehouse.jobs)
    _merged(bot, 7, MR7, TRAIN7)
    _merged(bot, 8, MR8, TRAIN8)
    for train in (TRAIN7, TRAIN8):
        deploy = bot.checks_on(train)["sluice/deploy"]
        assert (deploy.conclusion, deploy.title) == ("success", "Promoted by virtual update")
    # Nothing computed after the merges: prod reads what MR 7 and train 8 built.
    assert [s for job in warehouse.jobs[jobs:] for s in job["steps"] if s["type"] == "build"] == []
    assert warehouse.reads(view_name("jaffle.orders", PROD)) == mr7_orders
    assert warehouse.reads(view_name("jaffle.customers", PROD)) == train_customers
    rows = bot.ledger.entries(repo=KEY)
    assert [(r.outcome, r.ref) for r in rows if r.kind == "promotion"] == [
        ("promoted", "#7"), ("promoted", "#8")
    ]  # fmt: skip
    assert sorted((r.outcome, r.ref) for r in rows if r.kind == "merge queue") == [
        ("group passed", "#7"), ("group passed", "#8")
    ]  # fmt: skip
    store = open_state(bot.url)
    try:
        record = store.get_environment(environment)
        assert record is not None and record.invalidated  # the train's entry is over
    finally:
        store.close()


def test_a_combined_plan_no_merge_request_had_fails_the_entry_with_the_reason_until_approved(
    world: tuple[Bot, Warehouse],
) -> None:
    """MRs 7 and 9 filter orders each their own way; on the train (9 behind 7), orders
    holds both filters: a content nobody approved. Train 9's statuses fail (GitLab drops
    9 from the train), nothing is built, and the merge request is told which model, which
    content and which merge requests change it. 9, brought up to date with main and
    approved, passes the next time it rides."""
    bot, warehouse = world
    gitlab = bot.github
    bot.commit(TRAIN7, CONFIG, models=_models(FILTER), parents=(C,))
    bot.commit(TRAIN9, CONFIG, models=_models(BOTH), parents=(C,))
    _train(bot, 7, TRAIN7, 1007)
    jobs, notes = len(warehouse.jobs), len(gitlab.comments.get(9, []))
    _train(bot, 9, TRAIN9, 1009)
    assert warehouse.jobs[jobs:] == [], "an unapproved combination ran Spark"
    assert _states(bot, TRAIN9) == dict.fromkeys(CHECKS, "failure"), bot.checks_on(TRAIN9)
    gate = bot.checks_on(TRAIN9)["sluice/approval"]
    assert gate.title == "1 unapproved change in the combined plan", gate  # the status's text
    # A GitLab status shows its title only: the reason is on the merge request.
    [note] = [c.body for c in gitlab.comments[9][notes:]]
    assert note.startswith("**1 unapproved change in the combined plan**\n\nThis merge train")
    assert "- `jaffle.orders`: content `" in note and "(changed by !7, !9)" in note
    assert "GitLab removes the merge request from the train" in note
    assert "To merge !9, update its branch with `main`" in note
    rows = bot.ledger.entries(repo=KEY)
    [refusal] = [r for r in rows if r.outcome == "merge group refused"]
    assert refusal.ref == "#9" and "jaffle.orders" in refusal.detail
    _train(bot, 9, TRAIN9, 1009, "failed")  # GitLab drops 9 from the train
    assert [r.outcome for r in bot.ledger.entries(repo=KEY) if r.kind == "merge queue"] == [
        "group failed"
    ]

    # 7 merges; 9's author brings 9 up to date with main (both filters, the combination),
    # pushes, the build plans it and bob approves that plan; 9 rides again and passes.
    _merged(bot, 7, MR7, TRAIN7)
    bot.commit(MR9B, CONFIG, models=_models(BOTH), parents=(TRAIN7,))
    gitlab.push(9, MR9B)
    _deliver(bot, "Merge Request Hook", merge_request(OWNER, 9, MR9B, "update", updated_at=LATER,
                                                      uid=gitlab.account_id("alice")))  # fmt: skip
    _approved(bot, 9, MR9B)
    bot.commit(TRAIN9B, CONFIG, models=_models(BOTH), parents=(TRAIN7,))
    _train(bot, 9, TRAIN9B, 1010)
    assert _states(bot, TRAIN9B) == dict.fromkeys(CHECKS, "success"), bot.checks_on(TRAIN9B)


def test_a_train_into_another_branch_passes_with_nothing_planned(
    world: tuple[Bot, Warehouse],
) -> None:
    bot, warehouse = world
    bot.commit(TRAIN7, CONFIG, models=_models(FILTER), parents=(C,))
    jobs = len(warehouse.jobs)
    payload = train_pipeline(OWNER, 7, TRAIN7, 1007)
    payload["merge_request"]["target_branch"] = "release"
    _deliver(bot, "Pipeline Hook", payload)
    assert set(_states(bot, TRAIN7).values()) == {"neutral"}  # GitLab's "success"
    assert warehouse.jobs[jobs:] == []


def test_a_train_entry_whose_job_fails_for_good_fails_its_statuses(
    world: tuple[Bot, Warehouse],
) -> None:
    """The train waits for the statuses: a job given up fails them, with the error,
    instead of leaving the pipeline running until it times out."""
    bot, _warehouse = world
    event = parse_gitlab("Pipeline Hook", train_pipeline(OWNER, 7, TRAIN7, 1007))
    assert event is not None
    dispatch.give_up(bot.deps, event, "GitLab answered 502 four times")
    found: dict[str, Check] = bot.checks_on(TRAIN7)
    assert {name: check.conclusion for name, check in found.items()} == dict.fromkeys(
        CHECKS, "failure"
    )
    assert found["sluice/approval"].title == "Sluice gave up on this merge group"
