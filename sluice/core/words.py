"""How numbers read for people, in every message Sluice writes (PR comment, checks, CLI):
counts with their noun in the right number, byte sizes, durations. One owner, so "1 rows"
cannot come back in one place while another says "1 row".
"""

from __future__ import annotations


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``"1 model"``, ``"2 models"`` (``many``: an irregular plural).

    >>> plural(1, "model"), plural(3, "change"), plural(2, "entry", "entries")
    ('1 model', '3 changes', '2 entries')
    """
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


def size(n: int) -> str:
    """Bytes for people.

    >>> size(512), size(3 * 1024**3)
    ('512 B', '3.0 GB')
    """
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def duration(seconds: float) -> str:
    """
    >>> duration(41.2), duration(125), duration(7200)
    ('41 s', '2 min 5 s', '2 h 0 min')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
