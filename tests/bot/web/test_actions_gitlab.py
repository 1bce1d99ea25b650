"""The web UI's actions on GitLab (issue 44): the real service, python-gitlab really
running against a fake GitLab at the HTTP wire (tests/helpers/gitlab_web.py), people
signed in with GitLab's OAuth at the same wire, the queue's jobs run by the service's own
worker on the scripted warehouse. The form's approval is the GitLab counterpart of the
check's button: the author's own does not count (the sticky note says so, the
sluice/approval status stays failed), the gate's approver's passes the status on GitLab;
a Reporter's deploy from the page is refused as their ``/sluice deploy`` note is, a
Developer's promotes prod once the gate passed (GitLab gets its deployment record).
Each in the audit log with the person as its actor. Someone who cannot read the project
sees no page and sends no form."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from tests.helpers.gitlab_service import API_TOKEN, GitLabService
from tests.helpers.gitlab_web import (
    ALICE,
    BOB,
    CAROL,
    EVE,
    HEAD,
    PROJECT,
    GitLabProject,
    audit,
    flash_of,
    gitlab_project,
    signed_in_service,
)
from tests.helpers.oauth import sign_in
from tests.helpers.web_actions import forms

PAGE = f"/ui/pulls/2?repo=gitlab%3A{PROJECT.replace('/', '%2F')}"


@pytest.fixture
def built(tmp_path: Path) -> GitLabProject:
    return gitlab_project(tmp_path)


@pytest.fixture
def service(built: GitLabProject) -> Iterator[GitLabService]:
    with signed_in_service(built) as served:
        yield served


def _send(service: GitLabService, name: str) -> str:
    """Send the MR page's form ``name`` as the page filled it, wait for the worker; the
    flash the next page shows."""
    client = service.client
    page = client.get(PAGE)
    assert page.status_code == 200, page.text
    action, values = forms(page.text)[name]
    answer = client.post(action, data=values, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    service.idle(timeout=300)
    return flash_of(client.get(PAGE).text)


def _approval(service: GitLabService) -> dict[str, Any]:
    return service.gitlab.statuses_on(HEAD)["sluice/approval"]


def test_the_author_is_refused_and_the_approver_passes_the_gate_on_gitlab(
    built: GitLabProject, service: GitLabService
) -> None:
    gitlab = service.gitlab
    assert _approval(service)["state"] == "failed"  # waiting for bob
    sign_in(service.client, ALICE, forge="gitlab")
    page = service.client.get(PAGE).text
    assert {"approve", "deploy"} <= set(forms(page))
    assert "own approval does not count" not in gitlab.bot_notes(2)[0]["body"]
    asked = len(gitlab.requests)
    assert "queued as job" in _send(service, "approve")
    # the worker's flow asked GitLab for the MR (python-gitlab, the service's token), by
    # the project's id (the form carries the id its path is bound to)
    assert ("GET", f"/projects/{gitlab.project_id}/merge_requests/2") in (gitlab.requests[asked:])
    # the author's own approval from the page does not count, as on GitLab
    assert _approval(service)["state"] == "failed"
    assert "@alice's own approval does not count" in gitlab.bot_notes(2)[0]["body"]
    sign_in(service.client, BOB, forge="gitlab")
    _send(service, "approve")
    approval = _approval(service)
    assert (approval["state"], approval["description"]) == ("success", "Approved")
    assert "Approved by @bob (1 of 1 required)." in gitlab.bot_notes(2)[0]["body"]
    rows = audit(built.url)
    assert ("approval", "alice", "given") in [r[:3] for r in rows]
    assert ("approval", "bob", "given") in [r[:3] for r in rows]
    assert all("the web UI's Approve this plan" in r[3] for r in rows if r[0] == "approval"
               and r[1] != "sluice")  # fmt: skip
    # the service's token went to GitLab only as its own header, never into what it wrote
    assert API_TOKEN not in json.dumps([gitlab.notes, gitlab.statuses])


def test_a_reporter_cannot_deploy_from_the_page(
    built: GitLabProject, service: GitLabService
) -> None:
    store = open_state(built.url)
    try:
        before = store.get_environment(PROD)
    finally:
        store.close()
    notes = len(service.gitlab.notes_on(2))
    sign_in(service.client, CAROL, forge="gitlab")
    assert "/sluice deploy" in _send(service, "deploy")
    said = [n["body"] for n in service.gitlab.notes_on(2)[notes:]]
    assert len(said) == 1 and said[0].startswith(
        "@carol only users with the Developer role or above"
    ), said
    assert service.gitlab.merges == [] and service.gitlab.deployments == []
    store = open_state(built.url)
    try:
        assert store.get_environment(PROD) == before
    finally:
        store.close()
    assert [r[:3] for r in audit(built.url) if r[1] == "carol"] == [
        ("refusal", "carol", "not a writer")
    ]


def test_someone_who_cannot_read_the_project_sees_nothing_and_acts_on_nothing(
    built: GitLabProject, service: GitLabService
) -> None:
    sign_in(service.client, ALICE, forge="gitlab")
    action, values = forms(service.client.get(PAGE).text)["approve"]
    sign_in(service.client, EVE, forge="gitlab")
    assert service.client.get(PAGE).status_code == 404
    # alice's form, sent in eve's session: refused before anything is queued
    answer = service.client.post(action, data=values, follow_redirects=False)
    assert answer.status_code in (403, 404), answer.text
    assert service.counts().get("queued", 0) == 0
    assert not any(r[1] == "eve" for r in audit(built.url))


def test_a_developer_deploys_from_the_page_once_the_gate_passed(
    built: GitLabProject, service: GitLabService
) -> None:
    store = open_state(built.url)
    try:
        before = store.get_environment(PROD)
    finally:
        store.close()
    assert before is not None
    sign_in(service.client, BOB, forge="gitlab")
    _send(service, "approve")
    assert _approval(service)["state"] == "success"
    sign_in(service.client, ALICE, forge="gitlab")
    assert "/sluice deploy" in _send(service, "deploy")
    said = service.gitlab.notes_on(2)[-1]["body"]
    assert said.startswith("@alice deployed to prod: "), said
    store = open_state(built.url)
    try:
        after = store.get_environment(PROD)
    finally:
        store.close()
    assert after is not None and after.plan_id != before.plan_id
    [deployment] = service.gitlab.deployments  # GitLab's record of it, by the service
    assert (deployment["environment"], deployment["sha"], deployment["status"]) == (
        "prod",
        HEAD,
        "success",
    )
    rows = [r[:3] for r in audit(built.url)]
    assert ("deploy command", "alice", "asked") in rows
    assert ("promotion", "alice", "promoted") in rows
