"""The intervals calendar (issue 44, prod history): the intervals a model's table holds, as
the state records them (sorted, merged spans: a run of consecutive intervals is one span),
laid over a window of day or month cells, each full, part or none built (pure).

A window is a bounded number of cells (:data:`CELLS`) ending with the cell that holds
``until``: years of daily intervals are shown a window at a time (month cells, or day cells
of the last three months), and a model's spans are listed whole but for :data:`MAX_SPANS`
(a table with more gaps than that says how many it has).

>>> cells = window("day", 3 * DAY_MS, count=4)
>>> [c.label for c in cells], cells[0].group
(['1', '2', '3', '4'], '1970-01')
>>> fill([(DAY_MS, 2 * DAY_MS + DAY_MS // 2)], cells)
['none', 'full', 'part', 'none']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sluice.core.intervals import Interval
from sluice.core.timeutil import DAY_MS, to_ms

Unit = Literal["day", "month"]
CELLS: dict[Unit, int] = {"day": 92, "month": 48}
"""Cells a window holds: about three months of days, four years of months."""
MAX_SPANS = 100
"""Spans listed for one model; past this the rest are counted, not listed."""


@dataclass(frozen=True)
class Cell:
    """``[start, end)`` in epoch ms; ``label`` its short name (a day of the month, a
    month), ``group`` what it belongs to (its month, its year)."""

    start: int
    end: int
    label: str
    group: str


def _month_start(year: int, month: int) -> int:
    return to_ms(datetime(year, month, 1, tzinfo=UTC))


def _cell(unit: Unit, at: int) -> Cell:
    """The cell of ``unit`` holding the instant ``at`` (ms)."""
    moment = datetime.fromtimestamp(at / 1000, tz=UTC)
    if unit == "day":
        start = at - at % DAY_MS
        return Cell(start, start + DAY_MS, str(moment.day), f"{moment:%Y-%m}")
    year, month = moment.year, moment.month
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return Cell(_month_start(year, month), _month_start(*following), f"{moment:%b}", str(year))


def window(unit: Unit, until: int, *, count: int | None = None) -> list[Cell]:
    """``count`` (default :data:`CELLS`) cells of ``unit``, the last holding ``until``."""
    cells = [_cell(unit, until)]
    for _ in range((count or CELLS[unit]) - 1):
        if cells[0].start <= 0:
            break  # nothing is recorded before the epoch
        cells.insert(0, _cell(unit, cells[0].start - 1))
    return cells


def choose(spans: Sequence[Interval]) -> Unit:
    """Days when every span lies within one window of days, else months."""
    if not spans:
        return "day"
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    return "day" if last - first <= CELLS["day"] * DAY_MS else "month"


def fill(spans: Sequence[Interval], cells: Sequence[Cell]) -> list[str]:
    """Each cell's state: ``full`` (built throughout), ``part`` or ``none``; ``spans``
    sorted and non-overlapping, as the state gives them (one pass over both)."""
    states, index = [], 0
    for cell in cells:
        while index < len(spans) and spans[index][1] <= cell.start:
            index += 1
        covered, at = 0, index
        while at < len(spans) and spans[at][0] < cell.end:
            covered += min(spans[at][1], cell.end) - max(spans[at][0], cell.start)
            at += 1
        length = cell.end - cell.start
        states.append("full" if covered >= length else ("part" if covered > 0 else "none"))
    return states


def ahead(unit: Unit, at: int, *, count: int | None = None) -> int:
    """The start of the cell ``count`` (default :data:`CELLS`) cells after the one
    holding ``at``."""
    start = _cell(unit, at).start
    for _ in range(count or CELLS[unit]):
        start = _cell(unit, start).end
    return start
