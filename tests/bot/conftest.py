"""Shared fixtures for the bot tests: real webhook bodies captured by other projects.

The bodies live outside the repository, in ``shared/realcases`` beside the checkout
(``github/<X-GitHub-Event>/*.json``, ``gitlab/*.json``); their sources and licenses are in
``shared/realcases/MANIFEST.tsv``. Where that folder is absent, tests that need it skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REALCASES = Path(__file__).resolve().parents[2].parent / "shared" / "realcases"


def case_paths(pattern: str) -> list[Path]:
    """Files under the realcases folder matching ``pattern`` (e.g. ``github/*/*.json``).

    Sorted, for stable test ids; empty when the folder is absent. Use it to parametrise.
    """
    return sorted(REALCASES.glob(pattern))


def load_case(relpath: str | Path) -> dict[str, Any]:
    """The JSON object in ``realcases/<relpath>``; skips the test when the folder is absent."""
    if not REALCASES.is_dir():
        pytest.skip(f"real webhook cases not found at {REALCASES}")
    data = json.loads((REALCASES / relpath).read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{relpath} does not hold a JSON object"
    return data


@pytest.fixture(scope="session")
def realcases() -> Path:
    """The ``shared/realcases`` folder; skips the test when it is absent."""
    if not REALCASES.is_dir():
        pytest.skip(f"real webhook cases not found at {REALCASES}")
    return REALCASES
