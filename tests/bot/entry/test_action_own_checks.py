"""Under the Action (``on: check_run``) a workflow job gets the click of every check run the
GitHub Actions App made, a writer's workflow's as well as Sluice's own: a button counts only
on a run Sluice recorded making (sluice.bot.flow.own_checks). The entry point runs as a
workflow job would, GitHub faked at the wire, the state shared between the jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.bot.flow.ledger import Ledger
from tests.helpers import accounts
from tests.helpers.action_run import (
    HEAD,
    REPO,
    fake_github,
    job_env,
    make_project,
    pr_payload,
    run_action,
)
from tests.helpers.cases import load_case
from tests.helpers.github_wire import ACTIONS_APP, FakeGitHub

GATE = "sluice:\n  project: demo\n  gate:\n    required_approvers:\n      users: [bob]\n"


def _click(number: int, run_id: int, user: str) -> dict[str, Any]:
    payload = load_case("github/check_run/requested_action.payload.json")
    payload["repository"]["full_name"] = REPO
    payload.pop("installation", None)
    run = payload["check_run"]
    run.update(id=run_id, name="sluice/approval", head_sha=HEAD, app=ACTIONS_APP)
    run["pull_requests"] = [{"number": number, "id": number}]
    payload["requested_action"]["identifier"] = "approve"
    payload["sender"]["login"] = user
    return accounts.github(payload)  # the sender's id is that account's, as GitHub sends it


def test_a_click_on_a_workflows_run_of_sluices_name_approves_nothing(tmp_path: Path) -> None:
    # Opened by an account the fake GitHub knows (the gate asks it what each pusher is).
    payload = accounts.github(pr_payload())
    number = payload["pull_request"]["number"]
    github = fake_github(tmp_path, number, **{"config.yaml": GATE})
    github.permissions.update({"bob": "write"})
    github.save()
    make_project(tmp_path / "workspace", GATE)
    state = f"sqlite:///{tmp_path / 'shared.db'}"

    def job(event: str, body: dict[str, Any]) -> FakeGitHub:
        done = run_action(tmp_path, job_env(tmp_path, event, body, INPUT_DATABASE_URL=state))
        assert done.returncode == 0, done.stderr
        return FakeGitHub(state_file=tmp_path / "github.json")

    github = job("pull_request", payload)
    [ours] = [r for r in github.check_runs.values() if r["name"] == "sluice/approval"]
    assert ours["conclusion"] != "success"  # bob has not approved
    # A writer's workflow (its GITHUB_TOKEN: GitHub Actions' App, as the job's own) makes a
    # run named sluice/approval on the head, "Approve this plan" on it; bob clicks it.
    forged = github.add_check_run(
        HEAD, "sluice/approval", conclusion="action_required",
        output={"title": "Approve the README typo", "summary": "a typo"},
        actions=[{"label": "Approve this plan", "description": "", "identifier": "approve"}],
    )  # fmt: skip
    github.save()
    github = job("check_run", _click(number, forged, "bob"))
    assert github.check_runs[ours["id"]]["conclusion"] != "success"
    assert github.check_runs[forged]["history"] == []  # never edited by Sluice
    ledger = Ledger(state)
    try:
        assert ledger.clicks(f"github:{REPO}", number) == []
    finally:
        ledger.close()
    # The same click on Sluice's own run approves.
    github = job("check_run", _click(number, ours["id"], "bob"))
    assert github.check_runs[ours["id"]]["conclusion"] == "success"
