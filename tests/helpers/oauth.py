"""A fake GitHub and GitLab OAuth provider at the HTTP wire (``responses``: the real
``requests`` calls of :mod:`sluice.bot.forge.signin` are answered), and a browser's
sign-in through the web UI's pages with a TestClient (the forge's consent page skipped:
its redirect back is followed by hand)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import responses
from fastapi.testclient import TestClient
from starlette.testclient import TestClient as StarletteClient

from sluice.bot.forge.memory import account_id_of
from sluice.bot.forge.signin import SignIn

GITHUB_WEB = "https://github.com"
GITHUB_API = "https://api.github.com"
GITLAB = "https://gitlab.example.com"
CLIENT_ID = "Iv1.sluice0client"
CLIENT_SECRET = "oauth-client-s3cret"


@dataclass
class FakeUser:
    """A forge user: their login, the token the forge hands out for ``code``, and the
    repositories they can read."""

    login: str
    code: str
    token: str
    readable: Collection[str] = ()


def github_sign_in() -> SignIn:
    return SignIn(
        "github", web=GITHUB_WEB, api=GITHUB_API, client_id=CLIENT_ID, client_secret=CLIENT_SECRET
    )


def fake_github(
    rsps: responses.RequestsMock,
    *users: FakeUser,
    served: Collection[str],
    ids: Mapping[int, str] | None = None,
) -> None:
    """GitHub's token endpoint, ``/user`` and ``/repos/{repo}`` of every ``served``
    repository, answering as each of ``users`` by their code and token; with ``ids`` (a
    repository's id -> its name now), ``/repositories/{id}`` of each too, to whoever can
    read that name (the web UI asks by id about a name bound to one)."""
    by_code = {u.code: u for u in users}
    by_token = {f"Bearer {u.token}": u for u in users}

    def token(request):  # type: ignore[no-untyped-def]
        form = parse_qs(str(request.body))
        if form.get("client_id") != [CLIENT_ID] or form.get("client_secret") != [CLIENT_SECRET]:
            return 200, {}, '{"error": "incorrect_client_credentials"}'
        user = by_code.get(form.get("code", [""])[0])
        if user is None:
            return 200, {}, '{"error": "bad_verification_code"}'
        return 200, {}, f'{{"access_token": "{user.token}", "token_type": "bearer", "scope": ""}}'

    def user(request):  # type: ignore[no-untyped-def]
        found = by_token.get(request.headers.get("Authorization", ""))
        if found is None:
            return 401, {}, '{"message": "Bad credentials"}'
        # Each person their own account id (the in-memory forge's for their login): the
        # gate tells people apart by it.
        return 200, {}, json.dumps({"login": found.login, "id": account_id_of(found.login)})

    def repo(name: str):  # type: ignore[no-untyped-def]
        def answer(request):  # type: ignore[no-untyped-def]
            found = by_token.get(request.headers.get("Authorization", ""))
            if found is None or name not in found.readable:
                return 404, {}, '{"message": "Not Found"}'
            return 200, {}, f'{{"full_name": "{name}", "permissions": {{"pull": true}}}}'

        return answer

    def by_id(repo_id: int, name: str):  # type: ignore[no-untyped-def]
        def answer(request):  # type: ignore[no-untyped-def]
            found = by_token.get(request.headers.get("Authorization", ""))
            if found is None or name not in found.readable:
                return 404, {}, '{"message": "Not Found"}'
            body = {"id": repo_id, "full_name": name, "permissions": {"pull": True}}
            return 200, {}, json.dumps(body)

        return answer

    rsps.add_callback(responses.POST, f"{GITHUB_WEB}/login/oauth/access_token", callback=token)
    rsps.add_callback(responses.GET, f"{GITHUB_API}/user", callback=user)
    for name in served:
        rsps.add_callback(responses.GET, f"{GITHUB_API}/repos/{name}", callback=repo(name))
    for repo_id, name in (ids or {}).items():
        url = f"{GITHUB_API}/repositories/{repo_id}"
        rsps.add_callback(responses.GET, url, callback=by_id(repo_id, name))


def fake_gitlab(
    rsps: responses.RequestsMock,
    *users: FakeUser,
    served: Collection[str],
    ids: Mapping[int, str] | None = None,
) -> None:
    """GitLab's ``/oauth/token``, ``/api/v4/user`` and ``/api/v4/projects/{path}``; with
    ``ids`` (a project's id -> its path now), ``/api/v4/projects/{id}`` of each too."""
    by_code = {u.code: u for u in users}
    by_token = {f"Bearer {u.token}": u for u in users}

    def token(request):  # type: ignore[no-untyped-def]
        form = parse_qs(str(request.body))
        if form.get("grant_type") != ["authorization_code"] or form.get("client_secret") != [
            CLIENT_SECRET
        ]:
            return 401, {}, '{"error": "invalid_client"}'
        user = by_code.get(form.get("code", [""])[0])
        if user is None:
            return 400, {}, '{"error": "invalid_grant"}'
        return 200, {}, f'{{"access_token": "{user.token}", "token_type": "Bearer"}}'

    def user(request):  # type: ignore[no-untyped-def]
        found = by_token.get(request.headers.get("Authorization", ""))
        if found is None:
            return 401, {}, '{"message": "401 Unauthorized"}'
        return 200, {}, json.dumps({"username": found.login, "id": account_id_of(found.login)})

    def project(name: str):  # type: ignore[no-untyped-def]
        def answer(request):  # type: ignore[no-untyped-def]
            found = by_token.get(request.headers.get("Authorization", ""))
            if found is None or name not in found.readable:
                return 404, {}, '{"message": "404 Project Not Found"}'
            return 200, {}, f'{{"path_with_namespace": "{name}"}}'

        return answer

    def by_id(repo_id: int, name: str):  # type: ignore[no-untyped-def]
        def answer(request):  # type: ignore[no-untyped-def]
            found = by_token.get(request.headers.get("Authorization", ""))
            if found is None or name not in found.readable:
                return 404, {}, '{"message": "404 Project Not Found"}'
            return 200, {}, json.dumps({"id": repo_id, "path_with_namespace": name})

        return answer

    rsps.add_callback(responses.POST, f"{GITLAB}/oauth/token", callback=token)
    rsps.add_callback(responses.GET, f"{GITLAB}/api/v4/user", callback=user)
    for name in served:
        url = f"{GITLAB}/api/v4/projects/{quote(name, safe='')}"
        rsps.add_callback(responses.GET, url, callback=project(name))
    for repo_id, name in (ids or {}).items():
        rsps.add_callback(
            responses.GET, f"{GITLAB}/api/v4/projects/{repo_id}", callback=by_id(repo_id, name)
        )


def start_sign_in(client: StarletteClient, forge: str = "github", then: str = "/ui/") -> str:
    """Open ``/ui/login/{forge}``: the ``state`` the forge was sent (its redirect's)."""
    answer = client.get(f"/ui/login/{forge}", params={"next": then}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    return query["state"][0]


def sign_in(client: TestClient, user: FakeUser, forge: str = "github", then: str = "/ui/") -> str:
    """Sign ``user`` in as a browser would: to the forge and back with their code; where
    the service then sends the browser."""
    state = start_sign_in(client, forge, then)
    back = client.get(
        f"/ui/auth/{forge}/callback",
        params={"code": user.code, "state": state},
        follow_redirects=False,
    )
    assert back.status_code == 303, back.text
    return back.headers["location"]


def consent_page(
    user: FakeUser, seen: list[dict[str, list[str]]] | None = None
) -> Callable[[Any], None]:
    """A Playwright route handler standing for GitHub's consent page for ``user``: its
    *Authorize* link returns the browser to the callback the service asked for, with the
    user's code and the service's state (each query the page got appended to ``seen``)."""

    def consent(route: Any) -> None:
        query = parse_qs(urlsplit(route.request.url).query)
        if seen is not None:
            seen.append(query)
        back = (
            query["redirect_uri"][0]
            + "?"
            + urlencode({"code": user.code, "state": query["state"][0]})
        )
        route.fulfill(
            status=200,
            content_type="text/html",
            body=f'<!doctype html><title>GitHub</title><a href="{escape(back)}">Authorize</a>',
        )

    return consent
