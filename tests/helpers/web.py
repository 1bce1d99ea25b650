"""A repository for the web UI's tests: prod built from the example project on the
scripted warehouse (no Spark), pull request 7 opened and built by the real flow on an
in-memory GitHub (as tests/bot/flow/test_scripted_flows.py does), and the UI's sites
over its state: the service's (``create_app``) and ``sluice ui``'s (:func:`ui_site`).

Hostile text rides along: the PR's title, a model's owner and description, and a string
literal in the PR's SQL (so in its diff) are ``<script>`` tags, which every page must
show escaped.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import ScheduledRunEvent
from sluice.bot.flow import dispatch
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.web.access import Access, Everyone
from sluice.bot.web.pulls import MemoryPulls
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import Site
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Script, Warehouse
from sluice.core.state import open_state
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, opened

HEAD = "a1" * 20
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
TITLE = '<script>alert("title")</script> Drop returned orders'
SQL_MARK = "<script>alert(2)</script>"
OWNER_MARK = "<script>alert(1)</script>"
HOSTILE_MODEL = (
    "MODEL (\n  name jaffle.hostile,\n  kind FULL,\n"
    f"  description '{OWNER_MARK} described'\n);\n"
    f"SELECT '{OWNER_MARK}' AS marker\n"
)
MARKS = ("<script>",)
ORDERS = (
    "  ON o.order_id = p.order_id",
    f"  ON o.order_id = p.order_id\nWHERE o.status <> '{SQL_MARK}'",
)


@dataclass
class WebWorld:
    bot: Bot
    warehouse: Warehouse
    github: MemoryForge
    root: Path

    @property
    def logs(self) -> Path:
        """Where the service's jobs write their logs (flow/checkout.py's folder)."""
        return (self.root / "work" / "logs").resolve()

    def settings(self) -> ServiceSettings:
        return ServiceSettings(
            webhook_secret="s3cret",
            github_token="ghp_webToken",
            workdir=self.root / "work",
            database_url=self.bot.url,
            ui_public=True,
        )  # type: ignore[arg-type]

    def service(self, *, public: bool = True):  # type: ignore[no-untyped-def]
        settings = self.settings().model_copy(update={"ui_public": public})
        return create_app(settings, start_workers=False)

    def ui_site(self, access: Access | None = None) -> Site:
        """``sluice ui``'s site over this state: titles and checks from the forge; seen
        by everyone, or as ``access`` says."""
        pulls = MemoryPulls(self.github)
        return Site(
            lambda: [KEY],
            lambda repo: Reader(
                repo, self.bot.url, logs=self.logs, pulls=pulls, queue=False, clock=lambda: NOW
            ),
            access if access is not None else Everyone(),
        )

    def close(self) -> None:
        self.bot.close()


ORDER_DAYS = (
    "MODEL (\n  name jaffle.order_days,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column order_date),\n"
    "  start '2026-12-01',\n  grain [order_date]\n);\n"
    "SELECT order_date, COUNT(*) AS orders FROM jaffle.stg_orders\n"
    "WHERE order_date BETWEEN @start_date AND @end_date GROUP BY order_date\n"
)
"""A daily model with no end (``models=`` of :func:`web_world`): a scheduled run after
prod was built has its days due."""


def web_world(
    root: Path, *, config: str = CONFIG, models: dict[str, str] | None = None
) -> WebWorld:
    """Prod built at ``C`` (with ``jaffle.hostile`` and ``models``: file -> text under
    models/), PR 7 (``TITLE``) built at ``HEAD``; ``config`` the config.yaml of both (the
    prod branch's: its ``sluice:`` is in force)."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    bot = Bot(root, github, runner_for=warehouse.runner)
    extra = {"hostile.sql": HOSTILE_MODEL, **(models or {})}
    bot.commit(C, config, models=extra)
    github.refs["main"] = C
    project = load_project(bot.root / f"tree-{C[:6]}", use_cache=False)
    store = open_state(bot.url)
    try:
        plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
        # promoted from C: its plan records it (prod's scheduled runs load C's project)
        workflow.apply_plan(project, store, plan, warehouse.runner(), now=NOW, commit=C)
    finally:
        store.close()
    warehouse.script = Script(rows={"jaffle.orders": 99})
    src = bot.commit(HEAD, config, models=extra, parents=(C,))
    orders = src / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace(*ORDERS))
    github.commit_folder(HEAD, src, parents=(C,))
    github.open_pull(7, head_sha=HEAD, base="main", author="alice", title=TITLE)
    bot.deliver("pull_request", opened(7, HEAD))
    return WebWorld(bot, warehouse, github, root)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright (no browser download: installed as
    scripts/ensure-mermaid.sh does). Skipped without them locally, never under CI."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the dev lock installs it
        if os.environ.get("CI") == "true":
            pytest.fail("playwright is not installed: install requirements/dev.lock")
        pytest.skip("playwright is not installed")
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: run scripts/ensure-mermaid.sh")
        pytest.skip("chromium is not installed: run scripts/ensure-mermaid.sh")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by a real uvicorn on 127.0.0.1 (a free port, in a thread): its origin."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def scheduled_run(world: WebWorld, at: int) -> None:
    """The service's scheduled run of prod at ``at``, through the real flow (the dispatch
    of a :class:`ScheduledRunEvent`, its job clock reading ``at``) on the scripted
    warehouse; its error raised as the worker would see it."""
    deps = replace(world.bot.deps, clock=lambda: at)
    dispatch.handle(deps, ScheduledRunEvent("github", OWNER, None))


class Watched:
    """A page whose console errors, uncaught errors and dialogs (an ``alert`` a hostile
    text would open) are kept."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page()
        self.problems: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"error: {e}"))
        self.page.on(
            "dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss())
        )

    def close(self) -> None:
        self.page.close()
