"""The read-only SQLite reader (``sluice plan``'s): the same answers as the SQLAlchemy store
on the same file, nothing written, other schema versions and URLs left to ``open_state``,
a damaged row reported in the store's words, and no SQLAlchemy imported."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.core.errors import StateError
from sluice.core.state import (
    SCHEMA_VERSION,
    EnvironmentRecord,
    PlanRecord,
    SnapshotRef,
    StoredSnapshot,
    TableSize,
    open_state,
)
from sluice.core.state.migrations import STATE
from sluice.core.state.readonly import read_state


def _filled(path: Path) -> str:
    """A state file holding two environments, snapshots, intervals, sizes and a plan."""
    url = f"sqlite:///{path}"
    store = open_state(url)
    snaps = [
        StoredSnapshot(f"s.m{i}", f"id{i}", f"v{i % 3}", {"kind": "FULL", "i": i})
        for i in range(900)  # more than one chunk of keys
    ]
    store.push_snapshots(snaps)
    refs = tuple(s.ref for s in snaps[:5])
    store.update_environment(
        EnvironmentRecord("prod", refs, "p1", start=1, end=9, updated_ts=3), None
    )
    store.update_environment(EnvironmentRecord("pr_7", refs[:2], "p2", updated_ts=4), None)
    store.invalidate_environment("pr_7")
    store.add_intervals("s.m1", "v1", [(0, 10), (10, 20), (40, 50)])
    store.add_intervals("s.m2", "v2", [(5, 6)])
    store.set_table_size("s.m1", "v1", TableSize(2048, measured_ts=7, rows=12))
    store.set_table_size("s.m2", "v2", TableSize(10, measured_ts=8))
    store.save_plan(PlanRecord("p1", "prod", None, 11, {"plan": 1}))
    store.close()
    return url


def test_it_reads_what_the_store_reads(tmp_path: Path) -> None:
    url = _filled(tmp_path / "state.db")
    store, reader = open_state(url), read_state(url)
    assert reader is not None
    ids = [(f"s.m{i}", f"id{i}") for i in range(900)] + [("s.gone", "x")]
    tables = [("s.m1", "v1"), ("s.m2", "v2"), ("s.m3", "v0")]
    for read in (
        lambda s: s.get_environment("prod"),
        lambda s: s.get_environment("nope"),
        lambda s: s.list_environments(),
        lambda s: s.get_snapshots(ids),
        lambda s: s.get_intervals(tables),
        lambda s: s.get_table_sizes(["s.m1", "s.m2", "s.m9"]),
        lambda s: s.get_plan("p1"),
        lambda s: s.get_plan("p9"),
    ):
        assert read(reader) == read(store)
    assert len(reader.get_snapshots(ids)) == 900
    assert reader.get_intervals(tables) == {
        ("s.m1", "v1"): [(0, 20), (40, 50)],
        ("s.m2", "v2"): [(5, 6)],
    }
    assert [(e.name, e.invalidated) for e in reader.list_environments()] == [
        ("pr_7", True),
        ("prod", False),
    ]
    assert reader.get_environment("prod") == EnvironmentRecord(
        "prod",
        tuple(SnapshotRef(f"s.m{i}", f"id{i}", f"v{i % 3}") for i in range(5)),
        "p1",
        start=1,
        end=9,
        updated_ts=3,
    )
    reader.close()
    store.close()


def test_it_writes_nothing_and_a_missing_file_is_an_empty_state(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "state.db"
    reader = read_state(f"sqlite:///{path}")
    assert reader is not None
    assert reader.list_environments() == [] and reader.get_snapshots([("a", "b")]) == {}
    assert reader.get_table_sizes(["a"]) == {} and reader.get_plan("p") is None
    reader.close()
    assert not path.exists() and not path.parent.exists()
    url = _filled(tmp_path / "state.db")
    before = (tmp_path / "state.db").read_bytes()
    reader = read_state(url)
    assert reader is not None and reader.get_environment("prod") is not None
    assert reader.get_snapshots([("s.m1", "id1")]) and reader.list_environments()
    reader.close()
    assert (tmp_path / "state.db").read_bytes() == before


def test_the_read_only_connection_refuses_writes(tmp_path: Path) -> None:
    reader = read_state(_filled(tmp_path / "state.db"))
    assert reader is not None
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader._conn.execute("DELETE FROM sluice_plans")  # type: ignore[union-attr]
    reader.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user@localhost/db",
        "postgresql+psycopg://user:pw@localhost/db",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///state.db?timeout=3",
        "sqlite:///with%20escape.db",
        "duckdb:///x.db",
    ],
)
def test_other_urls_are_left_to_open_state(url: str) -> None:
    assert read_state(url) is None


def test_a_database_at_another_schema_version_is_left_to_open_state(tmp_path: Path) -> None:
    url = _filled(tmp_path / "state.db")
    assert STATE.last == SCHEMA_VERSION  # the one number the reader checks
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute(
            "INSERT INTO sluice_migrations VALUES ('state', ?, 'from the future', 0)",
            (SCHEMA_VERSION + 1,),
        )
    conn.close()
    assert read_state(url) is None
    with pytest.raises(StateError, match="upgrade Sluice"):
        open_state(url)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert read_state(f"sqlite:///{other}") is None


def test_a_damaged_row_is_reported_as_the_store_reports_it(tmp_path: Path) -> None:
    url = _filled(tmp_path / "state.db")
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE sluice_environments SET snapshots = '{not json' WHERE name = 'prod'")
    conn.close()
    reader, store = read_state(url), open_state(url)
    assert reader is not None
    with pytest.raises(StateError) as by_reader:
        reader.get_environment("prod")
    with pytest.raises(StateError) as by_store:
        store.get_environment("prod")
    assert "stored environment prod is corrupt" in str(by_reader.value)
    assert str(by_reader.value).split(": ", 1)[1] == str(by_store.value).split(": ", 1)[1]
    reader.close()
    store.close()


def test_reading_imports_no_sqlalchemy(tmp_path: Path) -> None:
    url = _filled(tmp_path / "state.db")
    script = (
        "import sys\n"
        "from sluice.core.state.readonly import read_state\n"
        f"reader = read_state({url!r})\n"
        "print(len(reader.get_snapshots([('s.m1', 'id1')])), reader.get_plan('p1').environment)\n"
        "print(sorted(m for m in sys.modules if m.startswith('sqlalchemy')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == ["1 prod", "[]"], done.stdout + done.stderr


def test_a_path_with_spaces_and_other_letters_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "état d'équipe 1"
    folder.mkdir()
    url = _filled(folder / "state db.sqlite")
    reader = read_state(url)
    assert reader is not None and reader.get_plan("p1") is not None
    reader.close()
