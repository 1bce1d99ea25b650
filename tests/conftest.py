"""Shared fixtures.

PostgreSQL: ``postgres_url`` is a real server for the whole session, either the one named
by ``SLUICE_TEST_POSTGRES_URL`` or a throwaway cluster started here from the local
PostgreSQL binaries (install them with ``scripts/ensure-postgres.sh``). Without binaries
the PostgreSQL tests are skipped, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.pgcluster import ClusterError, normalise, pg_bindir, throwaway_postgres

_PG_ENV = "SLUICE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a real PostgreSQL server (superuser, database ``postgres``)."""
    external = os.environ.get(_PG_ENV)
    if external:
        yield normalise(external)
        return
    if pg_bindir() is None:
        reason = (
            f"no PostgreSQL server binaries (initdb, pg_ctl) found and {_PG_ENV} is not set; "
            "run scripts/ensure-postgres.sh"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres())
        except ClusterError as exc:
            pytest.fail(str(exc))
        yield url


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
