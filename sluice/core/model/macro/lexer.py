"""Turn SQLMesh macro syntax into names sqlglot can parse (pure).

Only spelling changes here; nothing is evaluated. ``@name(`` becomes the function
``__sluice_fn_<k>__name(`` (``k`` numbers the calls, so an error can point at its call),
``@name`` and ``@{name}`` become the column ``__sluice_macro__name``, and a macro inside a
name (``col_@x``, ``@{x}_col``, ``"@{x} total"``) becomes the marker
``__sluiceat_x_taeculs__`` inside that name. The evaluator works on the parsed tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "__sluice_macro__"
FN_PREFIX = "__sluice_fn_"
EMBED_START = "__sluiceat_"
EMBED_END = "_taeculs__"

FN_NAME = re.compile(rf"^{FN_PREFIX}(\d+)__(\w+)$", re.I)
EMBEDDED = re.compile(rf"{EMBED_START}(\w+?){EMBED_END}", re.I)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PIECE = rf"@\{{\s*{_NAME}\s*\}}|@{_NAME}"
_WORD = rf"(?<![\w@$])[A-Za-z0-9_]*(?:{_PIECE})(?:[A-Za-z0-9_]|{_PIECE})*"
_SCAN = re.compile(
    r"(?P<skip>'(?:[^'\\]|\\.|'')*(?:'|\Z)|--[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<quoted>\"(?:[^\"\\]|\\.|\"\")*(?:\"|\Z)|`(?:[^`]|``)*(?:`|\Z))"
    rf"|(?P<word>{_WORD})",
    re.S,
)
_PIECES = re.compile(rf"@\{{\s*({_NAME})\s*\}}|@({_NAME})")


@dataclass(frozen=True)
class Site:
    """Where a macro was written: its name and the offsets of the text it replaced."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Lexed:
    text: str
    edits: tuple[tuple[int, int, int, int], ...]
    """Each replacement: (start, end) in ``text``, (start, end) in the source."""
    calls: tuple[Site, ...]
    """The k-th macro call, for ``__sluice_fn_<k>__``."""
    names: tuple[Site, ...]
    """Every ``@name`` used as a value (not called), in order."""
    source: str = ""
    """The text the offsets of ``edits`` and the sites refer to."""


def fn_name(index: int, name: str) -> str:
    return f"{FN_PREFIX}{index}__{name}"


def embed(name: str) -> str:
    return f"{EMBED_START}{name.lower()}{EMBED_END}"


def lex(text: str) -> Lexed:
    """Rewrite the macros of ``text`` (see the module docstring)."""
    text = lambda_aliases(text)
    out: list[str] = []
    edits: list[tuple[int, int, int, int]] = []
    calls: list[Site] = []
    names: list[Site] = []
    size = 0
    last = 0

    def emit(replacement: str, start: int, end: int) -> None:
        nonlocal size, last
        out.append(text[last:start])
        size += start - last
        edits.append((size, size + len(replacement), start, end))
        out.append(replacement)
        size += len(replacement)
        last = end

    for match in _SCAN.finditer(text):
        if match.group("skip") is not None:
            continue
        if match.group("quoted") is not None:
            quoted = match.group("quoted")
            if "@" not in quoted:
                continue
            inner = _PIECES.sub(lambda m: embed(m.group(1) or m.group(2)), quoted)
            if inner != quoted:
                for piece in _PIECES.finditer(quoted):
                    names.append(
                        Site((piece.group(1) or piece.group(2)).lower(), match.start(), match.end())
                    )
                emit(inner, match.start(), match.end())
            continue
        word = match.group("word")
        single = _PIECES.fullmatch(word)
        if single is not None:
            name = single.group(1) or single.group(2)
            if single.group(2) and text.startswith("(", match.end()):
                calls.append(Site(name, match.start(), match.end()))
                emit(fn_name(len(calls) - 1, name), match.start(), match.end())
            else:
                names.append(Site(name.lower(), match.start(), match.end()))
                emit(PREFIX + name.lower(), match.start(), match.end())
            continue
        for piece in _PIECES.finditer(word):
            names.append(
                Site((piece.group(1) or piece.group(2)).lower(), match.start(), match.end())
            )
        emit(
            _PIECES.sub(lambda m: embed(m.group(1) or m.group(2)), word), match.start(), match.end()
        )
    out.append(text[last:])
    return Lexed("".join(out), tuple(edits), tuple(calls), tuple(names), text)


ALIAS_FN = "__sluice_as__"


def lambda_aliases(text: str) -> str:
    """Spell ``x -> expr AS name`` (an alias in a lambda body) as a call sqlglot parses.

    ``x -> expr AS name`` becomes ``x -> __sluice_as__(expr, name)``. Inserted text holds
    no newline, so lines stay where they were.
    """
    if "->" not in text:
        return text
    from sqlglot.errors import TokenError
    from sqlglot.tokenizer_core import TokenType
    from sqlglot.tokens import Tokenizer

    try:
        tokens = Tokenizer().tokenize(text)
    except TokenError:
        return text
    opening = {TokenType.L_PAREN, TokenType.L_BRACKET}
    closing = {TokenType.R_PAREN, TokenType.R_BRACKET}
    ops: list[tuple[int, int, str]] = []  # (offset, characters removed, inserted text)
    for i, token in enumerate(tokens):
        if token.token_type != TokenType.ARROW or i + 1 >= len(tokens):
            continue
        depth = 0
        alias_at: int | None = None
        end = len(text)
        for later in tokens[i + 1 :]:
            if later.token_type in opening:
                depth += 1
            elif later.token_type in closing:
                if depth == 0:
                    end = later.start
                    break
                depth -= 1
            elif depth == 0 and later.token_type == TokenType.COMMA:
                end = later.start
                break
            elif depth == 0 and later.token_type == TokenType.ALIAS and alias_at is None:
                alias_at = later.start
        if alias_at is not None:
            ops.append((tokens[i + 1].start, 0, f"{ALIAS_FN}("))
            ops.append((alias_at, 2, ","))
            ops.append((end, 0, ")"))
    for offset, removed, inserted in sorted(ops, key=lambda o: o[0], reverse=True):
        text = text[:offset] + inserted + text[offset + removed :]
    return text
