"""Sluice's own check runs on the in-memory forge (sluice.bot.flow.own_checks): each check
is set on the run Sluice made for it (its id recorded), another App's run of the same name
is never edited, and a button counts only on a run Sluice made, for every check with one
(``sluice/approval`` here; ``sluice/drift``'s in tests/security/test_red_team_drift_repair.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.neutral import CheckRunEvent
from sluice.bot.flow import audit, dispatch, own_checks
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check, CheckAction
from sluice.bot.forge.memory import ACTIONS_APP, MemoryForge
from sluice.bot.present import checks
from tests.security.github_bot import OWNER, Bot, payload

KEY = f"github:{OWNER}"
A = "a" * 40
CONFIG = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [carol]\n"


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.commit("m" * 40, {"config.yaml": CONFIG}, branch="main")
    github.commit(A, {"config.yaml": CONFIG}, parents=("m" * 40,))
    github.roles.update({"alice": "write", "carol": "admin"})
    github.open_pull(7, head_sha=A, base="main", author="alice")
    made = Bot(tmp_path, github)
    made.ledger.record_plan(KEY, 7, A, PlanReview("fp", (), {}, {}), 1)
    yield made
    made.close()


def _rerun(bot: Bot) -> None:
    """GitHub's "Re-run" of sluice/approval: Sluice sets the check."""
    body = payload("github/check_run/rerequested.payload.json", **{
        "check_run.name": checks.APPROVAL, "check_run.head_sha": A,
    })  # fmt: skip
    body["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    bot.deliver("check_run", body)


def _click(bot: Bot, user: str, run_id: int, *, name: str = checks.APPROVAL) -> None:
    body: dict[str, Any] = payload("github/check_run/requested_action.payload.json", **{
        "check_run.name": name, "check_run.head_sha": A, "check_run.id": run_id,
        "requested_action.identifier": "approve:fp", "sender.login": user,
    })  # fmt: skip
    body["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    bot.deliver("check_run", body)


def _refusals(bot: Bot) -> list[tuple[str, str]]:
    return [(e.actor, e.detail) for e in bot.ledger.entries(repo=KEY) if e.kind == audit.REFUSAL]


def test_each_check_is_set_on_the_run_sluice_made_and_its_id_recorded(bot: Bot) -> None:
    _rerun(bot)
    made = bot.github.run_id(A, checks.APPROVAL)
    assert made is not None and bot.ledger.check_run(KEY, A, checks.APPROVAL) == made
    assert bot.ledger.own_check_run(KEY, made) == (A, checks.APPROVAL)
    _rerun(bot)  # set again: the same run edited, no second run of Sluice's
    ours = [r for r in bot.github.runs.values() if r.check.name == checks.APPROVAL]
    assert [r.id for r in ours] == [made]


def test_another_apps_run_of_the_same_name_is_never_edited(bot: Bot) -> None:
    theirs = Check(checks.APPROVAL, "completed", "Approved", "ok", conclusion="success")
    foreign = bot.github.foreign_run(A, theirs)
    _rerun(bot)
    made = bot.github.run_id(A, checks.APPROVAL)
    assert made is not None and made != foreign
    assert bot.github.runs[foreign].check == theirs and bot.github.runs[foreign].app == ACTIONS_APP
    assert bot.approval(A).conclusion == "failure"  # Sluice's own: carol has not approved


def test_approve_this_plan_on_another_apps_run_counts_nothing(bot: Bot) -> None:
    _rerun(bot)
    forged = dataclasses.replace(bot.approval(A), title="Approve the typo fix")
    run = bot.github.foreign_run(A, forged)
    _click(bot, "carol", run)
    assert bot.ledger.clicks(KEY, 7) == []
    assert bot.approval(A).conclusion == "failure"
    [(who, detail)] = _refusals(bot)
    assert who == "carol" and f"check run {run} is not one Sluice made" in detail
    _click(bot, "carol", bot.github.run_id(A, checks.APPROVAL) or 0)  # Sluice's own run
    assert [c.user for c in bot.ledger.clicks(KEY, 7)] == ["carol"]
    assert bot.approval(A).conclusion == "success"


def test_sluices_run_under_another_checks_name_counts_nothing(bot: Bot) -> None:
    """The id is Sluice's, the name the event gives is not that run's: refused."""
    _rerun(bot)
    ours = bot.github.run_id(A, checks.APPROVAL) or 0
    _click(bot, "carol", ours, name="sluice/approval ")
    assert bot.ledger.clicks(KEY, 7) == []
    [(_, detail)] = _refusals(bot)
    assert "is Sluice's sluice/approval on aaaaaaaaaaaa, not 'sluice/approval '" in detail


def test_as_a_github_app_the_payloads_app_must_be_the_services(bot: Bot) -> None:
    _rerun(bot)
    ours = bot.github.run_id(A, checks.APPROVAL) or 0
    app = dataclasses.replace(bot.deps, github_app=bot.github.app_id)
    job = Job.start(app, bot.github)
    try:
        event = CheckRunEvent("github", OWNER, None, "requested_action", checks.APPROVAL, A,
                              (7,), "carol", "approve:fp", ours, app_id=ACTIONS_APP)  # fmt: skip
        assert own_checks.refusal(job, event) == (
            f"check run {ours} names App {ACTIONS_APP} as its maker, not this service's App "
            f"{bot.github.app_id}"
        )
        missing = dataclasses.replace(event, app_id=None)
        assert "names no App as its maker" in (own_checks.refusal(job, missing) or "")
        mine = dataclasses.replace(event, app_id=bot.github.app_id)
        assert own_checks.refusal(job, mine) is None
    finally:
        job.close()


def test_a_forged_drift_click_that_failed_for_good_leaves_sluices_check_alone(bot: Bot) -> None:
    drift = Check(checks.DRIFT, "completed", "No drift", "fine", conclusion="success",
                  actions=(CheckAction("Plan the repair", "x", "drift:" + "a" * 12),))  # fmt: skip
    job = Job.start(bot.deps, bot.github)  # as the scheduled check sets it: recorded
    try:
        ours = job.forge.set_check(A, drift)
    finally:
        job.close()
    run = bot.github.foreign_run(A, drift)
    event = CheckRunEvent("github", OWNER, None, "requested_action", checks.DRIFT, A, (),
                          "alice", "drift:" + "a" * 12, run)  # fmt: skip
    dispatch.give_up(bot.deps, event, "boom")
    assert bot.github.checks[A][checks.DRIFT] == drift  # no "could not repair" on Sluice's
    dispatch.give_up(bot.deps, dataclasses.replace(event, check_run_id=ours), "boom")
    assert bot.github.checks[A][checks.DRIFT].title == "Sluice could not repair prod"
    assert bot.github.run_id(A, checks.DRIFT) == ours


def test_a_run_made_again_replaces_the_one_recorded(bot: Bot) -> None:
    bot.ledger.record_check_run(KEY, A, checks.APPROVAL, 5, 1)
    bot.ledger.record_check_run(KEY, A.upper(), checks.APPROVAL, 6, 2)  # one commit, any case
    assert bot.ledger.check_run(KEY, A, checks.APPROVAL) == 6
    assert bot.ledger.own_check_run(KEY, 5) is None  # no longer the check's run
    assert bot.ledger.own_check_run(KEY, 6) == (A, checks.APPROVAL)
    assert bot.ledger.own_check_run("github:octo/other", 6) is None  # another repository's
