"""Files nested too deeply for a recursive parser are a ModelError, not a crash (pure).

sqlglot parses, walks and writes SQL recursively: a query with a few hundred nested
brackets, subqueries or ``NOT``s exhausts Python's stack and raises ``RecursionError``.
No real model nests like that, but a file that does must get a message naming it, as any
other broken file does, not a traceback (CLI) or a failed job (bot).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sluice.core.errors import ModelError

_P = ParamSpec("_P")
_R = TypeVar("_R")


def nesting_guard(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """Make ``parse`` raise :class:`ModelError` where it would raise ``RecursionError``.

    ``parse`` must take the file it reads as a parameter named ``path``: the error names it.
    """
    signature = inspect.signature(parse)
    if "path" not in signature.parameters:
        raise TypeError(f"{parse.__qualname__} has no 'path' parameter")

    @functools.wraps(parse)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return parse(*args, **kwargs)
        except RecursionError:
            path = signature.bind(*args, **kwargs).arguments["path"]
            raise ModelError(
                "the file nests brackets, subqueries or expressions too deeply to be read",
                path=str(path),
                hint="flatten it, e.g. move nested subqueries into CTEs or other models",
            ) from None

    return guarded
