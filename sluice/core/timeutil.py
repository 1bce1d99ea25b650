"""Time values as Sluice keeps them: UTC epoch milliseconds (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

DAY_MS = 86_400_000


def to_ms(value: str | date | datetime | int) -> int:
    """Convert an ISO date/datetime string, a date, a datetime or epoch ms to epoch ms (UTC).

    Raises:
        ValueError: with a message saying which formats are accepted.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a date, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)
    if isinstance(value, date):
        return to_ms(datetime(value.year, value.month, value.day, tzinfo=UTC))
    text = str(value).strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a date; use YYYY-MM-DD or YYYY-MM-DD HH:MM:SS") from None
    return to_ms(parsed)


def to_datetime(ms: int) -> datetime:
    """Epoch ms to an aware UTC datetime."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def to_ds(ms: int) -> str:
    """Epoch ms to 'YYYY-MM-DD'."""
    return to_datetime(ms).strftime("%Y-%m-%d")


def to_ts(ms: int) -> str:
    """Epoch ms to 'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC, no offset)."""
    return to_datetime(ms).replace(tzinfo=None).isoformat(sep=" ")


def format_range(start: int, end: int) -> str:
    """A half-open [start, end) range for people: dates when both ends are midnight."""
    if start % DAY_MS == 0 and end % DAY_MS == 0:
        last = end - DAY_MS
        return to_ds(start) if last == start else f"{to_ds(start)} .. {to_ds(last)}"
    return f"{to_ts(start)} .. {to_ts(end)}"
