"""The web UI's actions on the real service (issue 44): ``create_app`` with GitHub sign-in
(faked at the HTTP wire by :mod:`tests.helpers.oauth`) over a :class:`WebWorld`, a page's
forms read as a browser reads them, and the queue's jobs run as the service's worker runs
them (claimed, the event read back, :func:`sluice.bot.flow.dispatch.handle` on the
world's flow: the in-memory GitHub and the scripted warehouse)."""

from __future__ import annotations

import time
from html.parser import HTMLParser
from typing import Any

from fastapi.testclient import TestClient

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import event_from_json
from sluice.bot.flow import dispatch
from sluice.bot.queue.schema import JobRecord
from sluice.bot.queue.store import JobQueue
from tests.helpers.oauth import CLIENT_ID, CLIENT_SECRET
from tests.helpers.web import WebWorld


def service(world: WebWorld, **settings: Any) -> TestClient:
    """The service over ``world``'s state, GitHub sign-in configured (``settings`` change
    any), no worker: :func:`run_queued` runs what was queued."""
    from sluice.bot.entry.app import create_app

    values = {
        "github_oauth_client_id": CLIENT_ID,
        "github_oauth_client_secret": CLIENT_SECRET,
        "ui_public": False,
        **settings,
    }
    made = ServiceSettings(**{**world.settings().model_dump(), **values})
    return TestClient(create_app(made, start_workers=False))


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, tuple[str, dict[str, str]]] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form" and "data-testid" in found:
            self._current = found["data-testid"]
            self.forms[self._current] = (found.get("action", ""), {})
        elif tag == "input" and self._current is not None and "name" in found:
            self.forms[self._current][1][found["name"]] = found.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def forms(html: str) -> dict[str, tuple[str, dict[str, str]]]:
    """A page's forms by ``data-testid``: (action, fields as the page fills them)."""
    parser = _Forms()
    parser.feed(html)
    return parser.forms


def jobs(world: WebWorld) -> list[JobRecord]:
    """Every job of the world's queue, newest first."""
    queue = JobQueue(world.bot.url)
    try:
        return queue.jobs(limit=1000)
    finally:
        queue.close()


def run_queued(world: WebWorld) -> int:
    """Run every queued job as a worker does, in the queue's order; how many ran."""
    queue = JobQueue(world.bot.url)
    ran = 0
    try:
        while (job := queue.claim("test-worker", time.time())) is not None:
            dispatch.handle(world.bot.deps, event_from_json(job.payload))
            queue.finish(job.id, "test-worker", now=time.time())
            ran += 1
    finally:
        queue.close()
    return ran
