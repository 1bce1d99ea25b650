"""The service's side of a project's config.py (SQLMesh's Python config).

config.py is the project's code, so it runs where a project's Python macros run: in the
sandboxed child of :mod:`.macros` (empty environment, memory, CPU and file limits, the
project read-only, no network, :mod:`.guard`), never in this process, and only where the
caller lets the project's Python run at all (``SLUICE_PROJECT_PYTHON``; the loader refuses
it otherwise). The child answers with the chosen ``Config`` as plain data and the line of
config.py of each value (:mod:`.config_eval`); :func:`read` checks the answer's shape and
size, refuses what Sluice never takes from a project's code (its own ``sluice:`` settings),
and returns it as a :class:`~sluice.core.yamlio.LocatedYaml`, so that
:func:`sluice.core.config.parse_config` validates it exactly as a config.yaml's data and
names config.py's lines in its errors.

Bounds: the child's start (:data:`.macros.START_SECONDS`), :data:`SECONDS` for running
config.py, the child's answer within :data:`.macros.LINE_BYTES`, at most :data:`MAX_LINES`
located values.
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sluice.core import yamlio
from sluice.core.errors import ConfigError, ModelError
from sluice.core.model.pycode.macros import PythonMacros
from sluice.core.yamlio import KeyPath, LocatedYaml

FILE = "config.py"
NAME: ContextVar[str] = ContextVar("sluice_config_py_name", default="config")
"""Which Config of config.py a load reads when none is named: SQLMesh's default,
``config``, unless the CLI's ``sluice --config NAME`` (SQLMesh's ``--config``) set
another. The service never sets it."""
SECONDS = 10.0
"""Longest config.py may take to run."""
MAX_LINES = 100_000
"""Most located values an answer may carry."""
MESSAGE_CHARS = 2_000
"""Longest error message of config.py's that is shown (the rest is cut)."""
NOT_FROM_PYTHON = frozenset({"sluice", "notes", "default_catalog"})
"""Keys the data may not hold: Sluice's own settings are never the project's code's to
give (a pull request's config.yaml ``sluice:`` section is not used for its build either),
and the other two are Sluice's own."""
HINT = (
    "config.py runs as SQLMesh runs it (in Sluice's sandboxed process: the project's files "
    "only, no network, no environment variables, with stand-ins for sqlmesh.core.config's "
    "classes): fix the code, or write the settings in config.yaml"
)


def read(root: Path, name: str | None = None) -> LocatedYaml:
    """The data of ``root``/config.py's Config ``name`` (None: :data:`NAME`'s, SQLMesh's
    ``config`` by default), with config.py's lines.

    Raises:
        ConfigError: config.py failed, timed out, wrote past its bounds, gave something
            that is not configuration, or set what it may not; naming config.py:line.
    """
    path = root / FILE
    name = name or NAME.get()
    process = PythonMacros(root)
    try:
        process.start([], {})
        answer = process.config(name, SECONDS)
    except ModelError as exc:
        raise ConfigError(
            f"running config.py: {_reason(exc.message)}", path=str(path), line=1, hint=HINT
        ) from None
    finally:
        process.close()
    if "error" in answer:
        error = answer["error"]
        where = error.get("path")
        here = where == str(path.resolve())
        line = error.get("line") if here else None
        at = f":{error['line']}" if error.get("line") else ""
        other = f" (in {_relative(root, where)}{at})" if where and not here else ""
        said = str(error.get("message"))
        said = said if len(said) <= MESSAGE_CHARS else said[: MESSAGE_CHARS - 1] + "…"
        raise ConfigError(
            f"running config.py: {said}{other}",
            path=str(path),
            line=line or 1,
            hint=HINT,
        )
    return located(path, answer.get("value"))


def _reason(message: str) -> str:
    """The process's error, in config.py's words (it speaks of macros)."""
    if "went past the limits" in message:
        return (
            f"it took more than {SECONDS:g} s, or more memory or CPU than the sandboxed "
            "process may use, or the process ended (an endless loop, sys.exit, a crash)"
        )
    if "wrote" in message and "protocol" in message:
        return (
            "it wrote to the process's standard output past Python's print (os.write(1, ...) "
            "or sys.__stdout__), or more than the process may send, which Sluice reads as "
            "the process's answers"
        )
    return message


def _relative(root: Path, where: str) -> str:
    try:
        return Path(where).relative_to(root.resolve()).as_posix()
    except ValueError:
        return where


def located(path: Path, value: Any) -> LocatedYaml:
    """The child's answer (``{"data": {...}, "lines": [[key path, line], ...]}``) checked
    and made a :class:`LocatedYaml` of ``path``.

    Raises:
        ConfigError: the answer is not of that shape, or sets a key in
            :data:`NOT_FROM_PYTHON`.
    """
    if not (
        isinstance(value, dict)
        and value.keys() == {"data", "lines"}
        and isinstance(value["data"], dict)
        and isinstance(value["lines"], list)
        and len(value["lines"]) <= MAX_LINES
    ):
        raise ConfigError(
            "running config.py: the sandboxed process gave an answer that is not a config",
            path=str(path),
            line=1,
            hint=HINT,
        )
    # The answer is the child's, and config.py runs in the child: it could write one of its
    # own. Held to config.yaml's bounds (yamlio), and to lines config.py has.
    problem = _beyond_bounds(value["data"])
    if problem is not None:
        raise ConfigError(
            f"running config.py: its config {problem}", path=str(path), line=1, hint=HINT
        )
    last = _line_count(path)
    lines: dict[KeyPath, int] = {}
    for item in value["lines"]:
        if (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], list)
            and all(type(k) in (str, int) for k in item[0])
            and type(item[1]) is int
            and 0 < item[1] <= last
        ):
            lines.setdefault(tuple(item[0]), item[1])
    doc = LocatedYaml(str(path), value["data"], lines)
    for key in value["data"]:
        if key in NOT_FROM_PYTHON:
            raise ConfigError(
                f"config.py sets '{key}', which Sluice never takes from a project's code",
                path=str(path),
                line=doc.line_of((key,)) or 1,
                hint="Sluice's own settings are not read from config.py (SQLMesh's Config "
                "has no such field either); remove it",
            )
    return doc


def _line_count(path: Path) -> int:
    try:
        return max(1, len(path.read_bytes().splitlines()))
    except OSError:
        return 1


def _beyond_bounds(data: Any) -> str | None:
    """What of ``data`` is past config.yaml's bounds (nesting, values), or None.

    >>> _beyond_bounds({"variables": {"x": [[[1]]]}}) is None
    True
    >>> deep: Any = 1
    >>> for _ in range(200):
    ...     deep = [deep]
    >>> _beyond_bounds({"variables": {"x": deep}})
    'nests values more than 100 deep'
    """
    count = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > yamlio.MAX_DEPTH:
            return f"nests values more than {yamlio.MAX_DEPTH} deep"
        if count > yamlio.MAX_VALUES:
            return f"holds more than {yamlio.MAX_VALUES:,} values"
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None
