"""The service's side of Python macros: one child process per project load.

:func:`active` launches :mod:`.child` with an empty environment (no token, key, secret or
database URL to find), hands it the macro files, and returns a :class:`PythonMacros` the
macro evaluator calls (through :data:`sluice.core.model.macro.external.ACTIVE`). Each call
is one JSON line each way; a call that takes more than :data:`CALL_SECONDS`, or a child
that dies, ends the child and fails the model that called it, never the service.

The child imports the macro files while the loader goes on (its answer is awaited at the
first Python macro call, or when the load ends, which fails if a file did not import), and
a call made again with the same arguments during one load is answered from memory: a
macro is a function of its arguments and the project's variables, as the model cache
already assumes (:mod:`sluice.core.model.loader` keeps a model's expansion until the
macro files change).
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.macro import external
from sluice.core.model.macro.registry import MacroError

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


class PythonMacros:
    """A running child holding a project's Python macros."""

    def __init__(self, root: Path, files: Sequence[Path], variables: Mapping[str, Any]) -> None:
        root = root.resolve()
        self.root = root
        self.calls = 0
        self._memo: dict[str, list[str]] = {}
        self._names: frozenset[str] | None = None
        self._errors: list[SluiceError] = []
        self._process = (
            subprocess.Popen(  # our interpreter and module; the project's files are data
                [sys.executable, "-I", "-X", "utf8", "-c", _MAIN, _ROOT],
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
        setup = {
            "root": str(root),
            "files": [str(f.resolve()) for f in files],
            "variables": dict(variables),
        }
        self._started = time.monotonic()
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
        request = {"name": name, "args": list(args), "kwargs": dict(kwargs), "dialect": dialect}
        key = json.dumps(request, sort_keys=True)
        known = self._memo.get(key)
        if known is not None:
            return list(known)
        try:
            self._ready()
            answer = self._exchange(request, CALL_SECONDS, f"running @{name}")
        except ModelError as exc:
            raise MacroError(exc.message, exc.hint) from None
        if "error" in answer:
            error = answer["error"]
            where = f" ({error['path']}:{error['line']})" if error.get("path") else ""
            raise MacroError(
                f"Python macro @{name} failed{where}: {error.get('message')}",
                "fix the macro in macros/, or the arguments given to it",
            )
        sql = [str(s) for s in answer.get("sql", [])]
        self._memo[key] = sql
        return list(sql)

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.close()
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._selector.close()

    def _exchange(self, request: dict[str, Any], seconds: float, doing: str) -> dict[str, Any]:
        self._send(request)
        return self._receive(time.monotonic() + seconds, seconds, doing)

    def _send(self, request: dict[str, Any]) -> None:
        process = self._process
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request, default=str).encode("utf-8") + b"\n")
            process.stdin.flush()
        except (OSError, ValueError):
            pass  # the child ended (or was closed); reported by _receive

    def _receive(self, deadline: float, seconds: float, doing: str) -> dict[str, Any]:
        process = self._process
        assert process.stdout is not None
        try:
            line = _readline(process.stdout, self._selector, deadline)
        except (OSError, ValueError):  # closed by close()
            line = None
        if line is None:
            process.kill()
            process.wait()
            raise ModelError(
                f"{doing} went past the limits of the Python process (more than {seconds:g} s, "
                "or the memory or CPU it may use), or the process ended",
                path=str(self.root / "macros"),
                hint="make the macro faster; a macro must not read input, loop forever or exit",
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _model_error(self, data: Mapping[str, Any], doing: str) -> SluiceError:
        return ModelError(
            f"{doing}: {data.get('message')}",
            path=str(data.get("path") or self.root / "macros"),
            line=data.get("line"),
            hint="fix the macro file; Sluice imports it as SQLMesh would, with `from sqlmesh "
            "import macro` available (see the README's 'Python in projects')",
        )


def _readline(stream: Any, selector: selectors.BaseSelector, deadline: float) -> bytes | None:
    """One line from the child's output (``stream``, registered with ``selector``), or
    None past ``deadline`` or at its end."""
    buffer = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            return None
        chunk: bytes = stream.read1(65536)
        if not chunk:
            return None
        buffer += chunk
        if buffer.endswith(b"\n"):
            return buffer


@contextmanager
def active(root: Path, variables: Mapping[str, Any]) -> Iterator[PythonMacros | None]:
    """The project's Python macros, callable from macro evaluation inside the block (None
    and nothing started when the project has none)."""
    files = macro_files(root)
    if not files:
        yield None
        return
    macros = PythonMacros(root, files, variables)
    token = external.ACTIVE.set(macros)
    try:
        yield macros
        macros.check()  # a macro file that did not import fails the load, called or not
    finally:
        external.ACTIVE.reset(token)
        macros.close()
