"""What the UI adds to an app (the service's, :mod:`sluice.bot.entry.app`, or ``sluice
ui``'s, :mod:`sluice.bot.web.standalone`): the API under ``/api/v1``."""

from __future__ import annotations

from fastapi import FastAPI

from sluice.bot.web import api
from sluice.bot.web.site import Site


def mount(app: FastAPI, site: Site) -> None:
    """Serve ``site`` on ``app``."""
    app.include_router(api.router(site))
