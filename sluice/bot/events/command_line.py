r"""Where a ``/sluice`` command stands in a comment: the one line of its Markdown that counts
as a command line (pure).

**The rule.** A comment holds a command when one of its lines is a *command line*: it
starts with ``/sluice`` (any case) after at most three spaces, followed by a space, a tab
or the end of the line; it is text of a paragraph (or heading, or table header) at the top
level of the comment as CommonMark, the Markdown of GitHub and GitLab, reads it; and that
paragraph starts the comment or follows a blank line, a closed fenced code block or a
closed HTML block. Only the first command line counts. So a ``/sluice`` line does not
count when it is:

- in a code block: fenced (three or more backticks or tildes, any info string, closed by
  a fence of the same character at least as long, or never closed) or indented (four
  spaces or a tab: ``\t/sluice plan`` is code);
- in a quote (``> ...``, the lines that continue it without a ``>``, GitLab's ``>>>``
  blocks) or in a list item (``- ...``, ``1. ...`` and the lines that continue it), or
  after quotes and list items nested more than 32 deep;
- in an HTML block (from a line starting with a tag, ``<!--``, ``<?``, ``<!X`` or
  ``<![CDATA[`` to the block's end);
- after HTML still open at that point, wherever it was opened (in code too): ``<!--``
  without ``-->``, a tag without its ``>``, an element such as ``<pre>``, ``<code>`` or
  ``<details>`` not closed yet (a closing tag counts only in an HTML block, or on a line
  of a paragraph with no backtick or ``[`` so far), or a comment an HTML block or a quote
  or list item opened and that outlives it;
- in a paragraph after a line holding any of `` ` < [ | $ `` (a code span, inline HTML,
  a link, an image, a table or math may run over lines and hide it), or in one that
  starts after a heading, a thematic break or a line of text (where Markdown readers
  differ), or soon after a link reference definition (up to a blank line followed by a
  line at column 0).

Where readings differ (GitLab's ``>>>`` quotes; the HTML block tags of CommonMark
0.29-0.31), a line counts only when every reading takes it for a command line. Only the
first 65,536 characters of a comment are read. In short: write the command on a line of
its own after a blank line, outside code, quotes, lists and HTML.

:func:`command_line` finds it, which is all the bot needs before it has checked the
author's permission.

>>> command_line('Looks good.\n\n/sluice plan')
'/sluice plan'
>>> command_line('```\n/sluice deploy\n```') is None
True
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Literal

PREFIX = "/sluice"
SCAN_LIMIT = 65_536
"""Characters of a comment read for a command (GitHub's own limit on a comment)."""
_NESTING = 32
"""Quotes and list items nested deeper than this hide the rest of a comment."""


# --- the command line -------------------------------------------------------------------

_LINE_END = re.compile(r"\r\n|\r|\n")
_CANDIDATE = re.compile(r" {0,3}/sluice(?=[ \t]|$)", re.IGNORECASE)
_MAYBE_SPECIAL = frozenset("#`~*+_=<>-0123456789")
_ATX = re.compile(r"#{1,6}(?: |$)")
_FENCE_OPEN = re.compile(r"`{3,}(?!.*`)|~{3,}")
_FENCE_CLOSE = re.compile(r"(`{3,}|~{3,}) *$")
_SETEXT = re.compile(r"(?:=+|-+) *$")
_BREAK = re.compile(r"(?:\* *){3,}$|(?:_ *){3,}$|(?:- *){3,}$")
_BULLET = re.compile(r"[*+-]")
_ORDERED = re.compile(r"(\d{1,9})[.)]")
_GITLAB_QUOTE = re.compile(r" {0,3}>>>[ \t]*$")
_DELIMITER_ROW = re.compile(r" {0,3}\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$")
_NOT_INERT = re.compile(r"[`<\[|$]")
_TICKS = re.compile(r"[`\[]")

# HTML blocks (CommonMark 4.6): the start of each type, and the end of types 1-5 (6 and 7
# end at a blank line). The block tags of type 6 differ between spec versions: "source"
# (0.29, GitHub's cmark-gfm) and "search" (0.31) are read both ways.
_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|"
    "details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|"
    "h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|"
    "optgroup|option|p|param|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
_HTML_START = {
    1: re.compile(r"<(?:script|pre|textarea|style)(?:\s|>|$)", re.IGNORECASE),
    2: re.compile(r"<!--"),
    3: re.compile(r"<\?"),
    4: re.compile(r"<![A-Za-z]"),
    5: re.compile(r"<!\[CDATA\["),
}
_HTML_END = {
    1: re.compile(r"</(?:script|pre|textarea|style)>", re.IGNORECASE),
    2: re.compile(r"-->"),
    3: re.compile(r"\?>"),
    4: re.compile(r">"),
    5: re.compile(r"\]\]>"),
}
_ATTRIBUTE = (
    r"(?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*"
    r"(?:\s*=\s*(?:[^\"'=<>`\x00-\x20]+|'[^']*'|\"[^\"]*\"))?)"
)
_HTML_TYPE7 = re.compile(
    rf"(?:<[A-Za-z][A-Za-z0-9-]*{_ATTRIBUTE}*\s*/?>|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$"
)
_EXTRA_BLOCK_TAGS = ("source", "search")
_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)


def _block_tags(extra: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join((_BLOCK_TAGS, *extra))
    return re.compile(rf"</?(?:{names})(?:\s|/?>|$)", re.IGNORECASE)


def command_line(body: str) -> str | None:
    """The comment's command line without its indentation, or None when it has none
    (see the module's docstring for the rule). Only enough of the comment is read to
    know whether it addresses Sluice: the arguments are not looked at."""
    text = body[:SCAN_LIMIT]
    lines = _LINE_END.split(text)
    complete = len(body) <= SCAN_LIMIT
    if not complete:
        lines.pop()  # may be cut; a paragraph still open at the cut is not read
    if not any(_CANDIDATE.match(line) for line in lines):
        return None
    html = _html_scan(lines)
    readings: list[tuple[bool, tuple[str, ...]]] = [(False, ())]
    if re.search(r"</?(?:source|search)", text, re.IGNORECASE):
        readings += [(False, (tag,)) for tag in _EXTRA_BLOCK_TAGS] + [(False, _EXTRA_BLOCK_TAGS)]
    if any(_GITLAB_QUOTE.match(line) for line in lines):
        readings += [(True, extra) for _, extra in list(readings)]
    found: set[int] | None = None
    for gitlab, extra in readings:
        reader = _Reader(_block_tags(extra), *html)
        for index, line in enumerate(_gitlab_quotes(lines) if gitlab else lines):
            reader.feed(index, line)
        commands = set(reader.finish(complete))
        found = commands if found is None else found & commands
        if not found:
            return None
    assert found is not None
    return lines[min(found)].lstrip(" ")


def _gitlab_quotes(lines: list[str]) -> list[str]:
    """``lines`` with GitLab's multi-line quotes (between two ``>>>`` lines; an unclosed one
    to the end) written as ``>`` quotes, as GitLab reads them."""
    out: list[str] = []
    inside = False
    for line in lines:
        if _GITLAB_QUOTE.match(line):
            inside = not inside
            out.append(">")
        else:
            out.append(f"> {line}" if inside else line)
    return out


_TOKEN = re.compile(
    r"<(?:(!--)|(\?)|(!\[CDATA\[)|(![A-Za-z])|(/?)([A-Za-z][A-Za-z0-9-]*)(?=[\s/>]|$))"
)
_TAG_END = re.compile(r"(?:[^>\"']++|\"[^\"]*+\"|'[^']*+')*+>")
_MARKUP_END = {1: "-->", 2: "?>", 3: "]]>", 4: ">"}


class _Finder:
    """Where ``needle`` next occurs in ``text`` from a position, for positions asked in
    increasing order (each search starts where the last one would have)."""

    def __init__(self, text: str, needle: str) -> None:
        self.text, self.needle, self.found = text, needle, -2

    def after(self, start: int) -> int:
        """The end of the next ``needle`` at or after ``start``; -1 when there is none."""
        if self.found == -1 or (self.found >= start):
            return self.found if self.found < 0 else self.found + len(self.needle)
        self.found = self.text.find(self.needle, start)
        return self.found if self.found < 0 else self.found + len(self.needle)


_Tag = tuple[str, bool, bool]  # name, closing, inside other markup
_Scan = tuple[list[bool], list[list[_Tag]], dict[int, int]]


def _html_scan(lines: list[str]) -> _Scan:
    """The raw HTML of a comment, read without Markdown (so, in code too).

    Returns, for each line, whether it starts inside a comment, processing instruction,
    declaration or CDATA section (to its CommonMark end: ``-->``, ``?>``, ``>``, ``]]>``;
    without one, to the end of the comment) or inside a tag whose ``>`` has not come; the
    tags that start on each line, as (name, closing, inside other markup), void and
    self-closing ones left out; and, for each line where such a construct starts and
    ends on a later line, that later line. Tags inside comments, instructions and other
    tags are listed too (flagged): that markup may be text after all (in code), or end
    sooner for a browser (``<!-->``, a processing instruction at its first ``>``)."""
    text = "\n".join(lines)
    starts: list[int] = []
    at = 0
    for text_line in lines:
        starts.append(at)
        at += len(text_line) + 1
    finders = {kind: _Finder(text, end) for kind, end in _MARKUP_END.items()}
    spans: list[tuple[int, int]] = []
    tags: list[list[_Tag]] = [[] for _ in lines]
    markup_end = -1  # the end of the construct being read
    pos = 0
    line = 0
    while (match := _TOKEN.search(text, pos)) is not None:
        begin = match.start()
        pos = match.end()
        while line + 1 < len(lines) and starts[line + 1] <= begin:
            line += 1
        nested = begin < markup_end
        kind = next((k for k in range(1, 5) if match.group(k) is not None), 0)
        if kind:
            if nested:
                continue
            end = finders[kind].after(match.end())
        else:
            name, closing = match.group(6).lower(), bool(match.group(5))
            if nested:
                tags[line].append((name, closing, True))
                continue
            found = _TAG_END.match(text, match.end())
            end = found.end() if found else -1
            if found and (closing or (name not in _VOID and text[end - 2] != "/")):
                tags[line].append((name, closing, False))
        if end < 0:  # never ends: the rest of the comment is inside it
            spans.append((begin, len(text) + 1))
            break
        spans.append((begin, end))
        markup_end = end
    inside = [False] * len(lines)
    reach = -1
    span = 0
    for index, start in enumerate(starts):
        while span < len(spans) and spans[span][0] < start:
            reach = max(reach, spans[span][1])
            span += 1
        inside[index] = start < reach
    multi: dict[int, int] = {}
    for begin, end in spans:
        first = bisect.bisect_right(starts, begin) - 1
        last = bisect.bisect_right(starts, end - 1) - 1
        if last > first:
            multi[first] = max(multi.get(first, 0), last)
    return inside, tags, multi


@dataclass
class _Box:
    """An open container block: a quote, or a list item whose content starts ``width``
    columns in."""

    quote: bool
    width: int = 0
    filled: bool = False


@dataclass
class _Leaf:
    """The open leaf block: a paragraph (its lines; ``top`` when it is not in a quote or
    list item), a fenced code block, an indented code block or an HTML block."""

    kind: Literal["paragraph", "fence", "code", "html"]
    top: bool = False
    trusted: bool = False
    ticked: bool = False  # a line of it held a backtick or a bracket
    lines: list[tuple[int, str]] = field(default_factory=list)
    fence: str = ""
    offset: int = 0
    html: int = 0


class _Reader:
    """CommonMark's block structure, line by line (the parsing strategy of the spec's
    appendix), kept only as far as it decides which lines are plain text of a top-level
    paragraph; :meth:`finish` returns the command lines found."""

    def __init__(
        self,
        block_tags: re.Pattern[str],
        inside: list[bool],
        tags: list[list[_Tag]],
        multi: dict[int, int],
    ) -> None:
        self.block_tags = block_tags
        self.inside = inside
        self.tags = tags
        self.multi = multi
        # Raw HTML running over lines from an HTML block, or from inside a quote or list:
        # (the line it ends on, whether it started in an HTML block, the containers then).
        self.spanning: list[tuple[int, bool, list[_Box]]] = []
        self.poisoned = False  # HTML left open for the browser: nothing after counts
        self.opened: list[str] = []  # HTML elements not closed yet
        self.open_at: list[bool] = []  # for each line read: whether one was open where it starts
        self.kind: Literal["code", "html", "text", "none"] = "none"  # what the last line was
        self.boxes: list[_Box] = []
        self.leaf: _Leaf | None = None
        self.found: list[int] = []
        self.clean = True  # the last line was blank or closed a top-level code or HTML block
        self.blank = True
        self.shadow = False  # after reference definitions, until a blank line and column 0
        self.shadowed: set[int] = set()

    def feed(self, index: int, raw: str) -> None:
        """Read the next line."""
        blank = not raw.strip(" \t")
        if self.shadow and self.blank and not blank and raw[0] not in " \t":
            self.shadow = False
        if self.shadow:
            self.shadowed.add(index)
        self.open_at.append(bool(self.opened))
        before = self.leaf
        ticked = before is not None and before.kind == "paragraph" and before.ticked
        self.clean = self._read(index, raw, clean=self.clean) or blank
        kind = self.kind
        self.blank = blank
        # Elements: every opening tag counts, even in code (a reading that can only hide
        # more); a closing tag only in an HTML block, or in text where no code span, link
        # or image may have turned it into text.
        leaf = self.leaf
        if kind == "text" and leaf is not None and leaf.kind == "paragraph":
            ticked = ticked if leaf is before else False
            leaf.ticked = ticked or bool(_TICKS.search(raw))
        closes = kind == "html" or (kind == "text" and not ticked and not _TICKS.search(raw))
        self._spans(index, kind)
        for name, closing, nested in self.tags[index]:
            if not closing:
                self.opened.append(name)
            elif closes and not nested and name in self.opened:
                # Only that element: browsers reopen the formatting elements (<code>, <b>
                # ...) a closing tag of an outer one pops, so the inner ones stay open.
                del self.opened[len(self.opened) - 1 - self.opened[::-1].index(name)]

    def _spans(self, index: int, kind: str) -> None:
        """A comment (or tag ...) that an HTML block opens is closed for the browser only
        by a ``-->`` (...) the page shows as HTML, not as escaped text; and one opened in a
        quote or list item that outlives it hides the container's end from the browser.
        Either way, everything after is taken as hidden."""
        still: list[tuple[int, bool, list[_Box]]] = []
        for end, from_html, boxes in self.spanning:
            if any(all(box is not open_box for open_box in self.boxes) for box in boxes):
                self.poisoned = True
            elif index == end:
                if from_html and kind != "html":
                    self.poisoned = True
            else:
                still.append((end, from_html, boxes))
        self.spanning = still
        last = self.multi.get(index)
        if last is not None and (kind == "html" or self.boxes):
            self.spanning.append((last, kind == "html", list(self.boxes)))

    def finish(self, complete: bool) -> list[int]:
        if complete:
            self._close_leaf()
        return self.found

    def _close_leaf(self) -> None:
        leaf, self.leaf = self.leaf, None
        if leaf is None or leaf.kind != "paragraph" or not leaf.top:
            return
        if not leaf.trusted or self.poisoned:
            return  # it does not start after a blank line, or HTML may hide it
        lines = leaf.lines
        for k, (index, raw) in enumerate(lines):
            if k > 0 and (
                _NOT_INERT.search(lines[k - 1][1]) or _DELIMITER_ROW.match(lines[k - 1][1])
            ):
                return  # something on an earlier line may run over this one
            if (
                _CANDIDATE.match(raw)
                and not self.inside[index]
                and not self.open_at[index]
                and index not in self.shadowed
            ):
                self.found.append(index)

    def _start(self, depth: int) -> None:
        """Make room for a new block in the ``depth``-th open container: close the leaf and
        every container below it."""
        self._close_leaf()
        del self.boxes[depth:]
        if self.boxes:
            self.boxes[-1].filled = True

    def _read(self, index: int, raw: str, *, clean: bool) -> bool:
        """The spec's algorithm for one line; True when the line closed a fenced code block
        or an HTML block (of types 1-5) outside any quote or list. Sets :attr:`kind`."""
        self.kind = "none"
        line = raw.expandtabs(4)
        size = len(line)
        pos = 0

        def ahead(at: int) -> tuple[int, int, bool]:
            nxt = at
            while nxt < size and line[nxt] == " ":
                nxt += 1
            return nxt, nxt - at, nxt >= size

        # 1. Which open blocks does the line continue?
        depth = 0  # containers matched
        leaf_matched = False
        for box in self.boxes:
            nxt, indent, blank = ahead(pos)
            if box.quote:
                if indent > 3 or nxt >= size or line[nxt] != ">":
                    break
                pos = nxt + 1
                if pos < size and line[pos] == " ":
                    pos += 1
            elif blank:
                if not box.filled:
                    break
                pos = nxt
            elif indent >= box.width:
                pos += box.width
            else:
                break
            depth += 1
        leaf = self.leaf
        if depth == len(self.boxes) and leaf is not None:
            nxt, indent, blank = ahead(pos)
            if leaf.kind == "paragraph":
                leaf_matched = not blank
            elif leaf.kind == "fence":
                closing = _FENCE_CLOSE.match(line, nxt) if indent <= 3 else None
                if (
                    closing
                    and closing.group(1)[0] == leaf.fence[0]
                    and len(closing.group(1)) >= len(leaf.fence)
                ):
                    self.leaf = None
                    self.kind = "code"
                    return not self.boxes
                leaf_matched = True
            elif leaf.kind == "code":
                leaf_matched = indent >= 4 or blank
            else:
                leaf_matched = not (blank and leaf.html >= 6)
        all_matched = depth == len(self.boxes) and (leaf is None or leaf_matched)
        in_paragraph = leaf_matched and leaf is not None and leaf.kind == "paragraph"

        # 2. Does a new block start here?
        if not (leaf_matched and leaf is not None and leaf.kind != "paragraph"):
            while True:
                nxt, indent, blank = ahead(pos)
                first = line[nxt] if nxt < size else ""
                if indent < 4 and first not in _MAYBE_SPECIAL:
                    break
                if len(self.boxes) >= _NESTING:
                    self.poisoned = True  # nothing after this counts
                    break
                rest = line[nxt:]
                if indent < 4 and first == ">":
                    self._start(depth)
                    self.boxes.append(_Box(quote=True))
                    depth += 1
                    pos = nxt + 1
                    if pos < size and line[pos] == " ":
                        pos += 1
                    in_paragraph = False
                    continue
                if indent < 4 and _ATX.match(rest):
                    self._start(depth)
                    self.kind = "text"
                    return False  # a heading: no command
                if indent < 4 and first in "`~" and (fence := _FENCE_OPEN.match(rest)):
                    self._start(depth)
                    self.leaf = _Leaf("fence", fence=fence.group(), offset=indent)
                    self.kind = "code"
                    return False
                if indent < 4 and first == "<":
                    lazy = (
                        not all_matched
                        and not blank
                        and self.leaf is not None
                        and (self.leaf.kind == "paragraph")
                    )
                    kind = self._html_kind(rest, allow_seven=not in_paragraph and not lazy)
                    if kind:
                        self._start(depth)
                        self.kind = "html"
                        if kind > 5 or not _HTML_END[kind].search(line, pos):
                            self.leaf = _Leaf("html", html=kind)
                            return False
                        return not self.boxes
                if indent < 4 and in_paragraph and _SETEXT.match(rest):
                    # The paragraph is a heading: shown as text all the same, and what
                    # follows a command never changes it.
                    self._close_leaf()
                    return False
                if indent < 4 and first in "*_-" and _BREAK.match(rest):
                    self._start(depth)
                    return False
                if indent < 4 and (item := self._list_item(line, nxt, in_paragraph)):
                    width, pos = item
                    self._start(depth)
                    self.boxes.append(_Box(quote=False, width=indent + width))
                    depth += 1
                    in_paragraph = False
                    continue
                if (
                    indent >= 4
                    and not blank
                    and (self.leaf is None or self.leaf.kind != "paragraph")
                ):
                    self._start(depth)
                    self.leaf = _Leaf("code")
                    self.kind = "code"
                    return False
                break

        # 3. The rest of the line is text.
        nxt, _indent, blank = ahead(pos)
        current = self.leaf
        if not all_matched and not blank and current is not None and current.kind == "paragraph":
            current.lines.append((index, raw))  # a lazy continuation line
            self.kind = "text"
            return False
        if not all_matched:
            if not leaf_matched:
                self._close_leaf()
            del self.boxes[depth:]
        current = self.leaf
        if current is not None and current.kind != "paragraph":
            self.kind = "html" if current.kind == "html" else "code"
            if (
                current.kind == "html"
                and current.html <= 5
                and _HTML_END[current.html].search(line, pos)
            ):
                self.leaf = None
                return not self.boxes
            return False
        if current is not None:
            current.lines.append((index, raw))
            self.kind = "text"
        elif not blank:
            self.kind = "text"
            if self.boxes:
                self.boxes[-1].filled = True
            top = not self.boxes
            self.leaf = _Leaf("paragraph", top=top, trusted=top and clean, lines=[(index, raw)])
            if top and re.match(r" {0,3}\[", raw):
                self.shadow = True  # reference definitions: readers differ about what follows
        return False

    def _html_kind(self, rest: str, *, allow_seven: bool) -> int:
        for kind, start in _HTML_START.items():
            if start.match(rest):
                return kind
        if self.block_tags.match(rest):
            return 6
        if allow_seven and _HTML_TYPE7.match(rest):
            return 7
        return 0

    @staticmethod
    def _list_item(line: str, nxt: int, in_paragraph: bool) -> tuple[int, int] | None:
        """A list item's marker at ``nxt``: (the columns from the marker to the content,
        where the content starts), or None."""
        marker = _BULLET.match(line, nxt)
        if marker is None:
            marker = _ORDERED.match(line, nxt)
            if marker is None or (in_paragraph and int(marker.group(1)) != 1):
                return None
        after = marker.end()
        if after < len(line) and line[after] != " ":
            return None
        if in_paragraph and not line[after:].strip(" "):
            return None  # an empty item cannot interrupt a paragraph
        spaces, at = 0, after
        while True:
            at += 1
            spaces += 1
            if not (spaces < 5 and at < len(line) and line[at] == " "):
                break
        width = after - nxt
        if spaces >= 5 or at >= len(line):
            return width + 1, min(after + 1, len(line))
        return width + spaces, at
