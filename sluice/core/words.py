"""How numbers read for people, in every message Sluice writes (PR comment, checks, CLI):
counts with their noun in the right number, byte sizes, durations. One owner, so "1 rows"
cannot come back in one place while another says "1 row".
"""

from __future__ import annotations

import re


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


_UNITS = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4, "pb": 1024**5}
_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from a size a person wrote: a number of bytes, or a number and a unit
    (B, KB, MB, GB, TB, PB, each 1024 of the one before, as :func:`size` prints them;
    KiB ... PiB mean the same).

    >>> parse_size(2048), parse_size("50 GB"), parse_size("1.5tb"), parse_size("10MiB")
    (2048, 53687091200, 1649267441664, 10485760)

    Raises:
        ValueError: not a size (the message says what one looks like).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"{text} is negative; a size is 0 or more bytes")
        return text
    found = _SIZE.match(text) if isinstance(text, str) else None
    unit = _UNITS.get(found.group(2).lower()) if found else None
    if found is None or unit is None:
        raise ValueError(
            f"{text!r} is not a size: write a number of bytes or a number and a unit, "
            "e.g. 500 MB, 50 GB or 2 TB"
        )
    return int(float(found.group(1)) * unit)


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
