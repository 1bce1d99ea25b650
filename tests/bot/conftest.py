"""Fixtures of the bot tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cases import REALCASES


@pytest.fixture(scope="session")
def realcases() -> Path:
    """The folder of real webhook bodies (``tests/fixtures/webhooks``)."""
    return REALCASES
