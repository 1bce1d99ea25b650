"""What the UI adds to an app (the service's, :mod:`sluice.bot.entry.app`, or ``sluice
ui``'s, :mod:`sluice.bot.web.standalone`): the API under ``/api/v1``, the pages under
``/ui`` and their files (stylesheet, script, icon: Sluice's own, no CDN) under
``/ui/static``."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from sluice.bot.web import api, pages
from sluice.bot.web.site import Site

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI, site: Site) -> None:
    """Serve ``site`` on ``app``."""
    app.include_router(api.router(site))
    app.include_router(pages.router(site))
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
