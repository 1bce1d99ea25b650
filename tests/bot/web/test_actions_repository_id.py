"""The web UI's actions carry the forge's id the repository's name is bound to (issue 46),
so the flow's rename and successor checks apply to them as to the forge's deliveries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.events.neutral import event_from_json
from sluice.bot.flow.ledger import Ledger
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, fake_github, sign_in
from tests.helpers.web import OWNER, WebWorld, web_world
from tests.helpers.web_actions import forms, jobs, service

KEY = f"github:{OWNER}"
BOB = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})
PAGE = f"/ui/pulls/7?repo=github%3A{OWNER.replace('/', '%2F')}"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WebWorld]:
    made = web_world(tmp_path)
    yield made
    made.close()


@pytest.fixture
def github() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, BOB, served=[OWNER], ids={CASE_REPOSITORY_ID: OWNER})
        yield rsps


def test_an_approval_from_the_page_carries_the_bound_repository_id(
    world: WebWorld, github: responses.RequestsMock
) -> None:
    ledger = Ledger(world.bot.url)
    try:
        bound = ledger.name_binding(KEY)
    finally:
        ledger.close()
    assert bound is not None  # the forge's deliveries bound the name
    with service(world) as client:
        sign_in(client, BOB)
        page = client.get(PAGE)
        assert page.status_code == 200, page.text
        action, values = forms(page.text)["approve"]
        assert client.post(action, data=values, follow_redirects=False).status_code == 303
        [job] = jobs(world)
        assert event_from_json(job.job.payload).repo_id == bound[1]
