"""The gate judges a click by the login its account has NOW (approval._clicks_now).

A click ("Approve this plan" on the check, or the web UI's form, which any reader of the
repository may submit) is recorded with the login of its moment and its account id; a
login is renamed at will and freed for anyone to take, so whether the clicker is an
approver is asked of the forge (Forge.account_of) when the gate is evaluated. Driven as a
PR's events drive the flow: the in-memory forge (whose accounts keep their id through a
rename), the ledger on SQLite, plans recorded as a PR build records them (no Spark).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.flow import approval, dispatch
from sluice.bot.flow.job import Job
from sluice.bot.present.checks import APPROVAL, approve_identifier
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import CHANGE, KEY, OWNER, TEAM, TEAM_GATED, B, Bot

ROLES = {"alice": "write", "bob": "write", "carol": "admin", "mallory": "read"}


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, TEAM_GATED, ROLES, members={"bob", "carol"})
    made.forge.open_pull(7, head_sha=B, base="main", author="alice", head_ref="change")
    made.deliver("pull_request", gw.pr_event("opened", B, "alice", head_ref="change"))
    gw.plan(made, B, CHANGE)
    yield made
    made.close()


def _web_approve(bot: Bot, login: str, uid: int) -> None:
    """Account ``uid``, signed in as ``login``, approves PR 7's plan at B from the web UI:
    the event the web UI's form queues (sluice/bot/web/actions.py)."""
    review = bot.ledger.review(KEY, 7, B)
    assert review is not None
    event = CheckRunEvent(
        forge="github", repo=OWNER, installation_id=None, action="requested_action",
        check_name=APPROVAL, head_sha=B, numbers=(7,), requester=login, requester_id=uid,
        identifier=approve_identifier(review.fingerprint), origin=WEB,
    )  # fmt: skip
    dispatch.handle(bot.deps, event)


def test_an_approver_s_click_counts_under_the_login_he_renamed_to(bot: Bot) -> None:
    # carol clicks, then renames herself `carol2` (still in the team, as the forge lists it
    # now): her click is hers under the login she has now.
    _web_approve(bot, "carol", bot.forge.account_id("carol"))
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
    bot.forge.rename("carol", "carol2")
    _web_approve(bot, "mallory", bot.forge.account_id("mallory"))  # the gate evaluated again
    check = bot.approval(B)
    assert check.conclusion == "success", check.summary
    assert "Approved by @carol2 (1 of 1 required)" in check.summary


def test_a_click_whose_account_the_forge_no_longer_knows_counts_for_nothing(bot: Bot) -> None:
    # A click recorded as `carol` by an account the forge knows no login of now (deleted
    # since): who it was cannot be told, so it is no approver's (fail closed).
    gone = 1_999_999_999
    assert bot.forge.account_of(gone) is None
    _web_approve(bot, "carol", gone)
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Approved by nobody yet (0 of 1 required)" in check.summary


def test_a_click_by_a_bot_account_counts_for_nothing(bot: Bot) -> None:
    # A bot account in the approvers' team (the forge says it is one, whatever its login):
    # whoever drives it is not named, so its click is no approver's.
    bot.forge.teams[TEAM] = frozenset({"bob", "carol", "deploy"})
    bot.forge.bots["deploy"] = True
    _web_approve(bot, "deploy", bot.forge.account_id("deploy"))
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    assert "Approved by nobody yet (0 of 1 required)" in check.summary


def test_each_clicker_s_login_is_asked_once_per_evaluation(bot: Bot) -> None:
    # Once per evaluation for each account: the clickers', and the pusher's (alice opened
    # it: whether she is a bot), in one cached look-up.
    mallory, alice = bot.forge.account_id("mallory"), bot.forge.account_id("alice")
    _web_approve(bot, "mallory", mallory)
    asked = [args for name, args in bot.forge.calls if name == "account_of"]
    assert sorted(asked) == sorted([(alice,), (mallory,)])
    _web_approve(bot, "bob", bot.forge.account_id("bob"))
    asked = [args for name, args in bot.forge.calls if name == "account_of"]
    bob = (bot.forge.account_id("bob"),)
    assert sorted(asked) == sorted([(alice,), (mallory,), (alice,), (mallory,), bob])
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary


def test_a_click_recorded_before_ids_were_counts_for_nothing_where_the_forge_has_ids(
    bot: Bot,
) -> None:
    # A click row of ledger migration 7's days (no account id), as `carol`: whose it was
    # cannot be told now that anyone may hold the login; she approves again.
    bot.ledger.click(KEY, 7, "carol", B, None, bot.clock.now)
    job = Job.start(bot.deps, bot.forge)
    try:
        approval.refresh(job, bot.forge.pull_request(7))
    finally:
        job.close()
    check = bot.approval(B)
    assert check.conclusion != "success", check.summary
    _web_approve(bot, "carol", bot.forge.account_id("carol"))
    assert bot.approval(B).conclusion == "success", bot.approval(B).summary
