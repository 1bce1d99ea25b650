"""The web UI's drift repair on GitLab (issue 47), whose commit statuses have no buttons:
the real service, python-gitlab against a fake GitLab at the HTTP wire, people signed in
with GitLab's OAuth at the same wire, the queue's jobs run by the service's own worker on
the scripted warehouse. Prod's view redefined by hand, then checked (the scheduled drift
check's job): ``/ui/drift`` shows the drift, the repair plan and the policies' verdicts
(escaped), and its forms are the ``sluice/drift`` check's buttons: a Developer asks, the
soft policy on the prod branch holds the plan until someone it names overrides it with a
reason, the gate's approver approves, and prod is repaired. Hostile: no sign-in, a wrong
CSRF token, a Reporter's request, someone who cannot read the project, a page older than
the drift (refused before anything is queued, and, when the drift changed after the form
was queued, by the flow), an override by someone the policy does not name."""

from __future__ import annotations

import copy
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.events.neutral import DriftCheckEvent, pr_key
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from tests.helpers.gitlab_service import GitLabService
from tests.helpers.gitlab_web import (
    ALICE,
    BOB,
    CAROL,
    EVE,
    MAIN,
    PROJECT,
    GitLabProject,
    audit,
    flash_of,
    gitlab_project,
    signed_in_service,
)
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.kept_world import copy_warehouse
from tests.helpers.oauth import sign_in
from tests.helpers.web_actions import forms

PAGE = f"/ui/drift?repo=gitlab%3A{PROJECT.replace('/', '%2F')}"
POLICY = """\
name: views-need-bob
description: Making a view of prod again needs <b>bob</b>'s word.
level: soft
override_by: [bob]
rule: '!plan.models.exists(m, m.change == "repoint")'
"""
HOSTILE = "SELECT '<script>alert(1)</script>' AS id"


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitLabProject, Path]:
    """The GitLab project (bob the gate's approver; alice and bob Developers, carol a
    Reporter), a soft policy on its prod branch, prod's plan recording its commit: built
    once for the module, with a copy of its folder (tests/helpers/kept_world.py)."""
    built = gitlab_project(tmp_path_factory.mktemp("drift-form"))
    for ref in (MAIN, "main"):
        built.gitlab.files[(ref, "policies/views-need-bob.yaml")] = POLICY
    store = open_state(built.url)
    try:  # prod as a promotion of MAIN leaves it: its plan records the commit
        record = store.get_environment(PROD)
        assert record is not None
        store.set_plan_commit(record.plan_id, MAIN)
    finally:
        store.close()
    saved = built.root.with_name(built.root.name + "-built")
    shutil.copytree(built.root, saved, symlinks=True)
    return built, saved


def _copy(gitlab: FakeGitLab) -> FakeGitLab:
    """A copy of ``gitlab`` sharing nothing with it (a lock of its own)."""
    return copy.deepcopy(gitlab, {id(gitlab.lock): threading.Lock()})


@pytest.fixture
def built(kept: tuple[GitLabProject, Path]) -> GitLabProject:
    """The project :func:`kept` built, a copy of its own for this test: its folder put
    back as built at the same path (the state records paths under it), its fake GitLab
    and scripted warehouse copied."""
    made, saved = kept
    shutil.rmtree(made.root, ignore_errors=True)
    shutil.copytree(saved, made.root, symlinks=True)
    return GitLabProject(made.root, made.url, _copy(made.gitlab), copy_warehouse(made.warehouse))


@pytest.fixture
def service(built: GitLabProject) -> Iterator[GitLabService]:
    with signed_in_service(built) as served:
        yield served


def _check(service: GitLabService) -> None:
    """The scheduled drift check of prod, queued as the service's schedule queues it."""
    event = DriftCheckEvent(forge="gitlab", repo=PROJECT, installation_id=None)
    job = NewJob(key=pr_key(event), kind=event.kind, payload=event.to_json())
    queue = JobQueue(service.settings.state_url())
    try:
        assert queue.accept(f"drift_check:{uuid.uuid4()}", "gitlab", event.kind, job, time.time())
    finally:
        queue.close()
    service.idle(timeout=300)


def _redefine(built: GitLabProject, service: GitLabService) -> None:
    built.warehouse.views["jaffle.customers"] = HOSTILE
    _check(service)


def _jobs(service: GitLabService) -> int:
    return sum(service.counts().values())


def _send(
    service: GitLabService, name: str, page: str | None = None, **change: str
) -> tuple[int, str]:
    """Send the drift page's form ``name`` as ``page`` (else the page now) filled it,
    ``change`` replacing fields; wait for the worker; (the status, the next page's flash)."""
    client = service.client
    page = page if page is not None else client.get(PAGE).text
    action, values = forms(page)[name]
    answer = client.post(action, data={**values, **change}, follow_redirects=False)
    if answer.status_code != 303:
        return answer.status_code, answer.text
    service.idle(timeout=300)
    return 303, flash_of(client.get(PAGE).text)


def _applies(built: GitLabProject) -> int:
    return sum(1 for job in built.warehouse.jobs if job["kind"] == "apply")


def test_asked_overridden_approved_and_repaired_from_the_page(
    built: GitLabProject, service: GitLabService
) -> None:
    sluices = built.warehouse.views["jaffle.customers"]
    _redefine(built, service)
    sign_in(service.client, ALICE, forge="gitlab")
    page = service.client.get(PAGE)
    assert page.status_code == 200, page.text
    html = page.text
    # the drift, the repair plan and the verdicts, every catalog and policy text escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "&lt;b&gt;bob&lt;/b&gt;" in html and "<b>bob</b>" not in html
    assert 'data-testid="repair-plan"' in html and "<code>jaffle.customers</code>" in html
    assert "views-need-bob" in html and "policies/views-need-bob.yaml:1" in html
    assert set(forms(html)) == {"request"}  # nobody asked yet: nothing to approve
    built_before = _applies(built)
    assert "queued as job" in _send(service, "request")[1]
    rows = audit(built.url)
    assert ("drift repair", "alice", "requested") in [r[:3] for r in rows]
    held = service.client.get(PAGE).text
    assert "held by the soft policies views-need-bob" in held
    assert {"approve-repair", "override"} <= set(forms(held))
    # alice is no one the policy names: her override is refused by the flow
    _send(service, "override", reason="I asked, so I say so")
    rows = audit(built.url)
    assert ("refusal", "alice", "drift repair refused",
            "not named by a soft policy in force (from the web UI)") in rows  # fmt: skip
    assert not any(r[0] == "policy override" for r in rows)
    # bob, the gate's approver, approves: still held by the policy
    sign_in(service.client, BOB, forge="gitlab")
    _send(service, "approve-repair")
    assert ("drift repair", "bob", "approved") in [r[:3] for r in audit(built.url)]
    assert _applies(built) == built_before
    # bob, whom the policy names, overrides it with a reason: the plan runs
    status, flash = _send(service, "override", reason="ticket\nOPS-7 <i>now</i>")
    assert status == 303 and "override" in flash, flash
    [override] = [r for r in audit(built.url) if r[0] == "policy override"]
    assert override[1] == "bob" and "(from the web UI): ticket OPS-7 <i>now</i>" in override[3]
    assert _applies(built) == built_before + 1
    assert built.warehouse.views["jaffle.customers"] == sluices
    assert ("drift repair", "alice", "applied") in [r[:3] for r in audit(built.url)]
    after = service.client.get(PAGE).text
    assert "No drift: prod is as Sluice recorded it." in after
    status_of = service.gitlab.statuses_on(MAIN)["sluice/drift"]
    assert status_of["state"] == "success", status_of


def test_no_sign_in_a_wrong_csrf_token_or_a_bad_reason_queue_nothing(
    built: GitLabProject, service: GitLabService
) -> None:
    _redefine(built, service)
    sign_in(service.client, ALICE, forge="gitlab")
    page = service.client.get(PAGE).text
    action, values = forms(page)["request"]
    jobs = _jobs(service)
    status, _ = _send(service, "request", page, csrf="0" * len(values["csrf"]))
    assert status == 403
    anonymous = TestClient(service.client.app)
    assert anonymous.post(action, data=values, follow_redirects=False).status_code == 401
    # an override's reason: required, printable (no terminal escapes), at most 500
    override = action.replace("/drift/request", "/drift/override")
    for reason in ("", "  \n ", "\x1b[31mred", "x" * 501):
        answer = service.client.post(override, data={**values, "reason": reason},
                                     follow_redirects=False)  # fmt: skip
        assert answer.status_code == 422, (reason, answer.text)
    service.idle(timeout=60)
    assert _jobs(service) == jobs
    assert not any(r[0] == "drift repair" for r in audit(built.url))


def test_a_reporter_is_refused_by_the_gate_and_an_outsider_sees_nothing(
    built: GitLabProject, service: GitLabService
) -> None:
    _redefine(built, service)
    sign_in(service.client, ALICE, forge="gitlab")
    alices = service.client.get(PAGE).text
    sign_in(service.client, CAROL, forge="gitlab")
    assert "queued as job" in _send(service, "request")[1]
    rows = audit(built.url)
    [refused] = [r for r in rows if r[1] == "carol"]
    assert refused[:3] == ("refusal", "carol", "drift repair refused"), refused
    assert "permission" in refused[3] and refused[3].endswith("(from the web UI)")
    assert not any(r[0] == "drift repair" for r in rows)  # nothing asked
    sign_in(service.client, EVE, forge="gitlab")
    assert service.client.get(PAGE).status_code == 404
    jobs = _jobs(service)
    status, _ = _send(service, "request", alices)  # alice's form in eve's session
    assert status in (403, 404)
    assert _jobs(service) == jobs and not any(r[1] == "eve" for r in audit(built.url))


def test_a_form_from_before_the_drift_changed_is_refused(
    built: GitLabProject, service: GitLabService
) -> None:
    _redefine(built, service)
    sign_in(service.client, ALICE, forge="gitlab")
    old = service.client.get(PAGE).text
    # prod's orders table dropped by hand, and checked: another repair plan
    orders = next(t for t, v in built.warehouse.tables.items() if v.model == "jaffle.orders")
    del built.warehouse.tables[orders]
    _check(service)
    jobs = _jobs(service)
    status, flash = _send(service, "request", old)
    assert status == 303 and "Not sent: the page showed repair plan" in flash, flash
    assert _jobs(service) == jobs  # nothing queued
    assert not any(r[0] == "drift repair" for r in audit(built.url))
    # asked for from the page now; then the drift changes after bob's page, before his
    # approval runs (no check in between): the flow makes the plan again and refuses it
    _send(service, "request")
    sign_in(service.client, BOB, forge="gitlab")
    bobs = service.client.get(PAGE).text
    other = next(v for v in sorted(built.warehouse.views) if v.startswith("jaffle.stg_"))
    built.warehouse.views[other] = HOSTILE  # one more view to make again: another plan
    status, _ = _send(service, "approve-repair", bobs)
    assert status == 303
    rows = audit(built.url)
    assert not any(r[:3] == ("drift repair", "bob", "approved") for r in rows)
    [stale] = [r for r in rows if r[1] == "bob"]
    assert stale[0] == "refusal" and " is now " in stale[3] and "(from the web UI)" in stale[3]
