"""Who may see a repository: the one place every page and API answer asks
(:meth:`sluice.bot.web.site.Site.open`). Today: everyone (``sluice ui`` on loopback, or a
service with ``SLUICE_UI_PUBLIC``) or no one; sign-in with the forge will add a policy
that asks the forge whether the signed-in user can read the repository."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import Request


class Access(Protocol):
    """Whether the request's user may read ``repo`` (``forge:owner/name``)."""

    def may_read(self, request: Request, repo: str) -> bool: ...

    def may_enter(self, request: Request) -> bool:
        """Whether the request may read anything at all (False: 403, :attr:`refusal`),
        asked before the site looks up what it serves."""
        ...

    @property
    def refusal(self) -> str:
        """Why a refused request is refused (403's message)."""
        ...


class Everyone:
    """Every request may read every repository the site serves."""

    refusal = ""

    def may_read(self, request: Request, repo: str) -> bool:
        return True

    def may_enter(self, request: Request) -> bool:
        return True


class NoOne:
    """No request may read anything: the service's default until sign-in exists."""

    refusal = (
        "the web UI needs sign-in, which this Sluice does not have yet: set "
        "SLUICE_UI_PUBLIC=true to show it to anyone who can reach this service"
    )

    def may_read(self, request: Request, repo: str) -> bool:
        return False

    def may_enter(self, request: Request) -> bool:
        return False
