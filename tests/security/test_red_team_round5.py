"""Red team, round 5: the code changed since 839ce98 (pushers by account id, the settings'
people pinned to account ids, prod's jobs on the commit prod was promoted from, the drift
repair's web forms, Spark roots per repository, the repository name bound to its forge id,
job logs per root).

Each test asserts what a sound service does. An attack that works against the code as it
is is a ``xfail(strict=True)`` naming the code path and the fix proposed; the others are
attacks tried and defended. The flows are driven through the service's own entry points:
real webhook bodies (tests/helpers/cases.py), the in-memory forge (accounts keep their id
through a rename, a freed login is another account's), the ledger and state on SQLite, the
scripted warehouse for Spark (tests/helpers/repair_red_team.py, tests/helpers/gate_world.py).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import CommentEvent, DriftCheckEvent
from sluice.bot.flow import audit, dispatch, tenancy, trust
from sluice.bot.flow.checkout import Checkout
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview
from sluice.bot.forge.base import Check
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.model.loader import load_project
from sluice.core.spark import jvm
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.submit import SubmitRunner
from tests.helpers import accounts
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase, record_prod
from tests.helpers.fold_settings import fold_settings
from tests.helpers.kept_world import KeptForges, keep_forges, restore_forges
from tests.helpers.policy_world import SOFT, World, edit_orders
from tests.helpers.repair_red_team import ONE, C, RepairWorld
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, drifted_prod, named, opened

OWNERS = ONE + "    owners_must_approve: direct\n"
BUDGET = ONE + "    backfill:\n      max_intervals: 0\n      approver: frank\n"


def _pin_owners(world: RepairWorld) -> None:
    """What prod's promotion does with the project it promotes (promotion._promote): the
    owners of its models are fixed to the accounts their logins have now."""
    tree = world.root / f"tree-{C[:6]}-{world.github.repo.replace('/', '_')}"
    project = load_project(tree, use_cache=False)
    job = Job.start(world.deps, world.github)
    try:
        trust.for_repository(job)  # the settings in force, and their people, pinned
        trust.pin_owners(job, project)
    finally:
        job.close()
    pinned = world.ledger.settings_in_force(f"github:{world.github.repo}")
    assert pinned is not None and pinned.people is not None
    assert pinned.people.get("finance") == world.github.account_id("finance")


# == 1. the drift repair's owners and budget approver: by login, not by the pinned account ==


def test_a_required_approver_who_takes_an_owner_s_freed_login_is_not_the_owner(
    tmp_path: Path,
) -> None:
    # owners_must_approve: direct; users [bob, carol] (one approval); finance owns orders in
    # prod, pinned to finance's account by the promotion. Prod's orders table is dropped by
    # hand; alice asks for the repair, which rebuilds orders: bob and finance must approve.
    # finance renames herself `financex`; bob (a required approver) takes the freed login
    # `finance` and clicks Approve once.
    world = RepairWorld(tmp_path, OWNERS)
    world.github.roles.update({"finance": "write", "marketing": "write"})
    try:
        world.drop_orders()
        _pin_owners(world)
        world.click("alice", world.button("Plan the repair"))
        built = world.applied()
        world.github.rename("finance", "financex")
        bob = world.github.rename("bob", "finance")  # bob's account, under finance's old login
        world.click("finance", world.button("Approve the repair"))
        approvals = [r for r in world.ledger.entries(repo="github:octo/warehouse")
                     if r.kind == audit.REPAIR and r.outcome == "approved"]  # fmt: skip
        assert [(r.actor, r.actor_id) for r in approvals] == [("finance", bob)]
        assert world.applied() == built, "one approval by bob rebuilt finance's table"
        assert "@finance approves it" in world.drift().summary, world.drift().summary
    finally:
        world.close()


# == 2. a name bound to a repository id: the service's own jobs of that name ===============

B_NAME = "acme/b"
B_KEY = f"github:{B_NAME}"
B_ID, SUCCESSOR_ID = 424242, 990001
HEAD_B, HEAD_X = "b2" * 20, "e5" * 20
B_CONFIG = GATED + "  pr:\n    backfill_days: null\n"
B_SECRET = "SELECT 'b-only-secret' AS id"


def test_a_scheduled_drift_check_of_b_s_name_never_reports_to_the_repository_that_took_it(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse()
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=warehouse.runner,
              isolate=True)  # fmt: skip
    try:
        bot.ledger.belongs_to(f"{KEY}#.", NOW)  # A (octo/warehouse) is the state owner
        # `forge` answers to B's name: B's own repository first, then (B renamed away) the
        # attacker's new repository under B's old name, holding B's public history.
        forge = bot.repository(B_NAME)
        forge.roles.update({"alice": "write"})
        drifted_prod(bot, forge, warehouse, B_KEY, B_CONFIG, B_SECRET)
        # B's own delivery (a PR opened) binds B's name to B's forge id: GitHub says B was
        # made before the service's first record of its name.
        forge.repositories[B_ID] = B_NAME
        forge.created[B_ID] = NOW - 86_400_000
        _b_check_run(bot, forge)
        bot.commit(HEAD_B, B_CONFIG, parents=(C,), forge=forge)
        forge.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
        bot.deliver("pull_request", named(opened(9, HEAD_B), B_NAME, B_ID))
        assert forge.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
        assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)
        forge.repositories.update({B_ID: "acme/b-renamed", SUCCESSOR_ID: B_NAME})
        forge.created[SUCCESSOR_ID] = NOW + 86_400_000
        bot.commit(HEAD_X, B_CONFIG, parents=(C,), forge=forge)
        forge.open_pull(11, head_sha=HEAD_X, base="main", author="alice")
        # The new repository's own delivery takes the name, in a namespace of its own: the
        # service knows the name changed hands (tests/security/test_red_team_isolation2.py).
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, SUCCESSOR_ID))
        assert forge.checks[HEAD_X]["sluice/pr-environment"].conclusion == "success"
        assert bot.ledger.name_binding(B_KEY) == (f"{B_KEY}~{SUCCESSOR_ID}", SUCCESSOR_ID)
        # The scheduler queues the name's drift check by name, as every period: it is the
        # new holder's now, in its namespace, which has none of B's prod.
        dispatch.handle(bot.deps, DriftCheckEvent("github", B_NAME, None))
        posted = forge.checks.get(C, {}).get("sluice/drift")
        assert posted is None, f"B's drift reported to the name's new holder: {posted}"
    finally:
        bot.close()


def _quiet_b(tmp_path: Path) -> tuple[Bot, MemoryForge, Warehouse]:
    """B served before names were bound to ids (prod, state, Spark root; no id recorded),
    quiet since; B is then renamed away and a new repository (another id, made a day after
    the service's first record of B) takes B's old name, holding B's public history."""
    warehouse = Warehouse()
    bot = Bot(tmp_path, MemoryForge(OWNER, name="github"), runner_for=warehouse.runner,
              isolate=True)  # fmt: skip
    bot.ledger.belongs_to(f"{KEY}#.", NOW)
    forge = bot.repository(B_NAME)
    forge.roles.update({"alice": "write"})
    drifted_prod(bot, forge, warehouse, B_KEY, B_CONFIG, B_SECRET)
    forge.repositories.update({B_ID: "acme/b-renamed", SUCCESSOR_ID: B_NAME})
    forge.created.update({B_ID: NOW - 86_400_000, SUCCESSOR_ID: NOW + 86_400_000})
    bot.commit(HEAD_X, B_CONFIG, parents=(C,), forge=forge)
    forge.open_pull(11, head_sha=HEAD_X, base="main", author="alice")
    return bot, forge, warehouse


Quiet = Callable[[], tuple[Bot, MemoryForge, Warehouse]]


@pytest.fixture(scope="module")
def quiet_built() -> list[KeptForges]:
    """:func:`_quiet_b`'s world, built once for the module when a test first asks for it
    (tests/helpers/kept_world.py)."""
    return []


@pytest.fixture
def quiet_b(
    quiet_built: list[KeptForges], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Quiet]:
    """``quiet_b()``: a copy of its own of :func:`_quiet_b`'s world (its folder put back
    where it was built, its forges and warehouse copied), the bot on it new."""
    made: list[Bot] = []

    def make() -> tuple[Bot, MemoryForge, Warehouse]:
        if not quiet_built:
            folder = tmp_path_factory.mktemp("quiet-b")
            first, _forge, warehouse = _quiet_b(folder)
            first.close()
            quiet_built.append(keep_forges(folder, first.forges, warehouse))
        folder, forges, warehouse = restore_forges(quiet_built[0])
        bot = Bot(folder, forges[OWNER], runner_for=warehouse.runner, isolate=True)
        bot.forges.update(forges)
        made.append(bot)
        return bot, forges[B_NAME], warehouse

    yield make
    for bot in made:
        bot.close()


def test_a_quiet_repository_s_old_name_taken_before_it_delivered_anything_is_not_inherited(
    quiet_b: Quiet,
) -> None:
    bot, forge, warehouse = quiet_b()
    try:
        b_views = {v: text for v, text in warehouse.views.items()}
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, SUCCESSOR_ID))
        # The successor is served, in a namespace of its own: B's records stay B's.
        assert bot.ledger.name_binding(B_KEY) == (f"{B_KEY}~{SUCCESSOR_ID}", SUCCESSOR_ID)
        ours = tenancy.namespace_of(B_KEY, bot.ledger, bot.url, isolate=True)
        theirs = tenancy.namespace_of(f"{B_KEY}~{SUCCESSOR_ID}", bot.ledger, bot.url,
                                      isolate=True)  # fmt: skip
        assert ours.schema_prefix != theirs.schema_prefix and ours.spark != theirs.spark
        built = forge.checks[HEAD_X]["sluice/pr-environment"]
        assert built.conclusion == "success", built
        comment = forge.bot_comments(11)[-1]
        assert "b-only-secret" not in comment
        # Nothing of B's namespace was read as the successor's prod: its PR's views are in
        # its own prefix, and none of B's views changed.
        assert all(text == warehouse.views[v] for v, text in b_views.items())
        made = [v for v in warehouse.views if v not in b_views]
        assert made and all(theirs.schema_prefix in v for v in made), made
    finally:
        bot.close()


def _b_check_run(bot: Bot, forge: MemoryForge) -> None:
    """What a PR build of B left before B went quiet: a check run GitHub keeps in B (by
    B's id) and the ledger keeps under B's name."""
    held = dict(forge.repositories)
    forge.repositories.clear()
    forge.repositories[B_ID] = B_NAME
    run = forge.set_check(C, Check("sluice/pr-environment", "completed", "built", "built",
                                   conclusion="success"))  # fmt: skip
    assert run is not None
    bot.ledger.record_check_run(B_KEY, C, "sluice/pr-environment", run, NOW)
    forge.repositories.clear()
    forge.repositories.update(held)


def test_a_quiet_repository_s_own_delivery_binds_it_to_its_records(quiet_b: Quiet) -> None:
    # Control: B itself (made before the service's first record, holding a check run the
    # service made under the name) keeps its namespace.
    bot, forge, _warehouse = quiet_b()
    try:
        _b_check_run(bot, forge)
        forge.repositories.update({B_ID: B_NAME})
        del forge.repositories[SUCCESSOR_ID]
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, B_ID))
        assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)
        assert forge.checks[HEAD_X]["sluice/pr-environment"].conclusion == "success"
    finally:
        bot.close()


def test_an_older_repository_that_shows_no_check_run_of_the_name_is_refused_until_bound(
    quiet_b: Quiet, caplog: pytest.LogCaptureFixture
) -> None:
    # B's own delivery, but no check run proves it (none recorded, or GitLab): older than
    # the records is no proof (a repository renamed into the name is older too). Refused
    # with the statement that binds it; bound by the operator, it keeps its namespace.
    bot, forge, _warehouse = quiet_b()
    try:
        forge.repositories.update({B_ID: B_NAME})
        del forge.repositories[SUCCESSOR_ID]
        with caplog.at_level(logging.ERROR):
            bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, B_ID))
        assert "sluice/pr-environment" not in forge.checks.get(HEAD_X, {})
        assert bot.ledger.name_binding(B_KEY) is None
        said = caplog.text
        assert "shows none of" in said or "cannot show" in said, said
        statement = said[said.index("INSERT INTO") : said.index("; to serve")]
        engine = create_engine(bot.url)
        with engine.begin() as conn:
            conn.execute(text(statement))
        engine.dispose()
        bot.deliver("pull_request", named(opened(11, HEAD_X), B_NAME, B_ID))
        assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)
        assert forge.checks[HEAD_X]["sluice/pr-environment"].conclusion == "success"
    finally:
        bot.close()


def test_a_quiet_repository_s_scheduled_job_never_runs_for_the_name_s_new_holder(
    quiet_b: Quiet,
) -> None:
    bot, forge, _warehouse = quiet_b()
    try:
        dispatch.handle(bot.deps, DriftCheckEvent("github", B_NAME, None))
        assert forge.checks.get(C, {}).get("sluice/drift") is None
        assert bot.ledger.name_binding(B_KEY) is None  # the successor's delivery binds it
    finally:
        bot.close()


def test_a_quiet_repository_s_scheduled_job_binds_its_name_while_it_is_still_its_own(
    quiet_b: Quiet,
) -> None:
    bot, forge, _warehouse = quiet_b()
    try:
        # Before any rename: GitHub names B so. Its drift check runs and binds the name, so
        # a rename later keeps B's namespace and a successor is refused.
        _b_check_run(bot, forge)
        forge.repositories.update({B_ID: B_NAME})
        del forge.repositories[SUCCESSOR_ID]
        dispatch.handle(bot.deps, DriftCheckEvent("github", B_NAME, None))
        assert bot.ledger.name_binding(B_KEY) == (B_KEY, B_ID)
        assert forge.checks[C]["sluice/drift"].conclusion is not None
    finally:
        bot.close()


# == 3. /sluice rollback: who may roll prod back, by login ================================

REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN = "e" * 40
ROLLBACK_NOW = 1_525_046_400_000
BOB_APPROVES = "\n  gate:\n    required_approvers:\n      users: [bob]\n"


def _rollback_world(tmp_path: Path, gate: str) -> tuple[Callable[[str], str], Warehouse, Any]:
    """Prod at two plans under ``gate`` (jaffle.customers changed in the second), PR 7
    merged; ``say(author)`` comments ``/sluice rollback`` on it as GitHub sends a comment
    (the author's account id with it) and returns the bot's reply."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = tmp_path / "v1"
    shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", first,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    fold_settings(first)
    with (first / "config.yaml").open("a") as config:
        config.write(gate)
    record_prod(first, url, ROLLBACK_NOW)
    second = tmp_path / "v2"
    shutil.copytree(first, second)
    customers = second / "models" / "customers.sql"
    customers.write_text(
        customers.read_text().replace("  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    )
    record_prod(second, url, ROLLBACK_NOW + 60_000)
    forge = MemoryForge()
    forge.commit_folder(MAIN, second, branch="main")
    forge.open_pull(7, head_sha=MAIN, base="main", author="alice")
    forge.close_pull(7, merged=True)
    forge.roles.update({"alice": "write", "bob": "write", "mallory": "write"})
    warehouse = Warehouse()
    deps = make_deps(project_python="on", forge_for=lambda _event: as_forge(forge),
                     workdir=tmp_path / "work", state_url=url, runner_for=warehouse.runner,
                     clock=lambda: ROLLBACK_NOW + 120_000)  # fmt: skip
    deps.ledger.seen(f"memory:{forge.repo}", None, ROLLBACK_NOW, sha=MAIN)

    def say(author: str) -> str:
        comment_id = forge.add_comment(7, author, "/sluice rollback")
        event = CommentEvent(
            forge="memory", repo=forge.repo, installation_id=None, action="created", number=7,
            comment_id=comment_id, author=author, body="/sluice rollback",
            author_id=forge.account_id(author),
        )  # fmt: skip
        dispatch.handle(deps, event)
        return forge.bot_comments(7)[-1]

    return say, warehouse, (forge, deps)


def test_an_account_that_took_a_required_approver_s_freed_login_rolls_nothing_back(
    tmp_path: Path,
) -> None:
    say, warehouse, (forge, deps) = _rollback_world(tmp_path, BOB_APPROVES)
    try:
        # The settings in force are read (and their people pinned: bob is bob's account).
        assert "only a required approver of the gate (`bob`" in say("mallory")
        bob = forge.account_id("bob")
        pinned = deps.ledger.settings_in_force(f"memory:{forge.repo}")
        assert pinned is not None and pinned.people == {"bob": bob}
        # bob renames himself; mallory's second account takes `bob` (a writer of the repo).
        forge.rename("bob", "bobx")
        forge.roles["bob"] = "write"
        assert forge.account_id("bob") != bob
        reply = say("bob")
        assert warehouse.jobs == [], f"the taker rolled prod back: {reply}"
        assert "not rolled back" in reply, reply
    finally:
        deps.close()


def test_a_required_approver_rolls_back_and_a_plain_writer_does_not(tmp_path: Path) -> None:
    # Control of the attack above: bob, the required approver, may; alice may not.
    say, warehouse, (_forge, deps) = _rollback_world(tmp_path, BOB_APPROVES)
    try:
        assert "only a required approver of the gate (`bob`" in say("alice")
        assert say("bob").startswith("@bob rolled prod back"), warehouse.jobs
    finally:
        deps.close()


TEAM_APPROVES = "\n  gate:\n    required_approvers:\n      teams: [acme/approvers]\n"
# A bot account in the approvers' group: a GitLab service account whose username its maker
# chose, or a group access token's user; the forge says it is a bot (by its id).
GROUP_BOT = "deploy-helper"


def test_a_bot_in_a_required_team_rolls_nothing_back(tmp_path: Path) -> None:
    say, warehouse, (forge, deps) = _rollback_world(tmp_path, TEAM_APPROVES)
    try:
        forge.teams["acme/approvers"] = frozenset({"carol", GROUP_BOT})
        forge.roles.update({"carol": "write", GROUP_BOT: "write"})
        forge.bots[GROUP_BOT] = True  # what the forge says of the account, by its id
        reply = say(GROUP_BOT)
        assert warehouse.jobs == [], f"a bot rolled prod back: {reply}"
        assert say("carol").startswith("@carol rolled prod back")  # a person of the team may
    finally:
        deps.close()


RELEASERS = (
    "sluice:\n  project: jaffle\n  deploy:\n    environments:\n"
    "      - {name: staging, on: merge}\n"
    "      - {name: prod, on: tag, tag_pattern: 'v*', released_by: [acme/releasers]}\n"
)


def _tag_by(tmp_path: Path, who: str) -> list[tuple[str, str, str]]:
    """``who`` pushes tag v1 on the prod branch's head, under a prod tier released by the
    team acme/releasers (carol, and a bot account); the audit log's rows then."""
    bot = gw.make_bot(tmp_path, RELEASERS, {"carol": "write", GROUP_BOT: "write"})
    try:
        bot.forge.teams["acme/releasers"] = frozenset({"carol", GROUP_BOT})
        bot.forge.bots[GROUP_BOT] = True  # what the forge says of the account, by its id
        bot.forge.refs["main"] = gw.A
        tag = realcase("github/push/woodpecker__HookTag.json", gw.OWNER,
                       ref="refs/tags/v1", after=gw.A, deleted=False)  # fmt: skip
        tag["sender"]["login"] = who
        assert bot.deliver("push", tag)
        return [(e.kind, e.actor, e.outcome) for e in bot.ledger.entries(repo=gw.KEY)]
    finally:
        bot.close()


def test_a_bot_in_the_releasers_team_releases_nothing(tmp_path: Path) -> None:
    # The bot's tag goes on to promote prod (its project here fails to load: no matter).
    rows = _tag_by(tmp_path, GROUP_BOT)
    assert rows == [(audit.REFUSAL, GROUP_BOT, "release refused")], rows


def test_a_person_outside_the_releasers_team_releases_nothing(tmp_path: Path) -> None:
    # Control of the attack above: mallory, a writer outside the team, is refused.
    rows = _tag_by(tmp_path, "mallory")
    assert rows == [(audit.REFUSAL, "mallory", "release refused")], rows


def _say(world: World, user: str, body: str) -> list[str]:
    """``user`` comments ``body`` on PR 7 as GitHub sends it (the account id with it)."""
    before = len(world.forge.bot_comments(7))
    comment_id = world.forge.add_comment(7, user, body)
    payload = realcase("github/issue_comment/drone-go-scm__comment.json", gw.OWNER,
                       action="created", **{
        "issue.number": 7, "comment.user.login": user, "comment.body": body,
        "comment.id": comment_id,
    })  # fmt: skip
    event = parse_github("issue_comment", accounts.github(payload, world.forge.account_id))
    assert event is not None
    dispatch.handle(world.deps, event)
    return world.forge.bot_comments(7)[before:]


def test_a_bot_in_the_override_by_team_overrides_nothing(tmp_path: Path) -> None:
    world = World(tmp_path, {"policies/soft.yaml": SOFT})
    world.forge.teams["octo/finance"] = frozenset({"fin", GROUP_BOT})
    world.forge.roles[GROUP_BOT] = "write"
    world.forge.bots[GROUP_BOT] = True  # what the forge says of the account, by its id
    try:
        world.head(gw.A, edit_orders)
        world.open(7, gw.A)
        world.build(7)
        assert world.check(gw.A).conclusion != "success"  # type: ignore[union-attr]
        [reply] = _say(world, GROUP_BOT, "/sluice override orders-need-finance ship it")
        assert "may not override" in reply, reply
        assert world.check(gw.A).conclusion != "success"  # type: ignore[union-attr]
    finally:
        world.close()


DANA_RELEASES = RELEASERS.replace("released_by: [acme/releasers]", "released_by: [dana]")


def test_a_tag_push_naming_its_pusher_without_an_account_releases_nothing(
    tmp_path: Path,
) -> None:
    """Defended: a tag push whose payload has no ``sender`` names its actor by
    ``pusher.name`` alone (no account id): under settings that pinned ``dana`` to her
    account, that name is nobody's, so the tag is refused though it says ``dana``."""
    bot = gw.make_bot(tmp_path, DANA_RELEASES, {"dana": "write", "mallory": "write"})
    try:
        bot.forge.refs["main"] = gw.A
        tag = realcase("github/push/woodpecker__HookTag.json", gw.OWNER,
                       ref="refs/tags/v1", after=gw.A, deleted=False)  # fmt: skip
        tag.pop("sender", None)
        tag["pusher"] = {"name": "dana", "email": "dana@example.com"}
        assert bot.deliver("push", tag)
        rows = [(e.kind, e.actor, e.outcome) for e in bot.ledger.entries(repo=gw.KEY)]
        assert rows == [(audit.REFUSAL, "dana", "release refused")], rows
    finally:
        bot.close()


# == 4. the class archive a prod driver writes, bound into A's next sandboxes =============

A_REPO, B_REPO = "github:mallory/a", "github:acme/b"


def test_a_prod_driver_cannot_swap_a_link_into_a_pr_job_s_class_archive_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(jvm.CACHE_ENV, raising=False)
    monkeypatch.setattr(sandbox, "isolation", lambda: "bwrap")
    work = Checkout(tmp_path / "work")
    a, b = (work.spark_at(tenancy.spark_root(repo)) for repo in (A_REPO, B_REPO))
    secret = b.warehouse / "sluice_r_b__db.db" / "t" / "part-0.parquet"
    secret.parent.mkdir(parents=True)
    secret.write_text("B's rows")
    a.logs.mkdir(parents=True)
    runner = SubmitRunner(SparkSettings(master="local[2]"), a)
    env = dict(os.environ)
    archive = jvm.ClassArchive.for_spark(jvm.spark_home(), env, a.class_archives)
    if archive is None:
        pytest.skip("no Java here: no class archive")
    # A's first prod job: no archive yet, so its driver dumps one, the folder writable.
    with runner._class_archive(env, {"environment": "prod"}) as dumping:  # type: ignore[arg-type]
        assert dumping.folder == archive.folder
        # The driver puts a regular file where the archive goes...
        archive.path.write_bytes(b"not a class archive")
        # ...and A's PR job starts: the archive is a regular file now, mapped.
        with runner._class_archive(env, {"environment": "pr"}) as mapped:  # type: ignore[arg-type]
            assert mapped.reads == [archive.path]
            # The driver swaps a link in (a rename: atomic) before the sandbox is made.
            link = archive.folder / "swap"
            link.symlink_to(secret)
            os.replace(link, archive.path)
            spec_path = a.logs / "pr-job.json"
            spec_path.write_text("{}")
            home = a.logs / "pr-job.home"
            home.mkdir()
            profile = runner.profile({"steps": []}, spec_path, home, mapped)  # type: ignore[typeddict-item]
            argv = sandbox._bwrap(["true"], profile)
    assert str(secret) not in argv, "B's warehouse file is bound into A's PR sandbox"


def test_no_driver_writes_its_root_s_log_folder_where_the_web_ui_serves_logs(
    tmp_path: Path,
) -> None:
    """Defended: the web UI serves ``<logs>/<id>.log`` of a repository's root (following a
    link there: Reader.log_path), so no sandbox of a job may write that folder: a PR's
    driver (spark-submit's, or a Connect job's child) writes its own home inside it, never
    the folder itself, where a link named as another job's log would be served."""
    work = Checkout(tmp_path / "work")
    a = work.spark_at(tenancy.spark_root(A_REPO))
    a.logs.mkdir(parents=True)
    spec_path = a.logs / "pr-job.json"
    spec_path.write_text("{}")
    home = a.logs / "pr-job.1a2b.home"
    home.mkdir()
    runner = SubmitRunner(SparkSettings(master="local[2]"), a)
    profile = runner.profile({"steps": []}, spec_path, home, jvm.ArchiveUse([]))  # type: ignore[typeddict-item]
    written = [Path(p) for p in profile.write]
    assert home in written
    assert not any(p == a.logs or p in a.logs.parents for p in written), written
    argv = sandbox._bwrap(["true"], profile)
    binds = {argv[i + 1] for i, flag in enumerate(argv) if flag == "--bind"}
    assert str(a.logs) not in binds and str(home) in binds, binds


# == 5. a hookless push to another branch of the repository ================================

TEAM_GATED = (
    "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      teams: [octo/approvers]\n"
)
CHANGE = PlanReview("fpchange0001", (("s.change", "k-change"),), {}, {})
B_COMMIT = gw.B


def test_a_hookless_push_to_another_branch_then_brought_in_by_alice_is_not_hidden(
    tmp_path: Path,
) -> None:
    roles = {"alice": "write", "bob": "write", "carol": "admin", "mallory": "write"}
    one = gw.make_bot(tmp_path, TEAM_GATED, roles)
    one.forge.teams["octo/approvers"] = frozenset({"bob", "carol", "mallory"})
    try:
        # mallory (octo/approvers) writes B (its author's e-mail alice's) and pushes it to
        # `side` in a push of over 5,000 branches: no hook; the forge records it.
        one.forge.commit(B_COMMIT, {"config.yaml": TEAM_GATED}, parents=(gw.A,),
                         author="alice", committer="alice")  # fmt: skip
        one.forge.push_log.append(("side", B_COMMIT, "mallory"))
        # alice makes `change` from `side` (a hooked push naming her) and opens the PR.
        one.deliver("push", gw.push("change", B_COMMIT, "alice", (B_COMMIT,)))
        one.forge.open_pull(7, head_sha=B_COMMIT, base="main", author="alice",
                            head_ref="change")  # fmt: skip
        one.deliver("pull_request", gw.pr_event("opened", B_COMMIT, "alice", head_ref="change"))
        gw.plan(one, B_COMMIT, CHANGE)
        gw.approve(one, "mallory", B_COMMIT, 41)
        check = one.approval(B_COMMIT)
        assert check.conclusion != "success", check.summary
    finally:
        one.close()
