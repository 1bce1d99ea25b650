"""An app serving only the UI (``sluice ui``, and the browser tests): the pages, the API
and their files over one :class:`~sluice.bot.web.site.Site`, no webhook, no worker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from sluice import __version__
from sluice.bot.web.routes import mount
from sluice.bot.web.site import Site


def ui_app(site: Site) -> FastAPI:
    """The UI of ``site``; ``/`` leads to its first page. The site is closed with the app."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            site.close()

    app = FastAPI(title="Sluice UI", version=__version__, lifespan=lifespan)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/", 303)

    mount(app, site)
    return app
