"""The process that runs a project's Python macros (started by :mod:`.macros`).

It reads one JSON line (the project root, the macro files, the variables), limits its own
memory and CPU, installs :mod:`.guard`, imports the macro files, and answers with the
names of the macros they registered (or the errors, each with file and line). Then it
answers calls, one JSON line in and one out, until its input ends::

    {"name": "total", "args": ["amount"], "kwargs": {}, "dialect": "spark"}
    {"sql": ["SUM(amount)"]}                      (or {"error": {...}})

Arguments arrive as SQL text, are parsed with sqlglot and given to the macro as
expressions (or converted to ``str``, ``int``, ``float``, ``bool``, ``SQL`` or a list of
them when the parameter is annotated so); what the macro returns goes back as SQL text.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import resource
import sys
import traceback
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

MEMORY_BYTES = 2 * 1024 * 1024 * 1024
"""Address space of the process (``RLIMIT_AS``)."""
CPU_SECONDS = 120
"""CPU time of the process (``RLIMIT_CPU``)."""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _where(exc: BaseException, files: set[str]) -> tuple[str | None, int | None]:
    """The last frame of ``exc``'s traceback inside one of the project's ``files``."""
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in files:
            found = (frame.filename, frame.lineno)
    if isinstance(exc, SyntaxError) and exc.filename in files:
        found = (exc.filename, exc.lineno)
    return found


def _error(exc: BaseException, files: set[str], default_path: str | None) -> dict[str, Any]:
    path, line = _where(exc, files)
    message = f"{type(exc).__name__}: {exc}".strip()
    return {"message": message, "path": path or default_path, "line": line}


def _coerce(value: Any, annotation: Any, dialect: str) -> Any:
    """An argument (a sqlglot expression) converted to what the parameter is annotated."""
    from sqlglot import exp

    if annotation is inspect.Parameter.empty or annotation is Any:
        return value
    name = getattr(annotation, "__name__", str(annotation))
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) and isinstance(value, exp.Array | exp.Tuple | exp.Paren):
        inner = typing.get_args(annotation)
        items = value.expressions if not isinstance(value, exp.Paren) else [value.this]
        return [_coerce(i, inner[0] if inner else Any, dialect) for i in items]
    if name == "SQL":
        return value.sql(dialect)
    if annotation is str:
        if isinstance(value, exp.Literal | exp.Column | exp.Identifier):
            return value.name
        return value.sql(dialect)
    if annotation in (int, float) and isinstance(value, exp.Literal) and not value.is_string:
        return annotation(value.this)
    if annotation is bool and isinstance(value, exp.Boolean):
        return bool(value.this)
    return value


def _sql(result: Any, dialect: str) -> list[str]:
    from sqlglot import exp

    if result is None:
        return []
    if isinstance(result, list | tuple):
        return [s for item in result for s in _sql(item, dialect)]
    if isinstance(result, exp.Expr):
        return [result.sql(dialect)]
    if isinstance(result, str):
        return [result]
    if isinstance(result, bool | int | float):
        return [exp.convert(result).sql(dialect)]
    raise TypeError(
        f"a macro returned {type(result).__name__}; return a sqlglot expression, SQL "
        "text, a number, a list of them, or None"
    )


_SIGNATURES: dict[Callable[..., Any], tuple[dict[str, Any], list[inspect.Parameter]]] = {}


def _signature(
    function: Callable[..., Any],
) -> tuple[dict[str, Any], list[inspect.Parameter]]:
    """The type hints and the parameters after the evaluator, read once per macro."""
    known = _SIGNATURES.get(function)
    if known is None:
        try:
            hints = typing.get_type_hints(function)
        except Exception:
            hints = {}
        known = (hints, list(inspect.signature(function).parameters.values())[1:])
        _SIGNATURES[function] = known
    return known


def _call(
    function: Callable[..., Any], request: dict[str, Any], variables: dict[str, Any]
) -> list[str]:
    import sqlglot

    from sluice.core.model.pycode.shim.sqlmesh.core.macros import MacroEvaluator

    dialect = str(request.get("dialect") or "spark")
    args = [sqlglot.parse_one(a, read=dialect) for a in request.get("args", [])]
    kwargs = {k: sqlglot.parse_one(v, read=dialect) for k, v in request.get("kwargs", {}).items()}
    hints, parameters = _signature(function)
    positional = [
        _coerce(a, hints.get(p.name, p.annotation), dialect)
        for a, p in zip(args, parameters, strict=False)
    ]
    positional += args[len(positional) :]
    named = {
        k: _coerce(v, hints.get(k, inspect.Parameter.empty), dialect) for k, v in kwargs.items()
    }
    return _sql(function(MacroEvaluator(dialect, variables), *positional, **named), dialect)


def main() -> None:
    _limit()
    setup = json.loads(sys.stdin.readline())
    root = str(Path(setup["root"]).resolve())
    files = [str(Path(f).resolve()) for f in setup["files"]]
    variables = dict(setup.get("variables") or {})

    import sqlglot  # noqa: F401  (imported before the guard: its files are Python's own)

    from sluice.core.model.pycode import guard, registry
    from sluice.core.model.pycode.shim import PATH
    from sluice.core.model.pycode.shim.sqlmesh.core import macros  # noqa: F401

    sys.path[:0] = [PATH, root]
    guard.install([root, PATH])
    out = sys.stdout
    known = set(files)
    errors: list[dict[str, Any]] = []
    for file in files:
        module = "macros." + Path(file).relative_to(Path(root) / "macros").with_suffix(
            ""
        ).as_posix().replace("/", ".")
        try:
            spec = importlib.util.spec_from_file_location(module, file)
            assert spec is not None and spec.loader is not None
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
        except BaseException as exc:
            errors.append(_error(exc, known, file))
    out.write(json.dumps({"macros": sorted(registry.MACROS), "errors": errors}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        function = registry.MACROS.get(str(request.get("name", "")).lower())
        try:
            if function is None:
                raise NameError(f"no Python macro {request.get('name')}")
            answer: dict[str, Any] = {"sql": _call(function, request, variables)}
        except BaseException as exc:
            answer = {"error": _error(exc, known, None)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
