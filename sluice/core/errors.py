"""Errors a user can cause, each saying what is wrong, where, and how to fix it.

Every error Sluice raises on purpose derives from :class:`SluiceError`. The CLI prints
``str(error)`` and exits non-zero; the bot renders the same text on the pull request.
"""

from __future__ import annotations

import difflib
import itertools
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

EXCERPT_WIDTH = 100  # at most this many characters of a source line are shown


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 1) -> str | None:
    """The hint for a misspelled name: ``did you mean 'x'?`` (None when nothing is close).

    >>> did_you_mean("INCREMENTAL_BY_TIME_RANG", ["FULL", "INCREMENTAL_BY_TIME_RANGE"])
    "did you mean 'INCREMENTAL_BY_TIME_RANGE'?"
    >>> did_you_mean("zzz", ["FULL"]) is None
    True
    """
    close = difflib.get_close_matches(word, sorted(set(choices)), n=n)
    if not close:
        return None
    return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


class SluiceError(Exception):
    """Root of all Sluice errors.

    Args:
        message: What is wrong, naming the object (model, file, setting).
        path: The file the problem is in, when there is one.
        line: 1-based line in ``path``.
        col: 1-based column in ``path``.
        hint: How to fix it.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        col: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.col = col
        self.hint = hint
        super().__init__(self.__str__())

    @property
    def location(self) -> str | None:
        """``file:line[:col]`` or None when the error is not tied to a file."""
        if self.path is None:
            return None
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        return where

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigError(SluiceError):
    """config.yaml (or a setting given on the command line) is invalid."""


class ModelError(SluiceError):
    """A model, audit, seed or unit-test file is invalid."""


class GraphError(SluiceError):
    """The dependency graph is invalid: unknown table, cycle, duplicate name."""


class PlanError(SluiceError):
    """A plan cannot be built from the given inputs."""


class StateError(SluiceError):
    """The state store cannot be opened, migrated, read or written."""


class ConflictError(StateError):
    """An environment changed since the plan was computed: re-plan and apply again."""


class ExecutionError(SluiceError):
    """Spark work failed."""


class DriverLost(ExecutionError):
    """The Spark driver died without reporting a failure (killed by a signal: ``kill -9``,
    the OOM killer, a machine going away): the job did not fail on its own, so the remedy
    is to run it again. Jobs are re-runnable (built intervals are kept, the views and the
    environment's record change last), so a caller that can retry should."""


class FailedAfterViews(ExecutionError):
    """The job failed (ran out of time, a statement after all failed, ...) after its views
    step had re-pointed every view of the environment, so the views read the plan's
    versions: the environment's record was committed to that plan all the same, and the
    state says what the views read. What failed came after the swap; the error says so."""


class JobCancelled(ExecutionError):
    """The job was stopped on purpose before it finished (a newer head superseded it:
    :mod:`sluice.core.spark.cancel`): not a failure of its own and not to be run again.
    What it finished is kept, as for any stopped job; its environment was not changed."""


class ProjectErrors(SluiceError):
    """Several independent problems found while loading one project.

    Loading reports every broken file at once, so a user fixes them in one pass.
    """

    def __init__(self, errors: list[SluiceError]) -> None:
        self.errors = errors
        super().__init__(f"{len(errors)} problems in the project")

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


# -- how an error is shown ---------------------------------------------------------------


def _cells(text: str) -> int:
    """Terminal columns ``text`` takes (East Asian wide characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def terminal_text(text: str) -> str:
    r"""``text`` fit for a terminal: every control character but a newline or a tab (ESC,
    C1 codes) and every bidirectional override shown as ``?``, so text from a project's
    files (a column's or a file's name in an error, a driver's log line) can neither
    restyle, retitle nor hide what the terminal shows.

    >>> terminal_text("x\x1b[8m hidden\u202e\nnext")
    'x?[8m hidden?\nnext'
    """
    return "".join(
        "?" if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0 or ch in _BIDI else ch
        for ch in text
    )


def _printable(text: str) -> str:
    """``text`` with tabs as spaces and any other control character as ``?`` (a source
    line is shown as text, never as terminal codes)."""
    text = text.expandtabs(4)
    return "".join("?" if ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 else ch for ch in text)


def excerpt(
    error: SluiceError, *, base: Path | None = None, width: int = EXCERPT_WIDTH
) -> list[str]:
    """The source line ``error`` points at, numbered, with a caret under its column: the
    lines to print under the error (none when it names no file and line, or the file or
    the line cannot be read). A relative path is read from the working folder, else from
    ``base`` (the project folder). A line longer than ``width`` is cut around the column.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
    ...     _ = f.write("MODEL (name s.a);\\nSELECT a, FROM t\\n")
    >>> print("\\n".join(excerpt(ModelError("bad", path=f.name, line=2, col=11))))
       2 | SELECT a, FROM t
         |           ^
    >>> excerpt(ModelError("bad", path=f.name, line=9)), excerpt(ModelError("no file"))
    ([], [])
    >>> os.unlink(f.name)
    """
    if error.path is None or error.line is None or error.line < 1:
        return []
    path = Path(error.path)
    if not path.is_file() and base is not None and not path.is_absolute():
        path = base / path
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            found = next(itertools.islice(handle, error.line - 1, None), None)
    except OSError:
        return []
    if found is None:
        return []
    raw = found.rstrip("\r\n")
    col = error.col if error.col is not None and 1 <= error.col <= len(raw) + 1 else None
    start = 0
    if len(raw) > width:  # a window around the column (the start when there is none)
        start = max(0, min((col or 1) - 1 - width // 2, len(raw) - width))
    shown = raw[start : start + width]
    before = "…" if start > 0 else ""
    after = "…" if start + width < len(raw) else ""
    number = f"{error.line:>4}"
    lines = [f"{number} | {before}{_printable(shown)}{after}"]
    if col is not None:
        # As the line is shown: tabs expanded from the shown part's start, wide characters.
        pad = _cells(before + _printable(raw[start : col - 1]))
        lines.append(f"{' ' * len(number)} | {' ' * pad}^")
    return lines


def to_json(error: SluiceError) -> dict[str, Any]:
    """``error`` as the JSON a ``--json`` command prints: ``error`` (what is wrong),
    ``file``, ``line``, ``col``, ``hint`` (None when unknown); a :class:`ProjectErrors`
    also has ``errors``, each problem as such an object.

    >>> to_json(ModelError("unknown kind", path="m.sql", line=1, col=3, hint="use FULL"))
    {'error': 'unknown kind', 'file': 'm.sql', 'line': 1, 'col': 3, 'hint': 'use FULL'}
    """
    document: dict[str, Any] = {
        "error": error.message,
        "file": error.path,
        "line": error.line,
        "col": error.col,
        "hint": error.hint,
    }
    if isinstance(error, ProjectErrors):
        document["errors"] = [to_json(e) for e in error.errors]
    return document
