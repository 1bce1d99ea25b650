"""Errors a user can cause, each saying what is wrong, where, and how to fix it.

Every error Sluice raises on purpose derives from :class:`SluiceError`. The CLI prints
``str(error)`` and exits non-zero; the bot renders the same text on the pull request.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


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


class ProjectErrors(SluiceError):
    """Several independent problems found while loading one project.

    Loading reports every broken file at once, so a user fixes them in one pass.
    """

    def __init__(self, errors: list[SluiceError]) -> None:
        self.errors = errors
        super().__init__(f"{len(errors)} problems in the project")

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
