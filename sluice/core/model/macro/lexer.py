"""Turn SQLMesh macro syntax into names sqlglot can parse (pure).

Only spelling changes here; nothing is evaluated. ``@name(`` becomes the function
``__sluice_fn_<k>__name(`` (``k`` numbers the calls, so an error can point at its call),
``@name`` and ``@{name}`` become the column ``__sluice_macro__name``, and a macro inside a
name (``col_@x``, ``@{x}_col``, ``"@{x} total"``) becomes the marker
``__sluiceat_x_taeculs__`` inside that name. A clause operator (``@WHERE(cond) a = 1``,
``LEFT @JOIN(cond) u ON ...``) becomes its SQL keyword followed by the comment
``/*__sluice_clause_<k>__*/``, which sqlglot keeps on the clause's node; its condition is kept
aside in :attr:`Lexed.clauses`. The evaluator works on the parsed tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "__sluice_macro__"
FN_PREFIX = "__sluice_fn_"
EMBED_START = "__sluiceat_"
EMBED_END = "_taeculs__"

CLAUSE_MARK = "__sluice_clause_"
CLAUSE_KEYWORDS = {
    "WITH": "WITH",
    "JOIN": "JOIN",
    "WHERE": "WHERE",
    "GROUP_BY": "GROUP BY",
    "HAVING": "HAVING",
    "ORDER_BY": "ORDER BY",
    "LIMIT": "LIMIT",
}
"""SQLMesh's clause operators and the SQL keyword each one stands for."""
CLAUSE_COMMENT = re.compile(rf"^\s*{CLAUSE_MARK}(\d+)__\s*$")

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
    clauses: tuple[Clause, ...] = ()
    """Clause operators, by the ``k`` of their ``/*__sluice_clause_<k>__*/`` comment."""


@dataclass(frozen=True)
class Clause:
    """A clause operator: ``@WHERE(condition)`` written at ``site``."""

    name: str
    """Upper case, e.g. ``GROUP_BY``."""
    condition: str
    """The text between the parentheses."""
    site: Site


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
    clauses: list[Clause] = []
    size = 0
    last = 0
    pos = 0

    def emit(replacement: str, start: int, end: int) -> None:
        nonlocal size, last
        out.append(text[last:start])
        size += start - last
        edits.append((size, size + len(replacement), start, end))
        out.append(replacement)
        size += len(replacement)
        last = end

    while (match := _SCAN.search(text, pos)) is not None:
        pos = max(match.end(), match.start() + 1)
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
            close = (
                closing_paren(text, match.end())
                if single.group(2) and name.upper() in CLAUSE_KEYWORDS
                else None
            )
            if close is not None:
                site = Site(name.lower(), match.start(), close + 1)
                clauses.append(Clause(name.upper(), text[match.end() + 1 : close], site))
                # Keep the line count: the condition's newlines stay, inside the comment.
                newlines = "\n" * text.count("\n", match.end(), close)
                marker = f"{CLAUSE_KEYWORDS[name.upper()]} /*{CLAUSE_MARK}{len(clauses) - 1}__{newlines}*/"
                emit(marker, match.start(), close + 1)
                pos = close + 1
            elif single.group(2) and text.startswith("(", match.end()):
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
    return Lexed("".join(out), tuple(edits), tuple(calls), tuple(names), text, tuple(clauses))


def closing_paren(text: str, start: int) -> int | None:
    """The offset of the ``)`` closing the ``(`` at ``start`` (strings and comments
    skipped), or None when ``text[start]`` is no ``(`` or it is never closed."""
    if not text.startswith("(", start):
        return None
    depth = 0
    pos = start
    while pos < len(text):
        skipped = _SKIP.match(text, pos)
        if skipped is not None and skipped.end() > pos:
            pos = skipped.end()
            continue
        char = text[pos]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return pos
        pos += 1
    return None


_SKIP = re.compile(
    r"'(?:[^'\\]|\\.|'')*(?:'|\Z)|--[^\n]*|/\*.*?(?:\*/|\Z)"
    r"|\"(?:[^\"\\]|\\.|\"\")*(?:\"|\Z)|`(?:[^`]|``)*(?:`|\Z)",
    re.S,
)


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
