"""The web UI shows a name bound to a forge's repository id only while the forge says that
repository has the name now, asked with the signed-in person's token by the id (GitHub
``GET /repositories/{id}``, GitLab ``GET /projects/:id``): the renamed repository is read
under its new name, its old name shows nothing of it, and a forge that cannot say opens
nothing. GitHub and GitLab at the HTTP wire (``responses``), the service over a real flow's
SQLite state (:func:`tests.helpers.web.web_world`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.signin import SignIn
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import (
    CLIENT_ID,
    CLIENT_SECRET,
    GITHUB_API,
    GITLAB,
    FakeUser,
    fake_github,
    fake_gitlab,
    github_sign_in,
    sign_in,
)
from tests.helpers.web import OWNER, WebWorld, web_world
from tests.helpers.web_actions import forms, service

NEW_NAME = "octo/warehouse-renamed"
KEY, NEW_KEY = f"github:{OWNER}", f"github:{NEW_NAME}"
SHOWN = "jaffle.orders"  # a model its PR 7 changes, as the PR's page shows it
LATER = 1_900_000_000_000  # after every delivery of the world (ms)
ALICE = FakeUser(
    "alice", code="code-alice", token="gho_aliceToken00000000", readable={OWNER, NEW_NAME}
)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WebWorld]:
    made = web_world(tmp_path)
    yield made
    made.close()


def _renamed(world: WebWorld) -> None:
    """octo/warehouse is renamed and its first delivery under the new name bound it, as
    dispatch does once the forge confirmed the rename (Ledger.add_name)."""
    ledger = Ledger(world.bot.url)
    try:
        bound = ledger.name_binding(KEY)
        assert bound == (KEY, CASE_REPOSITORY_ID)  # the forge's deliveries bound the name
        ledger.add_name(NEW_KEY, CASE_REPOSITORY_ID, KEY, LATER)
    finally:
        ledger.close()


def _page(client, repo: str):  # type: ignore[no-untyped-def]
    return client.get("/ui/pulls/7", params={"repo": repo})


def test_the_renamed_repository_is_read_under_its_new_name_and_not_its_old(
    world: WebWorld,
) -> None:
    _renamed(world)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        # alice can read both names: the old one is another repository's now.
        fake_github(rsps, ALICE, served=[OWNER, NEW_NAME], ids={CASE_REPOSITORY_ID: NEW_NAME})
        with service(world) as client:
            sign_in(client, ALICE)
            new = _page(client, NEW_KEY)
            assert new.status_code == 200, new.text
            assert SHOWN in new.text and "approve" in forms(new.text)
            old = _page(client, KEY)
            assert old.status_code == 404, old.text
            assert SHOWN not in old.text
            assert old.json() == {"detail": "no such repository here"}  # as for any unknown
            listed = client.get("/api/v1/repositories")
            assert listed.json() == [{"key": NEW_KEY}], listed.text


def test_a_forge_error_on_the_id_opens_nothing_and_is_asked_again(world: WebWorld) -> None:
    _renamed(world)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, served=[OWNER, NEW_NAME])
        rsps.add(
            responses.GET,
            f"{GITHUB_API}/repositories/{CASE_REPOSITORY_ID}",
            status=503,
            json={"message": "Service Unavailable"},
        )
        with service(world) as client:
            sign_in(client, ALICE)
            failed = _page(client, NEW_KEY)
            assert failed.status_code == 502, failed.text
            assert SHOWN not in failed.text and "approve" not in forms(failed.text)
            # not kept: once GitHub answers, the new name is read
            rsps.replace(
                responses.GET,
                f"{GITHUB_API}/repositories/{CASE_REPOSITORY_ID}",
                json={
                    "id": CASE_REPOSITORY_ID,
                    "full_name": NEW_NAME,
                    "permissions": {"pull": True},
                },
            )
            assert _page(client, NEW_KEY).status_code == 200


def test_a_name_bound_to_an_id_the_person_cannot_read_is_not_found(world: WebWorld) -> None:
    # bob can read octo/warehouse by name, but GitHub shows his token no repository of
    # the id bound to it (404 by id): nothing of it is shown.
    bob = FakeUser("bob", code="code-bob", token="gho_bobToken0000000000", readable={OWNER})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, bob, served=[OWNER])
        rsps.add(
            responses.GET,
            f"{GITHUB_API}/repositories/{CASE_REPOSITORY_ID}",
            status=404,
            json={"message": "Not Found"},
        )
        with service(world) as client:
            sign_in(client, bob)
            page = _page(client, KEY)
            assert page.status_code == 404, page.text
            assert SHOWN not in page.text


@responses.activate
def test_github_reads_by_id_only_under_the_name_the_id_has_now() -> None:
    github = github_sign_in()
    url = f"{GITHUB_API}/repositories/{CASE_REPOSITORY_ID}"
    answer = {
        "id": CASE_REPOSITORY_ID,
        "full_name": "Octo/Warehouse",
        "permissions": {"pull": True},
    }
    responses.add(responses.GET, url, json=answer)
    assert github.can_read_as("t", CASE_REPOSITORY_ID, "octo/warehouse")  # any case
    assert not github.can_read_as("t", CASE_REPOSITORY_ID, "octo/warehouse-old")
    responses.replace(responses.GET, url, json={**answer, "id": 7})  # another id's answer
    assert not github.can_read_as("t", CASE_REPOSITORY_ID, "octo/warehouse")
    responses.replace(responses.GET, url, json={**answer, "permissions": {"pull": False}})
    assert not github.can_read_as("t", CASE_REPOSITORY_ID, "octo/warehouse")
    assert responses.calls[0].request.headers["Authorization"] == "Bearer t"


def test_gitlab_reads_by_project_id_only_under_the_path_it_has_now() -> None:
    gitlab = SignIn(
        "gitlab",
        web=GITLAB,
        api=f"{GITLAB}/api/v4",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
    )
    carol = FakeUser("carol", code="c", token="glpat-carol", readable={"data/platform"})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_gitlab(rsps, carol, served=[], ids={88: "data/platform"})
        assert gitlab.can_read_as("glpat-carol", 88, "data/platform")
        assert not gitlab.can_read_as("glpat-carol", 88, "data/old-platform")
        assert not gitlab.can_read_as("glpat-other", 88, "data/platform")  # 404 to them
