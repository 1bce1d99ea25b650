"""Approving from the web UI as a person does (issue 44): Debian's Chromium (Playwright, no
browser download) signs in through a GitHub faked at its wires (the consent page by
Playwright's routing, the service's calls by ``responses``), on the UI served by a real
uvicorn on loopback with the intake and a worker of the queue running the real flow on the
in-memory GitHub. The author's own approval is queued, run, and does not count (the check
says so on the forge and on the page); the gate's approver's passes the check. No console
error. Slow: it starts Chromium."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
import responses
from fastapi import FastAPI

from sluice.bot.flow import dispatch
from sluice.bot.intake.group_commit import Intake
from sluice.bot.queue.store import Delivery, JobQueue
from sluice.bot.queue.worker import Worker
from sluice.bot.web.access import SignedIn
from sluice.bot.web.pulls import MemoryPulls
from sluice.bot.web.reader import Reader
from sluice.bot.web.routes import mount
from sluice.bot.web.session import Sessions
from sluice.bot.web.site import Site
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, consent_page, fake_github, github_sign_in
from tests.helpers.web import HEAD, OWNER, WebWorld, chromium, served, web_world

pytestmark = pytest.mark.slow

ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
BOB = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("browser-actions"))
    yield made
    made.close()


def _app(world: WebWorld) -> FastAPI:
    """The UI of ``world`` with sign-in, its actions handed to a real intake and run by a
    real worker of the queue (the flow on the world's in-memory GitHub)."""
    access = SignedIn(Sessions(b"browser-actions-key" * 3), {"github": github_sign_in()})
    pulls = MemoryPulls(world.github)  # titles and checks read back from the forge
    site = Site(
        lambda: [f"github:{OWNER}"],
        lambda repo: Reader(repo, world.bot.url, logs=world.logs, pulls=pulls),
        access,
    )
    queue = JobQueue(world.bot.url)
    worker = Worker(queue, **dispatch.bound(world.bot.deps), poll_seconds=0.1)
    running: dict[str, Intake] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        intake = running["intake"] = Intake(queue)
        intake.start()
        worker.start()
        try:
            yield
        finally:
            await intake.stop()
            worker.stop(timeout=30)
            queue.close()
            site.close()

    async def submit(delivery: Delivery) -> bool:
        return await running["intake"].accept(delivery)

    app = FastAPI(lifespan=lifespan)
    mount(app, site, submit=submit)
    return app


@pytest.fixture(scope="module")
def origin(world: WebWorld) -> Iterator[str]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_passthru("http://127.0.0.1")
        fake_github(rsps, ALICE, BOB, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
        with served(_app(world)) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def _approve_as(browser: Any, origin: str, user: FakeUser, problems: list[str]) -> Any:
    """``user`` signs in, opens pull request 7 and clicks *Approve this plan*: the page
    after (its context left open, for the caller to close)."""
    context = browser.new_context()
    context.route("https://github.com/**", consent_page(user))
    page = context.new_page()
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{origin}/ui/pulls/7?repo=github%3A{OWNER.replace('/', '%2F')}")
    page.get_by_test_id("sign-in-github").click()
    page.get_by_text("Authorize").click()
    page.wait_for_url(re.compile(r".*/ui/pulls/7\?repo=.*"))
    page.get_by_role("button", name=re.compile("^Approve this plan")).click()
    page.wait_for_url(re.compile(r".*/ui/pulls/7\?repo=.*"))
    flash = page.get_by_test_id("flash").inner_text()
    assert "was queued as job" in flash, flash
    return page


def _check_when(page: Any, done: Any, seconds: float = 60) -> str:
    """The approval check's summary on the page, reloaded until ``done(summary)``."""
    deadline = time.monotonic() + seconds
    while True:
        checks = page.get_by_test_id("checks").text_content() or ""
        if done(checks) or time.monotonic() > deadline:
            return checks
        time.sleep(0.3)
        page.reload()


def test_the_author_cannot_approve_their_own_plan_the_approver_can(
    browser: Any, origin: str, world: WebWorld
) -> None:
    problems: list[str] = []
    own = "@alice's own approval does not count (PR author)."
    page = _approve_as(browser, origin, ALICE, problems)
    try:
        shown = _check_when(page, lambda text: own in text)
        assert own in shown, shown
        assert world.bot.approval(HEAD).conclusion == "failure"
        page.reload()
        assert page.get_by_test_id("flash").count() == 0  # shown once, gone on reload
    finally:
        page.context.close()

    page = _approve_as(browser, origin, BOB, problems)
    try:
        page.get_by_role("link", name="Open the job").click()
        page.wait_for_url(re.compile(r".*/ui/jobs\?repo=.*#job-\d+"))
        job = urlsplit(page.url).fragment
        assert page.locator(f"#{job}").count() == 1
        page.go_back()
        shown = _check_when(page, lambda text: "Approved by @bob" in text)
        assert "Approved by @bob (1 of 1 required)." in shown, shown
        assert world.bot.approval(HEAD).conclusion == "success"
        assert "success" in (page.get_by_test_id("approval").inner_html() or "")
    finally:
        page.context.close()
    assert not problems, problems
