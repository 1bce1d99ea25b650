from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty state database: a SQLite file (in a folder not yet made), then a
    real PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nested' / 'state.db'}"
    else:
        yield request.getfixturevalue("fresh_postgres_url")
