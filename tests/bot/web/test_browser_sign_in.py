"""Signing in as a person does (issue 44): Debian's Chromium (Playwright, no browser
download) on the UI served by a real uvicorn on loopback with sign-in through GitHub. The
forge is faked at both of its wires: the browser's visit to github.com is answered by a
consent page whose *Authorize* link goes back to the callback with a code (Playwright's
routing), and the service's own calls (the code traded for a token, ``/user``, the
repository) by ``responses``. Slow: it starts Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import responses

from sluice.bot.web.access import SignedIn
from sluice.bot.web.session import Sessions
from sluice.bot.web.standalone import ui_app
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import CLIENT_ID, FakeUser, consent_page, fake_github, github_sign_in
from tests.helpers.web import OWNER, TITLE, WebWorld, chromium, served, web_world

pytestmark = pytest.mark.slow

ALICE = FakeUser("alice", code="code-alice", token="gho_aliceToken000000000", readable={OWNER})
EVE = FakeUser("eve", code="code-eve", token="gho_eveToken00000000000", readable=())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp("browser-sign-in"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def origin(world: WebWorld) -> Iterator[str]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_passthru("http://127.0.0.1")
        fake_github(rsps, ALICE, EVE, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
        access = SignedIn(Sessions(b"browser-test-key" * 3), {"github": github_sign_in()})
        with served(ui_app(world.ui_site(access))) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_a_reader_signs_in_reads_the_pull_request_and_signs_out(browser: Any, origin: str) -> None:
    context = browser.new_context()
    problems: list[str] = []
    seen: list[dict[str, list[str]]] = []
    context.route("https://github.com/**", consent_page(ALICE, seen))
    page = context.new_page()
    page.on(
        "console",
        lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (problems.append(d.message), d.dismiss()))
    try:
        page.goto(f"{origin}/ui/pulls/7")
        assert urlsplit(page.url).path == "/ui/login"
        page.get_by_test_id("sign-in-github").click()
        page.get_by_text("Authorize").click()
        page.wait_for_url(f"{origin}/ui/pulls/7")
        assert seen[0]["client_id"] == [CLIENT_ID]
        assert seen[0]["redirect_uri"] == [f"{origin}/ui/auth/github/callback"]
        assert page.get_by_test_id("viewer").inner_text() == "alice (GitHub)"
        assert TITLE in page.locator("h1").inner_text()  # shown as text, run as nothing
        cookies = {c["name"]: c for c in context.cookies()}
        session = cookies["sluice_session"]
        assert session["httpOnly"] and session["sameSite"] == "Lax"
        assert ALICE.token not in session["value"]

        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{origin}/ui/login")
        assert "sluice_session" not in {c["name"] for c in context.cookies()}
        page.goto(f"{origin}/ui/environments")
        assert urlsplit(page.url).path == "/ui/login"
        assert not problems, problems
    finally:
        context.close()


def test_a_user_who_cannot_read_the_repository_is_shown_nothing(browser: Any, origin: str) -> None:
    context = browser.new_context()
    context.route("https://github.com/**", consent_page(EVE))
    page = context.new_page()
    try:
        page.goto(f"{origin}/ui/login?next=/ui/pulls/7")
        page.get_by_test_id("sign-in-github").click()
        page.get_by_text("Authorize").click()
        page.wait_for_url(f"{origin}/ui/pulls/7")
        body = page.locator("body").inner_text()
        assert "no such repository here" in body
        assert TITLE not in page.content() and "jaffle" not in page.content()
    finally:
        context.close()
