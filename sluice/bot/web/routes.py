"""What the UI adds to an app (the service's, :mod:`sluice.bot.entry.app`, or ``sluice
ui``'s, :mod:`sluice.bot.web.standalone`): the API under ``/api/v1``, the pages under
``/ui`` and their files (stylesheet, script, icon: Sluice's own, no CDN) under
``/ui/static``; with sign-in (:class:`~sluice.bot.web.access.SignedIn`), its pages
(:mod:`sluice.bot.web.signin`) and the answer to a request without a session; with a
``submit`` (the service's intake), the actions (:mod:`sluice.bot.web.actions`, and the
drift repair's, :mod:`sluice.bot.web.repair`: refused but to a signed-in person)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from sluice.bot.web import actions, api, pages, repair, signin
from sluice.bot.web.access import SignedIn, SignInRequired
from sluice.bot.web.site import Site

STATIC = Path(__file__).parent / "static"


def mount(
    app: FastAPI,
    site: Site,
    *,
    ui_url: str | None = None,
    submit: actions.Submit | None = None,
) -> None:
    """Serve ``site`` on ``app``; ``ui_url`` is where people open it (sign-in's
    callbacks), else each request's own address; ``submit`` queues the actions'
    deliveries (None: no actions, as ``sluice ui`` has no queue)."""
    app.include_router(api.router(site))
    if isinstance(site.access, SignedIn):
        app.include_router(signin.router(site.access, ui_url=ui_url))
        app.add_exception_handler(SignInRequired, signin.sign_in_required)
    if submit is not None:
        app.include_router(actions.router(site, submit))
        app.include_router(repair.router(site, submit))
    app.include_router(pages.router(site, actions=submit is not None))
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
