"""A unified diff (the plan's, :mod:`sluice.core.plan.sqldiff`) laid out side by side for
the pages: each hunk's removed lines beside the added lines that replace them, context on
both sides, with each side's line numbers (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class Row:
    """One row: ``kind`` is ``hunk`` (a hunk's header, in ``left``), ``same``, or
    ``change`` (either side may be empty: a line only removed or only added)."""

    kind: str
    left_no: int | None = None
    left: str | None = None
    right_no: int | None = None
    right: str | None = None


def side_by_side(diff: str) -> list[Row]:
    """The rows of ``diff``; its file header lines (``---``, ``+++``) are left out."""
    rows: list[Row] = []
    removed: list[tuple[int, str]] = []
    added: list[tuple[int, str]] = []
    left = right = 0

    def flush() -> None:
        for index in range(max(len(removed), len(added))):
            old = removed[index] if index < len(removed) else (None, None)
            new = added[index] if index < len(added) else (None, None)
            rows.append(Row("change", old[0], old[1], new[0], new[1]))
        removed.clear()
        added.clear()

    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")) and not rows and not removed and not added:
            continue
        header = _HUNK.match(line)
        if header:
            flush()
            left, right = int(header.group(1)), int(header.group(2))
            rows.append(Row("hunk", left=line))
        elif line.startswith("-"):
            removed.append((left, line[1:]))
            left += 1
        elif line.startswith("+"):
            added.append((right, line[1:]))
            right += 1
        else:
            flush()
            text = line[1:] if line.startswith(" ") else line
            rows.append(Row("same", left, text, right, text))
            left, right = left + 1, right + 1
    flush()
    return rows
