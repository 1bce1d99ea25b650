"""The migration runner with every owner's track (state, job queue, ledger), on SQLite and
PostgreSQL: an empty database gets exactly the declared tables, a database from before the
runner migrates, a newer one is refused, concurrent starts migrate once, a failure changes
nothing."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    event,
    insert,
    select,
    text,
)

from sluice.bot.flow.audit import AUDIT
from sluice.bot.flow.ledger import Ledger, Push
from sluice.bot.flow.ledger_schema import LEDGER
from sluice.bot.queue.schema import QUEUE
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.core.db.engine import create_state_engine
from sluice.core.db.migrate import Migration, Track, create_tables, migrate, versions
from sluice.core.errors import StateError
from sluice.core.state import StoredSnapshot, open_state
from sluice.core.state.migrations import STATE
from sluice.core.state.schema import schema_version
from sluice.core.state.sql import SqlStateStore
from tests.helpers import pre_runner
from tests.helpers.dbshape import TRACKS, declared, inspected, recorded

WRITES = ("CREATE", "ALTER", "INSERT", "UPDATE", "DELETE", "DROP")
EVERY = {t.name: list(range(1, t.last + 1)) for t in TRACKS}


@pytest.fixture
def engine(state_url: str) -> Iterator[Engine]:
    made = create_state_engine(state_url)
    yield made
    made.dispose()


def test_an_empty_database_gets_exactly_the_declared_tables(engine: Engine) -> None:
    assert migrate(engine, TRACKS) == {
        "state": STATE.last,
        "queue": QUEUE.last,
        "ledger": LEDGER.last,
        "audit": AUDIT.last,
    }
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY


def test_the_owners_opening_an_empty_database_make_exactly_the_declared_tables(
    state_url: str, engine: Engine
) -> None:
    JobQueue(state_url).close()  # state, then queue
    Ledger(state_url).close()  # state (nothing to do), then ledger
    open_state(state_url).close()
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY


def test_a_table_declared_but_in_no_migration_is_found(engine: Engine) -> None:
    # The comparison above could fail: a queue whose migrations forget a table.
    forgetful = dataclasses.replace(
        QUEUE,
        migrations=(Migration(1, "tables", create_tables(QUEUE.tables.tables["sluice_jobs"])),),
    )
    migrate(engine, [STATE, forgetful, LEDGER])
    assert inspected(engine) != declared(engine.dialect)


def test_migrating_again_writes_nothing(engine: Engine) -> None:
    migrate(engine, TRACKS)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    assert migrate(engine, TRACKS) == {
        "state": STATE.last,
        "queue": QUEUE.last,
        "ledger": LEDGER.last,
        "audit": AUDIT.last,
    }
    assert not [s for s in statements if s.lstrip().upper().startswith(WRITES)]


def test_a_database_from_before_the_runner_migrates_and_keeps_its_rows(
    state_url: str, engine: Engine
) -> None:
    with engine.begin() as conn:
        pre_runner.build(conn)
    kept = StoredSnapshot("jaffle.orders", "aa11", "v1", {"kind": "FULL"})
    SqlStateStore(engine).push_snapshots([kept])
    with engine.begin() as conn:
        conn.execute(
            insert(pre_runner.ledger.tables["sluice_repos"]).values(repo="github:o/r", seen_ts=1)
        )
        plan = {"plan_id": "p1", "environment": "prod", "created_ts": 1, "payload": "{}"}
        conn.execute(insert(pre_runner.state.tables["sluice_plans"]).values(plan))
    before = inspected(engine)

    queue = JobQueue(state_url)
    try:
        assert queue.accept("d-1", "github", "pull_request", NewJob("k", "pr", {}), 1.0)
        assert queue.accept_many([]) == []
    finally:
        queue.close()
    ledger = Ledger(state_url)
    try:
        assert ledger.repositories() == [("github:o/r", None)]
    finally:
        ledger.close()
    store = open_state(state_url)
    try:
        assert store.get_snapshots([kept.id]) == {kept.id: kept}
        # State migration 6: a plan from before records no commit (none is guessed).
        found = store.get_plan("p1")
        assert found is not None and found.project_commit is None
        store.set_plan_commit("p1", "c" * 40)  # a promotion that found prod at its project
        found = store.get_plan("p1")
        assert found is not None and found.project_commit == "c" * 40
    finally:
        store.close()

    after = inspected(engine)
    assert after == declared(engine.dialect)
    # Nothing lost; added since: queue migration 3's column, ledger migration 2's, state
    # migration 3's table, the audit log's.
    since = (versions.name, "sluice_table_sizes", "sluice_audit")
    grown = {k: v for k, v in after.items() if k not in since}
    assert "sluice_table_sizes" in after and "sluice_audit" in after
    added = grown["sluice_jobs"]["columns"].pop("not_before")
    assert added[1] is True  # nullable: the rows from before are ready to run
    added = grown["sluice_prod_settings"]["columns"].pop("config_file")
    assert added[1] is True  # nullable: a pin from before is a config.yaml's text
    # Ledger migration 10: nullable, a pin from before names no accounts (resolved at read).
    assert grown["sluice_prod_settings"]["columns"].pop("people")[1] is True
    # Ledger migrations 3 and 5: nullable, so rows from before stand as they were (a plan
    # of no recorded time, a click naming no plan, an approval of no settings generation);
    # 4 is a table of its own.
    for table, column in (
        ("sluice_pr_plans", "plan_ts"),
        ("sluice_plan_clicks", "plan"),
        ("sluice_approved_models", "generation"),
        # Ledger migration 7: the account id beside a login (none for rows from before).
        ("sluice_plan_clicks", "user_id"),
        ("sluice_review_heads", "user_id"),
        # Ledger migration 15: the forge's time beside the service's (none from before).
        ("sluice_pr_plans", "plan_forge_ts"),
        # Ledger migration 16: Sluice's writes of its comment (none kept from before: the
        # gate's read-back then has nothing to compare with until the next write).
        ("sluice_pr_comments", "written_forge_ts"),
        ("sluice_pr_comments", "texts"),
        # Ledger migration 18: the comment's id (none from before: found by its marker
        # until Sluice's next answered post).
        ("sluice_pr_comments", "comment_id"),
    ):
        assert grown[table]["columns"].pop(column)[1] is True, (table, column)
    grown.pop("sluice_check_runs")  # ledger migration 8's table
    grown.pop("sluice_repositories")  # ledger migration 11's table
    grown.pop("sluice_push_records_asked")  # ledger migration 12's
    grown.pop("sluice_plan_shown")  # ledger migration 14's
    grown.pop("sluice_review_words")  # ledger migration 17's
    # Ledger migration 13: nullable, filled from the earliest record kept of each repository.
    assert grown["sluice_repos"]["columns"].pop("first_seen_ts")[1] is True
    # Ledger migrations 4 and 6 make the pushers tables as declared now (keyed by account,
    # migration 9's), and state migration 5's table.
    assert grown.pop("sluice_pr_pushers")["primary_key"] == ["account", "number", "repo", "user"]
    pushers_key = grown.pop("sluice_branch_pushers")["primary_key"]
    assert pushers_key == ["account", "branch", "repo", "sha", "user"]
    assert "sluice_run_inputs" in grown
    grown.pop("sluice_run_inputs")
    grown.pop("sluice_leases", None)  # queue migration 4's table
    # State migration 6: nullable, so a plan from before stands, with no commit known.
    assert grown["sluice_plans"]["columns"].pop("project_commit")[1] is True
    assert grown == before
    assert recorded(engine) == EVERY
    with engine.connect() as conn:
        assert conn.execute(select(schema_version.c.version)).scalar_one() == STATE.last
        firsts = select(versions.c.track, versions.c.name).where(versions.c.number == 1)
        names = dict(conn.execute(firsts).all())
    assert names["ledger"].endswith("(adopted)")


def test_an_older_database_from_before_the_runner_gets_what_it_lacks(engine: Engine) -> None:
    # State at version 1; a ledger table and the queue's partial index added since.
    with engine.begin() as conn:
        pre_runner.build(
            conn, state_version=1, leave_out=("sluice_state_owner", "ix_sluice_jobs_queued_key")
        )
    migrate(engine, TRACKS)
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY
    with engine.connect() as conn:
        ran = conn.execute(
            select(versions.c.name).where(versions.c.track == "state", versions.c.number == 2)
        ).scalar_one()
        assert conn.execute(select(schema_version.c.version)).scalar_one() == STATE.last
    assert not ran.endswith("(adopted)")  # state's migration 2 really ran


@pytest.mark.parametrize("track", ["state", "queue", "ledger"])
def test_a_database_newer_than_this_sluice_is_refused(
    state_url: str, engine: Engine, track: str
) -> None:
    migrate(engine, TRACKS)
    future = {"track": track, "number": EVERY[track][-1] + 1, "name": "x", "applied_ts": 0}
    with engine.begin() as conn:
        conn.execute(insert(versions).values(future))
    before = inspected(engine), recorded(engine)
    opener = {"state": open_state, "queue": JobQueue, "ledger": Ledger}[track]
    with pytest.raises(StateError, match="upgrade Sluice") as refused:
        opener(state_url)
    assert f"the {track} schema is version {future['number']}" in str(refused.value)
    assert (inspected(engine), recorded(engine)) == before


def test_a_pre_runner_state_newer_than_this_sluice_is_refused(engine: Engine) -> None:
    with engine.begin() as conn:
        pre_runner.build(conn, state_version=STATE.last + 1)
    with pytest.raises(StateError, match="upgrade Sluice"):
        migrate(engine, TRACKS)
    assert versions.name not in inspected(engine)


def test_a_failing_migration_leaves_the_database_as_it_was(engine: Engine) -> None:
    migrate(engine, TRACKS)
    before = inspected(engine), recorded(engine)

    def add_column(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE sluice_jobs ADD COLUMN note TEXT"))

    def broken(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE sluice_no_such_table ADD COLUMN x TEXT"))

    grown = dataclasses.replace(
        QUEUE,
        migrations=(
            *QUEUE.migrations,
            Migration(QUEUE.last + 1, "add a note", add_column),
            Migration(QUEUE.last + 2, "broken step", broken),
        ),
    )
    broken_at = f"migration {QUEUE.last + 2} of queue \\(broken step\\)"
    with pytest.raises(StateError, match=broken_at) as failed:
        migrate(engine, [STATE, grown, LEDGER])
    assert f"left as it was (queue at version {QUEUE.last})" in str(failed.value)
    assert (inspected(engine), recorded(engine)) == before


def test_a_failure_on_an_empty_database_leaves_it_empty(engine: Engine) -> None:
    def broken(conn: Connection) -> None:
        conn.execute(text("SELECT * FROM sluice_no_such_table"))

    grown = dataclasses.replace(
        LEDGER, migrations=(*LEDGER.migrations, Migration(LEDGER.last + 1, "broken step", broken))
    )
    with pytest.raises(StateError, match="broken step"):
        migrate(engine, [STATE, QUEUE, grown])
    assert inspected(engine) == {}


def test_tables_of_a_track_that_cannot_adopt_are_refused(engine: Engine) -> None:
    strict = dataclasses.replace(LEDGER, adopt=None)
    with engine.begin() as conn:
        LEDGER.tables.tables["sluice_repos"].create(conn)
    with pytest.raises(StateError, match="ledger tables \\(sluice_repos\\)"):
        migrate(engine, [strict])
    assert versions.name not in inspected(engine)


def test_misnumbered_migrations_are_a_bug(engine: Engine) -> None:
    skip = LEDGER.last + 2
    step = Migration(skip, f"skips {skip - 1}", lambda conn: None)
    with pytest.raises(ValueError, match=rf"numbered 1\.\.{LEDGER.last + 1}"):
        migrate(engine, [dataclasses.replace(LEDGER, migrations=(*LEDGER.migrations, step))])
    twice = Track("twice", LEDGER.tables, (LEDGER.migrations[0], LEDGER.migrations[0]))
    with pytest.raises(ValueError, match="repeats"):
        migrate(engine, [twice])
    assert inspected(engine) == {}


def test_a_gap_in_the_records_is_refused(engine: Engine) -> None:
    migrate(engine, TRACKS)
    with engine.begin() as conn:
        conn.execute(versions.delete().where(versions.c.track == "queue", versions.c.number == 1))
    left = ", ".join(str(n) for n in range(2, QUEUE.last + 1))
    with pytest.raises(StateError, match=rf"records migrations \[{left}\] of queue"):
        migrate(engine, TRACKS)


def test_owners_starting_together_migrate_once(state_url: str, engine: Engine) -> None:
    openers = [open_state, JobQueue, Ledger] * 2
    barrier = threading.Barrier(len(openers))
    errors: list[BaseException] = []

    def start(opener: type[JobQueue] | type[Ledger] | object) -> None:
        barrier.wait()
        try:
            opened = opener(state_url)  # type: ignore[operator]
            opened.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(o,)) for o in openers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY


# The pushers tables as ledger migrations 4, 6 and 7 left them, keyed by login, before
# migration 9 keyed them by account: a frozen copy (never change it: it is what is out there).
_BEFORE_9 = MetaData()
_PR_PUSHERS_8 = Table(
    "sluice_pr_pushers",
    _BEFORE_9,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),
    Column("pushed_ts", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=True),
)
_BRANCH_PUSHERS_8 = Table(
    "sluice_branch_pushers",
    _BEFORE_9,
    Column("repo", String, primary_key=True),
    Column("branch", String, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("user", String, primary_key=True),
    Column("pushed_ts", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=True),
)


def test_ledger_migration_9_keys_the_pushers_by_account_and_keeps_their_rows(
    state_url: str, engine: Engine
) -> None:
    # A ledger at migration 8 whose pushers tables were made keyed by login, with rows of
    # before migration 7 (no id) and after (an id; bob's under his old and his new login).
    at_8 = dataclasses.replace(LEDGER, migrations=LEDGER.migrations[:8])
    migrate(engine, [STATE, QUEUE, at_8, AUDIT])
    with engine.begin() as conn:
        for old in (_PR_PUSHERS_8, _BRANCH_PUSHERS_8):
            LEDGER.tables.tables[old.name].drop(conn)
            old.create(conn)
        conn.execute(insert(_PR_PUSHERS_8), [
            {"repo": "github:o/r", "number": 7, "user": "bob", "pushed_ts": 1, "user_id": None},
            {"repo": "github:o/r", "number": 7, "user": "bobx", "pushed_ts": 2, "user_id": 5},
            {"repo": "github:o/r", "number": 8, "user": "bob", "pushed_ts": 3, "user_id": 5},
        ])  # fmt: skip
        conn.execute(insert(_BRANCH_PUSHERS_8), [
            {"repo": "github:o/r", "branch": "change", "sha": "bbb", "user": "Bob",
             "pushed_ts": 1, "user_id": None},
            {"repo": "github:o/r", "branch": "change", "sha": "ccc", "user": "bobx",
             "pushed_ts": 2, "user_id": 5},
        ])  # fmt: skip
    assert recorded(engine)["ledger"] == list(range(1, 9))

    ledger = Ledger(state_url)  # migration 9 runs
    try:
        assert ledger.pusher_accounts("github:o/r", 7) == {("bob", None), ("bobx", 5)}
        assert ledger.pusher_accounts("github:o/r", 8) == {("bob", 5)}
        assert ledger.branch_pushes("github:o/r", "change") == [
            Push("bbb", "Bob", None),
            Push("ccc", "bobx", 5),
        ]
        # Keyed by account now: another account under a login a row has is a row of its
        # own (the same pair again is not), on both tables.
        ledger.record_pusher("github:o/r", 8, "bob", 4, user_id=9)
        ledger.record_pusher("github:o/r", 8, "BOB", 5, user_id=5)
        assert ledger.pusher_accounts("github:o/r", 8) == {("bob", 5), ("bob", 9)}
        ledger.record_branch_push("github:o/r", "change", ["CCC"], "bobx", 6, user_id=9)
        ledger.record_branch_push("github:o/r", "change", ["ccc"], "bobx", 7, user_id=5)
        assert sorted(ledger.pushes_of("github:o/r", ["ccc"])) == [
            Push("ccc", "bobx", 5),
            Push("ccc", "bobx", 9),
        ]
    finally:
        ledger.close()
    pushers = LEDGER.tables.tables["sluice_pr_pushers"]
    with engine.connect() as conn:
        rows = conn.execute(
            select(pushers.c.number, pushers.c.user, pushers.c.account, pushers.c.pushed_ts)
        ).all()
    assert sorted(tuple(row) for row in rows) == [
        (7, "bob", "@bob", 1),
        (7, "bobx", "#5", 2),
        (8, "bob", "#5", 3),  # the first push seen keeps its time
        (8, "bob", "#9", 4),
    ]
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY


def test_ledger_migrations_11_and_12_move_the_names_and_asked_heads_to_their_tables(
    state_url: str, engine: Engine
) -> None:
    # A ledger at migration 10 that kept each name's forge id and the heads whose push
    # records were asked as rows of the handled events (beside a real handled event).
    at_10 = dataclasses.replace(LEDGER, migrations=LEDGER.migrations[:10])
    migrate(engine, [STATE, QUEUE, at_10, AUDIT])
    handled = LEDGER.tables.tables["sluice_handled_events"]
    seen = LEDGER.tables.tables["sluice_repos"]
    with engine.begin() as conn:
        conn.execute(insert(seen), [
            {"repo": "github:Acme/Ware", "seen_ts": 5, "installation_id": 7},
            {"repo": "gitlab:grp/proj", "seen_ts": 6, "installation_id": None},
        ])  # fmt: skip
        conn.execute(insert(handled), [
            {"repo": "github:acme/ware", "key": "repository-id", "kind": "repository",
             "outcome": "424242", "handled_ts": 10},
            {"repo": "gitlab:grp/proj", "key": "repository-id", "kind": "repository",
             "outcome": "77", "handled_ts": 11},
            {"repo": "github:Acme/Ware", "key": f"push-records:{'AB' * 20}:feature/x",
             "kind": "push records asked", "outcome": "done", "handled_ts": 12},
            {"repo": "github:Acme/Ware", "key": "pull_request:opened:9:abc", "kind": "pr",
             "outcome": "done", "handled_ts": 13},
        ])  # fmt: skip
    assert recorded(engine)["ledger"] == list(range(1, 11))

    ledger = Ledger(state_url)  # migrations 11 and 12 run
    try:
        # The name keeps its id, its first name spelled as its records are (the
        # repository's row's case), the key of its records under a later name.
        assert ledger.name_binding("GitHub:ACME/ware") == ("github:Acme/Ware", 424242)
        renamed = ledger.bind_repository("github:acme/renamed", 424242, 19)
        assert renamed.rename and renamed.canonical == "github:Acme/Ware"
        assert ledger.name_binding("gitlab:grp/proj") == ("gitlab:grp/proj", 77)
        assert ledger.bind_repository("github:Acme/Ware", 424242, 20).canonical == (
            "github:Acme/Ware"
        )
        assert ledger.bind_repository("github:acme/ware", 9, 21).repo_id == 424242  # successor
        assert ledger.pushes_asked("github:Acme/Ware", "feature/x", "ab" * 20)
        assert not ledger.pushes_asked("github:Acme/Ware", "feature/y", "ab" * 20)
        assert ledger.handled("github:Acme/Ware", "pull_request:opened:9:abc") == ("done", 13)
        assert ledger.count("sluice_handled_events") == 1  # the moved rows are gone
        assert ledger.count("sluice_repositories") == 2
        assert ledger.count("sluice_push_records_asked") == 1
    finally:
        ledger.close()
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY


def test_ledger_migration_13_dates_each_repository_from_its_earliest_record(
    state_url: str, engine: Engine
) -> None:
    # A ledger at migration 12: a repository's row says when its latest job ran (a
    # scheduled one, long after its PRs); its other rows keep their first writes.
    at_12 = dataclasses.replace(LEDGER, migrations=LEDGER.migrations[:12])
    migrate(engine, [STATE, QUEUE, at_12, AUDIT])
    tables = LEDGER.tables.tables
    with engine.begin() as conn:
        conn.execute(insert(tables["sluice_repos"]), [
            {"repo": "github:Acme/Quiet", "seen_ts": 9_000, "installation_id": None},
            {"repo": "github:acme/new", "seen_ts": 500, "installation_id": None},
        ])  # fmt: skip
        conn.execute(insert(tables["sluice_handled_events"]), [
            {"repo": "github:Acme/Quiet", "key": "k", "kind": "pr", "outcome": "done",
             "handled_ts": 300},
        ])  # fmt: skip
        conn.execute(insert(tables["sluice_deployments"]), [
            {"repo": "github:Acme/Quiet", "sha": "a" * 40, "environment": "prod",
             "deployment_id": 1, "started_ts": 200},
        ])  # fmt: skip
    ledger = Ledger(state_url)  # migration 13 runs
    try:
        assert ledger.history("github:acme/quiet") == ("github:Acme/Quiet", 200)
        assert ledger.history("github:acme/new") == ("github:acme/new", 500)
        ledger.seen("github:acme/new", None, 800)  # a later job keeps the first record's time
        assert ledger.history("github:acme/new") == ("github:acme/new", 500)
        ledger.seen("github:acme/newest", None, 900)
        assert ledger.history("github:acme/newest") == ("github:acme/newest", 900)
        # A name bound to an id has no unbound history; the binding is what counts.
        assert ledger.bind_repository("github:acme/quiet", 5, 1_000).since == 200
        ledger.claim_name("github:acme/quiet", 5, "github:Acme/Quiet", 1_000)
        assert ledger.history("github:acme/quiet") is None
        assert ledger.name_binding("github:acme/quiet") == ("github:Acme/Quiet", 5)
    finally:
        ledger.close()
    assert inspected(engine) == declared(engine.dialect)
    assert recorded(engine) == EVERY
