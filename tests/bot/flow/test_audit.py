"""The audit log (issue 44): the flow's decisions on the in-memory GitHub and the scripted
runner (no Spark) append rows, read back in order; hostile text goes in bounded, scrubbed
and without control characters; rows round-trip as JSON lines; a lost row never stops
the flow, and a row written inside the decision's transaction fails with it."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import audit, trust
from sluice.bot.flow.audit import DETAIL_LIMIT, Entry
from sluice.bot.flow.ledger import Ledger
from sluice.bot.present.redact import Redactor
from sluice.core.errors import StateError
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Script
from sluice.core.state import open_state
from tests.helpers.kept_world import Kept, keep, restore
from tests.helpers.scripted_prod import filter_orders, prod_built
from tests.security.github_bot import GATED, KEY, NOW, Bot, C, merged, opened, review

HEAD = "a1" * 20
MERGE = "e" * 40
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
SECRET = "s3rvice-Secret-9f8e7d6c"
TOKEN = "ghp_" + "Z" * 36


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """The bot on an in-memory GitHub (bob the gate's approver, alice a writer), prod built
    from ``C`` on a scripted warehouse, PR 7 by alice changing orders.sql at HEAD. Built
    once for the module (tests/helpers/kept_world.py): each test gets a copy of its own
    (``bot``)."""
    folder = tmp_path_factory.mktemp("audit-world")
    made, warehouse = prod_built(folder, CONFIG)
    warehouse.script = Script()
    filter_orders(made, HEAD, CONFIG)
    made.pull(7, HEAD)
    made.close()
    return keep(folder, made.github, warehouse)


@pytest.fixture
def bot(built: Kept) -> Iterator[Bot]:
    """The world :func:`built` made, a copy of its own for this test; the service knows
    one secret."""
    folder, github, warehouse = restore(built)
    made = Bot(folder, github, runner_for=warehouse.runner)
    made.deps = dataclasses.replace(made.deps, redactor=Redactor([SECRET]))
    yield made
    made.close()


def rows(bot: Bot) -> list[Entry]:
    return bot.ledger.entries(repo=KEY)


def test_approve_promote_refuse_and_roll_back_are_each_one_row(bot: Bot) -> None:
    bot.deliver("pull_request", opened(7, HEAD))
    assert rows(bot) == []  # a gate still waiting decides nothing yet
    plan = bot.ledger.plans(KEY, 7)[HEAD]

    bot.github.add_review(7, "bob", "APPROVED", HEAD)
    bot.deliver("pull_request_review", review(7, "bob", HEAD, 1))
    [passed] = rows(bot)
    assert (passed.kind, passed.actor, passed.ref, passed.outcome, passed.plan_id) == (
        "approval", "sluice", "#7", "passed", plan,
    )  # fmt: skip
    assert "approved by bob" in passed.detail

    bot.github.commit(MERGE, dict(bot.github.files[HEAD]), parents=(C, HEAD), branch="main")
    bot.github.close_pull(7, merged=True)
    bot.deliver("pull_request", merged(7, HEAD, MERGE))
    promoted = rows(bot)[-1]
    assert (promoted.kind, promoted.actor, promoted.ref, promoted.outcome) == (
        "promotion", "sluice", "#7", "promoted",
    )  # fmt: skip
    assert promoted.detail.startswith(f"prod at {MERGE[:12]}: ")
    store = open_state(bot.url)
    try:
        prod_now = store.get_environment(PROD)
    finally:
        store.close()
    assert prod_now is not None and promoted.plan_id == prod_now.plan_id

    first = rows(bot)
    before = len(first)
    bot.say(7, "mallory", "/sluice rollback", 501)  # no permission at all
    refused = rows(bot)[before:]
    assert [(r.kind, r.actor, r.outcome) for r in refused] == [
        ("refusal", "mallory", "not a writer")
    ]
    assert refused[0].detail == "none permission: /sluice rollback"

    bot.say(7, "alice", "/sluice rollback", 502)  # a writer, not the gate's approver
    assert (rows(bot)[-1].kind, rows(bot)[-1].outcome) == ("refusal", "rollback refused")

    store = open_state(bot.url)
    try:
        prod_before = store.get_environment(PROD)
    finally:
        store.close()
    assert prod_before is not None
    bot.say(7, "bob", "/sluice rollback", 503)
    back = rows(bot)[-1]
    assert (back.kind, back.actor, back.ref, back.outcome) == (
        "rollback",
        "bob",
        "#7",
        "rolled back",
    )
    assert back.plan_id and back.plan_id != prod_before.plan_id
    # Appended in order, never rewritten: ids grow, every earlier row is as it was.
    everything = rows(bot)
    assert [r.id for r in everything] == sorted(r.id for r in everything if r.id)
    assert everything[:before] == first
    assert bot.ledger.entries(repo="github:some/other") == []


def test_hostile_text_is_bounded_scrubbed_and_without_control_characters(bot: Bot) -> None:
    login = "eve\x1b[2J\u202e"
    body = f"/sluice deploy \x1b[31m<script>alert(1)</script>\x07 {TOKEN} {SECRET} " + "&amp;" * 200
    bot.say(7, login, body, 601)
    [row] = rows(bot)
    assert row.kind == "refusal"
    for text in (row.actor, row.detail):
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in text)
    assert row.actor == "eve [2J"
    assert TOKEN not in row.detail and SECRET not in row.detail
    assert "***" in row.detail and "<script>" in row.detail  # stored as text, escaped when shown
    assert len(row.detail) == DETAIL_LIMIT and row.detail.endswith("…")
    # A row whose fields are too long is cut on the way in, whoever writes it.
    bot.ledger.append(Entry(NOW, KEY, "override", "x" * 1000, "o" * 1000, detail="d" * 10_000))
    long = rows(bot)[-1]
    assert len(long.actor) == audit.NAME_LIMIT and len(long.detail) == DETAIL_LIMIT


def test_rows_round_trip_as_json_lines(bot: Bot) -> None:
    bot.ledger.append(Entry(NOW, KEY, "approval", "sluice", "passed", "#7", "f" * 32, 'a "q"\\'))
    bot.ledger.append(Entry(NOW + 1, KEY, "rollback", "bob", "rolled back", detail="é ✓"))
    lines = "\n".join(json.dumps(r.to_json()) for r in rows(bot)).splitlines()
    back = [Entry.from_json(json.loads(line)) for line in lines]
    assert back == rows(bot)
    assert list(json.loads(lines[0])) == [
        "id", "time", "at_ms", "repo", "kind", "actor", "ref", "plan_id", "outcome", "detail",
    ]  # fmt: skip
    assert json.loads(lines[0])["time"] == "2027-01-15T08:00:00.000+00:00"


def _parsed(text: str) -> trust.Parsed:
    return trust.parse(trust.Source.of_config(text, "config.yaml"))


def test_a_change_of_the_settings_in_force_is_a_row_in_its_transaction(bot: Bot) -> None:
    ledger = bot.ledger
    trust.pin(ledger, KEY, C, _parsed(CONFIG), "main", NOW)  # first: no change to tell
    trust.pin(ledger, KEY, MERGE, _parsed(CONFIG), "main", NOW)  # same: no row
    assert rows(bot) == []
    changed = CONFIG.replace("users: [bob]", "users: [bob, carol]")
    trust.pin(ledger, KEY, HEAD, _parsed(changed), "main", NOW + 5)
    [row] = rows(bot)
    assert (row.kind, row.outcome, row.ref, row.at) == (
        "settings change",
        "in force",
        HEAD[:12],
        NOW + 5,
    )
    assert MERGE[:12] in row.detail


def test_settings_pushed_past_the_gate_are_told_once_per_commit(bot: Bot) -> None:
    def resolve() -> trust.Settings:
        return trust.settings_for(
            bot.github, bot.ledger, KEY, branch="main", path="config.yaml", now=NOW
        )

    assert resolve().sha == C  # pinned: the gate requires bob
    pushed = CONFIG.replace("users: [bob]", "users: [mallory]")
    bot.commit(MERGE, pushed, parents=(C,))
    bot.github.refs["main"] = MERGE  # pushed to main, no PR, no gate
    assert resolve().gate.required_approvers.users == ("bob",)  # kept out of force
    assert resolve().gate.required_approvers.users == ("bob",)  # every job, one row
    [row] = rows(bot)
    assert (row.kind, row.outcome, row.ref) == (
        "settings change", "not approved: not in force", MERGE[:12],
    )  # fmt: skip
    assert f"those of {C[:12]} stay in force" in row.detail


def test_a_lost_row_is_logged_and_the_flow_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        with ledger._writing("drop the log") as conn:  # the table gone: every write fails
            conn.exec_driver_sql("DROP TABLE sluice_audit")
        with caplog.at_level(logging.ERROR, logger="sluice.bot.flow.audit"):
            assert not ledger.append(Entry(NOW, KEY, "refusal", "eve", "not a writer", "#7"))
        assert "the audit log lost a row (refusal not a writer by eve: #7)" in caplog.text
        # Inside the decision's transaction the record fails it: neither is written.
        with pytest.raises(StateError), ledger.together("decide"):
            ledger.seen(KEY, None, NOW)
            ledger.append(Entry(NOW, KEY, "approval", "sluice", "passed", "#7"))
        assert ledger.repositories() == []
    finally:
        ledger.close()
