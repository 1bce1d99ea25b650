"""Red team on names bound to repository ids, round 5: a name's new holder takes it
(commit e13d454: ``dispatch._take_name``, ``Ledger.take_name``; the old holder's row moves
to ``<name>~<its id>``, the new holder gets ``<name>~<id>`` or its own first name's
namespace; ``Ledger.queue_keys`` and ``dispatch._key_of`` follow the id's namespace).

The attacker owns or can create repositories on the same forge, one of them served by the
service (``SLUICE_REPOSITORIES`` a pattern such as ``acme/*``), can rename, transfer,
delete and make repositories again, opens pull requests, resends old deliveries of her own
repositories, and signs in to the web UI with her own account; not the service's secrets
or database. Victims: other served repositories and repositories not served yet.

Each test asserts what a sound service does. An attack that works against the code as it
is is a ``xfail(strict=True)`` naming the code path and the fix proposed; the others are
attacks tried and defended, each saying which defence holds. The flow runs through
:func:`sluice.bot.flow.dispatch.handle` with real GitHub webhook bodies parsed as the
service parses them, on the in-memory forge (each repository's name as GitHub gives it by
id: ``MemoryForge.repositories``); the web UI through the real service (``create_app``)
with GitHub's sign-in at the wire (``responses``), over the flow's SQLite state.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from fastapi.testclient import TestClient

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import DriftCheckEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.ledger import QueueKeys
from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.memory import MemoryForge
from sluice.core.spark.scripted import Warehouse
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.github_service import sign
from tests.helpers.oauth import GITHUB_API, FakeUser, fake_github, sign_in
from tests.helpers.web import CONFIG as WEB_CONFIG
from tests.helpers.web import HEAD, WebWorld, web_world
from tests.helpers.web_actions import service
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, merged, named, opened

CONFIG = GATED + "  pr:\n    backfill_days: null\n"
V_ID, M_ID, M2_ID, M3_ID = 424242, 990001, 990002, 990003
BASE = "c" * 40
MINUTE = 60_000


def _bot(tmp_path: Path) -> Bot:
    """A service isolating repositories (octo/warehouse the state owner: the configured
    database), on the scripted warehouse."""
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=Warehouse().runner,
              isolate=True)  # fmt: skip
    bot.ledger.belongs_to(f"{KEY}#.", NOW)
    return bot


class GitHub:
    """One GitHub: which name each repository id has now (``names``, shared by every
    repository's in-memory forge, as ``GET /repositories/{id}`` answers), and a forge for
    each name a delivery carries."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.names: dict[int, str] = {}
        self.clock = NOW

    def make(self, name: str, repo_id: int, author: str) -> MemoryForge:
        """Repository ``name`` (id ``repo_id``) made or renamed to: its prod branch at the
        example, ``author`` an admin."""
        for held, now in list(self.names.items()):
            assert held == repo_id or now.casefold() != name.casefold(), "names are unique"
        self.names[repo_id] = name
        forge = MemoryForge(name, name="github", clock=lambda: NOW)
        forge.repositories = self.names  # one GitHub: every forge names each id alike
        forge.roles.update({author: "admin"})
        self.bot.commit(BASE, CONFIG, forge=forge)
        forge.refs["main"] = BASE
        self.bot.forges[name] = forge
        return forge

    def rename(self, repo_id: int, name: str, author: str) -> MemoryForge:
        return self.make(name, repo_id, author)

    def pull(self, name: str, repo_id: int, number: int, head: str, author: str) -> None:
        """``author`` opens PR ``number`` at ``head`` on ``name`` (id ``repo_id``) and
        GitHub delivers its hook, a minute after the last."""
        forge = self.bot.forges[name]
        self.bot.commit(head, CONFIG, parents=(BASE,), forge=forge)
        forge.open_pull(number, head_sha=head, base="main", author=author)
        body = named(opened(number, head, author=author), name, repo_id)
        body["sender"] = {**body["sender"], "login": author}  # who pushed it
        self.deliver("pull_request", body)

    def deliver(self, event: str, body: dict[str, Any]) -> None:
        self.clock += MINUTE
        at = self.clock
        self.bot.deps = dataclasses.replace(self.bot.deps, clock=lambda: at)
        self.bot.deliver(event, body)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[GitHub]:
    bot = _bot(tmp_path)
    try:
        yield GitHub(bot)
    finally:
        bot.close()


def _refused(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]


# == the name rebound is the one the delivery carries ===================================


def test_taking_a_name_rebinds_that_name_not_its_old_holder_s_first_name(
    github: GitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """V (id 424242) is served as acme/v, renamed to acme/v2 (a delivery binds it) and back
    to acme/v. mallory, who may create repositories in acme, makes acme/v2, V's left name,
    and opens a PR. A sound service binds acme/v2 to her repository and nothing else: V's
    name stays bound to V, and V's scheduled drift check runs under it."""
    bot = github.bot
    github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    github.rename(V_ID, "acme/v2", "alice")
    github.pull("acme/v2", V_ID, 10, "b2" * 20, "alice")
    github.rename(V_ID, "acme/v", "alice")
    github.pull("acme/v", V_ID, 11, "b3" * 20, "alice")
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v", V_ID)

    github.make("acme/v2", M_ID, "mallory")
    github.pull("acme/v2", M_ID, 3, "e5" * 20, "mallory")
    github.pull("acme/v", V_ID, 12, "b4" * 20, "alice")  # V's next PR still builds

    caplog.set_level(logging.INFO)
    caplog.clear()
    dispatch.handle(bot.deps, DriftCheckEvent("github", "acme/v", None))
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v", V_ID), (
        "mallory's delivery under acme/v2 bound V's current name acme/v to her id"
    )
    assert _refused(caplog) == [], _refused(caplog)


def test_a_repository_coming_back_to_its_name_after_a_squat_holds_it_again(
    github: GitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """V is renamed from acme/v by mistake; mallory makes acme/v at once and opens a PR
    (she takes the name), then renames hers away; V is renamed back and opens a PR. A sound
    service binds acme/v to V again, and V's scheduled drift check runs under it."""
    bot = github.bot
    github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    github.rename(V_ID, "acme/v-oops", "alice")
    github.make("acme/v", M_ID, "mallory")
    github.pull("acme/v", M_ID, 3, "e5" * 20, "mallory")
    github.rename(M_ID, "acme/elsewhere", "mallory")
    github.rename(V_ID, "acme/v", "alice")
    github.pull("acme/v", V_ID, 10, "b2" * 20, "alice")
    caplog.set_level(logging.INFO)
    caplog.clear()
    dispatch.handle(bot.deps, DriftCheckEvent("github", "acme/v", None))
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v", V_ID)
    assert _refused(caplog) == [], _refused(caplog)


# == a cycle of names: one delivery, the forge asked without end =========================


def test_one_delivery_asks_the_forge_a_bounded_number_of_times(github: GitHub) -> None:
    """mallory alone, with repositories of her own in acme (served: acme/*): P as acme/p,
    renamed to acme/p2 and back; Q made as acme/p2 (takes it), then P delivers again; Q
    renamed to acme/q and R made as acme/p2. A sound service asks GitHub a few times for
    R's delivery and builds it or refuses it."""
    P, Q, R = M_ID, M2_ID, M3_ID  # noqa: N806
    github.make("acme/p", P, "mallory")
    github.pull("acme/p", P, 1, "a1" * 20, "mallory")
    github.rename(P, "acme/p2", "mallory")
    github.pull("acme/p2", P, 2, "a2" * 20, "mallory")
    github.rename(P, "acme/p", "mallory")
    github.pull("acme/p", P, 3, "a3" * 20, "mallory")
    github.make("acme/p2", Q, "mallory")
    github.pull("acme/p2", Q, 4, "a4" * 20, "mallory")
    github.pull("acme/p", P, 5, "a5" * 20, "mallory")
    github.rename(Q, "acme/q", "mallory")
    r = github.make("acme/p2", R, "mallory")
    asked = len(r.calls)
    try:
        github.pull("acme/p2", R, 6, "a6" * 20, "mallory")
        outcome = "handled"
    except RecursionError:
        outcome = "RecursionError"
    lookups = [c for c in r.calls[asked:] if c[0] == "repository_of"]
    assert outcome == "handled" and len(lookups) <= 6, (
        f"{outcome} after asking GitHub which repository an id is {len(lookups)} times"
    )


# == the queue's keys right after a name changes hands ===================================


def test_a_namespace_has_one_queue_key_right_after_a_name_changes_hands(github: GitHub) -> None:
    """V is served as acme/f; mallory's acme/n is served too and busy (the queue read its
    binding a moment ago, and V's name's). She renames hers away and V is renamed to
    acme/n at once. A sound queue keys V's next delivery under acme/n and V's scheduled
    run alike, by V's namespace, as the ledger says, before and after V takes the name."""
    bot = github.bot
    f, n = "github:acme/f", "github:acme/n"
    github.make("acme/f", V_ID, "alice")
    github.pull("acme/f", V_ID, 9, "b1" * 20, "alice")
    github.make("acme/n", M_ID, "mallory")
    github.pull("acme/n", M_ID, 3, "e5" * 20, "mallory")
    keys = QueueKeys(bot.ledger, clock=lambda: 0.0)
    assert keys([(n, M_ID), (f, None)]) == {(n, M_ID): n, (f, None): f}  # her job, V's run
    github.rename(M_ID, "acme/m2", "mallory")
    github.rename(V_ID, "acme/n", "alice")
    wanted = [(n, V_ID), (f, None)]
    assert bot.ledger.queue_keys(wanted) == {(n, V_ID): f, (f, None): f}
    before = keys(wanted)
    github.pull("acme/n", V_ID, 10, "b2" * 20, "alice")  # V takes the name, keeping F's
    assert bot.ledger.name_binding(n) == (f, V_ID)
    after = keys([(n, V_ID), (n, None)])
    assert (before, after) == (
        {(n, V_ID): f, (f, None): f},
        {(n, V_ID): f, (n, None): f},
    )


# == defended: what the forge confirms =================================================


def test_a_delivery_under_a_tombstone_or_a_namespace_key_is_refused(
    github: GitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """Defended (``dispatch._confirmed`` → ``_named_now``): after mallory took acme/v, which
    V left, the ledger holds V's row under github:acme/v~424242 and her namespace is keyed
    github:acme/v~990001. A body naming either (as a GitLab maintainer can post with her own
    project's token, her project's id with any path) is refused before anything is bound,
    recorded or run: GitHub and GitLab allow no ``~`` in a name (letters, digits, ``-``,
    ``_``, ``.``), so the forge never names her id so."""
    bot = github.bot
    github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    github.rename(V_ID, "acme/v2", "alice")
    github.make("acme/v", M_ID, "mallory")
    github.pull("acme/v", M_ID, 3, "e5" * 20, "mallory")
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v~990001", M_ID)
    assert bot.ledger.name_binding(f"github:acme/v~{V_ID}") == ("github:acme/v", V_ID)
    caplog.set_level(logging.INFO)
    for name, rid in ((f"acme/v~{V_ID}", M_ID), (f"acme/v~{M_ID}", M_ID)):
        forge = MemoryForge(name, name="github", clock=lambda: NOW)
        forge.repositories = github.names  # GitHub names her id acme/v
        bot.forges[name] = forge
        github.deliver("pull_request", named(opened(3, "e5" * 20, author="mallory"), name, rid))
        assert forge.checks == {} and forge.comments == {}
        assert any(m.startswith(f"github:{name}: pull_request job refused")
                   for m in _refused(caplog)), _refused(caplog)  # fmt: skip
    assert bot.ledger.name_binding(f"github:acme/v~{V_ID}") == ("github:acme/v", V_ID)
    assert bot.ledger.queue_keys([("github:acme/v2", V_ID)]) == {
        ("github:acme/v2", V_ID): "github:acme/v"
    }


def test_the_old_holder_s_late_delivery_after_a_takeover_binds_nothing_back(
    github: GitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """Defended (``_confirmed``): mallory served acme/v first, renamed hers away, and V was
    made under the name and took it. She resends her repository's old signed delivery of
    acme/v: GitHub names her id otherwise now, so it is refused before the replay table,
    the binding or a build; V keeps the name and its namespace."""
    bot = github.bot
    github.make("acme/v", M_ID, "mallory")
    old = named(opened(3, "e5" * 20, author="mallory"), "acme/v", M_ID)
    github.pull("acme/v", M_ID, 3, "e5" * 20, "mallory")
    github.rename(M_ID, "acme/elsewhere", "mallory")
    v = github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    bound = bot.ledger.name_binding("github:acme/v")
    assert bound == ("github:acme/v~424242", V_ID)
    caplog.set_level(logging.INFO)
    v.open_pull(3, head_sha="b1" * 20, base="main", author="alice")  # V has a PR 3 too
    checks = {sha: dict(c) for sha, c in v.checks.items()}
    github.deliver("pull_request", old)
    assert bot.ledger.name_binding("github:acme/v") == bound
    assert {sha: dict(c) for sha, c in v.checks.items()} == checks
    assert any("pull_request job refused" in m for m in _refused(caplog))


def test_a_name_s_new_holder_and_its_old_holder_share_no_records(github: GitHub) -> None:
    """Defended (``Ledger.take_name``: a namespace of its own, ``<name>~<id>``; the old
    holder's records stay under its first name): mallory squats acme/v and opens PR 9 at
    V's future head (its pushers, head and plan recorded), then leaves; V is made under
    the name and opens its PR 9 at that head. V's PR 9 has none of her records (no pusher
    of hers, a plan of its own), and a scheduled job of the name runs in V's namespace."""
    bot = github.bot
    github.make("acme/v", M_ID, "mallory")
    github.pull("acme/v", M_ID, 9, "b1" * 20, "mallory")
    hers = bot.ledger.name_binding("github:acme/v")
    assert hers == ("github:acme/v", M_ID)
    assert "mallory" in bot.ledger.pushers("github:acme/v", 9)
    github.rename(M_ID, "acme/elsewhere", "mallory")
    v = github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    key, rid = bot.ledger.name_binding("github:acme/v") or ("", 0)
    assert (key, rid) == (f"github:acme/v~{V_ID}", V_ID)
    assert bot.ledger.pushers(key, 9) == {"alice"}
    assert bot.ledger.pr_head(key, 9) is not None and bot.ledger.plans(key, 9)
    assert "mallory" in bot.ledger.pushers("github:acme/v", 9)  # hers, where they were
    elsewhere = ("github:acme/elsewhere", M_ID)  # her next delivery: a rename, her records
    assert bot.ledger.queue_keys([elsewhere]) == {elsewhere: "github:acme/v"}
    asked = len(v.calls)
    dispatch.handle(bot.deps, DriftCheckEvent("github", "acme/v", None))
    assert ("repository_of", (V_ID,)) in v.calls[asked:]


def test_a_forge_error_about_the_bound_id_takes_nothing(
    github: GitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defended (``_take_name``): mallory makes acme/v, which V left, while GitHub fails
    when asked about V's id (an error, not "no such repository"): the job raises for the
    queue to retry, nothing is bound, built or posted; once GitHub answers, she takes the
    name in a namespace of her own."""
    bot = github.bot
    github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    github.rename(V_ID, "acme/v2", "alice")
    m = github.make("acme/v", M_ID, "mallory")
    answer = MemoryForge.repository_of

    def failing(self: MemoryForge, repo_id: int) -> str | None:
        if repo_id == V_ID:
            raise ForgeError("memory: 502 Bad Gateway")
        return answer(self, repo_id)

    monkeypatch.setattr(MemoryForge, "repository_of", failing)
    with pytest.raises(ForgeError, match="did not start"):
        github.pull("acme/v", M_ID, 3, "e5" * 20, "mallory")
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v", V_ID)
    assert m.checks == {}
    monkeypatch.setattr(MemoryForge, "repository_of", answer)
    github.deliver("pull_request", named(opened(3, "e5" * 20, author="mallory"), "acme/v", M_ID))
    assert bot.ledger.name_binding("github:acme/v") == ("github:acme/v~990001", M_ID)
    assert m.checks


def test_a_job_given_up_under_a_taken_name_posts_and_records_as_its_own(
    github: GitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """Defended (``give_up`` confirms by the event's id; ``_key_of`` keys by it): V merged
    PR 9 as acme/v and left the name; mallory takes it and her merge of PR 9 (same number,
    same merge commit sha she chose to copy) fails for good. Its failure is posted on her
    repository and recorded as handled under her key, so the same merge of V's, resent
    under V's new name, is not skipped as a replay, and nothing is posted on V."""
    bot = github.bot
    v = github.make("acme/v", V_ID, "alice")
    github.pull("acme/v", V_ID, 9, "b1" * 20, "alice")
    github.rename(V_ID, "acme/v2", "alice")
    m = github.make("acme/v", M_ID, "mallory")
    github.pull("acme/v", M_ID, 3, "e5" * 20, "mallory")
    body = accounts.github(named(merged(9, "b1" * 20, "d" * 40), "acme/v", M_ID),
                           bot.github.account_id)  # fmt: skip
    event = parse_github("pull_request", body)
    assert event is not None
    v_checks = {sha: dict(c) for sha, c in v.checks.items()}
    dispatch.abandon(bot.deps, event, "boom")
    assert m.checks.get("d" * 40), "her failure was posted nowhere"
    v2 = bot.forges["acme/v2"]
    assert {sha: dict(c) for sha, c in v.checks.items()} == v_checks and v2.checks == {}
    key = event.content_key()
    assert key is not None
    assert bot.ledger.handled("github:acme/v~990001", key) is not None
    assert bot.ledger.handled("github:acme/v", key) is None  # V's key: nothing recorded


# == the web UI under a taken name ======================================================

NEW = "octo/warehouse-renamed"
NEW_KEY = f"github:{NEW}"
ALICE = FakeUser("alice", code="code-alice", token="gho_alice000000000000", readable={OWNER, NEW})
MALLORY = FakeUser("mallory", code="code-mallory", token="gho_mallory0000000000",
                   readable={OWNER})  # fmt: skip
HEAD_M = "e5" * 20


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebWorld]:
    """octo/warehouse (V, id CASE_REPOSITORY_ID) with prod and PR 7 built (its page shows
    jaffle.orders changed), on a service that isolates repositories."""
    made = web_world(tmp_path)
    made.bot.deps = dataclasses.replace(made.bot.deps, isolate=True)
    yield made
    made.close()


def _github_by_id(rsps: responses.RequestsMock, names: dict[int, str]) -> None:
    """GitHub's ``GET /repositories/{id}`` as ``names`` says now, to whoever signed in."""

    def by_id(request: Any) -> tuple[int, dict[str, str], str]:
        rid = int(request.url.rsplit("/", 1)[1])
        name = names.get(rid)
        if name is None:
            return 404, {}, '{"message": "Not Found"}'
        body = {"id": rid, "full_name": name, "permissions": {"pull": True}}
        return 200, {}, json.dumps(body)

    rsps.add_callback(responses.GET, re.compile(rf"{GITHUB_API}/repositories/\d+"), by_id)


def _v_renamed_and_mallory_takes_the_name(web: WebWorld, names: dict[int, str]) -> MemoryForge:
    """V is renamed to octo/warehouse-renamed (its PR 8 delivered under it binds the name);
    mallory makes octo/warehouse (id 990001) and opens PR 3 there: she takes the name, in
    a namespace of her own."""
    bot, v = web.bot, web.github
    names[CASE_REPOSITORY_ID] = NEW
    v.repositories = names
    v.repo = NEW
    bot.forges[NEW] = v
    v.open_pull(8, head_sha=HEAD, base="main", author="alice")
    bot.deps = dataclasses.replace(bot.deps, clock=lambda: NOW + MINUTE)
    bot.deliver("pull_request", named(opened(8, HEAD), NEW, CASE_REPOSITORY_ID))
    names[M_ID] = OWNER
    m = MemoryForge(OWNER, name="github", clock=lambda: NOW)
    m.repositories = names
    m.roles.update({"mallory": "admin"})
    bot.forges[OWNER] = m
    bot.commit(BASE, WEB_CONFIG, forge=m)
    m.refs["main"] = BASE
    bot.commit(HEAD_M, WEB_CONFIG, parents=(BASE,), forge=m)
    m.open_pull(3, head_sha=HEAD_M, base="main", author="mallory")
    bot.deps = dataclasses.replace(bot.deps, clock=lambda: NOW + 2 * MINUTE)
    bot.deliver("pull_request", named(opened(3, HEAD_M, author="mallory"), OWNER, M_ID))
    assert bot.ledger.name_binding(KEY) == (f"{KEY}~{M_ID}", M_ID)
    return m


def test_the_new_holder_of_a_name_does_not_read_the_old_holder_s_records(
    web: WebWorld,
) -> None:
    """alice, a writer of V, looks at V's PR 7 in the web UI. V is renamed; mallory makes
    a repository under V's old name and opens a PR: the service serves it (acme/* style
    pattern). She signs in and opens octo/warehouse's PR 7. A sound UI shows her nothing
    of V's: her repository has no PR 7."""
    names = {CASE_REPOSITORY_ID: OWNER}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, MALLORY, served=[OWNER, NEW])
        _github_by_id(rsps, names)
        with service(web, isolate_repositories=True) as client:
            sign_in(client, ALICE)
            seen = client.get("/ui/pulls/7", params={"repo": KEY})
            assert seen.status_code == 200 and "jaffle.orders" in seen.text, seen.text
            _v_renamed_and_mallory_takes_the_name(web, names)
            client.cookies.clear()
            sign_in(client, MALLORY)
            listed = client.get("/api/v1/repositories").json()
            assert {"key": KEY} in listed, listed  # her records, under the name she holds
            page = client.get("/ui/pulls/7", params={"repo": KEY})
            pulls = client.get("/api/v1/pulls", params={"repo": KEY}).json()
    assert page.status_code == 404 or "jaffle.orders" not in page.text, "V's PR 7 shown to her"
    assert [p["number"] for p in pulls.get("items", [])] in ([], [3]), pulls


def _queue_v_s_push(client: TestClient) -> None:
    """GitHub delivers a synchronize of V's PR 7 to the service (no worker: it waits in
    the queue, keyed by V's namespace)."""
    body = accounts.github(named(opened(7, "f7" * 20), OWNER, CASE_REPOSITORY_ID))
    body["action"] = "synchronize"
    raw = json.dumps(body).encode()
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "v-push-7",
               "X-Hub-Signature-256": sign(raw, "s3cret"),
               "Content-Type": "application/json"}  # fmt: skip
    answer = client.post("/webhooks/github", content=raw, headers=headers)
    assert answer.status_code == 202, answer.text


def test_the_jobs_page_of_a_taken_name_lists_none_of_the_old_holder_s_jobs(
    web: WebWorld,
) -> None:
    """V's PR 7 gets a push while V is octo/warehouse (queued in V's namespace). V is
    renamed and mallory takes octo/warehouse. On a service started since (no page of the
    name opened before), her jobs page lists none of V's jobs."""
    names = {CASE_REPOSITORY_ID: OWNER}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, ALICE, MALLORY, served=[OWNER, NEW])
        _github_by_id(rsps, names)
        with service(web, isolate_repositories=True) as client:
            _queue_v_s_push(client)
        _v_renamed_and_mallory_takes_the_name(web, names)
        with service(web, isolate_repositories=True) as client:
            sign_in(client, ALICE)
            v_jobs = client.get("/api/v1/jobs", params={"repo": NEW_KEY}).json()
            [v_job] = [j for j in v_jobs["queue"]["items"] if j["key"] == f"{KEY}#7"]
            client.cookies.clear()
            sign_in(client, MALLORY)
            hers = client.get("/api/v1/jobs", params={"repo": KEY}).json()
            one = client.get(f"/api/v1/jobs/queue/{v_job['id']}", params={"repo": KEY})
            pulls = client.get("/api/v1/pulls", params={"repo": KEY}).json()
    assert [p["number"] for p in pulls["items"]] == [3]  # her own records: defended
    keys = [j["key"] for j in hers["queue"]["items"]]
    assert f"{KEY}#7" not in keys and one.status_code == 404, (keys, one.text)
