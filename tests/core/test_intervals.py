from sluice.core.intervals import batches, cron_intervals, interval_floor, merge, missing
from sluice.core.timeutil import DAY_MS, to_ms

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
