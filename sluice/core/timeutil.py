"""Time values as Sluice keeps them: UTC epoch milliseconds (pure)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

DAY_MS = 86_400_000
_DAY_WORDS = {"today": 0, "yesterday": -1, "tomorrow": 1}
_RELATIVE = re.compile(
    r"^(?:in\s+)?(\d+|an?)\s+(second|minute|hour|day|week|month|year)s?(\s+ago)?$"
)
_TIME_UNITS = frozenset({"second", "minute", "hour"})


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


def relative_ms(text: str, now: datetime | None = None) -> int | None:
    """The time a relative expression such as SQLMesh's ``start "1 week ago"`` names, in
    epoch ms (None when ``text`` is not one). As SQLMesh reads them: ``today``,
    ``yesterday``, ``tomorrow`` and amounts of days, weeks, months or years count from
    midnight UTC today; amounts of hours, minutes or seconds from ``now`` (to the minute).
    ``N unit(s) ago`` is in the past, ``in N unit(s)`` in the future; ``now`` is now.

    >>> base = datetime(2024, 3, 31, 15, 30, tzinfo=UTC)
    >>> [to_ts(relative_ms(t, base)) for t in ("1 week ago", "2 hours ago", "yesterday")]
    ['2024-03-24 00:00:00', '2024-03-31 13:30:00', '2024-03-30 00:00:00']
    >>> to_ds(relative_ms("1 month ago", base)), relative_ms("2024-01-01", base)
    ('2024-02-29', None)
    """
    words = " ".join(str(text).lower().split())
    base = (now or datetime.now(tz=UTC)).astimezone(UTC).replace(second=0, microsecond=0)
    midnight = base.replace(hour=0, minute=0)
    if words == "now":
        return to_ms(base)
    if words in _DAY_WORDS:
        return to_ms(midnight + timedelta(days=_DAY_WORDS[words]))
    match = _RELATIVE.match(words)
    if match is None or words.startswith("in ") == bool(match.group(3)):
        return None  # neither "in N units" nor "N units ago" (or both)
    worded = match.group(1) in ("a", "an")  # "a week ago": SQLMesh keeps the time of day
    amount = 1 if worded else int(match.group(1))
    sign = -1 if match.group(3) else 1
    unit = match.group(2)
    if unit in _TIME_UNITS:
        return to_ms(base + sign * timedelta(**{f"{unit}s": amount}))
    start = base if worded else midnight
    if unit in ("day", "week"):
        return to_ms(start + sign * timedelta(**{f"{unit}s": amount}))
    months = sign * amount * (12 if unit == "year" else 1)
    year, month = divmod(start.month - 1 + months, 12)
    year += start.year
    month += 1
    last = (date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)).day
    return to_ms(start.replace(year=year, month=month, day=min(start.day, last)))


def read_start(value: str | date | datetime | int) -> tuple[int, str | None]:
    """A model's ``start``: epoch ms and, when it is relative ("1 week ago", see
    :func:`relative_ms`), its text (the part of the model that stays the same from one
    day to the next; the ms are those of now).

    Raises:
        ValueError: neither a date nor a relative expression, saying what is accepted.
    """
    if isinstance(value, str):
        relative = relative_ms(value)
        if relative is not None:
            return relative, " ".join(value.lower().split())
    try:
        return to_ms(value), None
    except ValueError:
        raise ValueError(
            f"'{value}' is not a date; use YYYY-MM-DD, YYYY-MM-DD HH:MM:SS or a relative "
            "time such as '1 week ago', '3 days ago' or 'yesterday'"
        ) from None


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
