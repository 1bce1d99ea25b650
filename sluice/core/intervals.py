"""Cron schedules as intervals; missing intervals; batching (pure).

Intervals are half-open ``(start_ms, end_ms)`` pairs in UTC epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, cast

from sluice.core.errors import PlanError
from sluice.core.timeutil import DAY_MS, to_datetime, to_ts

if TYPE_CHECKING:
    from croniter import croniter

Interval = tuple[int, int]
HOUR_MS = 3_600_000
MAX_INTERVALS = 2_000_000
"""Most intervals one model's schedule may make in a plan: past this a plan is refused
(each interval is held in memory and in the job spec)."""
WARN_INTERVALS = 500_000
"""Past this a plan warns (SQLMesh plans such schedules, so Sluice does too)."""

# Schedules with a fixed period and an epoch-aligned phase are computed by arithmetic,
# without croniter (imported by the first schedule that needs it: 0.05 s of a process).
_FIXED = {
    "@daily": DAY_MS,
    "@midnight": DAY_MS,
    "0 0 * * *": DAY_MS,
    "@hourly": HOUR_MS,
    "0 * * * *": HOUR_MS,
}
_ALIASES = {
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


def _croniter() -> type[croniter]:
    from croniter import croniter

    return cast("type[croniter]", croniter)


# Cron strings come from projects (a PR head's among them): the caches below are bounded, so
# many distinct ones cost no more memory than these many.
CRON_CACHE = 1024


@lru_cache(maxsize=CRON_CACHE)
def check_cron(cron: str) -> str:
    """Return ``cron`` if valid.

    Raises:
        PlanError: when croniter cannot read it.
    """
    if cron in _FIXED:
        return cron
    if not _croniter().is_valid(_ALIASES.get(cron, cron)):
        raise PlanError(
            f"invalid cron '{cron}'",
            hint="use @hourly, @daily, @weekly, @monthly or a 5-field cron like '0 6 * * *'",
        )
    return cron


def boundaries(cron: str, start: int, end: int) -> list[int]:
    """Cron fire times t with floor(start) <= t <= end, where start is moved back to a fire time."""
    period = _FIXED.get(cron)
    if period is not None:
        first = start - start % period
        count = (end - first) // period + 1
        if count > MAX_INTERVALS:
            raise _too_many(cron, start, end, f"{count}")
        return list(range(first, first + count * period, period))
    expr = _ALIASES.get(check_cron(cron), cron)
    it = _croniter()(expr, to_datetime(start + 1), ret_type=float)
    first_ms = int(it.get_prev() * 1000)
    fields = expr.split()
    if len(fields) == 5:
        return _by_days(cron, fields, first_ms, start, end)
    points = [first_ms]
    while True:
        nxt = int(it.get_next() * 1000)
        if nxt <= first_ms:
            continue
        if nxt > end:
            return points
        points.append(nxt)
        if len(points) > MAX_INTERVALS:
            raise _too_many(cron, start, end, f"more than {MAX_INTERVALS}")


def _by_days(cron: str, fields: list[str], first: int, start: int, end: int) -> list[int]:
    """The fire times from ``first`` (a fire time) to ``end`` of a 5-field cron, computed
    day by day: a cron fires at the same times of day (its minute and hour fields) on each
    day its day fields match, so only the matching days are iterated; the count is checked
    as each day is added, so a cron firing too often fails at once."""
    minute, hour, dom, month, dow = fields
    offsets = _day_offsets(minute, hour)
    if (dom, month, dow) == ("*", "*", "*"):
        days: Iterable[int] = range(first - first % DAY_MS, end + 1, DAY_MS)
    else:
        days = _matching_days(f"0 0 {dom} {month} {dow}", first - first % DAY_MS, end)
    points: list[int] = []
    for day in days:
        points.extend(t for t in (day + o for o in offsets) if first <= t <= end)
        if len(points) > MAX_INTERVALS:
            raise _too_many(cron, start, end, f"more than {MAX_INTERVALS}")
    return points


@lru_cache(maxsize=CRON_CACHE)
def _day_offsets(minute: str, hour: str) -> tuple[int, ...]:
    """Milliseconds after midnight at which ``{minute} {hour} * * *`` fires."""
    it = _croniter()(f"{minute} {hour} * * *", to_datetime(-1), ret_type=float)
    offsets = []
    while (nxt := int(it.get_next() * 1000)) < DAY_MS:
        offsets.append(nxt)
    return tuple(offsets)


def _matching_days(expr: str, first_day: int, end: int) -> Iterable[int]:
    """Midnights from ``first_day`` to ``end`` of the days ``expr`` (fires at 00:00) fires on."""
    it = _croniter()(expr, to_datetime(first_day - 1), ret_type=float)
    while (day := int(it.get_next() * 1000)) <= end:
        yield day


def _too_many(cron: str, start: int, end: int, count: str) -> PlanError:
    return PlanError(
        f"cron '{cron}' makes {count} intervals from {to_ts(start)} to {to_ts(end)}; "
        f"a plan holds at most {MAX_INTERVALS}",
        hint="set a later start (the model's `start`, or --start) or a coarser cron",
    )


def cron_intervals(cron: str, start: int, end: int) -> list[Interval]:
    """Complete cron intervals covering [start, end): the first starts at or before ``start``."""
    if end <= start:
        return []
    points = boundaries(cron, start, end)
    return list(pairwise(points))


def interval_floor(cron: str, when: int) -> int:
    """The latest cron fire time at or before ``when``."""
    period = _FIXED.get(cron)
    if period is not None:
        return when - when % period
    expr = _ALIASES.get(check_cron(cron), cron)
    it = _croniter()(expr, to_datetime(when + 1).astimezone(UTC), ret_type=float)
    return int(it.get_prev() * 1000)


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, with touching and overlapping intervals joined."""
    result: list[Interval] = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            if end > result[-1][1]:
                result[-1] = (result[-1][0], end)
        else:
            result.append((start, end))
    return result


def missing(expected: Sequence[Interval], done: Sequence[Interval]) -> list[Interval]:
    """The expected intervals not wholly covered by ``done`` (``done`` merged and sorted)."""
    if not done:  # a new model: each of its (maybe thousands of) intervals, without a loop
        return list(expected)
    result = []
    index = 0
    for start, end in expected:
        while index < len(done) and done[index][1] <= start:
            index += 1
        if index < len(done) and done[index][0] <= start and done[index][1] >= end:
            continue
        result.append((start, end))
    return result


def batches(intervals: Sequence[Interval], batch_size: int | None) -> list[Interval]:
    """Group consecutive intervals into batches of at most ``batch_size`` (None: one batch per run)."""
    result: list[Interval] = []
    count = 0
    for start, end in intervals:
        contiguous = result and result[-1][1] == start
        if contiguous and (batch_size is None or count < batch_size):
            result[-1] = (result[-1][0], end)
            count += 1
        else:
            result.append((start, end))
            count = 1
    return result
