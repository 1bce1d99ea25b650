"""Find things in SQL text outside string literals, quoted names and comments (pure)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from functools import lru_cache

# A quote left open runs to the end of the text, so an unterminated literal hides what
# follows it rather than letting its contents be read as code.
_LITERALS = (
    r"'(?:[^'\\]|\\.|'')*(?:'|\Z)"
    r'|"(?:[^"\\]|\\.|"")*(?:"|\Z)'
    r"|`(?:[^`]|``)*(?:`|\Z)"
    r"|--[^\n]*"
    r"|/\*.*?(?:\*/|\Z)"
)


# Patterns may spell a project's names (a PR head's among them): bounded, so many distinct
# ones cost no more memory than these many compiled.
@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(f"(?P<skip>{_LITERALS})|(?P<hit>{pattern})", re.S)


def find_code(text: str, pattern: str, start: int = 0) -> Iterator[re.Match[str]]:
    """Yield matches of ``pattern`` in ``text`` that are code, not literals or comments."""
    for match in _compiled(pattern).finditer(text, start):
        if match.group("hit") is not None:
            yield match


class LineIndex:
    """Offsets to 1-based (line, column) in one text."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        """The (line, column) of character ``offset``."""
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


# A literal or block comment that runs to the end of the text without its closing mark.
_OPEN = re.compile(
    r"'(?:[^'\\]|\\.|'')*|\"(?:[^\"\\]|\\.|\"\")*|`(?:[^`]|``)*|/\*(?:(?!\*/).)*", re.S
)


def unclosed(text: str) -> int | None:
    """The offset of a quote or block comment that is never closed, if there is one."""
    for match in re.finditer(_LITERALS, text, re.S):
        if match.end() == len(text) and _OPEN.fullmatch(match.group()):
            return match.start()
    return None


def statement_starts(text: str, keyword: str, start: int = 0) -> Iterator[int]:
    """Offsets of ``keyword (`` where it begins a statement: at ``start`` or after a ``;``,
    with only blanks and comments between (``AUDIT (...)`` blocks in a file)."""
    # Code other than the keyword is matched a run at a time (not a character at a time:
    # a body is scanned whole for a following AUDIT), stopping before anything that may
    # open a literal or comment, which find_code skips whole.
    pattern = rf";|(?P<keyword>(?i:\b{re.escape(keyword)}\b)\s*\()|[^\s;'\"`/\-]+|[/\-]"
    boundary = True
    for match in find_code(text, pattern, start):
        if match.group("hit") == ";":
            boundary = True
            continue
        if boundary and match.group("keyword") is not None:
            yield match.start()
        boundary = False
