"""Sluice's check runs are told by the id Sluice recorded when it made them, never by
their name (sluice.bot.flow.own_checks), through the service's webhook endpoint with
PyGithub really running against the fake GitHub at the wire.

A writer's workflow (``GITHUB_TOKEN`` with ``checks: write``) or another App installed on
the repository can make a check run named ``sluice/approval`` on a pull request's head,
its button an "Approve this plan" whose identifier is Sluice's. Its click must approve
nothing, and Sluice must never edit that run nor take GitHub's 403 on it for "these
credentials cannot write check runs".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.github import PayloadError, parse_github
from sluice.bot.events.neutral import CheckRunEvent
from sluice.bot.flow import audit, own_checks
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from tests.helpers.cases import realcase
from tests.helpers.github_service import SECRET, TOKEN, Service, serve, service_settings
from tests.helpers.github_wire import ACTIONS_APP, FakeGitHub

OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
A = "a" * 40
CONFIG = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [carol]\n"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    settings = service_settings(tmp_path)
    github = FakeGitHub(repo=OWNER)
    github.files[("main", "config.yaml")] = CONFIG
    github.permissions.update({"alice": "write", "carol": "admin"})
    github.add_pull(7, A, author="alice")
    with serve(settings, github) as made:
        ledger = Ledger(settings.state_url())
        try:  # PR 7's head has a plan (an empty one): its gate asks carol
            ledger.record_plan(KEY, 7, A, PlanReview("fp", (), {}, {}), 1)
        finally:
            ledger.close()
        yield made


def _deliver(service: Service, event: str, body: dict[str, Any]) -> None:
    assert service.deliver(event, body).status_code == 202
    service.idle()


def _click(run_id: int, user: str, app: dict[str, Any]) -> dict[str, Any]:
    body = realcase("github/check_run/requested_action.payload.json", OWNER, **{
        "check_run.name": "sluice/approval", "check_run.head_sha": A, "check_run.id": run_id,
        "check_run.app": app, "requested_action.identifier": "approve:fp",
        "sender.login": user,
    })  # fmt: skip
    body["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    return body


def _sluices_run(service: Service) -> dict[str, Any]:
    """Sluice's sluice/approval run on A (the runs the fake's App made have no ``app``
    of another), set first by a re-run of the check."""

    def mine() -> list[dict[str, Any]]:
        return [
            r for r in service.github.check_runs.values()
            if r["name"] == "sluice/approval" and r["head_sha"] == A and "app" not in r
        ]  # fmt: skip

    if not mine():
        rerun = realcase("github/check_run/rerequested.payload.json", OWNER, **{
            "check_run.name": "sluice/approval", "check_run.head_sha": A,
        })  # fmt: skip
        rerun["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
        _deliver(service, "check_run", rerun)
    [run] = mine()
    return run


def _clicks_and_refusals(service: Service) -> tuple[list[str], list[str]]:
    ledger = Ledger(service.settings.state_url())
    try:
        clicks = [c.user for c in ledger.clicks(KEY, 7)]
        refused = [e.detail for e in ledger.entries(repo=KEY) if e.kind == audit.REFUSAL]
    finally:
        ledger.close()
    return clicks, refused


def test_a_click_on_a_workflows_run_named_sluice_approval_approves_nothing(
    service: Service,
) -> None:
    ours = _sluices_run(service)
    assert ours["conclusion"] == "failure"  # waiting for carol
    waiting = dict(ours["output"])
    # A writer's workflow makes its own sluice/approval run on the head, "Approve this
    # plan" on it; carol clicks it (it says whatever the workflow wrote).
    forged = service.github.add_check_run(
        A, "sluice/approval", conclusion="action_required",
        output={"title": "Approve the docs typo fix", "summary": "Only a typo."},
        actions=[{"label": "Approve this plan", "description": "", "identifier": "approve:fp"}],
    )  # fmt: skip
    _deliver(service, "check_run", _click(forged, "carol", ACTIONS_APP))
    clicks, refused = _clicks_and_refusals(service)
    assert clicks == [], "a click on a workflow's run approved the plan"
    assert [d for d in refused if f"check run {forged} is not one Sluice made" in d]
    assert ours["output"] == waiting and ours["conclusion"] == "failure"
    assert service.github.check_runs[forged]["history"] == []  # never edited by Sluice
    assert service.github.statuses == []  # and no fallback to commit statuses
    # The same person's click on Sluice's own run approves.
    _deliver(service, "check_run", _click(ours["id"], "carol", ACTIONS_APP))
    clicks, _ = _clicks_and_refusals(service)
    assert clicks == ["carol"]
    assert ours["conclusion"] == "success"


def test_a_run_of_the_same_name_made_first_is_never_edited_nor_a_reason_for_statuses(
    service: Service,
) -> None:
    """The workflow's run is there before Sluice sets its check: GitHub refuses its edit
    with 403; Sluice makes its own run (and records it), not a commit status."""
    forged = service.github.add_check_run(A, "sluice/approval", conclusion="success",
                                          output={"title": "Approved", "summary": "ok"})  # fmt: skip
    ours = _sluices_run(service)
    assert ours["id"] != forged and ours["conclusion"] == "failure"
    assert service.github.check_runs[forged]["conclusion"] == "success"
    assert ("PATCH", f"/repos/{OWNER}/check-runs/{forged}") not in [
        (m, u.split("api.github.com:443")[-1].split("api.github.com")[-1])
        for m, u in service.github.requests
    ]
    assert service.github.statuses == []
    ledger = Ledger(service.settings.state_url())
    try:
        assert ledger.check_run(KEY, A, "sluice/approval") == ours["id"]
    finally:
        ledger.close()


def test_the_refusal_names_the_run_and_why(service: Service) -> None:
    _sluices_run(service)
    _deliver(service, "check_run", _click(31337, "carol", ACTIONS_APP))
    _, refused = _clicks_and_refusals(service)
    assert refused == [
        "a button of 'sluice/approval': check run 31337 is not one Sluice made in this "
        "repository (or not its latest)"
    ]
    assert own_checks.REFUSED == "click refused"


# -- the new input: check_run.app.id ----------------------------------------------------------


def test_the_app_that_made_the_clicked_run_is_read_and_checked() -> None:
    body = realcase("github/check_run/requested_action.payload.json", OWNER)
    event = parse_github("check_run", body)
    assert isinstance(event, CheckRunEvent) and event.app_id == 25811
    body["check_run"]["app"] = None  # GitHub always names it; absent, it is None (refused)
    event = parse_github("check_run", body)
    assert isinstance(event, CheckRunEvent) and event.app_id is None
    for hostile in ("15368", True, 2**63, 1.5):
        body["check_run"]["app"] = {"id": hostile}
        with pytest.raises(PayloadError, match=r"check_run\.app\.id"):
            parse_github("check_run", body)


def test_the_service_compares_the_app_only_when_it_runs_as_an_app_of_a_numeric_id(
    tmp_path: Path,
) -> None:
    key = "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----\n"
    base = {"webhook_secret": SECRET, "workdir": tmp_path, "github_private_key": key}
    app = ServiceSettings(github_app_id="123456", **base)  # type: ignore[arg-type]
    assert app.github_app_number() == 123456
    client_id = ServiceSettings(github_app_id="Iv23liAbCdEf", **base)  # type: ignore[arg-type]
    assert client_id.github_app_number() is None  # runs told by their recorded ids alone
    token = ServiceSettings(github_app_id="123456", github_token=TOKEN, **base)  # type: ignore[arg-type]
    assert token.github_app_number() is None  # a token's runs are not the App's
