"""The service's start-up heap is frozen out of the cyclic garbage collector's scans while
it serves (``gc.freeze()``: each full collection would otherwise walk every module and the
app, a pause that holds the requests in flight) and collectable again once it stops. A
process that froze its own heap before the service started (a test session does, once)
keeps its freeze as it was: the service neither collects it all again nor unfreezes it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from tests.helpers.github_service import SECRET


@pytest.fixture
def heap_as_found() -> Iterator[None]:
    """Leave the process's freeze as the test found it."""
    frozen = gc.get_freeze_count() > 0
    yield
    gc.unfreeze()
    if frozen:
        gc.freeze()


def _settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(
        webhook_secret=SECRET,
        workdir=tmp_path / "work",
        database_url=f"sqlite:///{tmp_path / 'state.db'}",
        repositories="acme/warehouse",
    )


@pytest.mark.usefixtures("heap_as_found")
def test_a_service_freezes_its_start_up_heap_while_it_serves_and_unfreezes_it(
    tmp_path: Path,
) -> None:
    gc.unfreeze()
    app = create_app(_settings(tmp_path), start_workers=False)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("heap_as_found")
def test_a_heap_frozen_before_the_service_started_stays_as_it_was(tmp_path: Path) -> None:
    gc.unfreeze()
    gc.freeze()
    before = gc.get_freeze_count()
    assert before > 0
    app = create_app(_settings(tmp_path), start_workers=False)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        # Nothing the service built was added to the frozen heap (frozen objects freed
        # since lower the count), and nothing was thawed.
        assert 0 < gc.get_freeze_count() <= before
    assert 0 < gc.get_freeze_count() <= before
