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
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.core import sandbox
from sluice.core.errors import ConfigError, ModelError, SluiceError
from sluice.core.model.scan import LineIndex, find_code

CHILD_SECONDS = 120
"""Wall-clock limit of the rendering process for a whole project."""

_BEGIN = r"(?i:\bJINJA_(?P<kind>QUERY|STATEMENT)_BEGIN\s*;)"
_END = re.compile(r"(?i:\bJINJA_END\s*;)")
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
    templates = [
        [path, files[path][b.body_start : b.body_end], b.line]
        for path, found in split.items()
        for b in found
    ]
    request = {
        "variables": dict(variables),
        "env": dict(env or {}),
        "macro_variables": sorted(macro_variables),
        "macros": [
            [path, text, 1] for path, text in sorted(macros.items()) if _MARKERS.search(text)
        ],
        "templates": templates,
    }
    answers = _render(request, [str(t[0]) for t in templates])
    at = 0
    for path, found in split.items():
        mine = answers[at : at + len(found)]
        at += len(found)
        failed = next((a for a in mine if isinstance(a, SluiceError)), None)
        if failed is not None:
            errors[path] = failed
        else:
            texts[path] = splice(files[path], found, [str(a) for a in mine])
    return Rendered(texts, errors)


def render_config(text: str, path: str, env: Mapping[str, str] | None = None) -> str:
    """config.yaml's text with its ``{{ env_var(...) }}`` (and any other Jinja) rendered;
    a text without Jinja tags is returned as it is.

    Raises:
        SluiceError: naming the line of config.yaml.
    """
    if not _MARKERS.search(text):
        return text
    request = {"env": dict(env or {}), "templates": [[path, text, 1]]}
    answer = _render(request, [path], ConfigError)[0]
    if isinstance(answer, SluiceError):
        raise answer
    return answer


def _render(
    request: dict[str, Any], names: list[str], error_type: type[SluiceError] = ModelError
) -> list[str | SluiceError]:
    """Run the child; one rendered text or error per template of ``request``."""
    root = str(Path(__file__).resolve().parents[3])
    code = f"import sys; sys.path.insert(0, sys.argv[1]); from {_SANDBOX} import main; main()"
    payload = json.dumps(request, default=str).encode("utf-8")
    try:
        launch = sandbox.wrap([sys.executable, "-I", "-c", code, root], PROFILE)
        done = subprocess.run(  # our own interpreter and module, nothing from the project
            launch.argv,
            input=payload,
            capture_output=True,
            timeout=CHILD_SECONDS,
            env={},
            check=False,
        )
        output, crashed = done.stdout, done.returncode != 0
    except subprocess.TimeoutExpired as exc:
        output, crashed = exc.output or b"", True
    lines = [json.loads(line) for line in output.decode("utf-8").splitlines() if line.strip()]
    macros_line = lines.pop(0) if lines and "macros_error" in lines[0] else None
    if macros_line is not None:
        error = _error(macros_line["macros_error"], error_type)
        return [error for _ in names]
    answers: list[str | SluiceError] = [
        _error(line["error"], error_type) if "error" in line else str(line["text"])
        for line in lines
    ]
    if crashed or len(answers) < len(names):
        # The template after the last answer is the one that went past the limits.
        culprit = names[len(answers)] if len(answers) < len(names) else names[-1]
        failure = error_type(
            f"rendering its Jinja went past the limits of the sandbox (more than "
            f"{CHILD_SECONDS} seconds, or the memory or CPU the rendering process may use)",
            path=culprit,
            hint="make the template's loops, recursion and strings smaller",
        )
        answers += [failure] * (len(names) - len(answers))
    return answers


def _error(data: Mapping[str, Any], error_type: type[SluiceError]) -> SluiceError:
    return error_type(
        str(data.get("message")),
        path=str(data.get("path")),
        line=data.get("line"),
        hint=str(data.get("hint")),
    )
