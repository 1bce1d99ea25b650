"""Finding statement starts outside literals and comments (``AUDIT (`` blocks in a file):
the run-at-a-time scan gives exactly what a character-at-a-time reading gives, on every
SQL file of the fixtures and examples and on hostile cases."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core.model.scan import find_code, statement_starts

ROOT = Path(__file__).parents[3]


def _by_characters(text: str, keyword: str) -> Iterator[int]:
    """The reference: every character of code read one at a time."""
    boundary = True
    for match in find_code(text, rf";|(?i:\b{re.escape(keyword)}\b)\s*\(|\S"):
        hit = match.group("hit")
        if hit == ";":
            boundary = True
            continue
        if boundary and len(hit) > 1:
            yield match.start()
        boundary = False


CASES = [
    "AUDIT (name a); SELECT 1",
    "SELECT 1; AUDIT (name a); SELECT 2;\n  AUDIT(name b)",
    "SELECT a-b, 'AUDIT (' , /* AUDIT ( */ c -- AUDIT (\nFROM t; /* c */ AUDIT (x)",
    "xAUDIT (a); AUDITx (b); foo(AUDIT (c); audit (d)",
    "SELECT 'it''s; AUDIT (' ; AUDIT (e)",
    'SELECT "a;b" ; `x;AUDIT (y` ; AUDIT (f)',
    "SELECT 1 - -2 / 3; - AUDIT (g); / AUDIT (h); AUDIT (i)",
    "SELECT 'never closed; AUDIT (j)",
    "SELECT 1 /* open comment; AUDIT (k)",
    "SELECT $$x$$; AUDIT (l)",
    "",
    ";;;AUDIT (m)",
]


@pytest.mark.parametrize("text", CASES)
def test_hostile_cases_match_the_character_reading(text: str) -> None:
    assert list(statement_starts(text, "AUDIT")) == list(_by_characters(text, "AUDIT"))


def test_every_sql_file_of_the_fixtures_and_examples_matches_the_character_reading() -> None:
    files = sorted((ROOT / "tests" / "fixtures").rglob("*.sql"))
    files += sorted((ROOT / "examples").rglob("*.sql"))
    assert len(files) > 50
    found = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for keyword in ("AUDIT", "MODEL"):
            starts = list(statement_starts(text, keyword))
            assert starts == list(_by_characters(text, keyword)), path
            found += len(starts)
    assert found > len(files)  # the files' MODEL blocks at least


def test_patterns_compiled_are_bounded_however_many_distinct_names_are_spelled() -> None:
    """Patterns may spell a project's names: a flood of distinct ones keeps a bounded number
    compiled (the service's memory does not grow with every name a PR head spells)."""
    from sluice.core.model import scan

    scan._compiled.cache_clear()
    for i in range(1500):
        assert next(scan.find_code(f"select name_{i}", rf"\bname_{i}\b"), None) is not None
    info = scan._compiled.cache_info()
    assert info.maxsize is not None and info.currsize == info.maxsize < 1500
