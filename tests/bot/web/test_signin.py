"""Sign-in with GitHub and GitLab on the real service (``create_app`` over a state with
prod and pull request 7 built by the real flow), the forges faked at the HTTP wire with
``responses``: the browser goes to the forge with a ``state``, comes back with a code, the
service trades it for the user's token, reads who they are and asks the forge, with their
token, whether they can read the repository it serves."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.forge.signin import SignIn, github_web_url
from sluice.core.errors import ConfigError
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import (
    CLIENT_ID,
    CLIENT_SECRET,
    GITLAB,
    FakeUser,
    fake_github,
    fake_gitlab,
    sign_in,
)
from tests.helpers.web import OWNER, TITLE, WebWorld, web_world

ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
EVE = FakeUser("eve", code="code-eve", token="gho_eveToken00000000000", readable=())
GITLAB_ALICE = FakeUser("alice", code="gl-code", token="gl-token-alice", readable={OWNER})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("signin"))
    yield made
    made.close()


def _service(
    world: WebWorld, base_url: str = "http://testserver", **settings: object
) -> TestClient:
    from sluice.bot.entry.app import create_app

    values = {
        "github_oauth_client_id": CLIENT_ID,
        "github_oauth_client_secret": CLIENT_SECRET,
        "ui_public": False,
        **settings,
    }
    made = ServiceSettings(**{**world.settings().model_dump(), **values})
    return TestClient(create_app(made, start_workers=False), base_url=base_url)


@pytest.fixture
def github() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, EVE, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
        yield rsps


def test_a_reader_signs_in_with_github_and_sees_the_repository(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    with _service(world) as client:
        # no session: the page sends the browser to sign in, and back after
        first = client.get("/ui/pulls/7", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == "/ui/login?next=%2Fui%2Fpulls%2F7"
        assert "Sign in with GitHub" in client.get(first.headers["location"]).text

        gone = client.get(
            "/ui/login/github", params={"next": "/ui/pulls/7"}, follow_redirects=False
        )
        to = urlsplit(gone.headers["location"])
        query = parse_qs(to.query)
        assert (to.scheme, to.netloc, to.path) == ("https", "github.com", "/login/oauth/authorize")
        assert query["client_id"] == [CLIENT_ID]
        assert query["redirect_uri"] == ["http://testserver/ui/auth/github/callback"]
        assert len(query["state"][0]) >= 40

        back = client.get(
            "/ui/auth/github/callback",
            params={"code": ALICE.code, "state": query["state"][0]},
            follow_redirects=False,
        )
        assert back.status_code == 303 and back.headers["location"] == "/ui/pulls/7"
        page = client.get("/ui/pulls/7")
        assert page.status_code == 200
        assert "alice (GitHub)" in page.text
        assert 'name="csrf"' in page.text and "Sign out" in page.text
        assert client.get("/api/v1/repositories").json() == [{"key": f"github:{OWNER}"}]
        assert client.get("/api/v1/pulls/7").json()["number"] == 7

    # what went over the wire: the code and the App's secret to the token endpoint, then
    # the user's own token to /user and to the repository, by its name and by the id the
    # name is bound to (which must have the name now)
    posted = parse_qs(str(github.calls[0].request.body))
    assert posted["code"] == [ALICE.code] and posted["client_secret"] == [CLIENT_SECRET]
    asked = [c.request for c in github.calls[1:]]
    assert {r.url for r in asked} == {
        "https://api.github.com/user",
        f"https://api.github.com/repos/{OWNER}",
        f"https://api.github.com/repositories/{CASE_REPOSITORY_ID}",
    }
    assert all(r.headers["Authorization"] == f"Bearer {ALICE.token}" for r in asked)
    # the forge's answers are kept for the session: asked once for four requests
    assert sum(c.request.url.endswith(f"/repos/{OWNER}") for c in github.calls) == 1
    assert sum(c.request.url.endswith(f"/{CASE_REPOSITORY_ID}") for c in github.calls) == 1


def test_a_user_who_cannot_read_the_repository_sees_nothing(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    with _service(world) as client:
        assert sign_in(client, EVE) == "/ui/"
        assert client.get("/api/v1/repositories").json() == []
        for path in ("/api/v1/environments", "/api/v1/pulls/7", "/ui/environments", "/ui/pulls/7"):
            answer = client.get(path, follow_redirects=False)
            assert answer.status_code == 404, path
            assert TITLE not in answer.text and "jaffle" not in answer.text


def test_signing_out_ends_the_session(world: WebWorld, github: responses.RequestsMock) -> None:
    with _service(world) as client:
        sign_in(client, ALICE)
        page = client.get("/ui/environments")
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        kept = client.cookies.get("sluice_session")
        out = client.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        assert client.get("/api/v1/environments").status_code == 401
        # the old cookie, replayed, is signed out too
        client.cookies.set("sluice_session", str(kept))
        assert client.get("/api/v1/environments").status_code == 401


def test_the_session_cookie_is_httponly_samesite_and_secure_behind_https(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    # the browser at https (a Secure cookie is sent back only over https)
    with _service(world, "https://testserver", ui_url="https://sluice.example.com") as client:
        gone = client.get("/ui/login/github", follow_redirects=False)
        state = parse_qs(urlsplit(gone.headers["location"]).query)["state"][0]
        redirect = parse_qs(urlsplit(gone.headers["location"]).query)["redirect_uri"]
        assert redirect == ["https://sluice.example.com/ui/auth/github/callback"]
        sign_in_cookie = gone.headers["set-cookie"].lower()
        assert "httponly" in sign_in_cookie and "samesite=lax" in sign_in_cookie
        assert "secure" in sign_in_cookie and "path=/ui/auth" in sign_in_cookie
        back = client.get(
            "/ui/auth/github/callback",
            params={"code": ALICE.code, "state": state},
            follow_redirects=False,
        )
        session = [c for c in back.headers.get_list("set-cookie") if "sluice_session=" in c]
        assert len(session) == 1
        flags = session[0].lower()
        assert "httponly" in flags and "samesite=lax" in flags and "secure" in flags
        assert "max-age=28800" in flags and "path=/" in flags


def test_a_gitlab_user_signs_in_and_reads_only_their_forges_repositories(
    world: WebWorld,
) -> None:
    settings = {
        "github_oauth_client_id": None,
        "github_oauth_client_secret": None,
        "gitlab_oauth_client_id": "gl-app",
        "gitlab_oauth_client_secret": CLIENT_SECRET,
        "gitlab_url": GITLAB,
    }
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_gitlab(rsps, GITLAB_ALICE, served=[OWNER])
        with _service(world, **settings) as client:
            page = client.get("/ui/login")
            assert "Sign in with GitLab" in page.text and "GitHub" not in page.text
            assert client.get("/ui/login/github").status_code == 404
            sign_in(client, GITLAB_ALICE, forge="gitlab")
            # the service's repository is GitHub's: a GitLab user's session never reads it
            assert client.get("/api/v1/repositories").json() == []
            assert client.get("/api/v1/pulls/7").status_code == 404
        posted = parse_qs(str(rsps.calls[0].request.body))
        assert posted["grant_type"] == ["authorization_code"]
        assert rsps.calls[1].request.url == f"{GITLAB}/api/v4/user"


def test_gitlab_reads_a_project_the_user_can_see_by_its_path() -> None:
    gitlab = SignIn(
        "gitlab",
        web=GITLAB,
        api=f"{GITLAB}/api/v4",
        client_id="gl-app",
        client_secret=CLIENT_SECRET,
    )
    reader = FakeUser("alice", code="c", token="tok", readable={"data/platform/warehouse"})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_gitlab(rsps, reader, served=["data/platform/warehouse", "data/secret"])
        assert gitlab.can_read("tok", "data/platform/warehouse") is True
        assert gitlab.can_read("tok", "data/secret") is False
        assert rsps.calls[0].request.url == (
            f"{GITLAB}/api/v4/projects/data%2Fplatform%2Fwarehouse"
        )
    url = gitlab.authorize_url(redirect_uri="https://s/ui/auth/gitlab/callback", state="st")
    query = parse_qs(urlsplit(url).query)
    assert query["scope"] == ["read_api"] and query["response_type"] == ["code"]


def test_a_forge_that_cannot_be_asked_is_a_502_not_a_no(world: WebWorld) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, served=[])
        rsps.add(responses.GET, f"https://api.github.com/repos/{OWNER}", status=503)
        with _service(world) as client:
            sign_in(client, ALICE)
            answer = client.get("/api/v1/environments")
            assert answer.status_code == 502
            assert "GitHub" in answer.json()["detail"] and ALICE.token not in answer.text


def test_without_sign_in_or_ui_public_the_refusal_says_what_to_set(world: WebWorld) -> None:
    with _service(world, github_oauth_client_id=None, github_oauth_client_secret=None) as client:
        answer = client.get("/ui/environments")
        assert answer.status_code == 403
        detail = answer.json()["detail"]
        assert "SLUICE_GITHUB_OAUTH_CLIENT_ID" in detail and "SLUICE_UI_PUBLIC" in detail
        assert client.get("/ui/login").status_code == 404  # no sign-in to offer


def test_sign_in_settings_come_in_pairs_and_the_key_is_long_enough(world: WebWorld) -> None:
    base = {"webhook_secret": "s", "workdir": world.root / "work"}
    with pytest.raises(ConfigError, match="SLUICE_GITHUB_OAUTH_CLIENT_SECRET"):
        ServiceSettings(**base, github_oauth_client_id="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least 32"):
        ServiceSettings(**base, ui_session_key="short")  # type: ignore[arg-type]
    settings = ServiceSettings(
        **base,  # type: ignore[arg-type]
        gitlab_oauth_client_id="gl",
        gitlab_oauth_client_secret="gl-secret",
        ui_session_key="k" * 40,
    )
    assert "gl-secret" in settings.secrets() and "k" * 40 in settings.secrets()


def test_github_enterprise_signs_in_on_its_own_host() -> None:
    assert github_web_url("https://api.github.com") == "https://github.com"
    assert github_web_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com"


def test_a_signed_in_persons_pages_and_answers_are_not_cached(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    with _service(world) as client:
        sign_in(client, ALICE)
        for path in ("/ui/environments", "/api/v1/environments", "/api/v1/pulls/7"):
            answer = client.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["cache-control"] == "no-store", path


def test_serve_says_who_sees_the_web_ui(world: WebWorld) -> None:
    base = {"webhook_secret": "s", "workdir": world.root / "work"}
    off = ServiceSettings(**base)  # type: ignore[arg-type]
    assert "web UI:       off (no sign-in: set SLUICE_GITHUB_OAUTH_CLIENT_ID" in off.summary()
    public = ServiceSettings(**base, ui_public=True)  # type: ignore[arg-type]
    assert "web UI:       public (SLUICE_UI_PUBLIC" in public.summary()
    signed = ServiceSettings(
        **base,  # type: ignore[arg-type]
        github_oauth_client_id=CLIENT_ID,
        github_oauth_client_secret=CLIENT_SECRET,
        ui_url="https://u:pw@sluice.example.com",
    )
    text = signed.summary()
    assert "web UI:       sign-in with github at https://***@sluice.example.com" in text
    assert CLIENT_SECRET not in text and "pw@" not in text


def test_a_sign_in_keeps_the_account_id_the_forge_gives() -> None:
    # The gate tells people apart by their account's id (a login can be renamed): the
    # session keeps GitHub's and GitLab's `id` from GET /user; one that is no account id
    # (not a positive integer) is none, and the login decides.
    github = SignIn("github", web="https://github.com", api="https://api.github.com",
                    client_id=CLIENT_ID, client_secret=CLIENT_SECRET)  # fmt: skip
    with responses.RequestsMock() as rsps:
        for body in ({"login": "bobx", "id": 583231}, {"login": "bobx", "id": "583231"},
                     {"login": "bobx", "id": 0}, {"login": "bobx"}):  # fmt: skip
            rsps.get("https://api.github.com/user", json=body)
        assert github.account("tok") == ("bobx", 583231)
        assert github.account("tok") == ("bobx", None)
        assert github.account("tok") == ("bobx", None)
        assert github.login("tok") == "bobx"
    gitlab = SignIn("gitlab", web=GITLAB, api=f"{GITLAB}/api/v4", client_id="gl-app",
                    client_secret=CLIENT_SECRET)  # fmt: skip
    with responses.RequestsMock() as rsps:
        rsps.get(f"{GITLAB}/api/v4/user", json={"username": "bobx", "id": 5, "name": "Bob"})
        assert gitlab.account("tok") == ("bobx", 5)
