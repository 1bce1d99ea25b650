"""A state database written by the previous Sluice is migrated and read by this one; a newer
one is refused; a migration killed midway leaves a state that migrates again.

The previous release: Sluice has no release tag yet (``git tag`` is empty; releases are
tagged by ``scripts/release-tags.sh``), so "previous" is commit ``362a977``, the last
commit whose state schema was at the version before this one's (state track at 3, queue at
3, ledger at 1; ``a30499b``, the next commit, added state migration 4). The fixtures in
``tests/fixtures/upgrade/`` were made by that commit's own code, run from a worktree of it
with ``tests/fixtures/upgrade/make_state.py`` (its docstring says how): a built prod, a PR
environment, the job queue and the ledger. ``state-362a977.sqlite`` is the SQLite file it
wrote (vacuumed); ``state-362a977.pg.sql`` is ``pg_dump --inserts --no-owner
--no-privileges`` of the PostgreSQL database it wrote (psql's ``\\restrict`` lines taken
out); ``state-362a977.json`` is what that code read back from either.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, insert, inspect, select

from sluice.bot.events.neutral import PullRequestEvent, event_from_json
from sluice.bot.flow.ledger import Ledger
from sluice.bot.queue.store import JobQueue, JobStatus
from sluice.core.db.engine import create_state_engine
from sluice.core.db.migrate import versions
from sluice.core.errors import StateError
from sluice.core.state import open_state
from sluice.core.state.migrations import STATE
from tests.helpers.dbshape import TRACKS

FIXTURES = Path(__file__).parents[2] / "fixtures" / "upgrade"
PREVIOUS = "362a977"
REPO = "github:octo/warehouse"
NOW = 1_764_000_000_000
ROOT = Path(__file__).parents[3]


def said() -> dict[str, Any]:
    found: dict[str, Any] = json.loads((FIXTURES / f"state-{PREVIOUS}.json").read_text())
    return found


def sqlite_copy(tmp_path: Path) -> str:
    target = tmp_path / "state.db"
    shutil.copyfile(FIXTURES / f"state-{PREVIOUS}.sqlite", target)
    return f"sqlite:///{target}"


def restore_pg(url: str) -> str:
    """``url``'s empty database, holding the previous release's PostgreSQL state."""
    dump = (FIXTURES / f"state-{PREVIOUS}.pg.sql").read_text()
    engine = create_engine(url)
    try:
        with engine.connect() as conn:  # the dump's SETs change this session only
            conn.exec_driver_sql(dump)
            conn.commit()
    finally:
        engine.dispose()
    return url


def recorded(engine: Engine) -> dict[str, list[int]]:
    with engine.connect() as conn:
        rows = conn.execute(select(versions.c.track, versions.c.number).order_by("track", "number"))
        found: dict[str, list[int]] = {}
        for track, number in rows:
            found.setdefault(track, []).append(number)
    return found


def columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def read_all(url: str) -> dict[str, Any]:
    """What the current code reads from the state at ``url`` (migrating it), in the
    manifest's shape."""
    expected = said()
    queue, ledger, state = JobQueue(url), Ledger(url), open_state(url)
    try:
        tables = [(name, version) for name, _, version in expected["snapshots"]]
        ids = [(name, ident) for name, ident, _ in expected["snapshots"]]
        snapshots = state.get_snapshots(ids)
        got: dict[str, Any] = {
            "environments": {
                env.name: {"plan_id": env.plan_id, "snapshots": sorted([r.name, r.identifier, r.version] for r in env.snapshots)}
                for env in state.list_environments()
            },
            "snapshots": sorted([s.name, s.identifier, s.version] for s in snapshots.values()),
            "intervals": sorted(
                [name, version, [list(i) for i in spans]]
                for (name, version), spans in state.get_intervals(tables).items()
            ),
            "sizes": sorted(
                [name, version, size.bytes, size.measured_ts]
                for (name, version), size in state.get_table_sizes({n for n, _ in tables}).items()
            ),
            "jobs": sorted(
                [r.job.id, r.job.delivery_id, r.job.key, r.status.value, r.job.attempts, r.job.payload]
                for r in queue.jobs(limit=100)
            ),
            "deliveries": {d: queue.delivery_job(d) for d in expected["deliveries"]},
            "ledger": {
                "owner": ledger.belongs_to("github:someone/else", NOW),
                "repositories": [list(r) for r in ledger.repositories()],
                "last_sha": ledger.last_sha(REPO),
                "pr_head": list(ledger.pr_head(REPO, 7) or ()),
                "handled": list(ledger.handled(REPO, "merge:6:" + "6" * 40) or ()),
                "deployment": ledger.deployment(REPO, "6" * 40, "prod"),
            },
        }  # fmt: skip
        # Row counts did not exist then: every measured table has none.
        assert {s.rows for s in state.get_table_sizes({n for n, _ in tables}).values()} == {None}
        # The queued job of the previous release runs on this one: its payload is an event.
        job = queue.claim("upgraded-worker", NOW / 1000 + 60)
        assert job is not None and job.delivery_id == "delivery-1"
        event = event_from_json(job.payload)
        assert isinstance(event, PullRequestEvent) and event.number == 8
        assert queue.finish(job.id, "upgraded-worker", now=NOW / 1000 + 61)
        assert queue.job(job.id) is not None
        assert queue.counts()[JobStatus.DONE] == 2
    finally:
        queue.close()
        ledger.close()
        state.close()
    return got


def check_upgrade(url: str) -> None:
    engine = create_state_engine(url)
    try:
        assert recorded(engine) == {"ledger": [1], "queue": [1, 2, 3], "state": [1, 2, 3]}
        assert "row_count" not in columns(engine, "sluice_table_sizes")
        got = read_all(url)
        assert got == said()
        assert got["environments"].keys() == {"prod", "pr_7"} and len(got["intervals"]) > 0
        numbers = {t.name: list(range(1, t.last + 1)) for t in TRACKS}
        assert recorded(engine) == numbers  # state 4 ran, once
        assert "row_count" in columns(engine, "sluice_table_sizes")
    finally:
        engine.dispose()


def test_the_previous_releases_sqlite_state_is_migrated_and_read(tmp_path: Path) -> None:
    check_upgrade(sqlite_copy(tmp_path))


@pytest.mark.postgres
def test_the_previous_releases_postgres_state_is_migrated_and_read(
    fresh_postgres_url: str,
) -> None:
    check_upgrade(restore_pg(fresh_postgres_url))


def test_a_state_newer_than_this_sluice_is_refused_saying_both_versions(tmp_path: Path) -> None:
    url = sqlite_copy(tmp_path)
    open_state(url).close()  # now at this Sluice's version
    engine = create_state_engine(url)
    newer = STATE.last + 1
    with engine.begin() as conn:
        conn.execute(insert(versions).values(track="state", number=newer, name="from a newer Sluice", applied_ts=NOW))  # fmt: skip
    before = recorded(engine)
    for opener in (open_state, JobQueue, Ledger):
        with pytest.raises(StateError) as refused:
            opener(url)
        message = str(refused.value)
        assert f"the state schema is version {newer}" in message
        assert f"this Sluice knows only up to {STATE.last}; upgrade Sluice" in message
        assert "upgrade Sluice here to the version that last wrote" in (refused.value.hint or "")
    assert recorded(engine) == before  # refused, not touched
    engine.dispose()


def kill_mid_migration(url: str, tmp_path: Path) -> None:
    """Start the child migrating ``url``, wait until it is inside the state's last
    migration (its change made, not committed), and SIGKILL it."""
    marker = tmp_path / "inside"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.migrate_child", url, str(marker)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, f"the child ended ({child.returncode}) before the pause"
            assert time.monotonic() < deadline, "the child never reached the pause"
            time.sleep(0.05)
        assert marker.read_text() == str(STATE.last)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL


def check_killed_migration(url: str, tmp_path: Path) -> None:
    kill_mid_migration(url, tmp_path)
    engine = create_state_engine(url)
    try:
        # Nothing of the killed run stayed: not the column, not a record.
        assert recorded(engine) == {"ledger": [1], "queue": [1, 2, 3], "state": [1, 2, 3]}
        assert "row_count" not in columns(engine, "sluice_table_sizes")
        # ... and the state migrates again, keeping every row.
        assert read_all(url) == said()
        assert recorded(engine) == {t.name: list(range(1, t.last + 1)) for t in TRACKS}
    finally:
        engine.dispose()


def test_a_migration_killed_midway_leaves_a_sqlite_state_that_migrates_again(
    tmp_path: Path,
) -> None:
    check_killed_migration(sqlite_copy(tmp_path), tmp_path)


@pytest.mark.postgres
def test_a_migration_killed_midway_leaves_a_postgres_state_that_migrates_again(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    check_killed_migration(restore_pg(fresh_postgres_url), tmp_path)
