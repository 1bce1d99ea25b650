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
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
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

START_SECONDS = 60.0
"""Longest time the child may take to import the macro files."""
CALL_SECONDS = 10.0
"""Longest time one macro call may take."""
_ROOT = str(Path(__file__).resolve().parents[4])
_MAIN = "import sys; sys.path.insert(0, sys.argv[1]); from sluice.core.model.pycode.child import main; main()"


def macro_files(root: Path) -> list[Path]:
    """The project's Python macro files (an empty ``__init__.py`` is not one)."""
    folder = root / "macros"
    return [
        p
        for p in sorted(folder.rglob("*.py"))
        if p.name != "__init__.py" or p.read_text(encoding="utf-8", errors="replace").strip()
    ]


ColumnsOf = Callable[[str], Sequence[tuple[str, str]] | None]
"""The (name, Spark type) columns of a table by its lower-case name, None when unknown."""


def profile(root: Path) -> sandbox.Profile:
    """The child's sandbox: the project read-only, no network."""
    return sandbox.Profile("macros", read=(root,), cwd=root)


class PythonMacros:
    """A running child holding a project's Python macros."""

    def __init__(self, root: Path) -> None:
        """Start the child (it imports sqlglot, then waits for :meth:`start`)."""
        root = root.resolve()
        self.root = root
        self.calls = 0
        self.columns_of: ColumnsOf | None = None
        """Answers ``evaluator.columns_to_types`` (set by the loader; None: nothing known)."""
        self._memo: dict[str, dict[str, Any]] = {}
        self._names: frozenset[str] | None = None
        self._errors: list[SluiceError] = []
        self._buffer = b""
        self._next_id = 0
        self._closed = False
        self._started = time.monotonic()
        self._process = (
            subprocess.Popen(  # our interpreter and module; the project's files are data
                sandbox.wrap(
                    [sys.executable, "-I", "-X", "utf8", "-c", _MAIN, _ROOT],
                    profile(root),
                ).argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd=str(root),
            )
        )
        assert self._process.stdout is not None
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._process.stdout, selectors.EVENT_READ)

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
        self._send(setup)  # the answer is read by _ready(), when it is needed

    @property
    def names(self) -> frozenset[str]:
        """Lower-case names of the macros (none if a macro file did not import)."""
        return self._ready()

    def check(self) -> None:
        """Raise the errors of the macro files that did not import, if any."""
        self._ready()
        if self._errors:
            errors = self._errors
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
        key = call_key(name, list(args), dict(kwargs), dialect)
        answer = self._memo.get(key)
        try:
            if answer is None:
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

    def _ask(
        self, name: str, args: Sequence[str], kwargs: Mapping[str, str], dialect: str, key: str
    ) -> dict[str, Any]:
        """One call, asked of the child (answering its questions about columns)."""
        self._next_id += 1
        ident = self._next_id
        request = {
            "id": ident,
            "name": name,
            "args": list(args),
            "kwargs": dict(kwargs),
            "dialect": dialect,
        }
        self._send(request)
        asked = False
        deferred: Exception | None = None
        while True:
            # A call made ahead before this one may still be under way: it has its own limit.
            seconds = CALL_SECONDS + AHEAD_SECONDS
            line = self._receive(time.monotonic() + seconds, seconds, f"running @{name}")
            if line.get("id") != ident:
                continue  # not for this call (answers made ahead are kept by _receive)
            if "columns" in line:
                asked = True
                try:
                    found = self._columns(str(line["columns"]))
                except Exception as exc:  # the loader's "not read yet": the file waits
                    deferred, found = exc, None
                self._send({"columns": found})
                continue
            if deferred is not None:
                raise deferred  # the child has answered: it is ready for the next call
            if not asked:
                self._memo[key] = line
            return line

    def _columns(self, table: str) -> list[list[str]] | None:
        found = self.columns_of(table.lower()) if self.columns_of is not None else None
        return [[str(n), str(t)] for n, t in found] if found is not None else None

    def _take_ahead(self) -> None:
        """Keep the answers the child has sent ahead so far, without waiting."""
        while self._selector.select(0):
            if not self._fill():
                return
            self._split()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
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
        self._buffer += chunk
        return bool(chunk)

    def _split(self) -> dict[str, Any] | None:
        """The first whole line of the buffer that is not answers sent ahead."""
        while b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
            line: dict[str, Any] = json.loads(raw)
            if "ahead" not in line:
                return line
            for key, answer in line["ahead"]:
                self._memo.setdefault(str(key), answer)
        return None

    def _model_error(self, data: Mapping[str, Any], doing: str) -> SluiceError:
        return ModelError(
            f"{doing}: {data.get('message')}",
            path=str(data.get("path") or self.root / "macros"),
            line=data.get("line"),
            hint="fix the macro file; Sluice imports it as SQLMesh would, with `from sqlmesh "
            "import macro` available (see the README's 'Python in projects')",
        )


def spawn(root: Path) -> PythonMacros | None:
    """Start the project's macro process early (None when it has no Python macros): its
    start overlaps what the loader reads first; :func:`active` then hands it the work."""
    return PythonMacros(root) if macro_files(root) else None


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
    finally:
        external.ACTIVE.reset(token)
        macros.close()
