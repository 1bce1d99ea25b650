"""User text as literal Markdown: the one place Sluice escapes what it shows on a forge.

Column names and values, model names, error texts, test names: anything that comes from a
pull request's head or from the data reaches the PR comment and the check runs as Markdown
that GitHub (or GitLab) renders. Written as is, such text could end a table row (``|``, a
line break), open HTML (``</details><img src=x onerror=...>``), hide the rest of the
comment (``<!--``), make a link or an image (``[x](http://...)``, ``![x](...)``, or a bare
``http://`` URL GitHub links by itself), ping people (``@org/team``) or close a code block.
Each function here returns :class:`Markdown`, text safe for one context:

- :func:`text`: running text, a list item, a heading or a table cell.
- :func:`code`: an inline code span, whatever backticks the text holds (inside one, GitHub
  renders nothing); ``table=True`` for a table cell, where a ``|`` would split the cell
  even inside a code span, so such text becomes ``<code>`` around :func:`text`.
- :func:`html`: text inside raw HTML such as ``<summary>...</summary>``, where Markdown is
  not read (so backslash escapes would show) but entities are.
- :func:`fence`: a fenced code block whose fence is longer than any run of backticks in
  the text, so that nothing inside can close it.

How, and why that way:

- Line breaks become spaces (a line break ends a table row, a blank line ends a block).
- ``&``, ``<`` and ``>`` become entities: no HTML element, comment or autolink can start.
- Markdown punctuation (``\\ ` * _ [ ] | ~ $``) is escaped with a backslash, which
  CommonMark renders as the character itself; ``_`` only where it could start or end
  emphasis (``order_id`` stays as written). A leading ``#``, ``-``, ``+`` or ``1.`` is
  escaped too, so a value cannot start a heading or a list.
- ``@`` is followed by ``&#8203;``, a zero-width space: GitHub (and GitLab) only mention
  an ``@`` followed directly by a name, so ``@org/team`` shows as written and pings nobody.
  An HTML entity would not do: GitHub finds mentions in the rendered text, after entities
  are decoded. The same zero-width space goes into ``#12`` (an issue reference), ``://``
  and ``www.`` (links GitHub makes from bare URLs), which then show as written, unlinked.
- Text can be cut to a number of characters (``…`` marks the cut) before it is escaped,
  so an entity or an escape is never cut in half.
- In code spans and fences, ``<details`` and ``</details`` get a zero-width space after
  the ``<``: inert there anyway, but :func:`sluice.bot.forge.github.fit` counts those
  tags in the text when it cuts a body to the forge's size limit.
- Not neutralised: GitLab's in-project references (``!12``, ``~label``, ``%milestone``)
  and emoji codes (``:tada:``), which link or draw inside the project and ping no one.

Jinja2 templates use :data:`FILTERS` and :func:`finalize`: every ``{{ value }}`` is
escaped as :func:`text` unless it is :class:`Markdown` already (a filter's result, or
Sluice's own Markdown marked with ``| md``), so a value a template forgets to filter is
shown literally, never rendered.

>>> text("</details><img src=x onerror=1>")
'&lt;/details&gt;&lt;img src=x onerror=1&gt;'
>>> text("a|b\\nc @org/team [l](http://x)")
'a\\\\|b c @&#8203;org/team \\\\[l\\\\](http:&#8203;//x)'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

ZERO_WIDTH = "&#8203;"
"""A zero-width space, as an entity (so that it is visible in the Markdown source)."""


class Markdown(str):
    """Text that is Markdown already: escaped here, or written by Sluice itself.

    >>> isinstance(code("x"), Markdown)
    True
    """

    __slots__ = ()


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE = re.compile(r"\s+")
# Escaped with a backslash wherever they are.
_PUNCTUATION = frozenset("\\`*[]|~$")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
# What GitHub links or pings in plain text: a mention, an issue reference, a bare URL.
_LINKERS = re.compile(r"@|#(?=\d)|:(?=//)|(?<![\w.])www(?=\.)", re.IGNORECASE)
_DETAILS = re.compile(r"<(?=/?details)", re.IGNORECASE)
# A value that would start a block at the start of a line: a heading, a list item, a rule.
_BLOCK_START = re.compile(r"^(?:[#+\-](?=[\s#\-]|$)|\d{1,9}(?=[.)](?:\s|$)))")


def _plain(value: Any, limit: int | None) -> str:
    """``value`` on one line, control characters replaced, cut to ``limit``."""
    text = _SPACE.sub(" ", _CONTROL.sub("\ufffd", "" if value is None else str(value)))
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def _unlink(text: str) -> str:
    """Put a zero-width space where GitHub would mention, reference or link.

    The raw character goes in here, on the plain text (an entity inserted after escaping
    could land inside another entity); :func:`_visible` writes it as the entity.
    """
    return _LINKERS.sub(lambda m: m.group() + "\u200b", text)


def _unfold(code_text: str) -> str:
    """``code_text`` (shown as code) with ``<details`` tags broken by a zero-width space.

    They are inert in code, but tools that cut a comment at a size limit count
    ``<details>`` and ``</details>`` in the text to close what they leave open.
    """
    return _DETAILS.sub("<\u200b", code_text)


def _visible(escaped: str) -> Markdown:
    return Markdown(escaped.replace("\u200b", ZERO_WIDTH))


def _escape_char(text: str, at: int) -> str:
    char = text[at]
    if char in "&<>":
        return _ENTITIES[char]
    if char in _PUNCTUATION:
        return "\\" + char
    if char == "_":
        before = text[at - 1] if at > 0 else " "
        after = text[at + 1] if at + 1 < len(text) else " "
        # order_id cannot open or close emphasis; _id, id_ and a _ b can.
        return "_" if before.isalnum() and after.isalnum() else "\\_"
    return char


def text(value: Any, limit: int | None = None) -> Markdown:
    """``value`` as literal inline Markdown: running text, a list item or a table cell.

    Args:
        value: Any value; None is empty, others are ``str(value)``.
        limit: Cut the text to this many characters (before escaping), ending it with ``…``.

    >>> text("order_id > 5 & *bold*")
    'order_id &gt; 5 &amp; \\\\*bold\\\\*'
    >>> text("# title"), text("- item"), text("1. first"), text("66.67%"), text("-5")
    ('\\\\# title', '\\\\- item', '1\\\\. first', '66.67%', '-5')
    >>> text("see #12, mail a@b.com or www.x.org")
    'see #&#8203;12, mail a@&#8203;b.com or www&#8203;.x.org'
    >>> text("x" * 10, limit=4)
    'xxx…'
    """
    plain = _unlink(_plain(value, limit))
    out = "".join(_escape_char(plain, at) for at in range(len(plain)))
    start = _BLOCK_START.match(out)
    if start is not None:
        end = start.end()
        out = (
            out[:end] + "\\" + out[end:]  # 1. -> 1\.
            if start.group()[0].isdigit()
            else "\\" + out
        )
    return _visible(out)


def code(value: Any, limit: int | None = None, *, table: bool = False) -> Markdown:
    """``value`` as an inline code span (on one line, whatever backticks it holds).

    Args:
        value: The text to show as code.
        limit: Cut the text to this many characters first, as :func:`text` does.
        table: The span is in a table cell. A ``|`` in a code span would end the cell
            there (and ``\\|`` would show its backslash), so text with one is written as
            ``<code>`` around :func:`text` instead.

    Inside a code span GitHub renders nothing, so ``<`` stays as written; only
    ``<details`` and ``</details`` get a zero-width space after the ``<`` (see
    :func:`fence`).

    >>> code("status <> 'x'")
    "`status <> 'x'`"
    >>> code("`a b` = 1")
    '`` `a b` = 1 ``'
    >>> code("a|b", table=True)
    '<code>a\\\\|b</code>'
    """
    plain = _plain(value, limit).strip()
    if not plain:
        return Markdown("` `")
    if table and "|" in plain:
        return Markdown(f"<code>{text(plain)}</code>")
    plain = _unfold(plain)
    longest = max((len(run) for run in re.findall(r"`+", plain)), default=0)
    fence = "`" * (longest + 1)
    return Markdown(f"{fence} {plain} {fence}" if longest else f"`{plain}`")


def html(value: Any, limit: int | None = None) -> Markdown:
    """``value`` as text inside raw HTML, e.g. between ``<summary>`` and ``</summary>``.

    Markdown is not read there, so nothing is backslash-escaped; HTML's characters become
    entities, and mentions, references and bare URLs get the zero-width space.

    >>> html("Samples of </summary><b>x</b> by @me")
    'Samples of &lt;/summary&gt;&lt;b&gt;x&lt;/b&gt; by @&#8203;me'
    """
    plain = _unlink(_plain(value, limit))
    return _visible("".join(_ENTITIES.get(char, char) for char in plain))


def fence(value: Any, info: str = "") -> Markdown:
    """``value`` as a fenced code block that nothing inside it can close.

    The fence is one backtick longer than the longest run of backticks in ``value`` (and
    at least three). Inside, GitHub renders nothing: no HTML, link or mention. A
    ``<details`` or ``</details`` inside gets a zero-width space after its ``<`` (shown the
    same), since tools that cut a comment count those tags in the text (``fit`` in
    :mod:`sluice.bot.forge.github`).

    >>> print(fence("a\\n```\\nb", "text"))
    ````text
    a
    ```
    b
    ````
    """
    body = _CONTROL.sub("\ufffd", "" if value is None else str(value))
    body = body.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
    body = _unfold(body)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    marks = "`" * max(3, longest + 1)
    label = re.sub(r"[^\w+.-]", "", info)
    return Markdown(f"{marks}{label}\n{body}\n{marks}")


_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,253}[A-Za-z0-9_])?(?:\[bot\])?")


_SEGMENT = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,253}[A-Za-z0-9_])?"
_TEAM = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})+")


def mention(login: Any, *, team: bool = False) -> Markdown:
    """``@login`` when ``login`` is a well-formed forge login (letters, digits, ``-``,
    ``_``, ``.``, an App's ``[bot]``), or with ``team`` a team or group path
    (``org/slug``, ``group/subgroup``); anything else is quoted as code, never mentioned.

    >>> mention("octo-cat"), mention("sluice[bot]"), mention("x](http://e.vil)")
    ('@octo-cat', '@sluice[bot]', '`x](http://e.vil)`')
    >>> mention("octo/data-eng", team=True), mention("x/../../user", team=True)
    ('@octo/data-eng', '`x/../../user`')
    """
    login = "" if login is None else str(login)
    ok = _TEAM.fullmatch(login) if team else _LOGIN.fullmatch(login)
    return Markdown(f"@{login}") if ok and ".." not in login else code(login, 40)


def trusted(value: Any) -> Markdown:
    """Sluice's own Markdown, shown as written (any user text in it escaped already)."""
    return value if isinstance(value, Markdown) else Markdown("" if value is None else value)


def finalize(value: Any) -> Any:
    """Jinja2's ``finalize``: every ``{{ value }}`` not already Markdown is :func:`text`.

    >>> finalize("<b>"), finalize(code("b")), finalize(None), finalize(3)
    ('&lt;b&gt;', '`b`', '', '3')
    """
    if isinstance(value, Markdown):
        return value
    if value is None:
        return ""
    return text(value)


FILTERS: dict[str, Callable[..., Markdown]] = {
    "text": text,
    "code": code,
    "html": html,
    "fence": fence,
    "md": trusted,
}
"""Jinja2 filters: ``{{ name | code }}``, ``{{ title | html }}``, ``{{ sluice_text | md }}``."""
