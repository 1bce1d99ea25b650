"""The state's track of migrations, on real SQLite and PostgreSQL databases (the runner
with every owner's track: tests/core/db)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, event, insert, inspect, select, text, update

from sluice.core.db.engine import create_state_engine
from sluice.core.db.migrate import Migration, migrate, versions
from sluice.core.errors import StateError
from sluice.core.state import SCHEMA_VERSION, StoredSnapshot, open_state
from sluice.core.state.migrations import MIGRATIONS, STATE
from sluice.core.state.records import Seen, TableSize
from sluice.core.state.schema import metadata, schema_version
from sluice.core.state.sql import SqlStateStore


@pytest.fixture
def engine(state_url: str) -> Iterator[Engine]:
    made = create_state_engine(state_url)
    yield made
    made.dispose()


def stored_version(engine: Engine) -> list[int]:
    """The legacy version row (for Sluice before the runner) and the last recorded
    migration of the state track: they must agree."""
    with engine.connect() as conn:
        legacy = list(conn.execute(select(schema_version.c.version)).scalars())
        numbers = conn.execute(
            select(versions.c.number).where(versions.c.track == "state").order_by("number")
        ).scalars()
        ran = list(numbers)
    assert ran == list(range(1, len(ran) + 1))
    assert legacy == ran[-1:]
    return legacy


def state_migrate(engine: Engine, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    track = dataclasses.replace(STATE, migrations=tuple(migrations))
    return migrate(engine, [track])["state"]


def test_fresh_database_is_created_and_stamped(state_url: str, engine: Engine) -> None:
    open_state(state_url).close()
    assert stored_version(engine) == [SCHEMA_VERSION]
    assert set(metadata.tables) <= set(inspect(engine).get_table_names())


def test_reopening_changes_nothing(state_url: str, engine: Engine) -> None:
    open_state(state_url).close()
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    assert state_migrate(engine) == SCHEMA_VERSION
    writes = ("CREATE", "ALTER", "INSERT", "UPDATE", "DELETE", "DROP")
    assert not [s for s in statements if s.lstrip().upper().startswith(writes)]
    assert stored_version(engine) == [SCHEMA_VERSION]


def test_newer_database_is_refused(state_url: str, engine: Engine) -> None:
    state_migrate(engine)
    future = {"track": "state", "number": SCHEMA_VERSION + 1, "name": "x", "applied_ts": 0}
    with engine.begin() as conn:
        conn.execute(insert(versions).values(future))
    with pytest.raises(StateError, match="upgrade") as refused:
        open_state(state_url)
    assert f"version {SCHEMA_VERSION + 1}" in str(refused.value)


def test_extra_migrations_upgrade_in_order_and_keep_data(engine: Engine) -> None:
    state_migrate(engine)
    old = SqlStateStore(engine)
    kept = StoredSnapshot("jaffle.orders", "aa11", "v1", {"kind": "FULL"})
    old.push_snapshots([kept])

    ran: list[int] = []

    def add_note(conn: Connection) -> None:
        ran.append(SCHEMA_VERSION + 1)
        conn.execute(text("ALTER TABLE sluice_plans ADD COLUMN note TEXT"))

    def fill_note(conn: Connection) -> None:
        ran.append(SCHEMA_VERSION + 2)  # needs the column added before, so order matters
        conn.execute(text("UPDATE sluice_plans SET note = 'x' WHERE note IS NULL"))

    steps = (
        Migration(SCHEMA_VERSION + 2, "fill plan notes", fill_note),
        Migration(SCHEMA_VERSION + 1, "add plan notes", add_note),
    )
    top = SCHEMA_VERSION + 2
    assert state_migrate(engine, (*MIGRATIONS, *steps)) == top
    assert ran == [SCHEMA_VERSION + 1, top]
    assert stored_version(engine) == [top]
    assert "note" in {c["name"] for c in inspect(engine).get_columns("sluice_plans")}
    assert SqlStateStore(engine).get_snapshots([kept.id]) == {kept.id: kept}

    assert state_migrate(engine, (*MIGRATIONS, *steps)) == top  # nothing runs
    assert ran == [SCHEMA_VERSION + 1, top]


def test_failed_migration_leaves_database_unchanged(engine: Engine) -> None:
    state_migrate(engine)

    def add_column(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE sluice_plans ADD COLUMN note TEXT"))

    def broken(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE sluice_no_such_table ADD COLUMN x TEXT"))

    steps = (
        *MIGRATIONS,
        Migration(SCHEMA_VERSION + 1, "add note", add_column),
        Migration(SCHEMA_VERSION + 2, "broken step", broken),
    )
    with pytest.raises(StateError, match="broken step") as failed:
        state_migrate(engine, steps)
    assert f"left as it was (state at version {SCHEMA_VERSION})" in str(failed.value)
    assert stored_version(engine) == [SCHEMA_VERSION]
    assert "note" not in {c["name"] for c in inspect(engine).get_columns("sluice_plans")}


def test_missing_migration_step_is_a_bug(engine: Engine) -> None:
    state_migrate(engine)
    gap = Migration(SCHEMA_VERSION + 2, "skips one", lambda conn: None)
    with pytest.raises(ValueError, match="without gaps"):
        state_migrate(engine, (*MIGRATIONS, gap))


def test_partial_schema_without_version_is_refused(state_url: str, engine: Engine) -> None:
    metadata.tables["sluice_snapshots"].create(engine)
    with pytest.raises(StateError, match="sluice_snapshots") as refused:
        open_state(state_url)
    assert "no sluice_schema_version" in str(refused.value)


def test_concurrent_first_open_creates_schema_once(state_url: str, engine: Engine) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def opener() -> None:
        barrier.wait()
        try:
            open_state(state_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert stored_version(engine) == [SCHEMA_VERSION]  # each migration recorded once
    assert set(inspect(engine).get_table_names()) == {*metadata.tables, versions.name}


def test_a_state_from_before_the_runner_is_adopted_without_ddl(
    state_url: str, engine: Engine
) -> None:
    # What the code before the runner left: every table, stamped 2, no record.
    with engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    assert state_migrate(engine) == SCHEMA_VERSION
    created = [s for s in statements if s.lstrip().upper().startswith("CREATE")]
    assert len(created) == 1 and versions.name in created[0]  # the version table only
    assert stored_version(engine) == [SCHEMA_VERSION]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://u:secretpw@127.0.0.1:1/x",
        "postgresql://u:secretpw@127.0.0.1:1/x",
        "mysql://u:secretpw@127.0.0.1:1/x",
        "not a url u:secretpw@",
        "bogus://u:secretpw@@host/x y",
    ],
)
def test_bad_or_unreachable_url_hides_password(url: str) -> None:
    with pytest.raises(StateError) as failed:
        open_state(url)
    message = str(failed.value)
    assert "secretpw" not in message
    assert failed.value.hint
    # Nor may it hide in the chained exceptions a traceback would print.
    cause: BaseException | None = failed.value.__cause__
    while cause is not None:
        assert "secretpw" not in str(cause)
        cause = cause.__cause__


def test_sqlite_parent_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "state.db"
    open_state(f"sqlite:///{path}").close()
    assert path.exists()


def test_a_version_1_database_is_upgraded_to_the_current_schema(
    state_url: str, engine: Engine
) -> None:
    # Build what Sluice 0.1 (schema version 1) left behind: its tables only, stamped 1,
    # and no record of migrations (before the runner).
    state_migrate(engine)
    later = {"sluice_orphans", "sluice_results", "sluice_table_sizes", "sluice_run_inputs"}
    for table in (*sorted(later), versions.name):
        (versions if table == versions.name else metadata.tables[table]).drop(engine)
    with engine.begin() as conn:
        conn.execute(update(schema_version).values(version=1))
    old = SqlStateStore(engine)
    kept = StoredSnapshot("jaffle.orders", "aa11", "v1", {"kind": "FULL"})
    old.push_snapshots([kept])
    upgraded = open_state(state_url)
    try:
        assert stored_version(engine) == [SCHEMA_VERSION] and SCHEMA_VERSION >= 5
        assert later <= set(inspect(engine).get_table_names())
        assert upgraded.get_snapshots([kept.id]) == {kept.id: kept}
    finally:
        upgraded.close()


def test_a_version_4_database_gains_what_runs_read_and_keeps_its_sizes(
    state_url: str, engine: Engine
) -> None:
    assert state_migrate(engine, MIGRATIONS[:4]) == 4
    assert "sluice_run_inputs" not in inspect(engine).get_table_names()
    four = SqlStateStore(engine)
    four.set_table_size("s.t", "v1", TableSize(100, 1, 3))
    store = open_state(state_url)
    try:
        assert stored_version(engine) == [SCHEMA_VERSION]
        assert store.get_table_sizes(["s.t"])[("s.t", "v1")].bytes == 100
        seen = Seen("k", {"raw.a": "files:1:10:t:7", "raw.v": None}, 9)
        store.save_run_inputs({("s.t", "v1"): seen})
        assert store.get_run_inputs([("s.t", "v1"), ("s.u", "v1")]) == {("s.t", "v1"): seen}
        store.forget_tables([("s.t", "v1")])  # the janitor dropped it: its record goes too
        assert store.get_run_inputs([("s.t", "v1")]) == {}
    finally:
        store.close()


def test_a_version_3_database_gains_row_counts_and_keeps_its_sizes(
    state_url: str, engine: Engine
) -> None:
    # sluice_table_sizes as migration 3 made it before migration 4 (no row_count).
    from sqlalchemy import BigInteger, Column, MetaData, String, Table

    old = Table(
        "sluice_table_sizes",
        MetaData(),
        Column("name", String, primary_key=True),
        Column("version", String, primary_key=True),
        Column("bytes", BigInteger, nullable=False),
        Column("measured_ts", BigInteger, nullable=False),
    )
    three = Migration(3, MIGRATIONS[2].name, old.create)
    assert state_migrate(engine, (*MIGRATIONS[:2], three)) == 3
    with engine.begin() as conn:
        conn.execute(insert(old).values(name="s.t", version="v1", bytes=100, measured_ts=1))
    upgraded = open_state(state_url)
    try:
        assert stored_version(engine) == [SCHEMA_VERSION] and SCHEMA_VERSION >= 4
        # The size measured before keeps its bytes and has no row count ...
        assert upgraded.get_table_sizes(["s.t"]) == {("s.t", "v1"): TableSize(100, 1)}
        # ... and the next measurement records both.
        upgraded.set_table_size("s.t", "v1", TableSize(120, 2, rows=7))
        assert upgraded.get_table_sizes(["s.t"]) == {("s.t", "v1"): TableSize(120, 2, 7)}
    finally:
        upgraded.close()


def test_a_version_5_database_keeps_its_plans_and_knows_no_commit_of_them(
    state_url: str, engine: Engine
) -> None:
    # sluice_plans as migration 1 made it before migration 6 (no project_commit).
    from sqlalchemy import BigInteger, Column, MetaData, String, Table

    old = MetaData()
    plans = Table(
        "sluice_plans",
        old,
        Column("plan_id", String, primary_key=True),
        Column("environment", String, nullable=False),
        Column("base_plan_id", String, nullable=True),
        Column("created_ts", BigInteger, nullable=False),
        Column("payload", String, nullable=False),
    )
    first = [metadata.tables[n] for n in ("sluice_schema_version", "sluice_snapshots")]
    first += [metadata.tables[n] for n in ("sluice_intervals", "sluice_environments")]

    def tables_then(conn: Connection) -> None:
        for table in first:
            table.create(conn)
        plans.create(conn)

    one = Migration(1, MIGRATIONS[0].name, tables_then)
    assert state_migrate(engine, (one, *MIGRATIONS[1:5])) == 5
    with engine.begin() as conn:
        conn.execute(insert(plans).values(plan_id="p1", environment="prod", created_ts=1,
                                          payload="{}"))  # fmt: skip
    upgraded = open_state(state_url)
    try:
        assert stored_version(engine) == [SCHEMA_VERSION] and SCHEMA_VERSION >= 6
        found = upgraded.get_plan("p1")  # kept, and no commit is guessed for it
        assert found is not None and found.project_commit is None
        upgraded.set_plan_commit("p1", "c" * 40)
        found = upgraded.get_plan("p1")
        assert found is not None and found.project_commit == "c" * 40
        with pytest.raises(StateError, match="no such plan"):
            upgraded.set_plan_commit("p2", "c" * 40)
    finally:
        upgraded.close()
