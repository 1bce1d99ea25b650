"""Shared fixtures.

PostgreSQL: ``postgres_url`` is a real server for the whole session, either the one named
by ``SLUICE_TEST_POSTGRES_URL`` or a throwaway cluster started here from the local
PostgreSQL binaries (install them with ``scripts/ensure-postgres.sh``). Without binaries
the PostgreSQL tests are skipped, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

_PG_ENV = "SLUICE_TEST_POSTGRES_URL"


def _pg_bindir() -> Path | None:
    """Directory holding ``initdb`` and ``pg_ctl``: PATH first, then Debian's layout."""
    found = shutil.which("initdb")
    if found:
        bindir = Path(found).resolve().parent
        if (bindir / "pg_ctl").exists():
            return bindir
    # Newest version first; numeric sort so 16 beats 9.6.
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) for x in Path(p).parent.name.split(".") if x.isdigit()],
        reverse=True,
    )
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_accepting(url: str, timeout_s: float = 30.0) -> None:
    engine = create_engine(url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a real PostgreSQL server (superuser, database ``postgres``)."""
    external = os.environ.get(_PG_ENV)
    if external:
        parsed = make_url(external)
        if parsed.drivername == "postgresql":  # the psycopg 3 driver is the one installed
            parsed = parsed.set(drivername="postgresql+psycopg")
        yield parsed.render_as_string(hide_password=False)
        return
    bindir = _pg_bindir()
    if bindir is None:
        reason = (
            f"no PostgreSQL server binaries (initdb, pg_ctl) found and {_PG_ENV} is not set; "
            "run scripts/ensure-postgres.sh"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)

    # Not under pytest's tmp_path: its parents are private to root, and the server runs as
    # the postgres user when we are root (initdb refuses to run as root).
    base = Path(tempfile.mkdtemp(prefix="sluice-pg-"))
    datadir = base / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, text=True)

    options = (
        f"-h 127.0.0.1 -p {port} -k {base} "
        # Durability is worthless for a throwaway cluster; speed is not.
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    try:
        run(str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "-A", "trust", "-N")
        log = str(base / "server.log")
        run(str(bindir / "pg_ctl"), "-D", str(datadir), "-l", log, "-o", options, "-w", "start")
    except subprocess.CalledProcessError as exc:
        log_file = base / "server.log"
        detail = log_file.read_text() if log_file.exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc.stderr}\n{detail}")
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    try:
        _wait_until_accepting(url)
        yield url
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(datadir), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """URL of a new, empty database on the session's server, dropped afterwards."""
    name = f"sluice_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            # FORCE: a test that failed midway may have left connections open.
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
