"""Parse the ``MODEL (...)`` / ``AUDIT (...)`` header of a SQLMesh-format file (pure).

The header is a comma-separated list of ``key value`` properties. Values are words
(``FULL``, ``db.table``), strings, numbers, booleans, tuples ``(a, b)``, arrays
``[a, b]``, calls ``KIND (key value, ...)`` and ``name(arg := value)``, and keyed pairs
``key = value`` inside lists. Trailing commas and any keyword case are accepted. The value
of ``name := ...`` or ``name = ...`` (an audit argument, a default) may also be any SQL
expression, kept as its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from sluice.core.errors import ModelError
from sluice.core.model.scan import LineIndex, find_code

NodeType = Literal["word", "string", "number", "bool", "null", "list", "call", "pair", "expr"]

MAX_DEPTH = 64
"""Most brackets a header may nest (real headers nest three or four deep): the parser
recurses once per level, so this keeps a pathological file from exhausting the stack."""

_CLOSERS = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.COMMA}
_ASSIGN = {TokenType.EQ, TokenType.COLON_EQ}


@dataclass(frozen=True)
class Node:
    """One value in a header, with where it stands in the file."""

    type: NodeType
    value: str
    items: tuple[Node, ...] = ()
    line: int = 0
    col: int = 0
    start: int = 0
    end: int = 0  # offset one past the last character

    def text(self, source: str) -> str:
        """The exact source text of this value."""
        return source[self.start : self.end]

    def elements(self) -> tuple[Node, ...]:
        """A list's items, or this one value: a property that takes a list takes a single
        value without brackets too (``grain id`` as ``grain (id)``)."""
        return self.items if self.type == "list" else (self,)


@dataclass(frozen=True)
class Header:
    """A parsed header: its keyword, its properties in order, and where the body starts."""

    keyword: str
    properties: dict[str, Node] = field(default_factory=dict)
    keys: dict[str, Node] = field(default_factory=dict)  # key name -> the key's own node
    line: int = 1
    body_start: int = 0


def _macro_glued(last: Token, nxt: Token) -> bool:
    """Whether ``nxt`` continues a name holding a macro (``@schema``, ``t_@{x}``)."""
    return nxt.start == last.end + 1 and (nxt.text in ("@", "{", "}") or last.text in ("@", "{"))


class _Parser:
    def __init__(self, source: str, tokens: list[Token], path: str, lines: LineIndex) -> None:
        self.source = source
        self.tokens = tokens
        self.pos = 0
        self.path = path
        self.lines = lines
        self.depth = 0  # brackets open where the parser stands

    def error(self, message: str, token: Token | None, hint: str | None = None) -> ModelError:
        line, col = self.lines.position(token.start) if token else (None, None)
        return ModelError(message, path=self.path, line=line, col=col, hint=hint)

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            last = self.tokens[-1] if self.tokens else None
            raise self.error("the header ends too early", last, "close every '(' and '['")
        self.pos += 1
        return token

    def node(self, type_: NodeType, value: str, first: Token, last: Token, items=()) -> Node:  # type: ignore[no-untyped-def]
        line, col = self.lines.position(first.start)
        return Node(type_, value, tuple(items), line, col, first.start, last.end + 1)

    def value(self) -> Node:
        token = self.take()
        kind = token.token_type
        if kind == TokenType.STRING:
            return self.node("string", token.text, token, token)
        if kind == TokenType.NUMBER:
            return self.node("number", token.text, token, token)
        if kind in (TokenType.TRUE, TokenType.FALSE):
            return self.node("bool", token.text.lower(), token, token)
        if kind == TokenType.NULL:
            return self.node("null", "null", token, token)
        if kind == TokenType.STAR:
            # `columns *` of SCD_TYPE_2_BY_COLUMN: every column (a word other checks judge).
            return self.node("word", "*", token, token)
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
            items, last = self.items(
                TokenType.R_PAREN if kind == TokenType.L_PAREN else TokenType.R_BRACKET
            )
            return self.node("list", "", token, last, items)
        if (
            kind in _CLOSERS
            or kind in _ASSIGN
            or not (
                token.text[:1].isalpha()
                or token.text[:1] in ("_", "@")
                or kind == TokenType.IDENTIFIER
            )
        ):
            raise self.error(
                f"unexpected '{token.text}' in the header",
                token,
                "write each entry as `name value` (an audit argument as `name := value` or "
                "`name = value`), separated by commas",
            )
        word, last = token.text, token
        while (nxt := self.peek()) is not None and (
            nxt.token_type == TokenType.DOT or _macro_glued(last, nxt)
        ):
            self.take()
            if nxt.token_type != TokenType.DOT:
                word, last = word + nxt.text, nxt  # a macro inside a name: orders_@{suffix}
                continue
            part = self.take()
            word, last = f"{word}.{part.text}", part
        nxt = self.peek()
        if nxt is not None and nxt.token_type == TokenType.L_PAREN:
            self.take()
            items, close = self.items(TokenType.R_PAREN)
            return self.node("call", word, token, close, items)
        return self.node("word", word, token, last)

    def items(self, closer: TokenType) -> tuple[list[Node], Token]:
        if self.depth == MAX_DEPTH:
            raise self.error(
                f"the header nests brackets more than {MAX_DEPTH} deep",
                self.tokens[self.pos - 1],
                "a header needs a few levels at most: look for brackets opened by mistake",
            )
        self.depth += 1
        try:
            return self._items(closer)
        finally:
            self.depth -= 1

    def _items(self, closer: TokenType) -> tuple[list[Node], Token]:
        items: list[Node] = []
        while True:
            token = self.peek()
            if token is None:
                raise self.error(
                    "unclosed bracket in the header", self.tokens[-1], "add the missing ')' or ']'"
                )
            if token.token_type == closer:
                return items, self.take()
            items.append(self.item())
            token = self.peek()
            if token is not None and token.token_type == TokenType.COMMA:
                self.take()
            elif token is None or token.token_type != closer:
                raise self.error(
                    f"expected ',' or '{')' if closer == TokenType.R_PAREN else ']'}'"
                    + (f" but found '{token.text}'" if token else ""),
                    token or self.tokens[-1],
                    "separate the entries with commas",
                )

    def item(self) -> Node:
        first = self.value()
        token = self.peek()
        if token is None or token.token_type in _CLOSERS:
            return first
        if token.token_type in _ASSIGN and first.type == "word":
            # `name := value` or `name = value`: SQLMesh takes both for audit arguments,
            # and the value may be any SQL expression (`criteria = [LENGTH(name) > 0]`).
            self.take()
            value = self.argument()
            return Node(
                "pair", first.value, (value,), first.line, first.col, first.start, value.end
            )
        # `key value`: the key must be a plain word.
        if first.type != "word":
            raise self.error(
                f"unexpected '{token.text}' after a value", token, "separate entries with commas"
            )
        rest = [self.value()]
        # Multi-word values such as `TIMESTAMP WITH TIME ZONE` column types.
        # Only on one line: a value running on to the next line is a missing comma.
        while (nxt := self.peek()) is not None and nxt.token_type not in _CLOSERS:
            if self.lines.position(nxt.start)[0] != self.lines.position(rest[-1].end - 1)[0]:
                break
            rest.append(self.value())
        value = (
            rest[0]
            if len(rest) == 1
            else Node(
                "word",
                " ".join(r.text(self.source) for r in rest),
                (),
                rest[0].line,
                rest[0].col,
                rest[0].start,
                rest[-1].end,
            )
        )
        return Node("pair", first.value, (value,), first.line, first.col, first.start, value.end)

    def argument(self) -> Node:
        """The value of ``name := value``: a header value, or else a SQL expression's text."""
        begin = self.pos
        try:
            value = self.value()
            nxt = self.peek()
            if nxt is None or nxt.token_type in _CLOSERS:
                return value
        except ModelError:
            pass
        self.pos = begin
        # `criteria := (amount > 0)`: everything up to the next ',' or closer outside brackets.
        depth = 0
        first = last = self.peek()
        while (token := self.peek()) is not None:
            if depth == 0 and token.token_type in _CLOSERS:
                break
            if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
                depth += 1
            elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
                depth -= 1
            last = self.take()
        if first is None or last is None or first is self.peek():
            raise self.error(
                f"expected a value after '{self.tokens[begin - 1].text}'",
                self.peek() or self.tokens[-1],
                "write the argument's value, e.g. `column := id`",
            )
        return self.node("expr", self.source[first.start : last.end + 1], first, last)


def _header_end(text: str, open_paren: int) -> int | None:
    depth = 0
    for match in find_code(text, r"[()]", open_paren):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.end()
    return None


def parse_header(
    text: str, path: str, keyword: str, lines: LineIndex | None = None
) -> Header | None:
    """Parse the header at the top of ``text``; None when the file does not start with ``keyword``.

    Raises:
        ModelError: naming file:line:col of the problem.
    """
    lines = lines or LineIndex(text)
    first = next(find_code(text, r"\S+?(?=[\s(]|$)"), None)
    if first is None or first.group().upper() != keyword:
        return None
    paren = next(find_code(text, r"\S", first.end()), None)
    if paren is None or paren.group() != "(":
        line, col = lines.position(first.start())
        raise ModelError(
            f"expected '(' after {keyword}",
            path=path,
            line=line,
            col=col,
            hint=f"write {keyword} (name ..., ...); with the properties in parentheses",
        )
    end = _header_end(text, paren.start())
    if end is None:
        line, col = lines.position(paren.start())
        raise ModelError(
            f"the {keyword} header is never closed",
            path=path,
            line=line,
            col=col,
            hint="add the missing ')'",
        )
    try:
        tokens = Tokenizer().tokenize(text[:end])
    except TokenError as exc:
        raise ModelError(f"cannot read the {keyword} header: {exc}", path=path) from None
    parser = _Parser(text, tokens, path, lines)
    parser.take()  # keyword
    opening = parser.take()
    props, _ = parser.items(TokenType.R_PAREN)
    header = Header(keyword=keyword, line=lines.position(first.start())[0])
    for prop in (call_as_pair(p, text) for p in props):
        if prop.type != "pair":
            raise parser.error(
                f"'{prop.text(text)}' is not a property",
                _token_at(tokens, prop.start) or opening,
                "write each property as `name value`, e.g. `kind FULL`",
            )
        key = prop.value.lower()
        if key in header.properties:
            raise parser.error(
                f"property '{key}' is set twice", _token_at(tokens, prop.start), "keep one"
            )
        header.properties[key] = prop.items[0]
        header.keys[key] = prop
    body = end
    semi = next(find_code(text, r"\S", end), None)
    if semi is not None and semi.group() == ";":
        body = semi.end()
    return Header(header.keyword, header.properties, header.keys, header.line, body)


def call_as_pair(node: Node, source: str) -> Node:
    """Read ``key (a, b)`` (parsed as a call) as the pair ``key`` -> list ``(a, b)``."""
    if node.type != "call":
        return node
    paren = source.index("(", node.start + len(node.value))
    items = Node(
        "list", "", node.items, node.line, node.col + (paren - node.start), paren, node.end
    )
    return Node("pair", node.value, (items,), node.line, node.col, node.start, node.end)


def _token_at(tokens: list[Token], offset: int) -> Token | None:
    return next((t for t in tokens if t.start == offset), None)
