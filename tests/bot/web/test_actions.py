"""The web UI's actions (issue 44) on the real service, signed in with GitHub (faked at the
HTTP wire), each queued by the intake and run as the worker runs it on the in-memory
GitHub and the scripted warehouse: the same events as the check's button and the
``/sluice`` commands, so the same gate. The gate's approver approves from the page and the
check passes on the forge; the author's own approval does not count, in the very words a
click on the forge gets; a reader without write permission cannot deploy nor roll back; a
writer who is not the gate's approver cannot roll back, the approver can; a writer's deploy
waits for the gate, then promotes, and never stands in for a tag tier's releaser. Each is
in the audit log with the person as its actor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.events.neutral import event_from_json
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.memory import account_id_of
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, fake_github, sign_in
from tests.helpers.own_runs import sluices_run
from tests.helpers.web import CONFIG, HEAD, OWNER, WebWorld, web_world
from tests.helpers.web_actions import forms, jobs, run_queued, service
from tests.security.github_bot import C, merged, payload

KEY = f"github:{OWNER}"
BOB = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})
ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
CAROL = FakeUser("carol", code="code-carol", token="gho_carolToken00000000", readable={OWNER})
MERGE = "e" * 40
PAGE = f"/ui/pulls/7?repo=github%3A{OWNER.replace('/', '%2F')}"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WebWorld]:
    made = web_world(tmp_path)
    made.github.roles["carol"] = "read"
    yield made
    made.close()


@pytest.fixture
def github() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, BOB, ALICE, CAROL, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
        yield rsps


def _send(client: TestClient, name: str, **fields: str) -> str:
    """Send the page's form ``name`` (its fields as the page filled them, then
    ``fields``); the flash the next page shows."""
    page = client.get(PAGE)
    assert page.status_code == 200, page.text
    action, values = forms(page.text)[name]
    answer = client.post(action, data={**values, **fields}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == PAGE
    return _flash(client)


def _flash(client: TestClient) -> str:
    shown = client.get(PAGE).text
    start = shown.index('data-testid="flash"')
    return shown[start : shown.index("</p>", start)]


def _audit(world: WebWorld) -> list[tuple[str, str, str, str]]:
    ledger = Ledger(world.bot.url)
    try:
        return [(r.kind, r.actor, r.outcome, r.detail) for r in ledger.entries(repo=KEY)]
    finally:
        ledger.close()


def _prod_plan(world: WebWorld) -> str:
    store = open_state(world.bot.url)
    try:
        env = store.get_environment(PROD)
        assert env is not None
        return env.plan_id
    finally:
        store.close()


def test_the_gates_approver_approves_from_the_page_and_the_check_passes_on_the_forge(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    assert world.bot.approval(HEAD).conclusion == "failure"  # waiting for bob
    with service(world) as client:
        sign_in(client, BOB)
        page = client.get(PAGE).text
        assert {"approve", "deploy"} <= set(forms(page))  # a signed-in person's forms
        flash = _send(client, "approve")
        [job] = jobs(world)
        assert (job.job.kind, job.job.key, job.status.value) == ("check_run", f"{KEY}#7", "queued")
        # who approved, by the account id the sign-in kept (the gate compares people by it)
        assert event_from_json(job.job.payload).requester_id == account_id_of("bob")
        assert f"queued as job {job.job.id}" in flash and f"#job-{job.job.id}" in flash
        assert _flash_gone(client)  # shown once
        assert run_queued(world) == 1
    check = world.bot.approval(HEAD)
    assert check.conclusion == "success", check.summary
    assert "Approved by @bob (1 of 1 required)." in check.summary
    audit = _audit(world)
    assert audit[0][:3] == ("approval", "bob", "given")
    assert "the web UI's Approve this plan" in audit[0][3]
    assert audit[1][:3] == ("approval", "sluice", "passed")


def _flash_gone(client: TestClient) -> bool:
    return 'data-testid="flash"' not in client.get(PAGE).text


def test_the_author_approving_their_own_plan_is_refused_as_on_the_forge(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    with service(world) as client:
        sign_in(client, ALICE)
        _send(client, "approve")
        assert run_queued(world) == 1
    from_ui = world.bot.approval(HEAD)
    assert from_ui.conclusion == "failure"
    assert "@alice's own approval does not count (PR author)." in from_ui.summary
    # the same click on the forge's button: the same check, word for word
    run = sluices_run(world.bot.deliver, world.github, HEAD)
    click = payload("github/check_run/requested_action.payload.json", **{
        "check_run.name": "sluice/approval", "check_run.head_sha": HEAD, "check_run.id": run,
        "requested_action.identifier": "approve", "sender.login": "alice",
    })  # fmt: skip
    click["check_run"]["pull_requests"] = [{"number": 7, "id": 7}]
    world.bot.deliver("check_run", click)
    from_forge = world.bot.approval(HEAD)
    assert (from_forge.conclusion, from_forge.summary) == (from_ui.conclusion, from_ui.summary)
    assert [row[:3] for row in _audit(world)] == [
        ("approval", "alice", "given"),
        ("approval", "alice", "given"),
    ]  # the gate passed nothing


def test_a_reader_without_write_permission_can_neither_deploy_nor_roll_back(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    prod = _prod_plan(world)
    replies = len(world.github.comments.get(7, []))
    with service(world) as client:
        sign_in(client, CAROL)
        assert "/sluice deploy" in _send(client, "deploy")
        assert "/sluice rollback" in _send(client, "rollback")
        assert [j.job.key for j in jobs(world)] == [f"{KEY}:prod"] * 2  # as the commands queue
        assert run_queued(world) == 2
    assert _prod_plan(world) == prod
    said = [c.body for c in world.github.comments[7][replies:]]
    assert len(said) == 2 and all(
        "@carol only users with write permission on this repository may run Sluice commands "
        "(your permission: read)." in text
        for text in said
    ), said
    assert [row[:3] for row in _audit(world)] == [
        ("refusal", "carol", "not a writer"),
        ("refusal", "carol", "not a writer"),
    ]
    details = [row[3] for row in _audit(world)]
    assert details == [
        "read permission: /sluice deploy (from the web UI)",
        "read permission: /sluice rollback (from the web UI)",
    ]


def test_a_writer_not_the_gates_approver_cannot_roll_back_the_approver_can(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    with service(world) as client:
        sign_in(client, BOB)
        _send(client, "approve")
        run_queued(world)
    # merged on the forge: prod promoted by the real flow
    github_forge = world.github
    github_forge.commit(MERGE, dict(github_forge.files[HEAD]), parents=(C, HEAD), branch="main")
    github_forge.close_pull(7, merged=True)
    world.bot.deliver("pull_request", merged(7, HEAD, MERGE))
    promoted = _prod_plan(world)
    with service(world) as client:
        sign_in(client, ALICE)  # a writer, not the gate's approver
        assert "rollback" in forms(client.get(PAGE).text)
        _send(client, "rollback")
        run_queued(world)
        assert _prod_plan(world) == promoted
        sign_in(client, BOB)
        _send(client, "rollback")
        run_queued(world)
    assert _prod_plan(world) != promoted
    rows = _audit(world)
    assert ("refusal", "alice", "rollback refused") in [r[:3] for r in rows]
    assert rows[-1][:3] == ("rollback", "bob", "rolled back")
    assert rows[-1][3].endswith("(from the web UI)")


def test_a_writer_deploys_from_the_page_only_once_the_gate_passed(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    prod = _prod_plan(world)
    replies = len(world.github.comments.get(7, []))
    with service(world) as client:
        sign_in(client, ALICE)  # a writer: the author, whose own approval never counts
        _send(client, "approve")
        assert run_queued(world) == 1
        _send(client, "deploy")
        assert run_queued(world) == 1
        assert _prod_plan(world) == prod
        said = [c.body for c in world.github.comments[7][replies:]]
        assert said == [
            "@alice not deployed: the `sluice/approval` gate has not passed. "
            + world.bot.approval(HEAD).summary
        ], said
        sign_in(client, BOB)
        _send(client, "approve")
        run_queued(world)
        sign_in(client, ALICE)
        _send(client, "deploy")
        run_queued(world)
    assert _prod_plan(world) != prod
    assert world.github.comments[7][-1].body.startswith("@alice deployed to prod: ")
    rows = [row[:3] for row in _audit(world)]
    first, second = [i for i, r in enumerate(rows) if r == ("deploy command", "alice", "asked")]
    assert ("promotion", "alice", "promoted") not in rows[first:second]  # refused: no promotion
    assert ("promotion", "alice", "promoted") in rows[second:]
    assert [r[3] for r in _audit(world) if r[0] == "deploy command"] == [
        f"at {HEAD[:12]} (from the web UI)"
    ] * 2


def test_deploy_from_the_page_never_stands_in_for_a_releasers_tag(tmp_path: Path) -> None:
    """Prod promoted only by a tag that carol pushes: a writer's deploy from the page, the
    gate passed, is refused as the forge's command is, naming the tag and who releases."""
    tagged = CONFIG + (
        "  deploy:\n    environments:\n      - name: prod\n        on: tag\n"
        "        tag_pattern: 'v*'\n        released_by: [carol]\n"
    )
    made = web_world(tmp_path, config=tagged)
    try:
        prod = _prod_plan(made)
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(rsps, BOB, ALICE, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
            with service(made) as client:
                sign_in(client, BOB)
                _send(client, "approve")
                run_queued(made)
                assert made.bot.approval(HEAD).conclusion == "success"
                sign_in(client, ALICE)
                _send(client, "deploy")
                run_queued(made)
        assert _prod_plan(made) == prod
        said = made.github.comments[7][-1].body
        assert said.startswith("@alice not deployed: `/sluice deploy` promotes only what a merge")
        assert "pushed by @carol" in said
        assert "A comment never stands in for the tag and its `released_by`." in said
    finally:
        made.close()
