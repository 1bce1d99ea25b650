"""The web UI's sign-in, attacked (issue 44): forged session cookies (a bad signature, a
tampered payload, another key, the sign-in cookie passed as a session's), an expired
session, a sign-in's return without its state, with another, late or from another
browser, a logout without the session's CSRF token, another repository's ids and names,
no session at all, and a ``next`` leading off the site. The forge is GitHub faked at the
HTTP wire (``responses``); the UI is the real app over a state built by the real flow."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.web.access import SignedIn
from sluice.bot.web.session import COOKIE, SESSION_SECONDS, SIGN_IN_COOKIE, Sessions, Signer
from sluice.bot.web.standalone import ui_app
from tests.helpers.oauth import FakeUser, fake_github, github_sign_in, sign_in, start_sign_in
from tests.helpers.web import OWNER, TITLE, WebWorld, web_world

KEY = b"k" * 40
ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
EVE = FakeUser("eve", code="code-eve", token="gho_eveToken00000000000", readable=())
HOSTILE = FakeUser('<script>alert("x")</script>', code="code-x", token="gho_x000000000000000000")
API = (
    "/api/v1/environments",
    "/api/v1/environments/prod",
    "/api/v1/pulls",
    "/api/v1/pulls/7",
    "/api/v1/jobs",
    "/api/v1/history",
    "/api/v1/audit",
    "/api/v1/models",
    "/api/v1/models/jaffle.orders",
)
PAGES = ("/ui/environments", "/ui/pulls/7", "/ui/jobs", "/ui/history", "/ui/models", "/ui/audit")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("hostile-sign-in"))
    yield made
    made.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def github() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, EVE, HOSTILE, served=[OWNER, "octo/other"])
        yield rsps


@pytest.fixture
def app(world: WebWorld, clock: Clock, github: responses.RequestsMock):  # type: ignore[no-untyped-def]
    access = SignedIn(Sessions(KEY, clock=clock), {"github": github_sign_in()}, clock=clock)
    return ui_app(world.ui_site(access))


@pytest.fixture
def ui(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(app) as client:
        yield client


def _payload(cookie: str) -> dict[str, object]:
    body = cookie.split(".", 1)[0]
    decoded: dict[str, object] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return decoded


def _refused(ui: TestClient) -> None:
    for path in API:
        answer = ui.get(path)
        assert answer.status_code == 401, path
        assert TITLE not in answer.text and "jaffle" not in answer.text, path
    for path in PAGES:
        answer = ui.get(path, follow_redirects=False)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/ui/login?next="), path


def _token_calls(github: responses.RequestsMock) -> int:
    return sum(c.request.url.endswith("/login/oauth/access_token") for c in github.calls)


def test_no_session_sees_nothing(ui: TestClient, github: responses.RequestsMock) -> None:
    _refused(ui)
    assert ui.get("/api/v1/repositories").json() == []
    assert not github.calls  # nothing asked of the forge for nobody


def test_forged_session_cookies_are_refused(ui: TestClient) -> None:
    sign_in(ui, ALICE)
    real = str(ui.cookies.get(COOKIE))
    assert ui.get("/api/v1/environments").status_code == 200
    payload = _payload(real)
    assert ALICE.token not in json.dumps(payload)  # the token never leaves the service
    body, mac = real.split(".", 1)
    tampered = dict(payload, login="mallory")
    forged = {
        "bad signature": f"{body}.{mac[:-2]}{'AA' if mac[-2:] != 'AA' else 'BB'}",
        "tampered payload": Signer(b"x" * 40).sign("session", tampered).split(".")[0] + "." + mac,
        "later expiry, same mac": (
            Signer(b"x" * 40).sign("session", dict(payload, exp=int(payload["exp"]) + 10**6))  # type: ignore[call-overload]
        ).split(".")[0]
        + "."
        + mac,
        "another key": Signer(b"another key, not the service's!!!!!!").sign("session", payload),
        "no signature": body,
        "empty": "",
        "dots": "...",
        "long": "A" * 5000 + "." + mac,
        "not base64": "%%%." + mac,
    }
    for name, value in forged.items():
        ui.cookies.clear()
        ui.cookies.set(COOKIE, value)
        _refused(ui)
        assert ui.get("/api/v1/repositories").json() == [], name


def test_the_sign_in_cookie_cannot_pass_as_a_session(ui: TestClient) -> None:
    start_sign_in(ui)
    started = str(ui.cookies.get(SIGN_IN_COOKIE, path="/ui/auth"))
    ui.cookies.clear()
    ui.cookies.set(COOKIE, started)
    _refused(ui)


def test_an_expired_session_is_signed_out(ui: TestClient, clock: Clock) -> None:
    sign_in(ui, ALICE)
    clock.now += SESSION_SECONDS - 1
    assert ui.get("/api/v1/environments").status_code == 200
    clock.now += 2
    _refused(ui)


def test_a_sign_in_without_its_state_starts_no_session(
    ui: TestClient, app, clock: Clock, github: responses.RequestsMock
) -> None:  # type: ignore[no-untyped-def]
    callback = "/ui/auth/github/callback"
    state = start_sign_in(ui)
    for query in ({"code": ALICE.code}, {"code": ALICE.code, "state": state[:-1] + "x"}):
        answer = ui.get(callback, params=query, follow_redirects=False)
        assert answer.status_code == 400
        assert "state" in answer.text and "/ui/login" in answer.text
    # another browser with this browser's state (a login CSRF: the attacker's code)
    with TestClient(app) as other:
        answer = other.get(callback, params={"code": ALICE.code, "state": state})
        assert answer.status_code == 400 and "no sign-in was started" in answer.text
    # the right state, too late
    clock.now += 601
    answer = ui.get(callback, params={"code": ALICE.code, "state": state})
    assert answer.status_code == 400 and "10 minutes" in answer.text
    assert _token_calls(github) == 0  # no code was ever traded
    assert COOKIE not in ui.cookies
    _refused(ui)


def test_a_refused_code_or_a_hostile_login_starts_no_session(
    ui: TestClient, github: responses.RequestsMock
) -> None:
    callback = "/ui/auth/github/callback"
    state = start_sign_in(ui)
    answer = ui.get(callback, params={"code": "stolen", "state": state})
    assert answer.status_code == 400 and "bad_verification_code" in answer.text
    state = start_sign_in(ui)
    answer = ui.get(callback, params={"error": "<b>access_denied</b>", "state": state})
    assert answer.status_code == 400 and "<b>" not in answer.text
    state = start_sign_in(ui)
    answer = ui.get(callback, params={"code": HOSTILE.code, "state": state})
    assert answer.status_code == 400 and "<script>" not in answer.text
    assert COOKIE not in ui.cookies
    _refused(ui)


def test_logout_needs_the_sessions_csrf_token(ui: TestClient, app) -> None:  # type: ignore[no-untyped-def]
    def token(client: TestClient) -> str:
        page = client.get("/ui/environments").text
        return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

    with TestClient(app) as other:  # another session, the same user's
        sign_in(other, ALICE)
        others = token(other)
    sign_in(ui, ALICE)
    csrf = token(ui)
    assert others != csrf
    for form in ({}, {"csrf": ""}, {"csrf": "x" * 43}, {"csrf": others}, {"csrf": csrf + "x"}):
        answer = ui.post("/ui/logout", data=form, follow_redirects=False)
        assert answer.status_code == 403, form
        assert "CSRF" in answer.json()["detail"]
        assert ui.get("/api/v1/environments").status_code == 200  # still signed in
    # a JSON body or a query string carries no token either
    assert ui.post("/ui/logout", json={"csrf": csrf}).status_code == 403
    assert ui.post(f"/ui/logout?csrf={csrf}").status_code == 403
    # the header works (for scripts), as does the form field
    answer = ui.post("/ui/logout", headers={"X-Sluice-CSRF": csrf}, follow_redirects=False)
    assert answer.status_code == 303
    _refused(ui)


def test_another_repositorys_ids_and_names_are_not_found(ui: TestClient) -> None:
    sign_in(ui, ALICE)
    for other in ("github:octo/other", "gitlab:octo/warehouse", "github:OCTO/warehouse", ""):
        for path in (*API, *PAGES):
            answer = ui.get(path, params={"repo": other}, follow_redirects=False)
            assert answer.status_code == 404, (other, path)
            assert TITLE not in answer.text


def test_a_repository_the_user_cannot_read_looks_like_one_that_does_not_exist(
    ui: TestClient, app
) -> None:  # type: ignore[no-untyped-def]
    sign_in(ui, EVE)
    hidden = ui.get("/api/v1/pulls/7", params={"repo": f"github:{OWNER}"})
    absent = ui.get("/api/v1/pulls/7", params={"repo": "github:octo/nothing-here"})
    assert hidden.status_code == absent.status_code == 404
    assert hidden.json() == absent.json()
    for path in (*API, *PAGES):
        assert ui.get(path, follow_redirects=False).status_code == 404, path


def test_after_sign_in_the_browser_stays_on_this_site(ui: TestClient) -> None:
    for then in (
        "//evil.example/ui/",
        "https://evil.example/",
        "/\\evil.example",
        "/ui/\r\nSet-Cookie: x=1",
        "javascript:alert(1)",
        "/static/../ui",
    ):
        assert sign_in(ui, ALICE, then=then) == "/ui/", then
    assert sign_in(ui, ALICE, then="/ui/pulls/7?repo=x") == "/ui/pulls/7?repo=x"


def test_a_new_sign_in_replaces_the_browsers_session(ui: TestClient) -> None:
    sign_in(ui, ALICE)
    first = str(ui.cookies.get(COOKIE))
    sign_in(ui, ALICE)
    second = str(ui.cookies.get(COOKIE))
    assert _payload(first)["sid"] != _payload(second)["sid"]  # never the same id again
    assert ui.get("/api/v1/environments").status_code == 200
    ui.cookies.clear()
    ui.cookies.set(COOKIE, first)
    _refused(ui)
