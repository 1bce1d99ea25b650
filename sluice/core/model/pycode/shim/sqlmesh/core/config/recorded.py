"""What the stand-in config classes share: an object that records the keyword arguments
it was given and the place (file, line, column) of the call that made it.

SQLMesh's config classes are pydantic models that validate their fields; Sluice's stand-ins
validate nothing: the sandboxed process turns the chosen ``Config`` into plain data
(:mod:`sluice.core.model.pycode.config_eval`) and the service validates that data as it
validates a config.yaml (:mod:`sluice.core.config`), naming config.py's lines.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_SHIM = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Where = tuple[str, int, int]
"""(file, line, column) of a call, as the caller's code object gives it."""


def caller() -> Where | None:
    """Where the first frame outside the stand-in package called into it."""
    try:
        frame = sys._getframe(1)
    except ValueError:
        return None
    while frame is not None and frame.f_code.co_filename.startswith(_SHIM):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    code = frame.f_code
    line, column = frame.f_lineno, -1
    try:
        for index, position in enumerate(code.co_positions()):
            if index == frame.f_lasti // 2:
                line = position[0] or line
                column = position[2] if position[2] is not None else -1
                break
    except (AttributeError, ValueError):
        pass
    return (code.co_filename, line, column)


class Recorded:
    """An object of SQLMesh's config vocabulary: keyword arguments only, kept as given.

    Reading an argument it was not given is an error naming the class and the argument:
    the stand-in knows no defaults."""

    type_name: str | None = None
    """A connection's ``type`` (as config.yaml spells it); None for other classes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            raise TypeError(
                f"{type(self).__name__}() takes keyword arguments only, as SQLMesh's config "
                f"classes do (it was given {len(args)} positional)"
            )
        object.__setattr__(self, "sluice_values", dict(kwargs))
        object.__setattr__(self, "sluice_where", caller())
        object.__setattr__(self, "sluice_updated", {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("sluice_"):
            raise AttributeError(name)
        values = self.__dict__.get("sluice_values", {})
        if name in values:
            return values[name]
        raise AttributeError(
            f"{type(self).__name__}.{name} was not given: Sluice's stand-in for SQLMesh's "
            "config classes knows only the arguments an object was made with"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        self.sluice_values[name] = value
        self.sluice_updated[name] = caller()

    def copy(self, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy with ``update``'s fields replaced (pydantic's ``copy``)."""
        if update is not None and not isinstance(update, dict):
            raise TypeError("copy(update=...) takes a dict of field names and values")
        made = type(self)(**{**self.sluice_values, **(update or {})})
        where = made.sluice_where
        made.sluice_updated.update(
            {k: v for k, v in self.sluice_updated.items() if k not in (update or {})}
        )
        made.sluice_updated.update({str(k): where for k in update or {}})
        object.__setattr__(made, "sluice_origin", self)
        return made

    model_copy = copy

    @classmethod
    def parse_obj(cls, data: Any) -> Any:
        """An object made from a mapping of its fields (pydantic's ``parse_obj``)."""
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__}.parse_obj() takes a dict of field names and values")
        return cls(**data)

    model_validate = parse_obj

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.sluice_values.items())
        return f"{type(self).__name__}({args})"
