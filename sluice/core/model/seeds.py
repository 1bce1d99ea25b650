"""Seed CSV files: read the header, infer column types where none are declared (pure)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

from sluice.core.errors import ModelError

_PATTERNS = (
    ("BIGINT", re.compile(r"^-?\d{1,18}$")),
    ("DOUBLE", re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")),
    ("DATE", re.compile(r"^\d{4}-\d{2}-\d{2}$")),
    ("TIMESTAMP", re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$")),
    ("BOOLEAN", re.compile(r"^(true|false)$", re.I)),
)
CSV_OPTIONS = frozenset({"delimiter", "quotechar", "escapechar", "doublequote", "skipinitialspace"})


def csv_reader(text: str, settings: Iterable[tuple[str, str]]) -> Iterable[list[str]]:
    """A csv reader for seed text honouring SQLMesh-style ``csv_settings``."""
    options: dict[str, object] = {}
    for key, value in settings:
        if key in ("doublequote", "skipinitialspace"):
            options[key] = value.lower() == "true"
        elif key in CSV_OPTIONS:
            options[key] = value
    return csv.reader(io.StringIO(text, newline=""), **options)  # type: ignore[arg-type]


def seed_columns(
    text: str,
    path: str,
    model: str,
    declared: tuple[tuple[str, str], ...],
    settings: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, str], ...]:
    """The seed's columns: the declared ones (checked against the header) or inferred.

    ``settings`` were checked against :data:`CSV_OPTIONS` where the model declares them.

    Raises:
        ModelError: when the file has no header or the header and declaration disagree.
    """
    rows = iter(csv_reader(text, settings))
    header = [h.strip().lower() for h in next(rows, [])]
    if not header or not any(header):
        raise ModelError(
            f"seed {model}: the CSV file is empty or has no header row",
            path=path,
            line=1,
            hint="make the first line the column names, e.g. `id,name`",
        )
    if declared:
        names = [name for name, _ in declared]
        missing = [n for n in names if n not in header]
        if missing:
            raise ModelError(
                f"seed {model}: declared column(s) {', '.join(missing)} are not in the CSV header",
                path=path,
                line=1,
                hint=f"the header has: {', '.join(header)}",
            )
        return declared
    types: list[str | None] = [None] * len(header)
    for row in rows:
        for index, value in enumerate(row[: len(header)]):
            if value == "":
                continue
            types[index] = _widen(types[index], value)
    return tuple((name, kind or "STRING") for name, kind in zip(header, types, strict=True))


def _widen(current: str | None, value: str) -> str:
    found = next((name for name, pattern in _PATTERNS if pattern.match(value)), "STRING")
    if current is None or current == found:
        return found
    pair = {current, found}
    if pair == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    if pair == {"DATE", "TIMESTAMP"}:
        return "TIMESTAMP"
    return "STRING"
