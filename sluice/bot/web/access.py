"""Who may see a repository: the one place every page and API answer asks
(:meth:`sluice.bot.web.site.Site.open`). Everyone (``sluice ui`` on loopback, or a service
with ``SLUICE_UI_PUBLIC``), no one (a service with neither sign-in nor that setting), or
:class:`SignedIn`: a person signed in with a forge sees the repositories that forge says
they can read, asked with their own token and kept for :data:`ACCESS_SECONDS` per
session."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from fastapi import HTTPException
from starlette.requests import Request

from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.signin import SignIn
from sluice.bot.web.session import Sessions

ACCESS_SECONDS = 120.0  # how long a forge's "may read" answer is kept, per session


@dataclass(frozen=True)
class Viewer:
    """Who is signed in, for the pages: forge, login and the session's CSRF token."""

    forge: str
    login: str
    csrf: str


class SignInRequired(HTTPException):
    """No session: a page sends the browser to sign in, the API answers 401."""


class Access(Protocol):
    """Whether the request's user may read ``repo`` (``forge:owner/name``)."""

    def may_read(self, request: Request, repo: str) -> bool: ...

    def may_enter(self, request: Request) -> bool:
        """Whether the request may read anything at all (False: :meth:`refused`), asked
        before the site looks up what it serves."""
        ...

    def refused(self) -> HTTPException:
        """What a request that may not enter is answered."""
        ...

    def viewer(self, request: Request) -> Viewer | None:
        """Who is signed in (None: nobody, or no sign-in here)."""
        ...


class Everyone:
    """Every request may read every repository the site serves."""

    def may_read(self, request: Request, repo: str) -> bool:
        return True

    def may_enter(self, request: Request) -> bool:
        return True

    def refused(self) -> HTTPException:  # pragma: no cover - never refuses
        return HTTPException(403)

    def viewer(self, request: Request) -> Viewer | None:
        return None


class NoOne:
    """No request may read anything: a service with neither sign-in nor SLUICE_UI_PUBLIC."""

    refusal = (
        "the web UI needs sign-in, which is not configured: set "
        "SLUICE_GITHUB_OAUTH_CLIENT_ID and SLUICE_GITHUB_OAUTH_CLIENT_SECRET (the GitHub "
        "App's OAuth credentials) or SLUICE_GITLAB_OAUTH_CLIENT_ID and "
        "SLUICE_GITLAB_OAUTH_CLIENT_SECRET (a GitLab application's) so people sign in and "
        "see the repositories they can read, or SLUICE_UI_PUBLIC=true to show it to anyone "
        "who can reach this service"
    )

    def may_read(self, request: Request, repo: str) -> bool:
        return False

    def may_enter(self, request: Request) -> bool:
        return False

    def refused(self) -> HTTPException:
        return HTTPException(403, self.refusal)

    def viewer(self, request: Request) -> Viewer | None:
        return None


class SignedIn:
    """A signed-in person (``sessions``) reads a repository of their own forge when that
    forge (``sign_ins``, by name) says their token can read it. A name bound to a forge's
    repository id (``binding``: :meth:`sluice.bot.flow.ledger.Ledger.name_binding`) is
    then asked about by that id too, and read only while the forge says that repository
    has the name now: after a rename, whoever holds the old name is shown nothing of the
    renamed repository, even before its next delivery moves it to its new name."""

    def __init__(
        self,
        sessions: Sessions,
        sign_ins: Mapping[str, SignIn],
        *,
        binding: Callable[[str], tuple[str, int] | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessions, self.sign_ins, self._clock = sessions, sign_ins, clock
        self.binding = binding

    def may_enter(self, request: Request) -> bool:
        return self.sessions.current(request) is not None

    def refused(self) -> HTTPException:
        return SignInRequired(401, "sign in to see this: open /ui/login")

    def viewer(self, request: Request) -> Viewer | None:
        session = self.sessions.current(request)
        if session is None:
            return None
        return Viewer(self.sign_ins[session.forge].label, session.login, session.csrf)

    def may_read(self, request: Request, repo: str) -> bool:
        """The forge's answer for the session's user, kept :data:`ACCESS_SECONDS` for the
        name's binding it was asked under (read each time: a name that changed hands,
        :meth:`~sluice.bot.flow.ledger.Ledger.take_name`, is asked about again, by its new
        holder's id, never answered for the old one's).

        Raises:
            HTTPException: 502 when the forge could not be asked (not kept: asked again).
        """
        session = self.sessions.current(request)
        forge, _, name = repo.partition(":")
        if session is None or forge != session.forge or forge not in self.sign_ins:
            return False
        now = self._clock()
        bound = self.binding(repo) if self.binding is not None else None
        known = session.readable.get((repo, bound))
        if known is not None and now - known[1] < ACCESS_SECONDS:
            return known[0]
        sign_in = self.sign_ins[forge]
        try:
            answer = sign_in.can_read(session.token, name)
            if answer and bound is not None:  # and the repository bound to it still has it
                answer = sign_in.can_read_as(session.token, bound[1], name)
        except ForgeError as error:
            raise HTTPException(502, f"{error.message}; try again shortly") from None
        session.readable[(repo, bound)] = (answer, now)
        return answer
