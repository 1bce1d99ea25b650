"""SQLMesh's Jinja in a project: find the blocks, render them in a child process, put the
result back where the block was.

A model file may hold ``JINJA_QUERY_BEGIN; ... JINJA_END;`` (its query) and
``JINJA_STATEMENT_BEGIN; ... JINJA_END;`` (statements before or after it); macros/*.sql
hold ``{% macro %}`` definitions every model can call; config.yaml may use
``{{ env_var('NAME', 'default') }}``. All of it is rendered by
:mod:`.jinja_sandbox` in one short-lived Python process per project, which limits its own
memory and CPU, and is killed past :data:`CHILD_SECONDS`: a hostile template ends that
process, never the service. The child starts with an empty environment, so even a sandbox
escape would find no secret in it.

A rendered block replaces its markers and text in the file; when it has fewer lines than
the Jinja it came from, blank lines keep everything after it on its own line number.

What the templates render to is capped per template, per file and per project
(:data:`.jinja_sandbox.MAX_OUTPUT`, :func:`.jinja_sandbox.file_cap`,
:data:`.jinja_sandbox.MAX_PROJECT_OUTPUT`): the child stops at the template that goes over,
and this process checks the totals again and reads at most :data:`MAX_CHILD_BYTES` of the
child's answers, so a project of many small blocks cannot hand the loader gigabytes of
SQL to scan.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from sluice.core import sandbox
from sluice.core.errors import ConfigError, ModelError, SluiceError
from sluice.core.model.scan import LineIndex, find_code

CHILD_SECONDS = 120
"""Wall-clock limit of the rendering process for a whole project."""
MAX_CHILD_BYTES = 4 * 20_000_000 + 4 * 1024 * 1024  # 4 bytes a character of MAX_PROJECT_OUTPUT
"""Most bytes read from the rendering process's answers: the project's cap in UTF-8 (at
most 4 bytes a character) and room for JSON and error messages. Past it the process is
killed and the template it was rendering is the error."""
_READ_CHUNK = 1 << 16

_BEGIN = r"(?i:\bJINJA_(?P<kind>QUERY|STATEMENT)_BEGIN\s*;)"
_END = re.compile(r"(?i:\bJINJA_END\s*;)")
UNSET_ENV = "__sluice_unset_env_var__"
"""What config.yaml's ``{{ env_var('NAME') }}`` renders to, followed by ``NAME__``, when it
has no default and no value is offered: an error only where Sluice reads it (a section
Sluice ignores, such as a gateway's connection, may name variables only its own
deployment sets)."""
_MARKERS = re.compile(r"\{\{|\{%|\{#")
_SANDBOX = "sluice.core.model.jinja_sandbox"
PROFILE = sandbox.Profile("jinja")
"""The child's sandbox: nothing of the project (its templates arrive on stdin), no network."""


@dataclass(frozen=True)
class Block:
    """One JINJA block of a file: offsets of its markers and of the template between."""

    kind: str  # "QUERY" or "STATEMENT"
    start: int  # the BEGIN marker
    body_start: int
    body_end: int
    end: int  # just past JINJA_END;
    line: int  # of the template's first character


def has_blocks(text: str) -> bool:
    """Whether a model file uses Jinja blocks (cheap check before :func:`blocks`)."""
    return "JINJA_" in text.upper() and next(find_code(text, _BEGIN), None) is not None


def blocks(text: str, path: str) -> list[Block]:
    """The JINJA blocks of a model file, in order.

    Raises:
        ModelError: a block without its JINJA_END;
    """
    found: list[Block] = []
    lines = LineIndex(text)
    start = 0
    while True:
        begin = next(find_code(text, _BEGIN, start), None)
        if begin is None:
            return found
        kind = (begin.group("kind") or "").upper()
        end = _END.search(text, begin.end())
        if end is None:
            raise ModelError(
                f"JINJA_{kind}_BEGIN; has no JINJA_END;",
                path=path,
                line=lines.position(begin.start())[0],
                hint="end the Jinja block with a line `JINJA_END;`",
            )
        line = lines.position(begin.end())[0]
        found.append(Block(kind, begin.start(), begin.end(), end.start(), end.end(), line))
        start = end.end()


def splice(text: str, found: Sequence[Block], rendered: Sequence[str]) -> str:
    """``text`` with each block replaced by its rendered SQL (a ``;`` after each)."""
    out: list[str] = []
    at = 0
    for block, sql in zip(found, rendered, strict=True):
        out.append(text[at : block.start])
        out.append(" " * (block.body_start - block.start))
        out.append(sql)
        missing = text.count("\n", block.body_start, block.body_end) - sql.count("\n")
        out.append("\n" * max(missing, 0))
        out.append(";")
        at = block.end
    out.append(text[at:])
    return "".join(out)


@dataclass(frozen=True)
class Rendered:
    """Model files after rendering: text by file (blocks replaced), errors by file."""

    texts: dict[str, str]
    errors: dict[str, SluiceError]


def render_models(
    files: Mapping[str, str],
    macros: Mapping[str, str],
    variables: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    macro_variables: frozenset[str] = frozenset(),
) -> Rendered:
    """Render the JINJA blocks of ``files`` (path -> text; files without blocks are left
    out of the result) with the ``{% macro %}`` files ``macros`` (path -> text).

    ``env``: the only values ``env_var()`` may return (none by default: a template gets its
    default argument). ``macro_variables``: SQLMesh's predefined variables (``start_ds``,
    ...), which render as ``@start_ds`` for Sluice to fill in when the model runs.
    """
    split: dict[str, list[Block]] = {}
    errors: dict[str, SluiceError] = {}
    for path, text in files.items():
        try:
            found = blocks(text, path)
        except SluiceError as exc:
            errors[path] = exc
            continue
        if found:
            split[path] = found
    texts: dict[str, str] = {}
    if not split:
        return Rendered(texts, errors)
    templates: list[tuple[str, str, int]] = [
        (path, files[path][b.body_start : b.body_end], b.line)
        for path, found in split.items()
        for b in found
    ]
    caps = _caps({path: len(files[path]) for path in split})
    request = {
        "variables": dict(variables),
        "env": dict(env or {}),
        "macro_variables": sorted(macro_variables),
        "macros": [
            [path, text, 1] for path, text in sorted(macros.items()) if _MARKERS.search(text)
        ],
        "templates": templates,
        "caps": caps,
    }
    answers = _render(request, [(path, line) for path, _, line in templates])
    # The child has kept to the caps; checked again here, before any text is spliced.
    from sluice.core.model import jinja_sandbox  # jinja2: only when there is Jinja

    totals = jinja_sandbox.Totals(caps)
    at = 0
    for path, found in split.items():
        mine = answers[at : at + len(found)]
        at += len(found)
        failed = next((a for a in mine if isinstance(a, SluiceError)), None)
        for block, answer in zip(found, mine, strict=True):
            if failed is not None:
                break
            over = totals.check(jinja_sandbox.Source(path, "", block.line), str(answer))
            if over is not None:
                failed = _error(jinja_sandbox.as_dict(over), ModelError)
        if failed is not None:
            errors[path] = failed
        else:
            texts[path] = splice(files[path], found, [str(a) for a in mine])
    return Rendered(texts, errors)


def _caps(sizes: Mapping[str, int]) -> dict[str, Any]:
    """What the files of ``sizes`` (path -> characters) may render to, for the child and
    for the check of its answers (see :func:`.jinja_sandbox.render_batch`)."""
    from sluice.core.model import jinja_sandbox  # jinja2: only when there is Jinja

    return {
        "files": {path: jinja_sandbox.file_cap(size) for path, size in sizes.items()},
        "project": jinja_sandbox.MAX_PROJECT_OUTPUT,
    }


def has_markers(text: str) -> bool:
    """Whether ``text`` holds a Jinja tag (``{{``, ``{%`` or ``{#``).

    >>> has_markers("a: 1"), has_markers("a: '{{ 1 }}'")
    (False, True)
    """
    return _MARKERS.search(text) is not None


def render_config(text: str, path: str, env: Mapping[str, str] | None = None) -> str:
    """config.yaml's text with its ``{{ env_var(...) }}`` (and any other Jinja) rendered;
    a text without Jinja tags is returned as it is. An ``env_var('NAME')`` with no default
    and no value offered renders to :data:`UNSET_ENV` + NAME + ``__``, which
    :func:`sluice.core.config.parse_config` refuses where Sluice reads it.

    Raises:
        SluiceError: naming the line of config.yaml.
    """
    if not has_markers(text):
        return text
    request = {"env": dict(env or {}), "templates": [[path, text, 1]], "unset_env": UNSET_ENV}
    answer = _render(request, [(path, 1)], ConfigError)[0]
    if isinstance(answer, SluiceError):
        raise answer
    return answer


def _render(
    request: dict[str, Any],
    names: list[tuple[str, int]],
    error_type: type[SluiceError] = ModelError,
) -> list[str | SluiceError]:
    """Run the child; one rendered text or error per template of ``request`` (``names``:
    the file and first line of each, for the error of the one the child stopped at)."""
    payload = json.dumps(request, default=str).encode("utf-8")
    launch = sandbox.wrap(sandbox.python_child(_SANDBOX), PROFILE)
    output, stopped = _run_child(launch.argv, payload)
    lines = _answers(output)
    if lines is None:  # not the child's own answers: stop at the first line that is not
        lines, stopped = _answers(output, lenient=True) or [], stopped or "crashed"
    macros_line = lines.pop(0) if lines and "macros_error" in lines[0] else None
    if macros_line is not None:
        error = _error(macros_line["macros_error"], error_type)
        return [error for _ in names]
    answers: list[str | SluiceError] = [
        _error(line["error"], error_type) if "error" in line else str(line.get("text"))
        for line in lines[: len(names)]
    ]
    if stopped is not None or len(answers) < len(names):
        # The template after the last answer is the one that went past the limits.
        path, line = names[min(len(answers), len(names) - 1)]
        if stopped == "output":
            failure = error_type(
                f"rendering its Jinja wrote more than {MAX_CHILD_BYTES:,} bytes, the most "
                "Sluice reads from the rendering process (it was stopped at this block)",
                path=path,
                line=line,
                hint="make the templates render less: fewer or smaller JINJA blocks, "
                "loops and repeated strings",
            )
        else:
            failure = error_type(
                f"rendering its Jinja went past the limits of the sandbox (more than "
                f"{CHILD_SECONDS} seconds, or the memory or CPU the rendering process may use)",
                path=path,
                line=line,
                hint="make the template's loops, recursion and strings smaller",
            )
        answers += [failure] * (len(names) - len(answers))
    return answers


def _run_child(argv: list[str], payload: bytes) -> tuple[bytes, str | None]:
    """Run the rendering process on ``payload``: what it wrote on stdout (at most
    :data:`MAX_CHILD_BYTES`, complete lines or not) and why it was stopped: None (it
    ended by itself, exit code 0), ``"crashed"`` (another exit code, or past
    :data:`CHILD_SECONDS`) or ``"output"`` (past :data:`MAX_CHILD_BYTES`: killed)."""
    process = subprocess.Popen(  # our own interpreter and module, nothing from the project
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={},
    )
    assert process.stdin is not None and process.stdout is not None
    feeder = threading.Thread(target=_feed, args=(process.stdin, payload), daemon=True)
    feeder.start()
    chunks: list[bytes] = []
    size = 0
    stopped: str | None = None
    deadline = time.monotonic() + CHILD_SECONDS
    fd = process.stdout.fileno()
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    stopped = "crashed"
                    break
                if not selector.select(left):
                    continue
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_CHILD_BYTES:
                    stopped = "output"
                    break
                chunks.append(chunk)
    except BaseException:
        process.kill()
        raise
    finally:
        if stopped is not None:
            process.kill()
        try:  # a child that closed its stdout gets the rest of its time to end
            code = process.wait(timeout=max(deadline - time.monotonic(), 0.0) + 1.0)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
            stopped = stopped or "crashed"
        process.stdout.close()
        feeder.join()
    if stopped is None and code != 0:
        stopped = "crashed"
    return b"".join(chunks), stopped


def _feed(stdin: IO[bytes], payload: bytes) -> None:
    """Write the request to the child (it reads it whole before it answers)."""
    try:
        stdin.write(payload)
        stdin.close()
    except OSError:  # the child ended first: its exit code says why
        pass


def _answers(output: bytes, *, lenient: bool = False) -> list[dict[str, Any]] | None:
    """The child's answers, one JSON object a line (a line cut short by a kill is left
    out). None when a line is not one: a child that lost its sandbox may write anything;
    ``lenient``: the answers before that line instead."""
    answers: list[dict[str, Any]] = []
    for raw in output.split(b"\n")[:-1]:
        if not raw.strip():
            continue
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            return answers if lenient else None
        answers.append(answer)
    return answers


def _error(data: Any, error_type: type[SluiceError]) -> SluiceError:
    if not isinstance(data, Mapping):  # not the child's own answer
        data = {"message": "the rendering process answered something else than an error"}
    return error_type(
        str(data.get("message")),
        path=str(data.get("path")),
        line=data.get("line"),
        hint=str(data.get("hint")),
    )
