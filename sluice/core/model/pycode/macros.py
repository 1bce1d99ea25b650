"""The service's side of Python macros: one child process per project load.

:func:`active` launches :mod:`.child` with an empty environment (no token, key, secret or
database URL to find), hands it the macro files, and returns a :class:`PythonMacros` the
macro evaluator calls (through :data:`sluice.core.model.macro.external.ACTIVE`). A call
that takes more than :data:`CALL_SECONDS`, or a child that dies, ends the child and fails
the model that called it, never the service.

The child imports the macro files while the loader goes on (its answer is awaited at the
first Python macro call, or when the load ends, which fails if a file did not import).
Given the model files the loader is about to parse (``read_ahead``), it reads them too and
sends the answers of the calls it finds before they are asked for (see :mod:`.child`):
the loader then takes an answer from memory instead of waiting a round trip for each.
A call made again with the same arguments during one load is answered from memory too:
a macro is a function of its arguments and the project's variables, as the model cache
already assumes (:mod:`sluice.core.model.loader` keeps a model's expansion until the
macro files change). Calls whose macro asked for a table's columns
(``evaluator.columns_to_types``) are the exception: they are asked each time and
answered with :attr:`PythonMacros.columns_of`, the loader's column source (which also
keeps the models they expand out of its cache, and may raise to make the file wait for
a parent not read yet: the call is then answered "unknown" and that is raised again).

A load of a tree loaded before in this process (the same folder with the same bytes, the
same macro files, variables and dialect, within :data:`REPLAY_SECONDS`) is answered with
what that load's child answered (:class:`Replays`): no child is started unless the load
asks something that one did not answer. Errors, answers that asked for columns and the
answers of a child that broke the protocol are never kept.

The child runs the project's code, so what it writes is checked before it is used: each
line against the shape of its kind of message (:func:`_message`), in the protocol's order
(the list of macros first, answers only to the call asked, answers made ahead at most one
line per file read ahead, each for a call of a macro it listed, in the load's dialect), and
within :data:`LINE_BYTES`, :data:`READ_BYTES`, :data:`AHEAD_ITEMS` and
:data:`AHEAD_BYTES`. Anything else ends the child and fails the load with a
:class:`~sluice.core.errors.ModelError` naming the macro files (a macro that writes to
standard output, by ``print`` or ``os.write(1, ...)``, writes into the protocol).
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import stat
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sluice.core import sandbox
from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.macro import external
from sluice.core.model.macro.registry import MacroError
from sluice.core.model.pycode import files as files_module
from sluice.core.model.pycode.child import AHEAD_SECONDS, call_key
from sluice.core.model.pycode.models import Evaluation, SqlQuery, SqlText

START_SECONDS = 60.0
"""Longest time the child may take to import the macro files."""
CALL_SECONDS = 10.0
"""Longest time one macro call may take."""
LINE_BYTES = 4 << 20
"""Longest line the child may write (one answer, or the answers made ahead for one file)."""
READ_BYTES = 64 << 20
"""Most the service reads from one child (one project load)."""
AHEAD_ITEMS = 250_000
"""Most answers made ahead one load keeps, each SQL text in an answer counted too."""
AHEAD_BYTES = 32 << 20
"""Most bytes of lines of answers made ahead one load reads."""
VALUE_DEPTH = 128
"""Deepest a value answered may nest (lists or objects): the child writes at most
:data:`.child.PLAIN_DEPTH`; a deeper one is refused here, short of Python's recursion limit,
and past config.yaml's own bound (100 levels) so that its check names config.py's."""
VALUE_ITEMS = 250_000
"""Most JSON items (lists, objects, strings, numbers, ...) the values one load's Python
models and config.py answer hold among them: what the service keeps of them is bounded by
this, not by the bytes read (a 4 MiB line of ``{}`` is a million objects)."""


_RUN_HINT = (
    "the project's Python runs here as SQLMesh runs it when it loads the project (in "
    "Sluice's sandboxed process, with Sluice's Python packages): fix the code, or install "
    "what it imports where Sluice runs"
)
_REFUSED_HINT = (
    "Sluice's sandboxed process refuses starting processes, opening sockets, writing files "
    "and loading C code (ctypes, sqlite3: refused also when a library imports them): compute "
    "the query without it (SQL, or sqlglot), or keep the model out of Sluice "
    "(docs/security.md, 'Python from a project')"
)


def macro_files(root: Path) -> list[Path]:
    """The project's Python macro files (an empty ``__init__.py`` is not one)."""
    folder = root / "macros"
    return [p for p in sorted(folder.rglob("*.py")) if p.name != "__init__.py" or _has_code(p)]


def _has_code(init: Path) -> bool:
    """Whether the package file ``init`` holds anything but blanks. Only a regular file
    is read (a FIFO would hang the load, a link could lead out of the tree: red team, macro
    replay); anything else counts as a macro file, which the sandboxed child reports."""
    try:
        if not stat.S_ISREG(os.lstat(init).st_mode):
            return True
        with init.open("rb") as handle:
            return bool(handle.read(1 << 20).strip())
    except OSError:
        return True


ColumnsOf = Callable[[str], Sequence[tuple[str, str]] | None]
"""The (name, Spark type) columns of a table by its lower-case name, None when unknown."""


def profile(root: Path) -> sandbox.Profile:
    """The child's sandbox: the project read-only, no network."""
    return sandbox.Profile("macros", read=(root,), cwd=root)


class PythonMacros:
    """A running child holding a project's Python macros."""

    def __init__(self, root: Path, *, launch: bool = True, tree: str | None = None) -> None:
        """Start the child (it imports sqlglot, then waits for :meth:`start`); with
        ``launch=False`` only when the load asks what no earlier load of the same tree
        answered (``tree``: the folder's :func:`tree_key`, see :class:`Replays`)."""
        root = root.resolve()
        self.root = root
        self.tree = tree
        self.calls = 0
        self.columns_of: ColumnsOf | None = None
        """Answers ``evaluator.columns_to_types`` (set by the loader; None: nothing known)."""
        self._memo: dict[str, dict[str, Any]] = {}
        self._names: frozenset[str] | None = None
        self._errors: list[SluiceError] = []
        self._buffer = bytearray()
        self._next_id = 0
        self._closed = False
        # What the protocol allows next (see _expect), and what was read so far.
        self._files: list[Path] = []
        self._dialect = "spark"
        self._ahead_files = 0
        self._offered: frozenset[str] | None = None
        self._asking: int | None = None
        self._asking_value = False  # whether the call asked is for a value (evaluate)
        self._doing = "starting"
        self._read = 0
        self._ahead = [0, 0, 0]  # lines, items, bytes of answers made ahead
        self._value_items = 0  # JSON items of the values answered (VALUE_ITEMS)
        self._failure: ModelError | None = None
        self._asked: set[str] = set()  # keys of answers that asked the loader for columns
        self._setup: dict[str, Any] | None = None
        self._setting = ""
        self._replayed = False  # whether this load's answers so far are all replayed
        self._started = time.monotonic()
        self._selector = selectors.DefaultSelector()
        self._child: subprocess.Popen[bytes] | None = None
        if launch:
            self._launch()

    def _launch(self) -> None:
        self._started = time.monotonic()
        self._child = subprocess.Popen(  # our interpreter and module; the project's files are data
            sandbox.wrap(
                sandbox.python_child("sluice.core.model.pycode.child"),
                profile(self.root),
            ).argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd=str(self.root),
        )
        assert self._child.stdout is not None
        self._selector.register(self._child.stdout, selectors.EVENT_READ)

    @property
    def _process(self) -> subprocess.Popen[bytes]:
        """The child (started by :meth:`_live` where this load replayed so far)."""
        assert self._child is not None, "the macro process was not started"
        return self._child

    def _live(self) -> None:
        """Start the child now, if this load answered from an earlier one's so far: it is
        asked something that load did not answer. It gets the same setup, and its list of
        macros is read again (:meth:`_ready`)."""
        if self._child is not None or self._setup is None:
            return
        self._replayed = False
        self._names = None
        self._launch()
        self._send(self._setup)

    def start(
        self,
        files: Sequence[Path],
        variables: Mapping[str, Any],
        *,
        read_ahead: Sequence[Path] = (),
        dialect: str = "spark",
    ) -> None:
        """Hand the child the macro files to import, the variables, and the model files
        to read ahead (in the order they will be parsed)."""
        here = os.getcwd()
        self._files = [f.resolve() for f in files]
        self._dialect = dialect
        self._ahead_files = len(read_ahead)
        setup = {
            "root": str(self.root),
            # The child imports the project's Python from these sources only (a clean
            # copy, in its memory), never from the project's folder (pycode.files).
            "python": files_module.encode(files_module.sources(self.root)),
            "files": [str(f.resolve()) for f in files],
            "variables": dict(variables),
            # Absolute, not resolved: the child's guard resolves what it opens.
            "read_ahead": [os.path.join(here, f) for f in read_ahead],
            "dialect": dialect,
        }
        self._setup = setup
        self._setting = _setting(self.root, files, variables, dialect)
        if self._child is None:
            kept = REPLAYS.get(self.tree, self._setting)
            if kept is not None:
                self._replayed = True
                self._names, self._memo = kept
                return
            self._launch()
        self._send(setup)  # the answer is read by _ready(), when it is needed

    @property
    def names(self) -> frozenset[str]:
        """Lower-case names of the macros (none if a macro file did not import)."""
        return self._ready()

    def check(self) -> None:
        """Raise the errors of the macro files that did not import, if any, or what the
        child wrote that the protocol does not allow."""
        self._ready()
        errors = self._errors or ([self._failure] if self._failure is not None else [])
        if errors:
            raise errors[0] if len(errors) == 1 else ProjectErrors(list(errors))

    def _ready(self) -> frozenset[str]:
        if self._names is None:
            deadline = self._started + START_SECONDS
            try:
                ready = self._receive(deadline, START_SECONDS, "importing macros/*.py")
            except ModelError as exc:
                ready = {}
                errors: list[SluiceError] = [exc]
            else:
                errors = [
                    self._model_error(e, "loading Python macros") for e in ready.get("errors", [])
                ]
            if errors:
                self._errors = errors
                self._names = frozenset()
                self.close()
            else:
                self._names = frozenset(str(n) for n in ready.get("macros", []))
        return self._names

    def call(
        self, name: str, args: Sequence[str], kwargs: Mapping[str, str], dialect: str
    ) -> list[str]:
        self.calls += 1
        if self._failure is not None:
            raise MacroError(self._failure.message, self._failure.hint)
        key = call_key(name, list(args), dict(kwargs), dialect)
        answer = self._memo.get(key)
        try:
            if answer is None:
                self._live()
                self._ready()
                self._take_ahead()
                answer = self._memo.get(key)
            if answer is None:
                answer = self._ask(name, args, kwargs, dialect, key)
        except ModelError as exc:
            raise MacroError(exc.message, exc.hint) from None
        if "error" in answer:
            error = answer["error"]
            where = f" ({error['path']}:{error['line']})" if error.get("path") else ""
            raise MacroError(
                f"Python macro @{name} failed{where}: {error.get('message')}",
                "fix the macro in macros/, or the arguments given to it",
            )
        return [str(s) for s in answer.get("sql", [])]

    def evaluate(self, request: Evaluation) -> Any:
        """A Python model's decorator value (see :class:`.models.Evaluation`), as plain
        data (a sqlglot expression's SQL as :class:`.models.SqlText`)."""
        spec = {
            "file": request.file,
            "module": request.module,
            "expression": request.expression,
            "line": request.line,
        }
        what = f"evaluating '{_short(request.expression)}' ({request.file}:{request.line})"
        answer = self._model_request({"evaluate": spec}, what, request.file, request.line)
        return _sql_texts(answer["value"])

    def config(self, name: str, seconds: float = CALL_SECONDS) -> dict[str, Any]:
        """Run the project's config.py for its Config named ``name``: the child's answer,
        ``{"value": ...}`` (see :mod:`.config_eval`) or ``{"error": ...}``, unchecked.
        The child may take ``seconds`` (then it is ended: :class:`ModelError`)."""
        self._live()
        self._ready()
        if self._failure is not None:
            raise self._failure
        self._next_id += 1
        ident = self._next_id
        self._asking, self._asking_value = ident, True
        self._send({"id": ident, "config": {"file": "config.py", "name": name}})
        return self._receive(time.monotonic() + seconds, seconds, "running config.py")

    def query(self, request: SqlQuery) -> list[str]:
        """An ``is_sql`` model's query: what its function returns, as SQL statements."""
        spec = {"file": request.file, "entry": request.entry, "dialect": request.dialect}
        what = f"running {request.entry}() of {request.file} for its query"
        answer = self._model_request({"query": spec}, what, request.file, request.line)
        return [str(s) for s in answer["sql"]]

    def _model_request(
        self, body: dict[str, Any], doing: str, file: str, line: int
    ) -> dict[str, Any]:
        """Ask the child for a Python model's value or query (answered from memory when
        asked before in this load); raise its error as the model file's."""
        key = json.dumps(body, sort_keys=True)
        answer = self._memo.get(key)
        if answer is None:
            self._live()
            self._ready()
            if self._errors:
                raise ModelError(
                    f"{doing}: the project's Python process stopped, as a macro file did not "
                    "import",
                    path=str(self.root / file),
                    line=line,
                    hint="fix the macro file (its error is listed too)",
                )
            if self._failure is not None:
                raise self._failure
            answer = self._ask_for(body, doing, asked=key)
            self._memo[key] = answer
        if "error" in answer:
            error = answer["error"]
            message = str(error.get("message"))
            raise ModelError(
                f"{doing}: {message}",
                path=str(error.get("path") or self.root / file),
                line=error.get("line") if error.get("path") else line,
                hint=_REFUSED_HINT if "project Python may not" in message else _RUN_HINT,
            )
        return answer

    def _ask(
        self, name: str, args: Sequence[str], kwargs: Mapping[str, str], dialect: str, key: str
    ) -> dict[str, Any]:
        """One call, asked of the child (answering its questions about columns)."""
        request = {"name": name, "args": list(args), "kwargs": dict(kwargs), "dialect": dialect}
        return self._ask_for(request, f"running @{name}", key)

    def _ask_for(
        self, request: dict[str, Any], doing: str, key: str | None = None, asked: str = ""
    ) -> dict[str, Any]:
        """One request, asked of the child (answering its questions about columns); an
        answer that asked none is kept under ``key``; one that asked some is named by
        ``asked`` (or ``key``) among those never replayed (:meth:`keep`)."""
        self._next_id += 1
        ident = self._next_id
        request = {"id": ident, **request}
        self._asking = ident  # the only id an answer may have (_expect)
        # and the only kind of answer: a value for a model's or config.py's
        self._asking_value = "evaluate" in request or "config" in request
        self._send(request)
        deferred: Exception | None = None
        while True:
            # A call made ahead before this one may still be under way: it has its own limit.
            seconds = CALL_SECONDS + AHEAD_SECONDS
            line = self._receive(time.monotonic() + seconds, seconds, doing)
            if "columns" in line:
                self._asked.add(asked or key or "")
                try:
                    found = self._columns(str(line["columns"]))
                except Exception as exc:  # the loader's "not read yet": the file waits
                    deferred, found = exc, None
                self._send({"columns": found})
                continue
            if deferred is not None:
                raise deferred  # the child has answered: it is ready for the next call
            if key is not None and key not in self._asked:
                self._memo[key] = line
            return line

    def _columns(self, table: str) -> list[list[str]] | None:
        found = self.columns_of(table.lower()) if self.columns_of is not None else None
        return [[str(n), str(t)] for n, t in found] if found is not None else None

    def _take_ahead(self) -> None:
        """Keep the answers the child has sent ahead so far, without waiting."""
        self._doing = "reading the answers made ahead"
        while self._child is not None and self._selector.select(0):
            if not self._fill():
                return
            self._split()

    def keep(self) -> None:
        """Keep what this load's child answered for the later loads of the same tree
        (:data:`REPLAYS`): only after its macro files imported and it kept to its protocol,
        and never an error; nothing of a child asked the loader for a table's columns (those
        depend on the load's other models and the service's settings, and a macro may keep
        them in its module for a later answer). Nothing is kept of a tree that changed
        while it loaded, or of a child that wrote more than :data:`KEEP_BYTES`."""
        if (
            self.tree is None
            or self._child is None  # every answer was replayed: kept already
            or self._names is None
            or self._errors
            or self._failure is not None
            or self._asked  # a column answer may live on in the child's state (red team)
            or self._read > KEEP_BYTES
            or tree_key(self.root) != self.tree
        ):
            return
        answers = {k: v for k, v in self._memo.items() if k not in self._asked and "error" not in v}
        REPLAYS.put(self.tree, self._setting, self._names, answers, self._read)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._child is None:
            self._selector.close()
            return
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.close()
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._selector.close()

    def _send(self, request: dict[str, Any]) -> None:
        process = self._process
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request, default=str).encode("utf-8") + b"\n")
            process.stdin.flush()
        except (OSError, ValueError):
            pass  # the child ended (or was closed); reported by _receive

    def _receive(self, deadline: float, seconds: float, doing: str) -> dict[str, Any]:
        """The child's next line that is not answers sent ahead (those are kept)."""
        self._doing = doing
        while True:
            line = self._split()
            if line is not None:
                return line
            left = deadline - time.monotonic()
            try:
                alive = left > 0 and bool(self._selector.select(left)) and self._fill()
            except (OSError, ValueError):  # closed by close()
                alive = False
            if not alive:
                self._process.kill()
                self._process.wait()
                raise ModelError(
                    f"{doing} went past the limits of the Python process (more than "
                    f"{seconds:g} s, or the memory or CPU it may use), or the process ended",
                    path=str(self.root / "macros"),
                    hint="make the macro faster; a macro must not read input, loop forever or exit",
                )

    def _fill(self) -> bool:
        """Read what the child has written (False at its end)."""
        stream: Any = self._process.stdout  # a BufferedReader: read1 takes what is there
        chunk: bytes = stream.read1(1 << 16)
        self._read += len(chunk)
        if self._read > READ_BYTES:
            raise self._fail(_Breach(f"more than {_size(READ_BYTES)} in all", more=True))
        self._buffer += chunk
        return bool(chunk)

    def _split(self) -> dict[str, Any] | None:
        """The first whole line of the buffer that is not answers sent ahead (those are
        kept), checked (:meth:`_fail` ends the child on anything the protocol refuses)."""
        while True:
            end = self._buffer.find(b"\n")
            if end > LINE_BYTES or (end < 0 and len(self._buffer) > LINE_BYTES):
                raise self._fail(_Breach(f"a line longer than {_size(LINE_BYTES)}", more=True))
            if end < 0:
                return None
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            try:
                kind, line = _message(raw)
                self._expect(kind, line, len(raw))
            except _Breach as exc:
                raise self._fail(exc) from None
            if kind != "ahead":
                return line
            for key, answer in line["ahead"]:
                self._memo.setdefault(key, answer)

    def _expect(self, kind: str, line: dict[str, Any], size: int) -> None:
        """Raise :class:`_Breach` when a line of this kind is not one the protocol allows
        now: the list of macros comes once and first, an answer is to the call asked, and
        answers made ahead are one line at most per file read ahead, for calls of listed
        macros in the load's dialect, within :data:`AHEAD_ITEMS` and :data:`AHEAD_BYTES`."""
        if self._offered is None:
            if kind != "ready":
                raise _Breach("a line before the list of macros")
            self._offered = frozenset(line["macros"])
            return
        if kind == "ready":
            raise _Breach("a second list of macros")
        if kind in ("answer", "columns"):
            if self._asking is None or line["id"] != self._asking:
                raise _Breach("an answer to a call that was not asked")
            if kind == "answer" and "error" not in line and ("value" in line) != self._asking_value:
                raise _Breach("an answer of another kind than the call asked")
            if kind == "answer" and "value" in line:
                self._value_items += _items(line["value"], VALUE_DEPTH)
                if self._value_items > VALUE_ITEMS:
                    raise _Breach(f"values of more than {VALUE_ITEMS:,} items in all", more=True)
            if kind == "answer":
                self._asking = None
            return
        pairs = line["ahead"]
        if any("value" in answer for _, answer in pairs):
            raise _Breach("a value among the answers made ahead (they answer macro calls)")
        self._ahead[0] += 1
        self._ahead[1] += sum(1 + len(answer.get("sql", ())) for _, answer in pairs)
        self._ahead[2] += size
        lines, items, read = self._ahead
        if lines > self._ahead_files:
            raise _Breach("more lines of answers made ahead than files read ahead", more=True)
        if items > AHEAD_ITEMS or read > AHEAD_BYTES:
            raise _Breach(
                f"more than {AHEAD_ITEMS} answers made ahead or {_size(AHEAD_BYTES)} of them",
                more=True,
            )
        if not all(self._expected(key) for key, _ in pairs):
            raise _Breach("an answer made ahead for a call no model file can make")

    def _expected(self, key: str) -> bool:
        """Whether ``key`` is the :func:`call_key` of a call of a listed macro in the
        load's dialect."""
        try:
            name, args, kwargs, dialect = json.loads(key)
        except (ValueError, TypeError, RecursionError):
            return False
        return (
            isinstance(name, str)
            and name in (self._offered or ())
            and dialect == self._dialect
            and _strings(args)
            and isinstance(kwargs, dict)
            and _strings(list(kwargs.values()))
            and call_key(name, args, kwargs, dialect) == key
        )

    def _fail(self, breach: _Breach) -> ModelError:
        """End the child for writing what the protocol refuses; the error to raise (and
        the one every later call and :meth:`check` raise)."""
        if self._failure is None:
            self._process.kill()
            self._process.wait()
            self._buffer.clear()
            self._memo.clear()  # nothing the child answered is used (or kept) after this
            files = [os.path.relpath(f, self.root) for f in self._files]
            named = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
            what = (
                "wrote more than its protocol allows"
                if breach.more
                else "wrote something that is not its protocol"
            )
            self._failure = ModelError(
                f"the macro process {what} ({breach.what}) while {self._doing}; "
                f"the macro file{'s' if len(files) > 1 else ''}: {named or 'macros/'}",
                path=str(self._files[0] if len(self._files) == 1 else self.root / "macros"),
                hint="a macro must return SQL, not write to standard output (print, "
                "sys.stdout, os.write(1, ...)): Sluice reads that output as the macros' answers",
            )
        return self._failure

    def _model_error(self, data: Mapping[str, Any], doing: str) -> SluiceError:
        return ModelError(
            f"{doing}: {data.get('message')}",
            path=str(data.get("path") or self.root / "macros"),
            line=data.get("line"),
            hint="fix the macro file; Sluice imports it as SQLMesh would, with `from sqlmesh "
            "import macro` available (see the README's 'Python in projects')",
        )


class _Breach(Exception):
    """A line of the child's the protocol refuses (``more``: too much of it)."""

    def __init__(self, what: str, *, more: bool = False) -> None:
        super().__init__(what)
        self.what = what
        self.more = more


def _items(value: Any, depth: int) -> int:
    """How many JSON items ``value`` holds, itself included, counted a level at a time
    (no recursion, whatever the child wrote); :class:`_Breach` when it nests deeper than
    ``depth`` lists or objects (:data:`.child.PLAIN_DEPTH`: the child writes none deeper).

    >>> _items({"a": [1, 2, {"b": None}]}, 3)
    6
    """
    count, level = 0, [value]
    for _ in range(depth + 1):
        count += len(level)
        level = [
            v
            for item in level
            if isinstance(item, list | dict)
            for v in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return count
    raise _Breach(f"a value nested deeper than {depth} lists or objects")


def _sql_texts(value: Any) -> Any:
    """``value`` with each ``{"__sql__": text}`` (a sqlglot expression the project's
    code gave, :func:`.child.plain`) as :class:`.models.SqlText`."""
    if isinstance(value, list):
        return [_sql_texts(v) for v in value]
    if isinstance(value, dict):
        if value.keys() == {"__sql__"} and isinstance(value["__sql__"], str):
            return SqlText(value["__sql__"])
        return {k: _sql_texts(v) for k, v in value.items()}
    return value


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_error(value: Any) -> bool:
    """``{"message": str, "path": str | None, "line": int | None}`` (child._error)."""
    return (
        isinstance(value, dict)
        and value.keys() == {"message", "path", "line"}
        and isinstance(value["message"], str)
        and (value["path"] is None or isinstance(value["path"], str))
        and (value["line"] is None or type(value["line"]) is int)
    )


def _is_answer(value: Any) -> bool:
    """``{"sql": [str, ...]}``, ``{"value": JSON}`` (a Python model's value) or
    ``{"error": error}``."""
    if not isinstance(value, dict):
        return False
    if value.keys() == {"sql"}:
        return _strings(value["sql"])
    if value.keys() == {"value"}:
        return True  # JSON data, within LINE_BYTES
    return value.keys() == {"error"} and _is_error(value["error"])


def _message(raw: bytes) -> tuple[str, dict[str, Any]]:
    """The kind (``ready``, ``ahead``, ``answer`` or ``columns``) and value of one line
    the child wrote, its shape checked (see :mod:`.child`): the one place a line of the
    child's is read. Raises :class:`_Breach` for anything else."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
        raise _Breach("a line that is not JSON") from None
    if not isinstance(value, dict):
        raise _Breach("a line that is not a JSON object")
    keys = value.keys()
    if keys == {"macros", "errors"}:
        errors = value["errors"]
        if _strings(value["macros"]) and isinstance(errors, list) and all(map(_is_error, errors)):
            return "ready", value
    elif keys == {"ahead"}:
        pairs = value["ahead"]
        if isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and _is_answer(p[1])
            for p in pairs
        ):
            return "ahead", value
    elif "id" in keys and type(value["id"]) is int:
        if keys == {"id", "columns"} and isinstance(value["columns"], str):
            return "columns", value
        if _is_answer({k: v for k, v in value.items() if k != "id"}):
            return "answer", value
    raise _Breach("a line that is none of its messages")


def spawn(root: Path) -> PythonMacros | None:
    """Start the project's macro process early (None when it has no Python macros): its
    start overlaps what the loader reads first; :func:`active` then hands it the work.
    Where a load of the same tree was answered before (:data:`REPLAYS`), the process is
    started only if this load asks something that one did not."""
    if not macro_files(root):
        return None
    tree = tree_key(root)
    return PythonMacros(root, launch=not REPLAYS.has(tree), tree=tree)


@contextmanager
def active(
    root: Path,
    variables: Mapping[str, Any],
    *,
    read_ahead: Sequence[Path] = (),
    dialect: str = "spark",
    spawned: PythonMacros | None = None,
) -> Iterator[PythonMacros | None]:
    """The project's Python macros, callable from macro evaluation inside the block (None
    and nothing started when the project has none). ``read_ahead``: the model files about
    to be parsed, in order, whose calls the child answers before they are asked for;
    ``spawned``: the process :func:`spawn` started for this load, if any."""
    files = macro_files(root)
    if not files:
        yield None
        return
    macros = spawned or PythonMacros(root)
    macros.start(files, variables, read_ahead=read_ahead, dialect=dialect)
    token = external.ACTIVE.set(macros)
    try:
        yield macros
        macros.check()  # a macro file that did not import fails the load, called or not
        macros.keep()
    finally:
        external.ACTIVE.reset(token)
        macros.close()


# -- answers replayed ------------------------------------------------------------------

REPLAY_SECONDS = 300.0
"""Longest a load's answers are replayed after the load that got them from its child."""
REPLAY_TREES = 16
"""Most trees whose answers this process keeps (the least recently used go first)."""
REPLAY_BYTES = 8 << 20
"""Most bytes the children whose answers this process keeps wrote, in all."""
KEEP_BYTES = 1 << 20
"""Most a child may have written for its load's answers to be kept."""
TREE_FILES = 10_000
"""Most files and folders a tree may hold for its answers to be kept (:func:`tree_key`)."""
TREE_BYTES = 16 << 20
"""Most bytes a tree's files may hold for its answers to be kept (:func:`tree_key`): a
load with Python macros hashes at most this much (a few tens of ms) besides its child."""


def tree_key(root: Path) -> str | None:
    """One hash of the folder ``root`` as the child would find it: its resolved path, and
    every entry under it by relative path (a file's bytes, a link's target, a folder's
    name, any other kind of entry as its kind). None when it holds more than
    :data:`TREE_FILES` entries or :data:`TREE_BYTES` bytes of files (its answers are
    never kept)."""
    base = root.resolve()
    found: list[tuple[str, str, str]] = []  # kind, relative path, absolute path
    total = 0

    def unreadable(error: OSError) -> None:
        raise error

    try:
        for folder, dirs, names in os.walk(base, onerror=unreadable):
            dirs.sort()
            rel_folder = os.path.relpath(folder, base)
            for name in sorted({*dirs, *names}):
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    kind = "link"
                elif stat.S_ISDIR(info.st_mode):
                    kind = "folder"
                elif stat.S_ISREG(info.st_mode):
                    kind = "file"
                    total += info.st_size
                else:
                    kind = f"mode {stat.S_IFMT(info.st_mode)}"  # never opened
                found.append((kind, os.path.normpath(os.path.join(rel_folder, name)), path))
                if len(found) > TREE_FILES or total > TREE_BYTES:
                    return None
        hasher = hashlib.sha256(os.fsencode(base) + b"\0")
        for kind, rel, path in found:
            content = hashlib.sha256()
            if kind == "link":
                content.update(os.fsencode(os.readlink(path)))
            elif kind == "file":
                with open(path, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        content.update(chunk)
            named = os.fsencode(rel)
            hasher.update(f"{kind}\0{len(named)}\0".encode() + named + content.digest())
    except OSError:
        return None
    return hasher.hexdigest()


def _setting(root: Path, files: Sequence[Path], variables: Mapping[str, Any], dialect: str) -> str:
    """What a load hands its child besides the tree: the macro files, variables, dialect."""
    named = sorted(os.path.relpath(f.resolve(), root) for f in files)
    return json.dumps([named, dict(variables), dialect], sort_keys=True, default=str)


Kept = tuple[frozenset[str], dict[str, dict[str, Any]]]
"""A load's macros (lower-case names) and its answers by key (as :class:`PythonMacros`
keeps them in a load)."""


class Replays:
    """What the child of a load answered, kept for a later load of the same tree (the
    same folder with the same bytes, :func:`tree_key`) with the same macro files, variables
    and dialect in this process, for :data:`REPLAY_SECONDS` after it was answered: such a
    load starts no child unless it asks something that load did not. A macro is a function
    of its arguments, the project's files and variables (as the load's own memory of calls
    and the parse cache assume), so it is the same answer. At most :data:`REPLAY_TREES`
    trees, and what their children wrote at most :data:`REPLAY_BYTES` in all, are kept."""

    def __init__(
        self,
        trees: int = REPLAY_TREES,
        seconds: float = REPLAY_SECONDS,
        size: int = REPLAY_BYTES,
    ) -> None:
        self._trees = trees
        self._seconds = seconds
        self._size = size
        self._lock = threading.Lock()
        # tree -> (when first answered, bytes its children wrote, setting -> answers)
        self._kept: OrderedDict[str, tuple[float, int, dict[str, Kept]]] = OrderedDict()

    def _entry(self, tree: str | None) -> dict[str, Kept] | None:
        if tree is None or tree not in self._kept:
            return None
        since, _size, settings = self._kept[tree]
        if time.monotonic() - since > self._seconds:
            del self._kept[tree]
            return None
        self._kept.move_to_end(tree)
        return settings

    def has(self, tree: str | None) -> bool:
        """Whether a load of ``tree`` was answered (within the time kept)."""
        with self._lock:
            return self._entry(tree) is not None

    def get(self, tree: str | None, setting: str) -> Kept | None:
        """The macros and answers of a load of ``tree`` with ``setting`` (a copy)."""
        with self._lock:
            found = (self._entry(tree) or {}).get(setting)
            return None if found is None else (found[0], dict(found[1]))

    def put(
        self,
        tree: str,
        setting: str,
        names: frozenset[str],
        answers: dict[str, dict[str, Any]],
        size: int,
    ) -> None:
        """Keep a load's answers (``size``: the bytes its child wrote), added to those kept
        of the tree, whose time stays that of the first: nothing is replayed longer than
        :data:`REPLAY_SECONDS` after its child answered it."""
        with self._lock:
            settings = self._entry(tree)
            since, before = (self._kept[tree][0], self._kept[tree][1]) if settings else (0.0, 0)
            if settings is None:
                settings, since = {}, time.monotonic()
            old = settings.get(setting)
            settings[setting] = (names, {**(old[1] if old else {}), **answers})
            self._kept[tree] = (since, before + size, settings)
            self._kept.move_to_end(tree)
            while self._kept and (
                len(self._kept) > self._trees
                or sum(size for _, size, _ in self._kept.values()) > self._size
            ):
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


REPLAYS = Replays()
"""This process's answers kept (:class:`Replays`)."""


class ModelPython:
    """The project's Python as its Python models need it (:class:`.models.ProjectPython`):
    decorator values only its code gives, and ``is_sql`` queries. They go to the macro
    process when the project has one; otherwise a process like it (same sandbox, limits
    and guard, no macro files) is started at the first need and closed by :meth:`close`.
    The caller decides, as for macros, whether the project's Python may run at all."""

    def __init__(
        self,
        root: Path,
        variables: Mapping[str, Any],
        *,
        dialect: str = "spark",
        macros: PythonMacros | None = None,
        columns_of: ColumnsOf | None = None,
    ) -> None:
        self.root = root
        self.variables = dict(variables)
        self.dialect = dialect
        self.macros = macros
        self.columns_of = columns_of
        self._own: PythonMacros | None = None

    def _process(self) -> PythonMacros:
        if self.macros is not None:
            return self.macros
        if self._own is None:
            self._own = PythonMacros(self.root)
            self._own.columns_of = self.columns_of
            self._own.start([], self.variables, dialect=self.dialect)
        return self._own

    def evaluate(self, request: Evaluation) -> Any:
        return self._process().evaluate(request)

    def query(self, request: SqlQuery) -> list[str]:
        return self._process().query(request)

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
