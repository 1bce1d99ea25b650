import random

import pytest
from croniter import croniter

from sluice.core.errors import PlanError
from sluice.core.intervals import (
    MAX_INTERVALS,
    batches,
    boundaries,
    cron_intervals,
    interval_floor,
    merge,
    missing,
)
from sluice.core.timeutil import DAY_MS, to_datetime, to_ms

D = DAY_MS


def test_daily_intervals_are_aligned_and_complete_only() -> None:
    start, end = to_ms("2024-01-01 06:00"), to_ms("2024-01-04 12:00")
    assert cron_intervals("@daily", start, end) == [
        (to_ms("2024-01-01"), to_ms("2024-01-02")),
        (to_ms("2024-01-02"), to_ms("2024-01-03")),
        (to_ms("2024-01-03"), to_ms("2024-01-04")),
    ]


def test_croniter_schedules() -> None:
    weekly = cron_intervals("@weekly", to_ms("2024-01-01"), to_ms("2024-01-31"))
    assert [e - s for s, e in weekly] == [7 * D] * len(weekly)
    assert weekly[0][0] == to_ms("2023-12-31")  # the Sunday on or before the start
    six = cron_intervals("0 6 * * *", to_ms("2024-01-01"), to_ms("2024-01-03 07:00"))
    assert six[0] == (to_ms("2023-12-31 06:00"), to_ms("2024-01-01 06:00"))
    assert interval_floor("@monthly", to_ms("2024-03-15")) == to_ms("2024-03-01")


def _walk(expr: str, start: int, end: int) -> list[int]:
    """Fire times by stepping croniter one at a time (what boundaries computes faster)."""
    it = croniter(expr, to_datetime(start + 1), ret_type=float)
    points = [int(it.get_prev() * 1000)]
    while (nxt := int(it.get_next() * 1000)) <= end:
        if nxt > points[-1]:
            points.append(nxt)
    return points


@pytest.mark.parametrize(
    "expr",
    [
        "0 6 * * *", "*/7 9-17 * * 1-5", "15,45 */3 1,15 * *", "30 2 1 * 1", "0 12 29 2 *",
        "0 0 * * 0", "0 0 1 * *", "0 0 1 1 *", "5 4 L * *", "59 23 31 * *", "*/20 * * 3-5 *",
    ],
)  # fmt: skip
def test_boundaries_are_every_fire_time_croniter_gives(expr: str) -> None:
    rng = random.Random(expr)
    for _ in range(6):
        start = to_ms("2019-06-01") + rng.randrange(2 * 365 * DAY_MS)
        end = start + rng.choice([0, 1, 3_600_000, DAY_MS + 1, 40 * DAY_MS, 800 * DAY_MS])
        for a, b in ((start, end), (_walk(expr, start, end)[0], end), (start, start)):
            assert boundaries(expr, a, b) == _walk(expr, a, b), (expr, a, b)


def test_a_cron_with_too_many_intervals_fails() -> None:
    with pytest.raises(PlanError, match=f"makes more than {MAX_INTERVALS} intervals"):
        boundaries("* * * * *", to_ms("2000-01-01"), to_ms("2024-01-01"))
    with pytest.raises(PlanError, match=f"makes more than {MAX_INTERVALS} intervals"):
        boundaries("*/2 * * * 1-5", to_ms("2000-01-01"), to_ms("2024-01-01"))


def test_missing_merge_and_batches() -> None:
    days = cron_intervals("@daily", 0, 10 * D)
    done = merge([(2 * D, 4 * D), (3 * D, 5 * D), (7 * D, 8 * D)])
    assert done == [(2 * D, 5 * D), (7 * D, 8 * D)]
    todo = missing(days, done)
    assert todo == [
        (0, D),
        (D, 2 * D),
        (5 * D, 6 * D),
        (6 * D, 7 * D),
        (8 * D, 9 * D),
        (9 * D, 10 * D),
    ]
    # Batches never bridge a gap and never exceed batch_size.
    assert batches(todo, 3) == [(0, 2 * D), (5 * D, 7 * D), (8 * D, 10 * D)]
    assert batches(days, 4) == [(0, 4 * D), (4 * D, 8 * D), (8 * D, 10 * D)]
    assert batches(days, None) == [(0, 10 * D)]


def test_missing_with_nothing_done_is_every_interval_as_a_new_list() -> None:
    days = cron_intervals("@daily", 0, 5 * D)
    todo = missing(days, [])
    assert todo == days and todo is not days
    assert missing([], []) == [] and missing([], [(0, D)]) == []
    # One interval done anywhere goes back through the loop, and still only drops covered ones.
    assert missing(days, [(D, 2 * D)]) == [i for i in days if i != (D, 2 * D)]
    assert missing(days, [(0, 5 * D)]) == []


def test_cron_checks_kept_are_bounded_however_many_distinct_crons_a_project_names() -> None:
    """Crons come from projects (a PR head's too): a flood of distinct valid ones keeps at
    most CRON_CACHE checked, so they cannot grow the service's memory without bound."""
    from sluice.core import intervals

    intervals.check_cron.cache_clear()
    crons = [f"{m} {h} * * {d}" for d in range(7) for h in range(24) for m in range(0, 60, 6)]
    assert len(crons) > intervals.CRON_CACHE
    for cron in crons:
        assert intervals.check_cron(cron) == cron
    assert intervals.check_cron.cache_info().currsize == intervals.CRON_CACHE
