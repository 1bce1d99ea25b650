"""The web UI tests' shared world: a module's own real flow (prod built, an open PR;
:func:`tests.helpers.web.web_world`) and a client of ``sluice ui``'s app on it. A module
that needs another world defines its own ``world`` or ``ui``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from sluice.bot.web.standalone import ui_app
from tests.helpers.web import WebWorld, web_world


@pytest.fixture(scope="module")
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebWorld]:
    made = web_world(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    yield made
    made.close()


@pytest.fixture(scope="module")
def ui(world: WebWorld) -> Iterator[TestClient]:
    with TestClient(ui_app(world.ui_site())) as client:
        yield client
