"""The process that runs a project's Python macros (started by :mod:`.macros`).

It limits its own memory and CPU, imports sqlglot, reads one JSON line (the project root,
the macro files, the variables, and optionally the model files to read ahead), installs
:mod:`.guard`, imports the macro files, and answers with the names of the macros they
registered (or the errors, each with file and line). Then it answers calls, one JSON line
in and one out, until its input ends::

    {"id": 1, "name": "total", "args": ["amount"], "kwargs": {}, "dialect": "spark"}
    {"id": 1, "sql": ["SUM(amount)"]}                 (or {"id": 1, "error": {...}})

Arguments arrive as SQL text, are parsed with sqlglot and given to the macro as
expressions (or converted to ``str``, ``int``, ``float``, ``bool``, ``SQL`` or a list of
them when the parameter is annotated so); what the macro returns goes back as SQL text.
A macro that calls ``evaluator.columns_to_types(table)`` asks the loader for the table's
columns with a line of its own (``{"id": 1, "columns": "schema.table"}``), answered with
``{"columns": [[name, type], ...]}`` or ``{"columns": null}``.

**Python models.** The loader asks two more things for Python models (``pycode.models``):
``{"id": 2, "evaluate": {"file", "module", "expression", "line"}}``, a decorator value
only the project's code gives, evaluated after the module statements it needs
(:func:`_namespace`) and answered ``{"id": 2, "value": <plain JSON data>}`` (:func:`plain`);
and ``{"id": 3, "query": {"file", "entry", "dialect"}}``, an ``is_sql`` model's function
called with a macro evaluator (its file imported as SQLMesh imports it), answered with
``{"id": 3, "sql": [...]}``. Either may answer ``{"id": n, "error": {...}}``.

**config.py.** ``{"id": 4, "config": {"file": "config.py", "name": "config"}}`` runs the
project's config.py and answers ``{"id": 4, "value": {"data": ..., "lines": ...}}``, its
chosen ``Config`` as plain data (:mod:`.config_eval`), or an error.

**Reading ahead.** Waiting for one answer per call costs both processes a wake-up each
way, which at a thousand models is most of what Python macros add to a plan. So, when the
setup names ``read_ahead`` files (the model files the loader is about to parse, in its
order), the child reads them itself while the loader parses, finds the calls of its
macros whose arguments are plain SQL (no ``@``), and sends what each returns before it is
asked, one line per file (``{"ahead": [[key, answer], ...]}``; ``key`` as
:func:`call_key`). An answer is the one an explicit call with the same argument SQL would
get: the arguments are written as SQL and parsed again from that text, as for a call. A
call the loader makes with other arguments is asked for as usual, and requests always go
before the next file read ahead. A read-ahead call that needs the loader
(``columns_to_types``) or takes longer than :data:`AHEAD_SECONDS` is dropped, and a slow
one ends the reading ahead: the loader then asks for those calls one by one.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import resource
import select
import signal
import sys
import time
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
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_NPROC, (16, 16))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


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


def call_key(name: str, args: list[str], kwargs: dict[str, str], dialect: str) -> str:
    """What identifies a call's answer in one load: the macro, its arguments' SQL, the
    dialect (a macro is a function of these and the project's variables)."""
    return json.dumps([name.lower(), args, kwargs, dialect], sort_keys=True)


Columns = Callable[[str], "list[tuple[str, str]] | None"]


def _call(
    function: Callable[..., Any],
    request: dict[str, Any],
    variables: dict[str, Any],
    columns: Columns | None = None,
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
    evaluator = MacroEvaluator(dialect, variables, columns)
    return _sql(function(evaluator, *positional, **named), dialect)


# -- reading ahead -------------------------------------------------------------------

AHEAD_SECONDS = 0.5
"""Longest a call made ahead may take; a slower one ends the reading ahead."""
_CALL_START = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


class _Skip(BaseException):
    """A call made ahead asked for something only the loader knows, or took too long.
    (A BaseException, so that a macro's ``except Exception`` does not swallow it.)"""


def _calls_in(text: str, names: frozenset[str]) -> list[tuple[str, list[str]]]:
    """The calls ``@name(arg, ...)`` of ``names`` in ``text`` whose arguments hold no
    macro, each with its arguments' text (strings, quoted names and comments inside them
    kept whole). A call written in a comment or a string is not a call: it is never run,
    not even ahead (issue 41: a macro named only in a comment ran).

    >>> _calls_in("SELECT @m(1) -- @m(2)\\n, '@m(3)' /* @m(4) */", frozenset({"m"}))
    [('m', ['1'])]
    """
    found: list[tuple[str, list[str]]] = []
    i = 0
    while (at := _next_code(text, i)) is not None:
        match = _CALL_START.match(text, at)
        if match is None:
            i = at + 1
            continue
        if match.group(1).lower() in names:
            args = _arguments(text, match.end())
            if args is not None and not any("@" in a for a in args):
                found.append((match.group(1), args))
        i = match.end()
    return found


_SPECIAL = re.compile(r"['\"`@]|--|/\*")


def _next_code(text: str, at: int) -> int | None:
    """The position of the next ``@`` at or after ``at`` that is SQL, past strings,
    quoted names and comments (None: there is none)."""
    while (match := _SPECIAL.search(text, at)) is not None:
        if match.group() == "@":
            return match.start()
        end = _skipped(text, match.start())
        if end is None:
            return None  # an unclosed string: nothing after it is SQL
        at = end
    return None


def _skipped(text: str, i: int) -> int | None:
    """Where the string, quoted name or comment starting at ``text[i]`` ends (its
    position after it; None: a string or quoted name that is not closed; a comment runs to
    the end of the text when not closed)."""
    c = text[i]
    if c in "'\"`":
        end = text.find(c, i + 1)
        while end != -1 and c != "`" and text[end - 1] == "\\":
            end = text.find(c, end + 1)
        return None if end == -1 else end + 1
    if text.startswith("--", i):
        end = text.find("\n", i)
        return len(text) if end == -1 else end
    end = text.find("*/", i + 2)  # /* ... */
    return len(text) if end == -1 else end + 2


def _arguments(text: str, at: int) -> list[str] | None:
    """The top-level, comma-separated arguments from ``text[at:]`` to the ``)`` that
    closes the call (None when it is not closed)."""
    depth: list[str] = []
    args: list[str] = []
    begin = i = at
    while i < len(text):
        c = text[i]
        if c in "'\"`" or text.startswith("--", i) or text.startswith("/*", i):
            end = _skipped(text, i)
            if end is None:
                return None
            i = end
            continue
        if c in _CLOSERS:
            depth.append(_CLOSERS[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif c == ")":
            args.append(text[begin:i].strip())
            return [] if args == [""] else args
        elif c == "," and not depth:
            args.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    return None


def _ahead_request(name: str, texts: list[str], dialect: str) -> dict[str, Any] | None:
    """The request the loader would send for a call with these arguments, when each
    parses alone (None when one does not)."""
    import sqlglot
    from sqlglot import exp

    args: list[str] = []
    kwargs: dict[str, str] = {}
    for text in texts:
        try:
            node = sqlglot.parse_one(text, read=dialect)
        except Exception:
            return None
        if isinstance(node, exp.PropertyEQ | exp.Kwarg):
            kwargs[node.this.name.lower()] = node.expression.sql(dialect)
        else:
            args.append(node.sql(dialect))
    return {"name": name, "args": args, "kwargs": kwargs, "dialect": dialect}


class _Ahead:
    """The model files still to read ahead, one at a time."""

    def __init__(self, files: list[str], dialect: str, variables: dict[str, Any]) -> None:
        self.files = list(reversed(files))
        self.dialect = dialect
        self.variables = variables
        self.seen: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.files)

    def stop(self) -> None:
        self.files = []

    def next_file(self, known: set[str]) -> list[list[Any]]:
        """The answers of the next file's calls (``[key, answer]`` pairs)."""
        from sluice.core.model.pycode import registry

        path = self.files.pop()
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, ValueError):
            return []
        answers: list[list[Any]] = []
        for name, texts in _calls_in(text, frozenset(registry.MACROS)):
            request = _ahead_request(name, texts, self.dialect)
            if request is None:
                continue
            key = call_key(name, request["args"], request["kwargs"], self.dialect)
            if key in self.seen:
                continue
            self.seen.add(key)
            answer = self._answer(registry.MACROS[name.lower()], request, known)
            if answer is None:
                continue
            answers.append([key, answer])
        return answers

    def _answer(
        self, function: Callable[..., Any], request: dict[str, Any], known: set[str]
    ) -> dict[str, Any] | None:
        asked: list[str] = []

        def columns(table: str) -> list[tuple[str, str]] | None:
            asked.append(table)
            raise _Skip

        started = time.monotonic()
        answer: dict[str, Any] = {}
        with _time_limit(AHEAD_SECONDS):
            try:
                answer = {"sql": _call(function, request, self.variables, columns)}
            except _Skip:
                answer = {}
            except BaseException as exc:
                answer = {"error": _error(exc, known, None)}
        if time.monotonic() - started >= AHEAD_SECONDS:
            self.stop()  # a slow macro: the loader asks for each call itself
            return None
        if asked or not answer:
            return None  # what it returns depends on what only the loader knows
        return answer


class _time_limit:  # noqa: N801  (used as a context manager)
    """Raise :class:`_Skip` in the code run inside after ``seconds``, and again every
    quarter second until it ends (a macro's ``except`` cannot keep it running)."""

    armed = False

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        signal.signal(signal.SIGALRM, self._fire)
        _time_limit.armed = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds, 0.25)

    def __exit__(self, *exc: object) -> bool:
        _time_limit.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        return isinstance(exc[1], _Skip)  # one fired on the way out: the call is over

    @staticmethod
    def _fire(signum: int, frame: Any) -> None:
        if _time_limit.armed:
            raise _Skip


# -- the conversation ----------------------------------------------------------------


class _Lines:
    """Lines of standard input, read without blocking when asked."""

    def __init__(self) -> None:
        self.buffer = b""
        self.ended = False

    def ready(self) -> bool:
        """Whether a whole line (or the end of input) can be had without waiting."""
        while b"\n" not in self.buffer and not self.ended:
            if not select.select([0], [], [], 0)[0]:
                return False
            self._read()
        return True

    def next(self) -> dict[str, Any] | None:
        """The next line (waiting for it); None at the end of input."""
        while b"\n" not in self.buffer and not self.ended:
            self._read()
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        value: dict[str, Any] = json.loads(line)
        return value

    def _read(self) -> None:
        chunk = os.read(0, 1 << 16)
        if chunk:
            self.buffer += chunk
        else:
            self.ended = True


def _write(out: Any, value: dict[str, Any]) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def main() -> None:
    _limit()
    import sqlglot  # imported before the guard: its files are Python's own

    from sluice.core.model.pycode import files as files_module
    from sluice.core.model.pycode import guard, registry
    from sluice.core.model.pycode.shim import PATH
    from sluice.core.model.pycode.shim.sqlmesh.core import macros  # noqa: F401

    lines = _Lines()
    setup = lines.next()
    if setup is None:
        return
    root = str(Path(setup["root"]).resolve())
    files = [str(Path(f).resolve()) for f in setup["files"]]
    variables = dict(setup.get("variables") or {})
    # The project's Python is imported from the sources the loader digested, held in
    # memory (pycode.files): no project folder on sys.path, no bytecode read or written.
    files_module.no_bytecode()
    importer = files_module.SourceImporter(root, files_module.decode(setup.get("python") or {}))
    importer.install()
    sys.path[:0] = [PATH]
    # sqlglot's compiled modules (sqlglotc) may load after the guard: a dialect's first use.
    guard.install([root, PATH], native=[os.path.dirname(str(sqlglot.__file__))])
    out = sys.stdout
    known = set(files)
    errors: list[dict[str, Any]] = []
    for file in files:
        rel = Path(file).relative_to(root)
        module = "macros." + rel.relative_to("macros").with_suffix("").as_posix().replace("/", ".")
        try:
            importer.load(rel.as_posix(), module)
        except BaseException as exc:
            errors.append(_error(exc, known, file))
    _write(out, {"macros": sorted(registry.MACROS), "errors": errors})
    ahead = _Ahead(
        [str(f) for f in setup.get("read_ahead") or []] if not errors else [],
        str(setup.get("dialect") or "spark"),
        variables,
    )
    while True:
        if ahead and not lines.ready():
            answers = ahead.next_file(known)
            if answers:
                _write(out, {"ahead": answers})
            continue
        request = lines.next()
        if request is None:
            return
        _write(out, _answer(request, variables, known, lines, out, importer))


def _answer(
    request: dict[str, Any],
    variables: dict[str, Any],
    known: set[str],
    lines: _Lines,
    out: Any,
    importer: Any = None,
) -> dict[str, Any]:
    from sluice.core.model.pycode import registry

    ident = request.get("id")

    def columns(table: str) -> list[tuple[str, str]] | None:
        _write(out, {"id": ident, "columns": table})
        reply = lines.next()
        found = (reply or {}).get("columns")
        return [(str(n), str(t)) for n, t in found] if found is not None else None

    if "config" in request:
        # The project's config.py, run for its Config (.config_eval).
        from sluice.core.model.pycode import config_eval

        project = {os.path.join(importer.root, rel) for rel in importer.files}
        try:
            return {"id": ident, "value": config_eval.evaluate(request["config"], importer)}
        except config_eval.Unsupported as exc:
            where = os.path.join(importer.root, str(request["config"].get("file") or ""))
            return {"id": ident, "error": {"message": str(exc), "path": where, "line": exc.line}}
        except BaseException as exc:
            return {"id": ident, "error": _error(exc, project | known, None)}
    if "evaluate" in request or "query" in request:
        # A Python model's value or is_sql query: the project's files are the ones to name.
        project = {os.path.join(importer.root, rel) for rel in importer.files}
        try:
            if "evaluate" in request:
                return {"id": ident, "value": _evaluate(request["evaluate"], importer)}
            return {"id": ident, "sql": _query(request["query"], importer, variables, columns)}
        except BaseException as exc:
            return {"id": ident, "error": _error(exc, project | known, None)}
    function = registry.MACROS.get(str(request.get("name", "")).lower())
    try:
        if function is None:
            raise NameError(f"no Python macro {request.get('name')}")
        return {"id": ident, "sql": _call(function, request, variables, columns)}
    except BaseException as exc:
        return {"id": ident, "error": _error(exc, known, None)}


# -- Python models ---------------------------------------------------------------------

PLAIN_DEPTH = 32
"""Deepest nesting of lists and dicts a value evaluated for a Python model may have."""


def _evaluate(spec: dict[str, Any], importer: Any) -> Any:
    """A value of a ``@model(...)`` argument (``pycode.models.Evaluation``): the statements
    of its module it needs (:func:`_namespace`), then the expression, compiled with the
    file's name and line."""
    import ast

    rel = str(spec["file"])
    path = os.path.join(importer.root, rel)
    expression = ast.parse(str(spec["expression"]), filename=path, mode="eval")
    ast.increment_lineno(expression, int(spec["line"]) - 1)
    namespace = _namespace(importer, rel, str(spec["module"]), _free(expression), set())
    value = eval(compile(expression, path, "eval", dont_inherit=True), namespace)
    return plain(value)


def _free(node: Any) -> set[str]:
    from sluice.core.model.pycode import slices

    return slices.free_names(node)


def _namespace(
    importer: Any, rel: str, module: str, names: set[str], open_: set[str]
) -> dict[str, Any]:
    """The module ``rel``'s namespace as far as ``names`` need it: the statements that
    bind them and what those read (:func:`.slices.needed`), run from the project's source
    one by one (its ``from __future__`` flags kept). A name imported from another project
    module comes from that module's statements the same way, not from running all of it:
    ``from models.shared import START`` runs what ``START`` needs, not ``import faker``."""
    import __future__

    import ast

    from sluice.core.model.pycode import slices

    path = os.path.join(importer.root, rel)
    if rel not in importer.files:
        raise FileNotFoundError(f"{path} is not among the project's Python sources")
    tree = ast.parse(importer.files[rel], filename=path)
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                flags |= getattr(__future__, alias.name).compiler_flag
    package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
    namespace: dict[str, Any] = {
        "__name__": module,
        "__file__": path,
        "__package__": package,
        "__builtins__": __builtins__,
    }
    for index, kept in slices.needed(tree, names):
        node = slices.keep(tree.body[index], kept)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        target = _project_module(importer, node, package)
        if target is not None and target[0] not in open_:
            target_rel, target_module = target
            assert isinstance(node, ast.ImportFrom)
            wanted = {a.name for a in node.names}
            inner = _namespace(importer, target_rel, target_module, wanted, open_ | {rel})
            for alias in node.names:
                if alias.name in inner:
                    namespace[alias.asname or alias.name] = inner[alias.name]
                else:  # a submodule, or a name bound some other way: import it
                    code = ast.Module(
                        body=[ast.ImportFrom(**{**node.__dict__, "names": [alias]})],
                        type_ignores=[],
                    )
                    exec(
                        compile(
                            ast.fix_missing_locations(code), path, "exec", flags, dont_inherit=True
                        ),
                        namespace,
                    )
            continue
        code = ast.Module(body=[node], type_ignores=[])
        exec(compile(code, path, "exec", flags, dont_inherit=True), namespace)
    return namespace


def _project_module(importer: Any, node: Any, package: str) -> tuple[str, str] | None:
    """(path, name) of the project module a ``from X import ...`` imports, when it is
    one of the project's sources (None: another import)."""
    import ast
    import importlib.util

    if not isinstance(node, ast.ImportFrom) or any(a.name == "*" for a in node.names):
        return None
    try:
        name = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    except ImportError:
        return None
    base = name.replace(".", "/")
    for rel in (f"{base}.py", f"{base}/__init__.py"):
        if rel in importer.files:
            return rel, name
    return None


def plain(value: Any, dialect: str | None = None, depth: int = 0) -> Any:
    """``value`` as JSON data: str, numbers, bool, None, lists (from lists, tuples, sets)
    and dicts with string keys; an enum as its value, a date or datetime as ISO text, a
    SQLMesh kind or ``TimeColumn`` of the shim as its dict, a sqlglot expression as
    ``{"__sql__": text}``.

    >>> from datetime import date
    >>> plain({"start": date(2022, 6, 1), "grain": ("a", "b")})
    {'start': '2022-06-01', 'grain': ['a', 'b']}
    """
    import datetime
    import enum

    from sqlglot import exp

    if depth > PLAIN_DEPTH:
        raise ValueError(f"the value nests deeper than {PLAIN_DEPTH} lists or dicts")
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value if type(value) in (bool, int, float, str, type(None)) else _base(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, exp.Expr):
        return {"__sql__": value.sql(dialect)}
    to_plain = getattr(type(value), "sluice_plain", None)
    if callable(to_plain) and type(value).__module__.startswith("sqlmesh."):
        value = to_plain(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [plain(v, dialect, depth + 1) for v in items]
    if isinstance(value, dict):
        found = {}
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise TypeError(f"a dict key of type {type(key).__name__} is not plain data")
            found[plain(key, dialect, depth + 1)] = plain(item, dialect, depth + 1)
        return {str(k): v for k, v in found.items()}
    raise TypeError(
        f"the value is a {type(value).__module__}.{type(value).__name__}, not plain data "
        "(a string, number, list, dict, date, or a SQLMesh kind)"
    )


def _base(value: Any) -> Any:
    """A subclass of str, int, float or bool as the base type's value."""
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    return value


def _query(
    spec: dict[str, Any], importer: Any, variables: dict[str, Any], columns: Columns
) -> list[str]:
    """An ``is_sql`` model's query: its file run as a module (as SQLMesh imports it),
    its function called with a macro evaluator, as SQLMesh renders ``@entrypoint()``."""
    import hashlib

    from sluice.core.model.pycode.shim.sqlmesh.core.macros import MacroEvaluator

    rel = str(spec["file"])
    name = f"__sluice_model_{hashlib.sha256(rel.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name) or importer.load(rel, name)
    function = getattr(module, str(spec["entry"]))
    dialect = str(spec.get("dialect") or "spark")
    return _sql(function(MacroEvaluator(dialect, variables, columns)), dialect)


if __name__ == "__main__":
    main()
