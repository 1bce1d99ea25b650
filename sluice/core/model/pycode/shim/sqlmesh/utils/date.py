"""``sqlmesh.utils.date``'s helpers that model functions call on the dates they get."""

from __future__ import annotations

from datetime import UTC, date, datetime


def to_datetime(value: date | datetime | str | int) -> datetime:
    """A UTC datetime from a date, a datetime, ISO text or epoch milliseconds."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, int):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return to_datetime(datetime.fromisoformat(str(value)))


def to_ds(value: date | datetime | str | int) -> str:
    """``YYYY-MM-DD``."""
    return to_datetime(value).strftime("%Y-%m-%d")


def to_ts(value: date | datetime | str | int) -> str:
    """``YYYY-MM-DD HH:MM:SS``."""
    return to_datetime(value).strftime("%Y-%m-%d %H:%M:%S")
