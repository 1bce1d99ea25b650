"""Red team on names bound to repository ids, round 3: the whole binding of a repository's
name to the forge's id of it, and the namespace each binding keys (``sluice_repositories``,
``Ledger.bind_repository``, ``claim_name``, ``history``, ``add_name``;
``dispatch._admitted``, ``_claim``, ``_unbound_still_named``, ``_still_named``,
``_confirmed``; ``Forge.identity``, ``Forge.repository_of``).

Each test asserts what a sound service does. An attack that works against the code as it
is is a ``xfail(strict=True)`` naming the code path and the fix proposed; the others are
attacks tried and defended. The flow is driven through its own entry point
(:func:`sluice.bot.flow.dispatch.handle`, real GitHub webhook bodies parsed as the service
parses them), on the in-memory forge (one :class:`MemoryForge` answers for a name: whatever
repository holds the name now; ``repositories`` and ``created`` say what GitHub says of
each id) and the scripted warehouse, the state and ledger on SQLite.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.events.neutral import WEB, CommentEvent, DriftCheckEvent, PullRequestEvent
from sluice.bot.flow import dispatch, tenancy
from sluice.bot.flow.deps import make_deps
from sluice.bot.forge.base import Check, ForgeError, RepositoryIdentity
from sluice.bot.forge.memory import MemoryForge
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import CASE_REPOSITORY_ID, record_prod
from tests.helpers.fold_settings import fold_settings
from tests.helpers.kept_world import KeptForges, keep_forges, restore_forges
from tests.helpers.oauth import GITHUB_API, FakeUser, fake_github, sign_in
from tests.helpers.web import OWNER as WEB_OWNER
from tests.helpers.web import web_world
from tests.helpers.web_actions import forms
from tests.helpers.web_actions import service as web_service
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, drifted_prod, named, opened

B_NAME = "acme/b"
B_KEY = f"github:{B_NAME}"
B_ID, TAKER_ID = 424242, 990001
HEAD_B, HEAD_X = "b2" * 20, "e5" * 20
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
B_SECRET = "SELECT 'b-only-secret' AS id"
DAY = 86_400_000
YEARS_AGO = NOW - 10 * 365 * DAY


def _world(
    tmp_path: Path, *, bound: bool = False
) -> tuple[Bot, MemoryForge, Warehouse, tenancy.Namespace]:
    """A service isolating repositories (A, octo/warehouse, the state owner) that serves B
    (acme/b: prod, state, Spark root); B's name bound to no id yet (a quiet repository
    served before names were bound), or ``bound`` to B's id (B first delivered since);
    the forge for B's name."""
    warehouse = Warehouse()
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=warehouse.runner,
              isolate=True)  # fmt: skip
    bot.ledger.belongs_to(f"{KEY}#.", NOW)
    if bound:
        assert bot.ledger.bind_repository(B_KEY, B_ID, NOW)[:2] == (B_KEY, B_ID)
    forge = bot.repository(B_NAME)
    forge.roles.update({"alice": "write", "mallory": "admin"})
    forge.repositories[B_ID] = B_NAME
    forge.created[B_ID] = NOW - DAY
    space = drifted_prod(bot, forge, warehouse, B_KEY, CONFIG, B_SECRET)
    # What B's builds left: a check run Sluice made in B, which the ledger keeps.
    built = Check("sluice/pr-environment", "completed", "built", "built", conclusion="success")
    run = forge.set_check(C, built)
    assert run is not None
    bot.ledger.record_check_run(B_KEY, C, built.name, run, NOW)
    return bot, forge, warehouse, space


World = tuple[Bot, MemoryForge, Warehouse, tenancy.Namespace]
Worlds = Callable[..., World]


@pytest.fixture(scope="module")
def built() -> dict[bool, tuple[KeptForges, tenancy.Namespace]]:
    """:func:`_world`'s two worlds (B's name bound or not), each built once for the module
    when a test first asks for it (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def worlds(
    built: dict[bool, tuple[KeptForges, tenancy.Namespace]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Worlds]:
    """``worlds(bound=...)``: a copy of its own of :func:`_world`'s world (its folder put
    back where it was built, its forges and warehouse copied), the bot on it new."""
    made: list[Bot] = []

    def make(*, bound: bool = False) -> World:
        if bound not in built:
            folder = tmp_path_factory.mktemp("names3-world")
            first, _forge, warehouse, space = _world(folder, bound=bound)
            first.close()
            built[bound] = (keep_forges(folder, first.forges, warehouse), space)
        kept, space = built[bound]
        folder, forges, warehouse = restore_forges(kept)
        bot = Bot(folder, forges[OWNER], runner_for=warehouse.runner, isolate=True)
        bot.forges.update(forges)
        made.append(bot)
        return bot, forges[B_NAME], warehouse, space

    yield make
    for bot in made:
        bot.close()


def _b_delivers(bot: Bot, forge: MemoryForge) -> None:
    """B's own delivery (PR 9 opened), under the name bound to B's id; B's PR is built."""
    bot.commit(HEAD_B, CONFIG, parents=(C,), forge=forge)
    forge.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
    bot.deliver("pull_request", named(opened(9, HEAD_B), B_NAME, B_ID))
    assert forge.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
    assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)


def _taken(bot: Bot, forge: MemoryForge, created: int) -> None:
    """B is renamed away (acme/b-renamed) and mallory's repository (``TAKER_ID``, made at
    ``created``) takes the name acme/b, holding B's public history; she opens PR 11."""
    forge.repositories.update({B_ID: "acme/b-renamed", TAKER_ID: B_NAME})
    forge.created[TAKER_ID] = created
    bot.commit(HEAD_X, CONFIG, parents=(C,), forge=forge)
    forge.open_pull(11, head_sha=HEAD_X, base="main", author="mallory")


WRITES = frozenset(
    {"set_check", "reply", "upsert_comment", "react", "start_deployment", "deployment_status",
     "merge"}
)  # fmt: skip


def _writes(forge: MemoryForge, since: int) -> list[str]:
    """The forge's calls since the ``since``-th that post or change something."""
    return [m for m, _ in forge.calls[since:] if m in WRITES]


# == 1. a quiet name's first delivery: made before the records is not the same repository ==


def test_an_older_repository_renamed_into_a_quiet_name_does_not_inherit_it(
    worlds: Worlds,
) -> None:
    bot, forge, _warehouse, _ours = worlds()
    try:
        # B (quiet: no delivery since names were bound) is renamed away; mallory renames
        # her repository of ten years ago (never served here) into B's old name.
        _taken(bot, forge, YEARS_AGO)
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        bound = bot.ledger.name_binding(B_KEY)
        # Her PR is planned against B's prod: "Merging changes nothing in prod: prod
        # already has this state" (a namespace of her own would add every model).
        said = forge.bot_comments(11)
        inherited = [c[:200] for c in said if "prod already has this state" in c]
        assert bound != (B_KEY, TAKER_ID) and not inherited, (
            f"mallory's repository took B's namespace ({bound}): {inherited}"
        )
    finally:
        bot.close()


def test_an_older_repository_renamed_into_a_quiet_name_is_not_shown_its_drift(
    worlds: Worlds,
) -> None:
    bot, forge, _warehouse, _ours = worlds()
    try:
        _taken(bot, forge, YEARS_AGO)
        # The scheduler queues B's drift check by name, as every period (no id).
        dispatch.handle(bot.deps, DriftCheckEvent("github", B_NAME, None))
        posted = forge.checks.get(C, {}).get("sluice/drift")
        assert posted is None, f"B's drift posted to the name's new holder: {posted}"
        assert bot.ledger.name_binding(B_KEY) != (B_KEY, TAKER_ID)
    finally:
        bot.close()


def test_a_served_repository_renamed_into_a_quiet_name_keeps_its_own_namespace(
    worlds: Worlds,
) -> None:
    """Defended: an older repository the service already knows (bound under its own name)
    renamed into a quiet repository's old name is a rename: it keeps its namespace, and
    the quiet one's records are not its."""
    bot, forge, warehouse, ours = worlds()
    try:
        mine = bot.repository("mallory/m")
        mine.repositories[TAKER_ID] = "mallory/m"
        mine.created[TAKER_ID] = YEARS_AGO
        mine.roles.update({"mallory": "admin"})
        bot.commit(C, CONFIG, forge=mine)
        mine.refs["main"] = C
        bot.commit(HEAD_X, CONFIG, parents=(C,), forge=mine)
        mine.open_pull(3, head_sha=HEAD_X, base="main", author="mallory")
        bot.deliver("pull_request", named(opened(3, HEAD_X, author="mallory"), "mallory/m",
                                           TAKER_ID))  # fmt: skip
        assert bot.ledger.name_binding("github:mallory/m") == ("github:mallory/m", TAKER_ID)
        before = dict(warehouse.views)
        _taken(bot, forge, YEARS_AGO)
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        assert bot.ledger.name_binding(B_KEY) == ("github:mallory/m", TAKER_ID)
        made = [v for v in warehouse.views if v not in before]
        assert not any(ours.schema_prefix in v for v in made), made
    finally:
        bot.close()


# == 2. a delivery carrying the id its name is bound to, under a name the id left ==========


def test_a_replayed_delivery_under_the_name_b_left_posts_nothing_to_its_new_holder(
    worlds: Worlds,
) -> None:
    bot, forge, _warehouse, _ours = worlds(bound=True)
    try:
        _b_delivers(bot, forge)
        # B is renamed and delivers under its new name (the binding follows it).
        forge.repositories[B_ID] = "acme/b-renamed"
        renamed = bot.repository("acme/b-renamed")
        renamed.repositories[B_ID] = "acme/b-renamed"
        renamed.roles.update({"alice": "write"})
        bot.commit(C, CONFIG, forge=renamed)
        renamed.refs["main"] = C
        bot.commit(HEAD_B, CONFIG, parents=(C,), forge=renamed)
        renamed.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
        bot.deliver("pull_request", named(opened(9, HEAD_B), "acme/b-renamed", B_ID))
        assert bot.ledger.name_binding("github:acme/b-renamed") == (B_KEY, B_ID)
        # mallory's repository takes the old name (B's public history in it), PR 9 open.
        _taken(bot, forge, NOW + DAY)
        forge.open_pull(9, head_sha=HEAD_B, base="main", author="mallory")
        since = len(forge.calls)
        # B's delivery of PR 9 under its old name, late (retried) or replayed.
        bot.deliver("pull_request", named(opened(9, HEAD_B), B_NAME, B_ID))
        written = _writes(forge, since)
        assert written == [], (
            f"B's job posted to the repository now named {B_NAME}: {written}; "
            f"{forge.bot_comments(9)[-1][:300] if forge.bot_comments(9) else ''}"
        )
    finally:
        bot.close()


def test_a_replayed_delivery_under_the_name_b_left_does_not_list_b_under_it_again(
    worlds: Worlds,
) -> None:
    bot, forge, _warehouse, _ours = worlds(bound=True)
    try:
        _b_delivers(bot, forge)
        forge.repositories[B_ID] = "acme/b-renamed"
        renamed = bot.repository("acme/b-renamed")
        renamed.repositories[B_ID] = "acme/b-renamed"
        renamed.roles.update({"alice": "write"})
        bot.commit(C, CONFIG, forge=renamed)
        renamed.refs["main"] = C
        bot.commit(HEAD_B, CONFIG, parents=(C,), forge=renamed)
        renamed.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
        bot.deliver("pull_request", named(opened(9, HEAD_B), "acme/b-renamed", B_ID))
        listed = dict(bot.ledger.repositories())
        assert "github:acme/b-renamed" in listed and B_KEY not in listed, listed
        _taken(bot, forge, NOW + DAY)
        forge.open_pull(9, head_sha=HEAD_B, base="main", author="mallory")
        # The replay comes a minute later.
        bot.deps = dataclasses.replace(bot.deps, clock=lambda: NOW + 60_000)
        bot.deliver("pull_request", named(opened(9, HEAD_B), B_NAME, B_ID))
        listed = dict(bot.ledger.repositories())
        assert "github:acme/b-renamed" in listed and B_KEY not in listed, listed
    finally:
        bot.close()


def test_a_late_delivery_under_a_name_b_had_but_never_delivered_under_is_refused(
    worlds: Worlds,
) -> None:
    """Defended: B renamed twice (acme/b -> acme/b1 -> acme/b2); a delivery of B under
    acme/b1 (never bound) arriving once mallory holds acme/b1 is a rename only if GitHub
    names B's id so now, which it does not: refused, nothing posted to acme/b1."""
    bot, forge, _warehouse, _ours = worlds(bound=True)
    try:
        _b_delivers(bot, forge)
        forge.repositories.update({B_ID: "acme/b2", TAKER_ID: "acme/b1"})
        held = bot.repository("acme/b1")
        held.repositories.update({B_ID: "acme/b2", TAKER_ID: "acme/b1"})
        held.roles.update({"alice": "write", "mallory": "admin"})
        bot.commit(C, CONFIG, forge=held)
        held.refs["main"] = C
        bot.commit(HEAD_B, CONFIG, parents=(C,), forge=held)
        held.open_pull(9, head_sha=HEAD_B, base="main", author="mallory")
        bot.deliver("pull_request", named(opened(9, HEAD_B), "acme/b1", B_ID))
        assert _writes(held, 0) == []
        assert bot.ledger.name_binding("github:acme/b1") is None
    finally:
        bot.close()


ROLLBACK_NOW = 1_525_046_400_000
MAIN = "e" * 40
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jaffle_shop"


def _b_rolls_back(tmp_path: Path) -> tuple[MemoryForge, Any]:
    """B (acme/b, bound to B_ID) serves prod at two plans under a gate that names nobody
    (any writer of B may roll back); its PR 7 was merged. B's forge and the flow's deps (a
    rollback re-points views: nothing is computed)."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = tmp_path / "v1"
    shutil.copytree(EXAMPLE, first, ignore=shutil.ignore_patterns(".sluice", "tests"))
    fold_settings(first)
    record_prod(first, url, ROLLBACK_NOW)
    second = tmp_path / "v2"
    shutil.copytree(first, second)
    customers = second / "models" / "customers.sql"
    customers.write_text(
        customers.read_text().replace("  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    )
    record_prod(second, url, ROLLBACK_NOW + 60_000)
    forge = MemoryForge(B_NAME, name="github")
    forge.commit_folder(MAIN, second, branch="main")
    forge.open_pull(7, head_sha=MAIN, base="main", author="alice")
    forge.close_pull(7, merged=True)
    forge.roles.update({"alice": "write"})
    forge.repositories[B_ID] = B_NAME
    deps = make_deps(project_python="on", forge_for=lambda _event: forge,
                     workdir=tmp_path / "work", state_url=url, runner_for=Warehouse().runner,
                     clock=lambda: ROLLBACK_NOW + 120_000)  # fmt: skip
    # B's deliveries bound its name to its id (a quiet one's claimed as its own).
    deps.ledger.seen(B_KEY, None, ROLLBACK_NOW, sha=MAIN)
    assert deps.ledger.claim_name(B_KEY, B_ID, B_KEY, ROLLBACK_NOW) is not None
    return forge, deps


def _web_rollback(forge: MemoryForge, deps: Any, author: str) -> list[str]:
    """``author``'s rollback form on B's page, as actions.act makes it (the id the name is
    bound to with the name), handled; the bot's comments on PR 7 then."""
    event = CommentEvent(
        forge="github", repo=B_NAME, installation_id=None, repo_id=B_ID,
        action="created", number=7, comment_id=123456789, author=author,
        author_id=forge.account_id(author), body="/sluice rollback",
        created_ms=ROLLBACK_NOW + 100_000, origin=WEB,
    )  # fmt: skip
    dispatch.handle(deps, event)
    return forge.bot_comments(7)


def test_the_holder_of_b_s_old_name_does_not_roll_b_s_prod_back_from_the_web_ui(
    tmp_path: Path,
) -> None:
    forge, deps = _b_rolls_back(tmp_path)
    try:
        # B is renamed; mallory takes acme/b (B's public history in it: its merged PR 7).
        forge.repositories.update({B_ID: "acme/b-renamed", TAKER_ID: B_NAME})
        forge.roles["mallory"] = "admin"
        said = _web_rollback(forge, deps, "mallory")
        assert not any("rolled prod back" in c for c in said), said
    finally:
        deps.close()


def test_a_person_with_no_role_on_b_rolls_nothing_back_from_the_web_ui(tmp_path: Path) -> None:
    """Defended (control of the attack above): before the rename, mallory, who has no role
    on B, is refused."""
    forge, deps = _b_rolls_back(tmp_path)
    try:
        said = _web_rollback(forge, deps, "mallory")
        assert said and not any("rolled prod back" in c for c in said), said
        assert _web_rollback(forge, deps, "alice")[-1].startswith("@alice rolled prod back")
    finally:
        deps.close()


# == 3. a name with no records: the first delivery binds it on its word ====================

C_NAME = "acme/c"
C_KEY = f"github:{C_NAME}"
C_ID, M_ID = 515151, 626262
HEAD_C, HEAD_M = "c3" * 20, "d4" * 20


def test_a_replayed_delivery_from_a_name_s_former_holder_does_not_lock_its_repository_out(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse()
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=warehouse.runner,
              isolate=True)  # fmt: skip
    try:
        forge = bot.repository(C_NAME)
        forge.roles.update({"alice": "write"})
        bot.commit(C, CONFIG, forge=forge)
        forge.refs["main"] = C
        # GitHub: acme/c is repository C_ID now; mallory's (M_ID) is mallory/m.
        forge.repositories.update({C_ID: C_NAME, M_ID: "mallory/m"})
        bot.commit(HEAD_C, CONFIG, parents=(C,), forge=forge)
        forge.open_pull(5, head_sha=HEAD_C, base="main", author="alice")
        # mallory's signed delivery of when her repository was named acme/c, sent again.
        # Its commit is not in acme/c: the job fails (the worker retries, then gives up).
        with contextlib.suppress(ForgeError):
            bot.deliver("pull_request", named(opened(5, HEAD_M), C_NAME, M_ID))
        # The real acme/c's first delivery (its PR 5, open since).
        bot.deliver("pull_request", named(opened(5, HEAD_C), C_NAME, C_ID))
        assert bot.ledger.name_binding(C_KEY) == (C_KEY, C_ID)
        assert "sluice/pr-environment" in forge.checks.get(HEAD_C, {})
    finally:
        bot.close()


# == 4. defended: case variants, the ~<id> keys, another forge's ids, a forge that fails ===


def test_a_case_variant_of_a_bound_name_from_another_id_inherits_nothing(worlds: Worlds) -> None:
    """Defended: ``Acme/B`` is ``acme/b`` to the binding (case-folded): a repository of
    another id under it, once the forge names B otherwise, takes the name in a namespace
    of its own, never B's, nor a fresh binding of its own spelling beside B's."""
    bot, forge, _warehouse, _ours = worlds(bound=True)
    try:
        _b_delivers(bot, forge)
        _taken(bot, forge, NOW + DAY)
        forge.repositories[TAKER_ID] = "Acme/B"
        bot.forges["Acme/B"] = forge
        bot.deliver("pull_request", named(opened(11, HEAD_X), "Acme/B", TAKER_ID))
        assert forge.checks[HEAD_X]["sluice/pr-environment"].conclusion == "success"
        bound = bot.ledger.name_binding("github:Acme/B")
        assert bound is not None and bound[0].casefold() == f"{B_KEY}~{TAKER_ID}", bound
        theirs = bound[0]
        assert bot.ledger.name_binding(B_KEY) == (theirs, TAKER_ID)
        assert bot.ledger.plans(B_KEY, 11) == {} and set(bot.ledger.plans(theirs, 11))
        # B keeps its namespace: its next delivery under its new name is a rename.
        assert bot.ledger.queue_keys([("github:acme/b-renamed", B_ID)]) == {
            ("github:acme/b-renamed", B_ID): B_KEY
        }
    finally:
        bot.close()


def test_a_name_spelling_another_repository_s_id_key_gets_a_namespace_of_its_own(
    worlds: Worlds,
) -> None:
    """Defended: a successor's records are keyed ``<name>~<id>``; a repository whose name
    spells that key (no forge allows ``~`` in a name; were one to) is bound to a key of its
    own, never to the successor's namespace."""
    bot, forge, _warehouse, _ours = worlds()
    try:
        _taken(bot, forge, NOW + DAY)  # B quiet: the taker is served under acme/b~<id>
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        theirs = f"{B_KEY}~{TAKER_ID}"
        assert bot.ledger.name_binding(B_KEY) == (theirs, TAKER_ID)
        odd = f"{B_NAME}~{TAKER_ID}"
        other = bot.repository(odd)
        other.repositories[M_ID] = odd
        other.roles.update({"mallory": "admin"})
        bot.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        bot.commit(HEAD_M, CONFIG, parents=(C,), forge=other)
        other.open_pull(4, head_sha=HEAD_M, base="main", author="mallory")
        bot.deliver("pull_request", named(opened(4, HEAD_M, author="mallory"), odd, M_ID))
        bound = bot.ledger.name_binding(f"github:{odd}")
        assert bound is not None and bound[0] != theirs, bound
        assert bot.ledger.name_binding(B_KEY) == (theirs, TAKER_ID)
    finally:
        bot.close()


def test_a_gitlab_project_with_a_bound_github_id_is_not_that_repository(worlds: Worlds) -> None:
    """Defended: ids are the forge's own: a GitLab project whose id equals a bound GitHub
    repository's is neither its rename nor its namespace."""
    bot, forge, _warehouse, _ours = worlds(bound=True)
    try:
        _b_delivers(bot, forge)
        lab = MemoryForge("acme/g", name="gitlab", clock=lambda: NOW)
        lab.repositories[B_ID] = "acme/g"
        bot.forges["acme/g"] = lab
        event = PullRequestEvent(
            forge="gitlab", repo="acme/g", installation_id=None, repo_id=B_ID,
            action="closed", number=1, head_sha=HEAD_M, head_ref="x", base_ref="main",
            base_sha=C, author="mallory", draft=False, fork=False, merged=False,
            merge_sha=None, updated_ms=NOW,
        )  # fmt: skip
        dispatch.handle(bot.deps, event)
        assert bot.ledger.name_binding("gitlab:acme/g") == ("gitlab:acme/g", B_ID)
        assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)
        assert bot.ledger.names(B_KEY) == [B_KEY]
    finally:
        bot.close()


def test_a_forge_that_cannot_say_when_a_repository_was_made_binds_nothing(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defended: a quiet name's first delivery while the forge fails, or says no time, is
    refused (the worker tries it again when the forge failed) and binds nothing; the next
    delivery asks again."""
    bot, forge, _warehouse, _ours = worlds()
    try:
        _taken(bot, forge, NOW + DAY)

        def failing(repo_id: int | None = None) -> RepositoryIdentity | None:
            raise ForgeError("GitHub answered 502")

        monkeypatch.setattr(forge, "identity", failing)
        with pytest.raises(ForgeError, match="could not say when repository id"):
            bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        assert bot.ledger.name_binding(B_KEY) is None
        assert "sluice/pr-environment" not in forge.checks.get(HEAD_X, {})

        def timeless(repo_id: int | None = None) -> RepositoryIdentity | None:
            return RepositoryIdentity(TAKER_ID, B_NAME, None)

        monkeypatch.setattr(forge, "identity", timeless)
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        assert bot.ledger.name_binding(B_KEY) is None
        monkeypatch.undo()
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, TAKER_ID))
        assert bot.ledger.name_binding(B_KEY) == (f"{B_KEY}~{TAKER_ID}", TAKER_ID)
    finally:
        bot.close()


def test_a_delivery_naming_a_quiet_name_with_another_repository_s_id_is_refused(
    worlds: Worlds,
) -> None:
    """Defended: a delivery under a quiet name carrying the id of a repository the forge
    names otherwise (forged, or replayed from a former holder) binds nothing."""
    bot, forge, _warehouse, _ours = worlds()
    try:
        forge.repositories[M_ID] = "mallory/m"
        forge.created[M_ID] = YEARS_AGO
        bot.commit(HEAD_X, CONFIG, parents=(C,), forge=forge)
        forge.open_pull(11, head_sha=HEAD_X, base="main", author="mallory")
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, M_ID))
        assert bot.ledger.name_binding(B_KEY) is None
        assert "sluice/pr-environment" not in forge.checks.get(HEAD_X, {})
    finally:
        bot.close()


# == 5. the web UI: a renamed repository's pages under the name another repository took ==

OLD_NAME = "octo/warehouse-old"
MALLORY = FakeUser(
    "mallory", code="code-mallory", token="gho_malloryToken000000", readable={WEB_OWNER}
)


def _github_by_id(rsps: responses.RequestsMock, names: dict[int, str]) -> None:
    """GitHub's ``GET /repositories/{id}``: each id's name now (were the service to ask)."""
    for repo_id, name in names.items():
        rsps.add(
            responses.GET,
            f"{GITHUB_API}/repositories/{repo_id}",
            json={"id": repo_id, "full_name": name, "created_at": "2016-01-01T00:00:00Z"},
        )


def test_the_web_ui_does_not_show_a_renamed_repository_to_its_old_name_s_new_holder(
    tmp_path: Path,
) -> None:
    world = web_world(tmp_path)
    try:
        # octo/warehouse (the id its deliveries carry) is renamed; it has delivered nothing
        # since. mallory took the old name: she reads her own repository, not the renamed.
        world.github.repositories.update({CASE_REPOSITORY_ID: OLD_NAME, TAKER_ID: WEB_OWNER})
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(rsps, MALLORY, served=[WEB_OWNER, OLD_NAME])
            _github_by_id(rsps, {CASE_REPOSITORY_ID: OLD_NAME, TAKER_ID: WEB_OWNER})
            with web_service(world) as client:
                sign_in(client, MALLORY)
                page = client.get("/ui/pulls/7", params={"repo": f"github:{WEB_OWNER}"})
        assert page.status_code == 404, (
            f"the renamed repository's PR 7 is shown to the holder of its old name: "
            f"{page.status_code} {'approve' in forms(page.text)}"
        )
    finally:
        world.close()


def test_the_web_ui_shows_nothing_to_a_person_who_cannot_read_the_name(
    tmp_path: Path,
) -> None:
    """Defended (control of the attack above): before the rename, mallory, who cannot read
    octo/warehouse, is shown nothing of it."""
    world = web_world(tmp_path)
    try:
        stranger = FakeUser("mallory", code="code-mallory", token="gho_malloryToken000000")
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(rsps, stranger, served=[WEB_OWNER])
            with web_service(world) as client:
                sign_in(client, stranger)
                page = client.get("/ui/pulls/7", params={"repo": f"github:{WEB_OWNER}"})
        assert page.status_code == 404, page.status_code
    finally:
        world.close()
