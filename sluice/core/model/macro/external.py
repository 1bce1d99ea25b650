"""Macros the macro language does not define: a project's Python macros (pure).

The evaluator asks :data:`ACTIVE` (set by the loader while it loads a project with
``macros/*.py``) for any ``@name(...)`` that is neither an operator nor a ``@DEF``. The
calls go to a separate process (:mod:`sluice.core.model.pycode.macros`); this module only
says what the evaluator may ask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Protocol


class External(Protocol):
    """Macros defined outside the macro language."""

    @property
    def names(self) -> frozenset[str]:
        """Lower-case names of the macros."""
        ...

    def call(
        self, name: str, args: Sequence[str], kwargs: Mapping[str, str], dialect: str
    ) -> list[str]:
        """SQL text of what ``@name(args)`` returns, each argument given as SQL text.

        Raises:
            MacroError: the macro failed (its message names the macro file and line).
        """
        ...


ACTIVE: ContextVar[External | None] = ContextVar("sluice_external_macros", default=None)
