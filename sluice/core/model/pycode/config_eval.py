"""In the sandboxed child (:mod:`.child`): run a project's config.py and give its chosen
``Config`` back as plain data, with the line of config.py each value was written on.

config.py imports SQLMesh's config classes; the child finds Sluice's stand-ins
(``shim/sqlmesh/core/config``), which record their keyword arguments and where they were
called. :func:`evaluate` imports config.py from the project's sources (as SQLMesh imports
it, module name ``config``), takes the module's ``config`` (or the name asked for), and
walks it into the mapping a config.yaml parses into: a config object's keyword arguments
are its keys, a connection or notification target gains its ``type``, an enumeration is its
value, a date its ISO text, tuples and sets are lists. Anything else (a function, a class,
an object of another library) is an :class:`Unsupported` error naming the setting and its
line. What config.py prints is dropped (SQLMesh would show it on the terminal; here
standard output is the protocol), and it reads an empty standard input.

The answer is ``{"data": {...}, "lines": [[key path, line], ...]}``; the service checks
its shape and validates the data (:mod:`.config_file`).
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import enum
import importlib
import importlib.abc
import io
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

DEPTH = 32
"""Deepest nesting of config objects, lists and dicts in a config."""
MODULE = "config"
"""The module name config.py runs under (SQLMesh imports it by its file's stem)."""


class Unsupported(Exception):
    """A value config.py gives that is not plain data: ``line`` is config.py's."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


class _Sink(io.TextIOBase):
    """A standard output that drops what is written to it."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


SUBMODULES = (
    "categorizer",
    "connection",
    "gateway",
    "janitor",
    "migration",
    "model",
    "naming",
    "plan",
    "root",
    "run",
    "scheduler",
    "format",
    "ui",
)
"""Modules of ``sqlmesh.core.config`` that config files import classes from by their own
path (``from sqlmesh.core.config.connection import DuckDBConnectionConfig``): each is the
stand-in package itself, so a class it lacks is the same clear ImportError."""
ALLOWED = (
    "sqlmesh.core.config (and its modules), sqlmesh.core.user, "
    "sqlmesh.core.notification_target, sqlmesh.integrations.github.cicd.config"
)


class _Missing(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path`` while config.py runs: a ``sqlmesh`` module the stand-in
    lacks is an ImportError saying so (not Python's bare "No module named")."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "sqlmesh" or fullname.startswith("sqlmesh."):
            raise ModuleNotFoundError(
                f"Sluice's stand-in for SQLMesh has no module {fullname}: config.py may "
                f"import {ALLOWED}",
                name=fullname,
            )


@contextlib.contextmanager
def _alone() -> Iterator[None]:
    """config.py runs with a standard output that drops what it prints, an empty standard
    input (``input()`` gets EOFError at once: the real one carries the protocol), the
    stand-in's modules by their own paths, and :class:`_Missing` for the others."""
    package = importlib.import_module("sqlmesh.core.config")
    for name in SUBMODULES:
        sys.modules.setdefault(f"{package.__name__}.{name}", package)
    saved = sys.stdout, sys.stdin
    sys.stdout, sys.stdin = _Sink(), io.StringIO("")
    missing = _Missing()
    sys.meta_path.append(missing)
    try:
        yield
    finally:
        sys.stdout, sys.stdin = saved
        if missing in sys.meta_path:
            sys.meta_path.remove(missing)


def evaluate(spec: dict[str, Any], importer: Any) -> dict[str, Any]:
    """Run config.py (``spec["file"]``) and convert its ``spec["name"]`` Config."""
    # The stand-ins as config.py imports them (the shim's folder is on sys.path): the
    # same classes, not copies loaded under the sluice package's name.
    Config = importlib.import_module("sqlmesh.core.config").Config  # noqa: N806

    rel = str(spec.get("file") or "config.py")
    name = str(spec.get("name") or "config")
    path = os.path.join(importer.root, rel)
    with _alone():
        module = sys.modules.get(MODULE) or importer.load(rel, MODULE)
    configs = sorted(k for k, v in vars(module).items() if isinstance(v, Config))
    if not hasattr(module, name):
        others = f"; its Config objects: {', '.join(configs)}" if configs else ""
        raise Unsupported(f"config.py defines no config named '{name}'{others}", None)
    chosen = getattr(module, name)
    if not isinstance(chosen, Config):
        raise Unsupported(
            f"'{name}' in config.py is a {type(chosen).__name__}, not a Config "
            "(sqlmesh.core.config.Config), which SQLMesh requires",
            _defined_at(importer.files.get(rel, b""), name),
        )
    walk = _Walk(path, importer.files.get(rel, b""))
    lines: list[list[Any]] = []
    top = walk.line_of(chosen) or _defined_at(importer.files.get(rel, b""), name) or 1
    lines.append([[], top])
    data = walk.convert(chosen, (), top, lines, 0)
    return {"data": data, "lines": lines}


def _defined_at(source: bytes, name: str) -> int | None:
    """The line of config.py's last top-level assignment to ``name``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found = node.lineno
    return found


class _Walk:
    """Converts config objects made in config.py to plain data and lines."""

    def __init__(self, path: str, source: bytes) -> None:
        self.path = path
        # (line, column) of each call in config.py -> {keyword: line}
        self.calls: dict[tuple[int, int], dict[str, int]] = {}
        self.by_line: dict[int, dict[str, int]] = {}
        # (line, column) of each call -> {keyword: the lines of its list's items}, for a
        # list written in the call or in a top-level assignment of the name it gives
        self.items: dict[tuple[int, int], dict[str, list[int]]] = {}
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return
        assigned: dict[str, list[tuple[int, list[int]]]] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and isinstance(
                statement.value, ast.List | ast.Tuple
            ):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        elements = [e.lineno for e in statement.value.elts]
                        assigned.setdefault(target.id, []).append((statement.lineno, elements))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            listed: dict[str, list[int]] = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    continue
                if isinstance(keyword.value, ast.List | ast.Tuple):
                    listed[keyword.arg] = [e.lineno for e in keyword.value.elts]
                elif isinstance(keyword.value, ast.Name):
                    before = [e for at, e in assigned.get(keyword.value.id, []) if at < node.lineno]
                    if before:
                        listed[keyword.arg] = before[-1]
            self.items[(node.lineno, node.col_offset)] = listed
            keywords = {k.arg: k.lineno for k in node.keywords if k.arg is not None}
            for keyword in node.keywords:
                if keyword.arg == "update" and isinstance(keyword.value, ast.Dict):
                    for key in keyword.value.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            keywords[key.value] = key.lineno
            self.calls[(node.lineno, node.col_offset)] = keywords
            self.by_line.setdefault(node.lineno, {}).update(keywords)

    def _here(self, where: Any) -> tuple[int, int] | None:
        if not where or os.path.realpath(str(where[0])) != os.path.realpath(self.path):
            return None
        return int(where[1]), int(where[2])

    def line_of(self, value: Any) -> int | None:
        here = self._here(getattr(value, "sluice_where", None))
        return here[0] if here else None

    def key_line(self, value: Any, key: str) -> int | None:
        """The line config.py gives ``key`` of a config object on: its keyword in the call
        that made the object (or the copy or assignment that set it), else that call's."""
        updated = value.sluice_updated.get(key)
        where = updated if key in value.sluice_updated else value.sluice_where
        origin = value.__dict__.get("sluice_origin")
        if key not in value.sluice_updated and origin is not None:
            return self.key_line(origin, key)
        here = self._here(where)
        if here is None:
            return None
        keywords = self.calls.get(here) or self.by_line.get(here[0], {})
        return keywords.get(key, here[0])

    def item_lines(self, value: Any, key: str) -> list[int]:
        """The lines of the items of the list config.py gives ``key`` of a config object,
        where it writes them out (else none)."""
        if key in value.sluice_updated:
            return []
        origin = value.__dict__.get("sluice_origin")
        if origin is not None:
            return self.item_lines(origin, key)
        here = self._here(value.sluice_where)
        return self.items.get(here, {}).get(key, []) if here else []

    def convert(
        self,
        value: Any,
        key: tuple[Any, ...],
        line: int,
        lines: list[list[Any]],
        depth: int,
        item_lines: list[int] | None = None,
    ) -> Any:
        Recorded = importlib.import_module("sqlmesh.core.config.recorded").Recorded  # noqa: N806

        dotted = ".".join(str(k) for k in key) or "the config"
        if depth > DEPTH:
            raise Unsupported(f"{dotted} nests deeper than {DEPTH} objects, lists or dicts", line)
        if isinstance(value, enum.Enum):
            value = value.value
        if value is None or type(value) in (bool, int, float, str):
            return value
        for base in (bool, int, float, str):
            if isinstance(value, base):
                return base(value)
        if isinstance(value, datetime.date):
            return value.isoformat()
        if isinstance(value, pathlib.PurePath):
            return str(value)
        if isinstance(value, Recorded):
            found: dict[str, Any] = {}
            if value.type_name is not None and "type" not in value.sluice_values:
                found["type"] = value.type_name
            for name, item in value.sluice_values.items():
                at = self.key_line(value, name) or line
                lines.append([[*key, name], at])
                listed = self.item_lines(value, name)
                found[name] = self.convert(item, (*key, name), at, lines, depth + 1, listed)
            return found
        if isinstance(value, list | tuple | set | frozenset):
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            known = item_lines if item_lines and len(item_lines) == len(items) else None
            converted = []
            for index, item in enumerate(items):
                at = known[index] if known else line
                if known:
                    lines.append([[*key, index], at])
                converted.append(self.convert(item, (*key, index), at, lines, depth + 1))
            return converted
        if isinstance(value, dict):
            mapping: dict[str, Any] = {}
            for written, item in value.items():
                name = written.value if isinstance(written, enum.Enum) else written
                if not isinstance(name, str | int | float | bool):
                    raise Unsupported(
                        f"{dotted} has a key of type {type(name).__name__}; config keys are "
                        "text or numbers",
                        line,
                    )
                mapping[str(name)] = self.convert(item, (*key, str(name)), line, lines, depth + 1)
            return mapping
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        raise Unsupported(
            f"{dotted} is a {kind}, which Sluice cannot read as configuration: it reads "
            "SQLMesh's config classes (sqlmesh.core.config), text, numbers, booleans, dates, "
            "lists and dicts",
            line,
        )
