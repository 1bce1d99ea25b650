"""The web UI's actions, attacked (issue 44): no session, a form without its CSRF token or
with another session's, another repository's ids, a pull request Sluice never planned, a
repository the person cannot read, a form from a page older than the plan (a stale plan
id or head), malformed fields, a viewer of a public service, ``sluice ui``'s local site,
a form sent twice, an expired or signed-out session. Each is refused before anything is
queued (the queue is counted), but the form sent twice, which is one delivery. The
service is the real app, GitHub faked at the HTTP wire; the state built by the real flow."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterator

import pytest
import responses
from fastapi import FastAPI
from fastapi.testclient import TestClient

from sluice.bot.web.access import SignedIn
from sluice.bot.web.routes import mount
from sluice.bot.web.session import COOKIE, SESSION_SECONDS, Sessions
from sluice.bot.web.standalone import ui_app
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, fake_github, github_sign_in, sign_in
from tests.helpers.web import HEAD, OWNER, WebWorld, web_world
from tests.helpers.web_actions import forms, jobs, service
from tests.security.github_bot import C

REPO = f"github:{OWNER}"
BOB = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})
ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
EVE = FakeUser("eve", code="code-eve", token="gho_eveToken00000000000", readable=())
PAGE = "/ui/pulls/7"
APPROVE = "/ui/pulls/7/approve"
SESSION_KEY = "k" * 40


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("hostile-actions"))
    yield made
    made.close()


@pytest.fixture
def github() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(
            rsps, BOB, ALICE, EVE, served=[OWNER, "octo/other"], ids={CASE_REPOSITORY_ID: OWNER}
        )
        yield rsps


@pytest.fixture
def bob(world: WebWorld, github: responses.RequestsMock) -> Iterator[TestClient]:
    with service(world) as client:
        sign_in(client, BOB)
        yield client


def _form(client: TestClient, name: str = "approve") -> tuple[str, dict[str, str]]:
    page = client.get(PAGE, params={"repo": REPO})
    assert page.status_code == 200, page.text
    return forms(page.text)[name]


def _flash(client: TestClient) -> str:
    shown = client.get(PAGE, params={"repo": REPO}).text
    start = shown.index('data-testid="flash"')
    return shown[start : shown.index("</p>", start)]


def test_no_session_queues_nothing(world: WebWorld, bob: TestClient) -> None:
    action, fields = _form(bob)
    before = len(jobs(world))
    with service(world) as stranger:
        for path in (action, APPROVE, "/ui/pulls/7/deploy", "/ui/pulls/7/rollback"):
            answer = stranger.post(path, data=fields, follow_redirects=False)
            assert answer.status_code == 401, (path, answer.text)
    assert len(jobs(world)) == before


def test_a_form_without_its_csrf_token_or_with_another_sessions_is_refused(
    world: WebWorld, bob: TestClient, github: responses.RequestsMock
) -> None:
    action, fields = _form(bob)
    before = len(jobs(world))
    without = {k: v for k, v in fields.items() if k != "csrf"}
    assert bob.post(action, data=without, follow_redirects=False).status_code == 403
    assert bob.post(action, data={**fields, "csrf": ""}, follow_redirects=False).status_code == 403
    assert bob.post(action, data={**fields, "csrf": "x" * 43}).status_code == 403
    with service(world) as other:
        sign_in(other, ALICE)
        _, theirs = _form(other)
    # alice's token with bob's cookie, and bob's form without his cookie: both refused
    answer = bob.post(action, data={**fields, "csrf": theirs["csrf"]}, follow_redirects=False)
    assert answer.status_code == 403
    assert "CSRF" in answer.json()["detail"]
    # the token in a JSON body is not a form's: refused, as is a token in the query
    assert bob.post(action, json=fields, follow_redirects=False).status_code == 403
    query = f"{action}&csrf={fields['csrf']}"
    assert bob.post(query, data=without, follow_redirects=False).status_code == 403
    assert len(jobs(world)) == before


def test_another_repositorys_ids_and_an_unplanned_pull_request_are_not_found(
    world: WebWorld, bob: TestClient, github: responses.RequestsMock
) -> None:
    _, fields = _form(bob)
    before = len(jobs(world))
    for path, repo in (
        (APPROVE, "github:octo/other"),  # served by the forge, not by this service
        (APPROVE, "gitlab:octo/warehouse"),  # another forge's
        ("/ui/pulls/8/approve", REPO),  # never planned here
        ("/ui/pulls/8/deploy", REPO),
        ("/ui/pulls/8/rollback", REPO),
    ):
        answer = bob.post(path, params={"repo": repo}, data=fields, follow_redirects=False)
        assert answer.status_code == 404, (path, repo, answer.text)
    assert len(jobs(world)) == before


def test_a_repository_the_person_cannot_read_is_not_found_even_with_their_own_token(
    world: WebWorld, bob: TestClient, github: responses.RequestsMock
) -> None:
    _, fields = _form(bob)
    before = len(jobs(world))
    with service(world, ui_session_key=SESSION_KEY) as eve:
        sign_in(eve, EVE)  # signed in, but her token cannot read the repository
        assert eve.get("/api/v1/repositories").json() == []
        # bob's form sent with eve's session and the CSRF token that is hers
        answer = eve.post(
            APPROVE,
            params={"repo": REPO},
            data={**fields, "csrf": _own_csrf(eve)},
            follow_redirects=False,
        )
        assert answer.status_code == 404, answer.text
        assert "no such repository here" in answer.text
    assert len(jobs(world)) == before


def _own_csrf(client: TestClient) -> str:
    """The CSRF token of ``client``'s session (the HMAC of its id under the service's
    key, ``SESSION_KEY``): no page of a repository she cannot read holds it."""
    cookie = str(client.cookies.get(COOKIE))
    body = cookie.split(".", 1)[0]
    sid = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["sid"]
    mac = hmac.new(SESSION_KEY.encode(), b"csrf\0" + sid.encode("ascii"), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def test_a_form_from_a_page_older_than_the_plan_is_refused(
    world: WebWorld, bob: TestClient
) -> None:
    action, fields = _form(bob)
    before = len(jobs(world))
    for stale in ({"plan": "0" * 32}, {"head": C}, {"plan": "0" * 32, "head": C}):
        for name in ("approve", "deploy"):
            path = action.replace("/approve", f"/{name}")
            answer = bob.post(path, data={**fields, **stale}, follow_redirects=False)
            assert answer.status_code == 303, answer.text
            flash = _flash(bob)
            assert "Nothing was queued" in flash, flash
            assert fields["plan"][:12] in flash and HEAD[:12] in flash  # what is current
    assert len(jobs(world)) == before


def test_malformed_fields_are_refused(world: WebWorld, bob: TestClient) -> None:
    action, fields = _form(bob)
    before = len(jobs(world))
    for bad in (
        {"head": "HEAD"},
        {"head": HEAD + "'; DROP TABLE jobs"},
        {"plan": "<script>"},
        {"plan": ""},
        {"nonce": "short"},
        {"nonce": ""},
    ):
        answer = bob.post(action, data={**fields, **bad}, follow_redirects=False)
        assert answer.status_code == 422, (bad, answer.text)
    rollback, back = _form(bob, "rollback")
    for to in ("HEAD~1", "abc", "g" * 10, "1" * 65, "--where 1=1"):
        answer = bob.post(rollback, data={**back, "to": to}, follow_redirects=False)
        assert answer.status_code == 422, (to, answer.text)
    assert bob.get(action).status_code == 405  # a GET changes nothing
    assert len(jobs(world)) == before


def test_a_form_sent_twice_is_one_delivery(world: WebWorld, bob: TestClient) -> None:
    action, fields = _form(bob, "deploy")
    before = len(jobs(world))
    first = bob.post(action, data=fields, follow_redirects=False)
    assert first.status_code == 303
    assert "was queued as job" in _flash(bob)
    again = bob.post(action, data=fields, follow_redirects=False)
    assert again.status_code == 303
    assert "already (this form was sent before)" in _flash(bob)
    assert len(jobs(world)) == before + 1


def test_a_public_viewer_and_sluice_ui_have_no_actions(world: WebWorld) -> None:
    before = len(jobs(world))
    with TestClient(world.service(public=True)) as viewer:
        page = viewer.get(PAGE, params={"repo": REPO})
        assert page.status_code == 200 and not forms(page.text)  # reads, no form
        for path in (APPROVE, "/ui/pulls/7/deploy", "/ui/pulls/7/rollback"):
            answer = viewer.post(
                path, params={"repo": REPO}, data={"plan": "x"}, follow_redirects=False
            )
            assert answer.status_code == 403, answer.text
            assert "need sign-in" in answer.json()["detail"]
    with TestClient(ui_app(world.ui_site())) as local:
        page = local.get(PAGE, params={"repo": REPO})
        assert page.status_code == 200 and not forms(page.text)
        answer = local.post(APPROVE, params={"repo": REPO}, data={"plan": "x"})
        assert answer.status_code in (404, 405)  # no such route: sluice ui has no queue
    assert len(jobs(world)) == before


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_an_expired_or_signed_out_session_acts_no_more(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    """The session's own clock moved past its 8 hours, or its person signed out: the form
    the page held is refused, and nothing reaches the intake."""
    clock = _Clock()
    reached: list[object] = []

    async def submit(delivery: object) -> bool:
        reached.append(delivery)
        return True

    access = SignedIn(Sessions(SESSION_KEY.encode(), clock=clock), {"github": github_sign_in()})
    app = FastAPI()
    mount(app, world.ui_site(access), submit=submit)
    with TestClient(app) as client:
        sign_in(client, BOB)
        action, fields = _form(client)
        clock.now += SESSION_SECONDS + 1
        assert client.post(action, data=fields, follow_redirects=False).status_code == 401
        clock.now -= SESSION_SECONDS + 1
        sign_in(client, BOB)
        action, fields = _form(client)
        kept = str(client.cookies.get(COOKIE))
        client.cookies.clear()
        client.cookies.set(COOKIE, kept)  # as the browser sends it: still a session
        assert client.get(PAGE, params={"repo": REPO}, follow_redirects=False).status_code == 200
        out = client.post("/ui/logout", data={"csrf": fields["csrf"]}, follow_redirects=False)
        assert out.status_code == 303
        client.cookies.clear()
        client.cookies.set(COOKIE, kept)  # the signed-out cookie, sent again
        assert client.post(action, data=fields, follow_redirects=False).status_code == 401
    assert reached == []
