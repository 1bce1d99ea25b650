"""Sign-in with a forge (OAuth 2.0's authorization-code flow) for the web UI, and what a
signed-in person may read there: one :class:`SignIn` a forge, its few differences in
:data:`FORGES` (where to send the browser, where to trade the code for a token, who the
token's user is, whether they can read a repository).

GitHub: the GitHub App's OAuth credentials; the user's token (a user-to-server token)
reads a repository when both the user and the App can, which ``GET /repos/{owner}/{name}``
answers (200 with ``permissions.pull``, else 404). GitLab: an application with the
``read_api`` scope; ``GET /projects/{path}`` answers for a member, or anyone for a public
(or, signed in, internal) project. A name bound to a repository's id is asked about by
that id (``GET /repositories/{id}``, ``GET /projects/:id``), and read only under the name
the answer gives it now (:meth:`SignIn.can_read_as`).

Plain HTTP through ``requests`` (which PyGithub and python-gitlab use too): these calls
are made as the user, not as the service, and need nothing of either client. A token
never appears in an error; a failure is a :class:`~sluice.bot.forge.base.ForgeError`
saying what was asked and the status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import requests

from sluice.bot.forge.base import ForgeError

TIMEOUT = 15  # seconds, per request
# What a login may be, on either forge (it is shown and logged, never put in a path).
LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-\[\]]{0,254}")


class SignInRefused(ForgeError):
    """The forge refused the sign-in (a bad or used code, a wrong secret): the person
    starts again; nothing to retry."""


@dataclass(frozen=True)
class Forge:
    """Where a forge's OAuth and API live, relative to its two base URLs."""

    name: str
    label: str
    authorize: str  # on the web base
    token: str  # on the web base
    user: str  # on the API base
    login_key: str  # the user's login in ``user``'s answer
    scope: str


FORGES = {
    "github": Forge(
        "github",
        "GitHub",
        authorize="/login/oauth/authorize",
        token="/login/oauth/access_token",
        user="/user",
        login_key="login",
        scope="",  # a GitHub App's user token has the App's permissions, no scope
    ),
    "gitlab": Forge(
        "gitlab",
        "GitLab",
        authorize="/oauth/authorize",
        token="/oauth/token",
        user="/user",
        login_key="username",
        scope="read_api",
    ),
}


def github_web_url(api_url: str) -> str:
    """GitHub's web address from its API's: github.com for api.github.com, else
    Enterprise's host (``https://HOST/api/v3`` -> ``https://HOST``)."""
    api_url = api_url.rstrip("/")
    if api_url == "https://api.github.com":
        return "https://github.com"
    return api_url.removesuffix("/api/v3")


class SignIn:
    """One forge's sign-in, with the service's OAuth application (``client_id``,
    ``client_secret``): ``web`` is where people sign in, ``api`` where the user's token is
    used (GitHub: ``https://github.com`` and ``https://api.github.com``; GitLab: its URL
    and ``<URL>/api/v4``)."""

    def __init__(
        self, forge: str, *, web: str, api: str, client_id: str, client_secret: str
    ) -> None:
        self.forge = FORGES[forge]
        self.web, self.api = web.rstrip("/"), api.rstrip("/")
        self._client_id, self._client_secret = client_id, client_secret

    @property
    def name(self) -> str:
        return self.forge.name

    @property
    def label(self) -> str:
        return self.forge.label

    def authorize_url(self, *, redirect_uri: str, state: str) -> str:
        """Where the browser goes to sign in; the forge sends it back to ``redirect_uri``
        with a code and ``state``."""
        query = {
            "client_id": self._client_id,
            "redirect_uri": redirect_uri,
            "response_type": "code",
            "state": state,
        }
        if self.forge.scope:
            query["scope"] = self.forge.scope
        return f"{self.web}{self.forge.authorize}?{urlencode(query)}"

    def exchange(self, code: str, *, redirect_uri: str) -> str:
        """The user's access token for ``code``.

        Raises:
            SignInRefused: the forge refused the code.
            ForgeError: the forge could not be asked.
        """
        data = {
            "client_id": self._client_id,
            "client_secret": self._client_secret,
            "code": code,
            "redirect_uri": redirect_uri,
            "grant_type": "authorization_code",
        }
        answer = self._call("post", f"{self.web}{self.forge.token}", "trading the code", data=data)
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            # GitHub answers a refused code with 200 and {"error": "bad_verification_code"}
            error = answer.get("error") if isinstance(answer, dict) else None
            known = isinstance(error, str) and re.fullmatch(r"[a-z_]{1,60}", error)
            raise SignInRefused(
                f"{self.label} refused the sign-in{f' ({error})' if known else ''}",
                hint="sign in again; if it keeps failing, check the OAuth application's "
                "client id, secret and callback URL",
            )
        return token

    def login(self, token: str) -> str:
        """The token's user's login.

        Raises:
            SignInRefused: the token is not accepted, or names no login.
            ForgeError: the forge could not be asked.
        """
        return self.account(token)[0]

    def account(self, token: str) -> tuple[str, int | None]:
        """The token's user: their login, and their account's id (both forges' ``id``),
        which a rename of the login does not change (the gate tells people apart by it);
        None where the answer holds no positive integer id.

        Raises:
            SignInRefused: the token is not accepted, or names no login.
            ForgeError: the forge could not be asked.
        """
        answer = self._call("get", f"{self.api}{self.forge.user}", "reading the user", token=token)
        login = answer.get(self.forge.login_key) if isinstance(answer, dict) else None
        if not isinstance(login, str) or not LOGIN.fullmatch(login):
            raise SignInRefused(f"{self.label} named no user for this sign-in")
        uid = answer.get("id") if isinstance(answer, dict) else None
        ok = isinstance(uid, int) and not isinstance(uid, bool) and 0 < uid < 2**63
        return login, uid if ok else None

    def can_read(self, token: str, repo: str) -> bool:
        """Whether the token's user can read ``repo`` (``owner/name``, GitLab's
        ``group/subgroup/name``): the forge's answer; 401, 403 and 404 are no.

        Raises:
            ForgeError: the forge could not be asked (a 5xx, the network).
        """
        if self.forge.name == "github":
            url = f"{self.api}/repos/{quote(repo, safe='/')}"
        else:
            url = f"{self.api}/projects/{quote(repo, safe='')}"
        try:
            answer = self._call("get", url, f"reading {repo}", token=token)
        except SignInRefused:
            return False
        if not isinstance(answer, dict):
            return False
        return self._readable(answer)

    def can_read_as(self, token: str, repo_id: int, repo: str) -> bool:
        """Whether the token's user can read the repository of the forge's id ``repo_id``
        (GitHub ``GET /repositories/{id}``, GitLab ``GET /projects/:id``) and it is named
        ``repo`` now (any case): a name bound to that id is read only while it is that
        repository's, not once a rename left it to whoever holds it next.

        Raises:
            ForgeError: the forge could not be asked (a 5xx, the network).
        """
        if self.forge.name == "github":
            url, name_key = f"{self.api}/repositories/{int(repo_id)}", "full_name"
        else:
            url, name_key = f"{self.api}/projects/{int(repo_id)}", "path_with_namespace"
        try:
            answer = self._call("get", url, f"reading repository id {repo_id}", token=token)
        except SignInRefused:
            return False
        if not isinstance(answer, dict) or answer.get("id") != repo_id:
            return False
        name = answer.get(name_key)
        if not isinstance(name, str) or name.casefold() != repo.casefold():
            return False
        return self._readable(answer)

    def _readable(self, answer: dict[str, Any]) -> bool:
        """A repository's answer to the user's token says they may read it."""
        if self.forge.name == "github":
            permissions = answer.get("permissions")
            # a user's token is always answered with them; without, the 200 says yes
            return not isinstance(permissions, dict) or bool(permissions.get("pull"))
        return True

    def _call(
        self,
        method: str,
        url: str,
        what: str,
        *,
        token: str | None = None,
        data: dict[str, str] | None = None,
    ) -> Any:
        """The JSON answer of one request.

        Raises:
            SignInRefused: 401, 403 or 404 (the forge says no).
            ForgeError: any other status, the network, an answer that is not JSON.
        """
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        try:
            # a new connection a call (requests' Session is not for threads; these are rare)
            response = requests.request(
                method, url, headers=headers, data=data, timeout=TIMEOUT, allow_redirects=False
            )
        except requests.RequestException as error:
            # requests' messages hold URLs and may hold the code: keep only the kind.
            raise ForgeError(
                f"{self.label}: {what} failed: {type(error).__name__} (network error)"
            ) from None
        if response.status_code in (401, 403, 404):
            raise SignInRefused(f"{self.label}: {what} failed: {response.status_code}")
        if response.status_code != 200:
            raise ForgeError(f"{self.label}: {what} failed: {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise ForgeError(f"{self.label}: {what} failed: the answer is not JSON") from None
