"""One service, many repositories, each in its own namespace (issue 46, docs/architecture.md
"Many repositories, isolated"): its own state, its own Spark schemas (a prefix the
service derives), so no repository reads, promotes, rolls back or drops another's
environments or tables. The flows run for real on the scripted warehouse (no Spark: the
same specs, state and write checks, one warehouse both repositories' jobs share).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from sluice.bot.events.neutral import CommentEvent, JanitorEvent
from sluice.bot.flow import dispatch, tenancy
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core.errors import SluiceError
from sluice.core.rollback import history
from sluice.core.snapshot.naming import PROD, pr_environment, schema_prefix, view_name
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.core.helpers import BASIC, load
from tests.helpers.cases import record_prod
from tests.helpers.fold_settings import fold_settings
from tests.security.github_bot import GATED, KEY, OWNER, Bot, C, opened

OTHER = "mallory/other"
OTHER_KEY = f"github:{OTHER}"
HEAD_A, HEAD_B = "a1" * 20, "b2" * 20
CONFIG = GATED + "  pr:\n    backfill_days: null\n"
ORDERS = (
    "  ON o.order_id = p.order_id",
    "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'",
)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _elsewhere(payload: dict[str, Any], repo: str = OTHER) -> dict[str, Any]:
    repository = dict(payload["repository"])
    repository["full_name"] = repo
    repository["id"] = 424242
    pull = dict(payload["pull_request"])
    head = dict(pull["head"])
    head["repo"] = {**dict(head["repo"]), "full_name": repo}
    pull["head"] = head
    return {**payload, "repository": repository, "pull_request": pull}


def _pr(bot: Bot, forge: MemoryForge, number: int, head: str) -> None:
    src = bot.commit(head, CONFIG, parents=(C,), forge=forge)
    orders = src / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace(*ORDERS))
    forge.commit_folder(head, src, parents=(C,))
    forge.open_pull(number, head_sha=head, base="main", author="alice")


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Bot, MemoryForge, Warehouse]]:
    """An isolating service: repositories A (OWNER) and B (OTHER), main at ``C`` in both,
    each with a PR changing orders.sql (A's 7, B's 9), on one scripted warehouse."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    bot.prod(C, CONFIG)
    other = bot.repository(OTHER, 424242)
    bot.commit(C, CONFIG, forge=other)
    other.refs["main"] = C
    for forge in (github, other):
        forge.roles.update({"alice": "write", "bob": "write"})
    _pr(bot, github, 7, HEAD_A)
    _pr(bot, other, 9, HEAD_B)
    yield bot, other, warehouse
    bot.close()


def _environments(url: str) -> set[str]:
    store = open_state(url)
    try:
        return {e.name for e in store.list_environments()}
    finally:
        store.close()


def _schemas(names: Any) -> set[str]:
    return {name.rsplit(".", 1)[0] for name in names}


def test_two_repositories_build_in_their_own_state_and_schemas(
    two: tuple[Bot, MemoryForge, Warehouse],
) -> None:
    bot, other, warehouse = two
    bot.deliver("pull_request", opened(7, HEAD_A))
    bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
    assert bot.checks_on(HEAD_A)["sluice/pr-environment"].conclusion == "success"
    assert other.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
    a, b = tenancy.schema_prefix(KEY), tenancy.schema_prefix(OTHER_KEY)
    schemas = _schemas(warehouse.tables) | _schemas(warehouse.views)
    assert schemas and all(s.startswith((a, b)) for s in schemas), schemas
    assert any(s.startswith(a) for s in schemas) and any(s.startswith(b) for s in schemas)
    # Each repository's environment in its own state; none in the shared database's.
    assert _environments(tenancy.state_url(bot.url, KEY)) == {pr_environment(7)}
    assert _environments(tenancy.state_url(bot.url, OTHER_KEY)) == {pr_environment(9)}
    assert _environments(bot.url) == set()
    with schema_prefix(b):
        assert view_name("jaffle.orders", pr_environment(9)) in warehouse.views
    # Both PRs changed the same model the same way: still two tables, one per repository.
    orders = [t for t in warehouse.tables if ".jaffle__orders__" in t]
    assert len(orders) == 2 and _schemas(orders) == {f"{a}sluice__jaffle", f"{b}sluice__jaffle"}


def test_a_janitor_never_drops_another_repository_s_tables(
    two: tuple[Bot, MemoryForge, Warehouse],
) -> None:
    bot, _other, warehouse = two
    bot.deliver("pull_request", opened(7, HEAD_A))
    bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
    b = tenancy.schema_prefix(OTHER_KEY)
    theirs = ({t for t in warehouse.tables if t.startswith(b)}, dict(
        (v, sql) for v, sql in warehouse.views.items() if v.startswith(b)))  # fmt: skip
    assert theirs[0] and theirs[1]
    janitors = len([j for j in warehouse.jobs if j["kind"] == "janitor"])
    github = bot.github
    github.close_pull(7, merged=False)
    closed = {**opened(7, HEAD_A), "action": "closed"}
    closed["pull_request"] = {**closed["pull_request"], "state": "closed", "merged": False}
    bot.deliver("pull_request", closed)  # A's PR environment invalidated
    for _ in range(2):
        dispatch.handle(bot.deps, JanitorEvent(forge="github", repo=OWNER, installation_id=None))
    specs = [j for j in warehouse.jobs if j["kind"] == "janitor"][janitors:]
    assert specs, "A's janitor ran no job"
    named = repr(specs)
    assert b not in named  # nothing of B's is even named
    assert {t for t in warehouse.tables if t.startswith(b)} == theirs[0]
    assert {v: s for v, s in warehouse.views.items() if v.startswith(b)} == theirs[1]
    with schema_prefix(tenancy.schema_prefix(KEY)):
        assert view_name("jaffle.orders", pr_environment(7)) not in warehouse.views  # A's gone


def test_a_state_made_before_isolation_stays_its_owner_s_and_unprefixed(tmp_path: Path) -> None:
    """The state owner's database, environments and table names are kept in place when
    the service starts isolating; a new repository gets its own beside them."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    before = Bot(tmp_path, github, runner_for=warehouse.runner)  # as every service was
    before.prod(C, CONFIG)
    _pr(before, github, 7, HEAD_A)
    before.deliver("pull_request", opened(7, HEAD_A))
    before.close()
    unprefixed = set(warehouse.tables)
    assert unprefixed and not any(t.startswith("sluice_r_") for t in unprefixed)
    assert Ledger(before.url).owner() == (KEY, ".")

    after = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    try:
        other = after.repository(OTHER, 424242)
        other.roles.update({"alice": "write", "bob": "write"})
        after.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        _pr(after, other, 9, HEAD_B)
        github.open_pull(8, head_sha=HEAD_A, base="main", author="alice")
        after.deliver("pull_request", opened(8, HEAD_A))  # the owner: same state, same names
        after.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
        assert _environments(after.url) == {pr_environment(7), pr_environment(8)}
        assert _environments(tenancy.state_url(after.url, OTHER_KEY)) == {pr_environment(9)}
        assert view_name("jaffle.orders", pr_environment(8)) in warehouse.views
        new = set(warehouse.tables) - unprefixed
        b = tenancy.schema_prefix(OTHER_KEY)
        assert new and all(t.startswith(b) for t in new)  # the owner built nothing new
        assert not Path(tenancy.state_url(after.url, KEY).removeprefix("sqlite:///")).exists()
    finally:
        after.close()


# --- names: derived by the service, never colliding -----------------------------------

LOOK_ALIKES = [
    "github:acme/ware_house",
    "github:acme/ware.house",
    "github:acme/ware-house",
    "github:acme-ware/house",
    "gitlab:acme/ware_house",
    "github:acme/ware_house_" + tenancy.repository_name("github:acme/ware_house")[-20:],
    "github:acme/../../etc/passwd",
    "github:sluice_r_acme/x",
]


def test_look_alike_repositories_get_apart_names_and_no_path_escapes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    names = {tenancy.repository_name(repo) for repo in LOOK_ALIKES}
    assert len(names) == len(LOOK_ALIKES)
    prefixes = {tenancy.schema_prefix(repo) for repo in LOOK_ALIKES}
    assert len(prefixes) == len(LOOK_ALIKES)
    # No prefix is the start of another's: one repository's schemas are never another's.
    assert not any(p != q and q.startswith(p) for p in prefixes for q in prefixes)
    for repo in LOOK_ALIKES:
        path = Path(tenancy.state_url(url, repo).removeprefix("sqlite:///"))
        assert path.parent == tmp_path and path.name.startswith("state.")
        with schema_prefix(tenancy.schema_prefix(repo)):
            pass  # the service's form: lower-case letters, digits, single underscores
    # The forges' own case-folding: one repository, one namespace.
    assert tenancy.repository_name("github:Acme/Ware_House") == tenancy.repository_name(
        "github:acme/ware_house"
    )


def test_each_repository_has_its_own_postgresql_schema(fresh_postgres_url: str) -> None:
    urls = {repo: tenancy.state_url(fresh_postgres_url, repo) for repo in (KEY, OTHER_KEY)}
    for url in urls.values():
        tenancy.ensure_schema(url)
        store = open_state(url)
        try:
            assert store.list_environments() == []
        finally:
            store.close()
    engine = create_engine(fresh_postgres_url)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT table_schema FROM information_schema.tables "
                    "WHERE table_name = 'sluice_environments'"
                )
            ).scalars()
            schemas = set(found)
    finally:
        engine.dispose()
    assert schemas == {"sluice_" + tenancy.repository_name(r) for r in urls}


def test_an_operator_s_own_search_path_gives_way_to_the_repository_s(
    fresh_postgres_url: str,
) -> None:
    configured = f"{fresh_postgres_url}?options=-c%20search_path%3Delsewhere"
    url = tenancy.state_url(configured, OTHER_KEY)
    tenancy.ensure_schema(url)
    store = open_state(url)
    try:
        with store.engine.connect() as conn:
            current = conn.execute(text("SELECT current_schema()")).scalar_one()
    finally:
        store.close()
    assert current == "sluice_" + tenancy.repository_name(OTHER_KEY)


# --- a repository's SQL never reaches another's schemas -------------------------------

PREFIX_B = tenancy.schema_prefix(OTHER_KEY)
READS = [
    f"SELECT * FROM {PREFIX_B}jaffle.orders",
    f"SELECT * FROM {PREFIX_B}sluice__jaffle.jaffle__orders__abc",
    f"SELECT * FROM `{PREFIX_B.upper()}jaffle__pr_9`.orders",
    f"SELECT * FROM spark_catalog.{PREFIX_B}jaffle.orders",
    f"SELECT * FROM IDENTIFIER('{PREFIX_B}jaffle.orders')",
]


@pytest.mark.parametrize("sql", READS)
def test_a_model_reading_another_repository_s_schema_is_refused(tmp_path: Path, sql: str) -> None:
    files = {"models/d.sql": f"MODEL (name s.d, kind FULL);\n{sql}\n"}
    with pytest.raises(SluiceError) as info:
        load(tmp_path, {**BASIC, **files})
    assert "d.sql" in str(info.value) or "s.d" in str(info.value), info.value


AUDIT_READS = {
    "an audit": {
        "audits/peek.sql": f"AUDIT (name peek);\nSELECT * FROM {PREFIX_B}jaffle.orders WHERE 1 = 0\n",
        "models/d.sql": "MODEL (name s.d, kind FULL, audits (peek));\nSELECT id FROM s.a\n",
    },
    "an audit's argument": {
        "models/d.sql": "MODEL (name s.d, kind FULL, audits (forall(criteria := (id IN "
        f"(SELECT id FROM {PREFIX_B}jaffle.orders)))));\nSELECT id FROM s.a\n",
    },
    "a pre-statement": {
        "models/d.sql": "MODEL (name s.d, kind FULL);\nCREATE TEMPORARY VIEW v AS SELECT * "
        f"FROM {PREFIX_B}jaffle.orders;\nSELECT id FROM s.a\n",
    },
}


@pytest.mark.parametrize("files", AUDIT_READS.values(), ids=AUDIT_READS.keys())
def test_an_audit_or_statement_reading_another_repository_s_schema_is_refused(
    tmp_path: Path, files: dict[str, str]
) -> None:
    """An audit's rows come back in the PR's comment: reading another repository's table
    through one would show its rows."""
    with pytest.raises(SluiceError, match="in a schema Sluice keeps for a repository"):
        load(tmp_path, {**BASIC, **files})


def test_an_external_table_or_a_model_in_a_repository_namespace_is_refused(
    tmp_path: Path,
) -> None:
    external = f"- name: {PREFIX_B}jaffle.orders\n  columns:\n    id: int\n"
    files = {
        "external_models.yaml": external,
        "models/d.sql": f"MODEL (name s.d, kind FULL);\nSELECT id FROM {PREFIX_B}jaffle.orders\n",
    }
    with pytest.raises(SluiceError, match="sluice_r_"):
        load(tmp_path / "one", {**BASIC, **files})
    named = {"models/d.sql": f"MODEL (name {PREFIX_B}jaffle.orders, kind FULL);\nSELECT 1 AS x\n"}
    with pytest.raises(SluiceError, match="sluice_r_"):
        load(tmp_path / "two", {**BASIC, **named})


# --- /sluice rollback in one repository never reaches another's prod ------------------

MAIN = "e" * 40
T0 = 1_525_046_400_000


def _recorded(tmp_path: Path, url: str, name: str, column: str) -> Path:
    src = tmp_path / name
    shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", src,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    fold_settings(src)
    with (src / "config.yaml").open("a") as config:
        config.write("\n  gate:\n    required_approvers:\n      users: [bob]\n")
    record_prod(src, url, T0)
    customers = src / "models" / "customers.sql"
    customers.write_text(
        customers.read_text().replace("  c.last_name,\n", f"  c.last_name,\n  1 AS {column},\n")
    )
    record_prod(src, url, T0 + 60_000)
    return src


def test_a_rollback_in_one_repository_cannot_name_another_s_plan(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    forges = {repo: MemoryForge(repo) for repo in ("acme/a", "acme/b")}
    urls = {repo: tenancy.state_url(url, f"memory:{repo}") for repo in forges}
    for repo, forge in forges.items():
        src = _recorded(tmp_path, urls[repo], repo.replace("/", "_"), repo[-1])
        forge.commit_folder(MAIN, src, branch="main")
        forge.open_pull(7, head_sha=MAIN, base="main", author="alice")
        forge.close_pull(7, merged=True)
        forge.roles.update({"alice": "write", "bob": "write"})
    stores = {repo: open_state(u) for repo, u in urls.items()}
    try:
        plans = {repo: [p.plan_id for p in history(s, PROD)] for repo, s in stores.items()}
    finally:
        for store in stores.values():
            store.close()
    assert len(plans["acme/a"]) == 2 and len(plans["acme/b"]) == 2
    runner = Warehouse()
    deps = make_deps(project_python="on", forge_for=lambda e: as_forge(forges[e.repo]),
                     workdir=tmp_path / "work", state_url=url, runner_for=runner.runner,
                     clock=lambda: T0 + 120_000, isolate=True)  # fmt: skip
    for repo in forges:
        deps.ledger.seen(f"memory:{repo}", None, T0, sha=MAIN)
    try:
        b = forges["acme/b"]
        older_a = plans["acme/a"][0]  # A's prod now (plan ids name content: A's own)
        assert older_a not in plans["acme/b"]
        body = f"/sluice rollback {older_a}"
        comment_id = b.add_comment(7, "bob", body)
        dispatch.handle(deps, CommentEvent(
            forge="memory", repo="acme/b", installation_id=None, action="created",
            number=7, comment_id=comment_id, author="bob", body=body,
            author_id=b.account_id("bob"),  # as a forge's comment event carries it
        ))  # fmt: skip
        reply = b.bot_comments(7)[-1]
        assert f"plan {older_a} is not in prod's history" in reply, reply
        assert "prod is unchanged" in reply
        assert runner.jobs == []
        for repo, u in urls.items():
            store = open_state(u)
            try:
                record = store.get_environment(PROD)
                assert record is not None and record.plan_id == plans[repo][0]
            finally:
                store.close()
        # B's own earlier plan: rolled back, in B's schemas only, A's prod as it was.
        body = "/sluice rollback"
        comment_id = b.add_comment(7, "bob", body)
        dispatch.handle(deps, CommentEvent(
            forge="memory", repo="acme/b", installation_id=None, action="created",
            number=7, comment_id=comment_id, author="bob", body=body,
            author_id=b.account_id("bob"),  # as a forge's comment event carries it
        ))  # fmt: skip
        assert b.bot_comments(7)[-1].startswith("@bob rolled prod back"), b.bot_comments(7)[-1]
        [job] = runner.jobs
        views = [v["view"] for step in job["steps"] if step["type"] == "views"
                 for v in step["views"]]  # fmt: skip
        prefix = tenancy.schema_prefix("memory:acme/b")
        assert views and all(v.startswith(prefix) for v in views), views
        store = open_state(urls["acme/a"])
        try:
            record = store.get_environment(PROD)
            assert record is not None and record.plan_id == plans["acme/a"][0]
        finally:
            store.close()
    finally:
        deps.close()


def test_shared_database_holds_no_engine_state_of_an_isolated_repository(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    own = tenancy.state_url(url, OTHER_KEY)
    store = open_state(own)
    store.close()
    path = Path(own.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "sluice_environments" in tables
    assert not (tmp_path / "state.db").exists()


# --- a state owner's unprefixed schemas are refused to the others ---------------------

STEAL = "MODEL (name mine.stolen, kind FULL);\nSELECT id FROM {table}\n"


@pytest.mark.parametrize(
    "table",
    ["jaffle.legacy", "jaffle__pr_7.orders", "sluice__jaffle.jaffle__orders__abc"],
)
def test_another_repository_cannot_declare_the_state_owner_s_tables(
    tmp_path: Path, table: str
) -> None:
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    before = Bot(tmp_path, github, runner_for=warehouse.runner)
    tree = before.commit(C, CONFIG)
    record_prod(tree, before.url, T0)  # the owner's prod: schemas jaffle, sluice__jaffle
    before.ledger.belongs_to(f"{KEY}#.", T0)
    before.close()
    bot = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    try:
        other = bot.repository(OTHER, 424242)
        other.roles.update({"alice": "write"})
        bot.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        external = f"- name: {table}\n  columns:\n    id: int\n"
        bot.commit(HEAD_B, CONFIG, parents=(C,), forge=other,
                   models={"stolen.sql": STEAL.format(table=table)},
                   files={"external_models.yaml": external})  # fmt: skip
        other.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
        bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
        check = other.checks[HEAD_B]["sluice/pr-environment"]
        assert check.conclusion == "failure", check
        assert "another repository" in (check.summary or ""), check.summary
        assert warehouse.jobs == []  # nothing ran
    finally:
        bot.close()


def test_another_repository_s_audit_cannot_read_the_state_owner_s_views(tmp_path: Path) -> None:
    """A table an audit names that is not one of its project's models is read as written:
    on this service, in the state owner's schemas, the owner's."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    before = Bot(tmp_path, github, runner_for=warehouse.runner)
    record_prod(before.commit(C, CONFIG), before.url, T0)
    before.ledger.belongs_to(f"{KEY}#.", T0)
    before.close()
    bot = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    try:
        other = bot.repository(OTHER, 424242)
        other.roles.update({"alice": "write"})
        bot.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        peek = "AUDIT (name peek);\nSELECT * FROM jaffle.legacy WHERE 1 = 0\n"
        mine = "AUDIT (name mine);\nSELECT * FROM jaffle.customers WHERE 1 = 0\n"
        bot.commit(HEAD_B, CONFIG, parents=(C,), forge=other,
                   files={"audits/peek.sql": peek, "audits/mine.sql": mine})  # fmt: skip
        other.open_pull(9, head_sha=HEAD_B, base="main", author="alice")
        bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
        check = other.checks[HEAD_B]["sluice/pr-environment"]
        assert check.conclusion == "failure", check
        # Its own model (read at its own prefixed view) passes; the owner's table does not.
        assert "peek's audit reads jaffle.legacy" in (check.summary or ""), check.summary
        assert warehouse.jobs == []
    finally:
        bot.close()


def test_the_state_owner_itself_declares_what_it_likes(tmp_path: Path) -> None:
    """The refusal is of another repository's reads: the owner's own project, with the
    same external table, loads and builds."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write"})
    bot = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    try:
        tree = bot.commit(C, CONFIG)
        github.refs["main"] = C
        record_prod(tree, bot.url, T0)
        bot.ledger.belongs_to(f"{KEY}#.", T0)
        external = "- name: jaffle.legacy\n  columns:\n    id: int\n"
        bot.commit(HEAD_A, CONFIG, parents=(C,),
                   models={"stolen.sql": STEAL.format(table="jaffle.legacy")},
                   files={"external_models.yaml": external})  # fmt: skip
        bot.pull(7, HEAD_A)
        bot.deliver("pull_request", opened(7, HEAD_A))
        check = bot.checks_on(HEAD_A)["sluice/pr-environment"]
        assert check.conclusion == "success", check
    finally:
        bot.close()


def test_two_repositories_on_postgresql_each_in_its_own_schema(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    """The flow on one PostgreSQL database: the ledger in the database's own schema, each
    repository's state in ``sluice_<name>``, made by its first job."""
    warehouse = Warehouse()
    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github, runner_for=warehouse.runner, isolate=True)
    bot.deps.close()
    bot.ledger.close()
    bot.url = fresh_postgres_url
    bot.deps = make_deps(project_python="on", forge_for=bot.deps.forge_for,
                         workdir=tmp_path / "work", state_url=fresh_postgres_url,
                         clock=lambda: T0, runner_for=warehouse.runner, isolate=True)  # fmt: skip
    bot.ledger = Ledger(fresh_postgres_url)
    try:
        bot.prod(C, CONFIG)
        other = bot.repository(OTHER, 424242)
        bot.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        for forge in (github, other):
            forge.roles.update({"alice": "write"})
        _pr(bot, github, 7, HEAD_A)
        _pr(bot, other, 9, HEAD_B)
        bot.deliver("pull_request", opened(7, HEAD_A))
        bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
        assert other.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
        assert bot.checks_on(HEAD_A)["sluice/pr-environment"].conclusion == "success"
        for repo, env in ((KEY, pr_environment(7)), (OTHER_KEY, pr_environment(9))):
            assert _environments(tenancy.state_url(fresh_postgres_url, repo)) == {env}
        engine = create_engine(fresh_postgres_url)
        try:
            with engine.connect() as conn:
                where = conn.execute(text(
                    "SELECT table_schema, table_name FROM information_schema.tables "
                    "WHERE table_name IN ('sluice_environments', 'sluice_prod_settings')"
                )).all()  # fmt: skip
        finally:
            engine.dispose()
        states = {s for s, t in where if t == "sluice_environments"}
        own = {"sluice_" + tenancy.repository_name(r) for r in (KEY, OTHER_KEY)}
        assert states - {"public"} == own
        assert {s for s, t in where if t == "sluice_prod_settings"} == {"public"}  # ledger
        # The shared schema's state tables (the ledger migrates them) hold no one's.
        assert _environments(fresh_postgres_url) == set()
    finally:
        bot.close()


KNOWN = "AUDIT (name known_customers);\nSELECT * FROM @this_model\nWHERE customer_id NOT IN (SELECT customer_id FROM jaffle.customers)\n"


def test_an_audit_naming_its_own_model_reads_its_own_repository_s_view(
    two: tuple[Bot, MemoryForge, Warehouse],
) -> None:
    """Under a prefix, an audit's read of another model by name goes to the repository's
    own prod view of it, never the unprefixed name (another repository's, or nothing)."""
    bot, other, warehouse = two
    src = bot.commit(HEAD_B, CONFIG, parents=(C,), forge=other,
                     files={"audits/known_customers.sql": KNOWN})  # fmt: skip
    orders = src / "models" / "orders.sql"
    text_ = orders.read_text().replace("  audits (\n", "  audits (\n    known_customers,\n", 1)
    orders.write_text(text_.replace(*ORDERS))
    other.commit_folder(HEAD_B, src, parents=(C,))
    bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
    assert other.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
    audits = [a["sql"] for job in warehouse.jobs for step in job["steps"]
              if step["type"] == "build" for batch in step.get("batches", [])
              for a in batch.get("audits", []) if "known_customers" in a["label"]]  # fmt: skip
    assert audits, "the audit did not run"
    b = tenancy.schema_prefix(OTHER_KEY)
    assert all(f"{b}jaffle.customers" in sql for sql in audits), audits
    assert not any(" jaffle.customers" in sql for sql in audits), audits
