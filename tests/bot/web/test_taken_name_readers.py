"""A name that changes hands (:meth:`sluice.bot.flow.ledger.Ledger.take_name`) is read as
its new holder's from the moment it is bound to it: the site's reader of a namespace is
found by the key the name is bound to on each open (:class:`sluice.bot.web.site.Site`), a
signed-in person's kept "may read" answer holds for the binding it was asked under only
(:class:`sluice.bot.web.access.SignedIn`), and a repository's jobs are listed by its
namespace's key and the names no other namespace has or had
(:meth:`sluice.bot.flow.ledger.Ledger.job_names`). Real SQLite ledger, state and queue;
GitHub at the HTTP wire (``responses``) for sign-in and "may read"."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi import HTTPException
from starlette.requests import Request

from sluice.bot.flow.ledger import Ledger
from sluice.bot.queue.schema import NewJob
from sluice.bot.queue.store import JobQueue
from sluice.bot.web.access import Everyone
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import Site
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import GITHUB_API, FakeUser, fake_github, sign_in
from tests.helpers.web import OWNER, WebWorld, web_world
from tests.helpers.web_actions import service

V_ID, M_ID = CASE_REPOSITORY_ID, 990001
NEW = "octo/warehouse-renamed"
KEY, NEW_KEY, HERS = f"github:{OWNER}", f"github:{NEW}", f"github:{OWNER}~{M_ID}"
SHOWN = "jaffle.orders"  # a model V's PR 7 changes, as its page shows it
LATER = 1_900_000_000_000  # after every delivery of the world (ms)
ALICE = FakeUser("alice", code="code-alice", token="gho_alice000000000000")
MALLORY = FakeUser("mallory", code="code-mallory", token="gho_mallory0000000000")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WebWorld]:
    made = web_world(tmp_path)
    yield made
    made.close()


def _taken(url: str) -> None:
    """V (octo/warehouse) is renamed, and mallory's repository made under octo/warehouse
    takes the name and gets records (as dispatch does once GitHub confirmed each)."""
    ledger = Ledger(url)
    try:
        assert ledger.name_binding(KEY) == (KEY, V_ID)
        ledger.add_name(NEW_KEY, V_ID, KEY, LATER)
        assert ledger.take_name(KEY, M_ID, V_ID, LATER + 1) is not None
        ledger.seen(HERS, None, LATER + 1)
        assert ledger.name_binding(KEY) == (HERS, M_ID)
    finally:
        ledger.close()


def _github_now(rsps: responses.RequestsMock, names: dict[int, str]) -> None:
    """GitHub as ``names`` (id -> its name now) says: each repository readable by its own
    people alone (V by alice, mallory's by her), by name and by id."""
    readers = {V_ID: ALICE.token, M_ID: MALLORY.token}

    def answer(request: Any, rid: int | None) -> tuple[int, dict[str, str], str]:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if rid is None or rid not in names or readers[rid] != token:
            return 404, {}, '{"message": "Not Found"}'
        body = {"id": rid, "full_name": names[rid], "permissions": {"pull": True}}
        return 200, {}, json.dumps(body)

    def by_name(request: Any) -> tuple[int, dict[str, str], str]:
        name = request.url.split("/repos/", 1)[1].casefold()
        return answer(request, next((i for i, n in names.items() if n.casefold() == name), None))

    def by_id(request: Any) -> tuple[int, dict[str, str], str]:
        return answer(request, int(request.url.rsplit("/", 1)[1]))

    rsps.add_callback(responses.GET, re.compile(rf"{GITHUB_API}/repos/.+"), by_name)
    rsps.add_callback(responses.GET, re.compile(rf"{GITHUB_API}/repositories/\d+"), by_id)


def test_a_kept_may_read_answer_is_not_the_name_s_new_holder_s(world: WebWorld) -> None:
    """alice reads V's PR 7 under octo/warehouse (GitHub's yes kept two minutes). V is
    renamed and mallory's repository takes the name: alice's kept yes was for V's
    binding, so GitHub is asked again, by mallory's id, and says no: 404, nothing of
    hers; V is read under its new name, through a reader made for it."""
    names = {V_ID: OWNER}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, MALLORY, served=[])
        _github_now(rsps, names)
        with service(world, isolate_repositories=True) as client:
            sign_in(client, ALICE)
            seen = client.get("/ui/pulls/7", params={"repo": KEY})
            assert seen.status_code == 200 and SHOWN in seen.text, seen.text
            _taken(world.bot.url)
            names.update({V_ID: NEW, M_ID: OWNER})
            listed = client.get("/api/v1/repositories").json()
            assert listed == [{"key": NEW_KEY}], listed  # hers is not alice's to see
            hers = client.get("/api/v1/pulls", params={"repo": KEY})
            again = client.get("/ui/pulls/7", params={"repo": KEY})
            v = client.get("/ui/pulls/7", params={"repo": NEW_KEY})
            client.cookies.clear()
            sign_in(client, MALLORY)
            mine = client.get("/api/v1/pulls", params={"repo": KEY})
    assert (hers.status_code, again.status_code) == (404, 404), (hers.text, again.text)
    assert v.status_code == 200 and SHOWN in v.text, v.text
    assert mine.status_code == 200 and mine.json()["items"] == [], mine.text


def _request() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": []})


def test_a_reader_kept_for_a_name_is_made_again_for_its_new_holder(world: WebWorld) -> None:
    """The site keeps a reader per namespace: octo/warehouse's is V's until the name is
    bound to mallory's repository, then one of hers (V's closed); V's new name gets a
    reader of its own namespace made for that name."""
    url = world.bot.url
    names = Ledger(url)
    site = Site(
        lambda: [KEY, NEW_KEY],
        lambda repo: Reader(repo, url, queue=False),
        Everyone(),
        key_of=names.canonical,
    )
    try:
        v = site.open(_request(), KEY)
        assert (v.repo, v.key) == (KEY, KEY) and site.open(_request(), KEY) is v
        _taken(url)
        hers = site.open(_request(), KEY)
        assert (hers.repo, hers.key) == (KEY, HERS)
        # V's builds of PR 7 are read under V's key alone (one state here: not isolated)
        assert 7 in v.ledger.builds(v.key) and hers.ledger.builds(hers.key) == {}
        renamed = site.open(_request(), NEW_KEY)
        assert (renamed.repo, renamed.key) == (NEW_KEY, KEY) and renamed is not v
        assert site.open(_request(), KEY) is hers
    finally:
        site.close()
        names.close()


def test_a_name_that_changes_hands_while_it_is_opened_is_not_found(world: WebWorld) -> None:
    """The name is looked up before the access is asked and after the reader is found: a
    name bound to mallory's repository in between is not found (neither V's reader nor
    hers, for an answer asked about V's); the next open reads hers."""
    url = world.bot.url
    names = Ledger(url)
    looked: list[str] = []

    def key_of(repo: str) -> str:
        looked.append(names.canonical(repo))
        if len(looked) == 1:  # right after the first look-up: the name changes hands
            _taken(url)
        return looked[-1]

    site = Site(
        lambda: [KEY], lambda repo: Reader(repo, url, queue=False), Everyone(), key_of=key_of
    )
    try:
        with pytest.raises(HTTPException) as refused:
            site.open(_request(), KEY)
        assert refused.value.status_code == 404 and looked == [KEY]
        assert site.open(_request(), KEY).key == HERS
    finally:
        site.close()
        names.close()


A, B, C = "github:acme/a", "github:acme/b", "github:acme/c"


def test_a_namespace_s_jobs_are_listed_by_its_key_and_the_names_no_other_had(
    tmp_path: Path,
) -> None:
    """V (id 1) first named acme/a, renamed acme/b: its jobs are listed by its key and,
    for a job queued under acme/b before any delivery bound it, that name. Once mallory
    (id 2) takes acme/b, neither lists the other's: V's page lists by acme/a alone, hers
    by her key alone (acme/b's raw jobs predate her); carol (id 3) taking acme/a, V's
    key, lists nothing of V's. Records of acme/c that no delivery bound keep their name's
    jobs from the namespace bound to acme/c later."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    ledger, queue = Ledger(url), JobQueue(url)
    ids: dict[str, int] = {}
    for key in (f"{B}#1", f"{A}#2", f"{B}~2#3", "github:acme/ab#4", f"{A}~3:prod", f"{C}#5"):
        queue.accept(f"d-{key}", "github", "pull_request", NewJob(key, "pull_request", {}), 1.0)
        found = queue.delivery_job(f"d-{key}")
        assert found is not None
        ids[key] = found

    def listed(repo: str) -> tuple[list[str], dict[str, bool]]:
        reader = Reader(repo, url)
        try:
            keys = [j.key for j in reader.jobs(offset=0, limit=50).queue.items]
            return keys, {k: reader.queue_job(i) is not None for k, i in ids.items()}
        finally:
            reader.close()

    try:
        assert ledger.bind_repository(A, 1, 1000).canonical == A
        ledger.add_name(B, 1, A, 2000)
        assert ledger.job_names(A) == [A, B]
        keys, one = listed(B)
        assert keys == [f"{A}#2", f"{B}#1"] and one[f"{B}#1"] and not one["github:acme/ab#4"]

        taken = ledger.take_name(B, 2, 1, 3000)
        assert taken is not None and taken.canonical == f"{B}~2"
        assert ledger.job_names(A) == [A] and ledger.job_names(f"{B}~2") == [f"{B}~2"]
        keys, one = listed(B)  # hers
        assert keys == [f"{B}~2#3"] and not one[f"{B}#1"] and not one[f"{A}#2"]
        assert listed(A)[0] == [f"{A}#2"]

        ledger.take_name(A, 3, 1, 4000)  # carol takes V's first name, V's key
        assert ledger.job_names(f"{A}~3") == [f"{A}~3"] and ledger.job_names(A) == [A]
        keys, one = listed(A)  # carol's
        assert keys == [f"{A}~3:prod"] and not one[f"{A}#2"]

        ledger.seen(C, None, 5000)  # records of acme/c no delivery bound
        ledger.claim_name(C, 4, f"{C}~4", 6000)
        assert ledger.job_names(f"{C}~4") == [f"{C}~4"] and listed(C)[0] == []
    finally:
        queue.close()
        ledger.close()


def test_a_service_that_does_not_isolate_shows_its_owner_s_state_under_no_taken_name(
    world: WebWorld,
) -> None:
    """A service that does not isolate keeps its state owner's (V's) state alone. V is
    renamed and, before any delivery under its new name, mallory's repository takes
    octo/warehouse (its jobs are refused after: not the owner). The name is hers: she
    sees nothing of V's environments, plans, history or logs under it (404), and V's pages
    are back once a delivery binds V's new name."""
    names = {V_ID: NEW, M_ID: OWNER}
    ledger = Ledger(world.bot.url)
    try:
        assert ledger.take_name(KEY, M_ID, V_ID, LATER) is not None
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(rsps, ALICE, MALLORY, served=[])
            _github_now(rsps, names)
            with service(world) as client:
                sign_in(client, MALLORY)
                answers = [
                    client.get(path, params={"repo": KEY})
                    for path in ("/api/v1/environments", "/api/v1/history", "/api/v1/jobs")
                ]
                client.cookies.clear()
                ledger.add_name(NEW_KEY, V_ID, KEY, LATER + 1)  # V's next delivery
                sign_in(client, ALICE)
                v = client.get("/api/v1/environments", params={"repo": NEW_KEY})
    finally:
        ledger.close()
    assert [a.status_code for a in answers] == [404, 404, 404], [a.text for a in answers]
    assert v.status_code == 200 and "pr_7" in v.text, v.text
