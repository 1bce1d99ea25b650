"""Who pushed a pull request's head when no push hook told of it, through the service at
the GitHub wire: the webhook server, the queue, the flow and PyGithub run for real
against the fake GitHub (``responses``), no Spark.

bob pushes branch ``change`` with no push hook sent (a push of over 5,000 branches at
once); alice opens the pull request from it. The gate asks GitHub's repository activity
who pushed its head: bob, whose approval then does not count; or, when GitHub cannot
say, someone unknown, and the gate asks one approval more and says why (red team,
approval round 3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview
from tests.helpers.github_lifecycle import pull, review
from tests.helpers.github_service import Service, serve, service_settings
from tests.helpers.github_wire import FakeGitHub

OWNER = "octo/warehouse"
KEY = f"github:{OWNER}"
A = "a" * 40
CONFIG = "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob, carol]\n"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    settings = service_settings(tmp_path)
    github = FakeGitHub(repo=OWNER)
    github.files[("main", "config.yaml")] = CONFIG
    github.permissions.update({"alice": "write", "bob": "write", "carol": "admin"})
    github.add_pull(7, A, author="alice", head_ref="feature-7")
    with serve(settings, github) as made:
        ledger = Ledger(settings.state_url())
        try:  # PR 7's head has a plan (an empty one): its gate asks bob or carol
            ledger.record_plan(KEY, 7, A, PlanReview("fp", (), {}, {}), 1)
        finally:
            ledger.close()
        yield made


def _deliver(service: Service, event: str, body: dict[str, Any]) -> None:
    assert service.deliver(event, body).status_code == 202
    service.idle()


def _approve(service: Service, user: str) -> dict[str, Any]:
    service.github.add_review(7, user, "APPROVED", A)
    _deliver(service, "pull_request_review", review(7, A, user, "approved", A))
    return dict(service.github.checks_on(A)["sluice/approval"])


def _asked(service: Service) -> int:
    return sum(1 for method, url in service.github.requests if "/activity" in url)


def test_the_activity_names_bob_as_the_head_s_pusher(service: Service) -> None:
    service.github.add_activity("refs/heads/feature-7", A, "bob", "branch_creation")
    _deliver(service, "pull_request", pull(7, A, "alice", "opened"))
    assert _approve(service, "bob")["conclusion"] == "failure"  # bob pushed it
    assert _approve(service, "carol")["conclusion"] == "success"
    ledger = Ledger(service.settings.state_url())
    try:
        assert {push.user for push in ledger.pushes_of(KEY, [A])} == {"alice", "bob"}
    finally:
        ledger.close()
    assert _asked(service) == 1  # recorded: later jobs do not ask again


def test_github_failing_to_say_asks_one_approval_more_and_says_why(service: Service) -> None:
    service.github.activity_status = 403  # the token may not read it (or GitHub is down)
    _deliver(service, "pull_request", pull(7, A, "alice", "opened"))
    check = _approve(service, "bob")
    assert check["conclusion"] == "failure", check
    summary = check["output"]["summary"]
    assert "could not say who pushed it" in summary and "403" in summary, summary
    assert "one approval more" in summary
    assert _approve(service, "carol")["conclusion"] == "success"  # the service goes on
    assert _asked(service) >= 2  # asked again by each job: nothing was recorded


def test_bob_s_hookless_push_to_another_branch_names_him_as_a_pusher(service: Service) -> None:
    # bob pushes A to `side` with no hook; alice makes feature-7 from it (GitHub's activity
    # names her for it) and opens the PR: the activity of every branch (no ref asked)
    # names bob too, so his approval is not enough (red team, round 5).
    service.github.add_activity("refs/heads/side", A, "bob")
    _deliver(service, "pull_request", pull(7, A, "alice", "opened"))
    assert _approve(service, "bob")["conclusion"] == "failure"  # bob pushed it
    assert _approve(service, "carol")["conclusion"] == "success"
    ledger = Ledger(service.settings.state_url())
    try:
        assert {push.user for push in ledger.pushes_of(KEY, [A])} == {"alice", "bob"}
    finally:
        ledger.close()
    asked = [url for _method, url in service.github.requests if "/activity" in url]
    assert len(asked) == 1 and "ref=" not in asked[0], asked
