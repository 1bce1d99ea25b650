"""Hostile PR comments: commands hidden in code, quotes and HTML never run, and nobody's
Markdown is echoed back before their permission is known.

Two halves:

- what counts as a command (:func:`sluice.bot.events.commands.parse_command`): many hand-written
  variants, then generated documents checked against an independent CommonMark reader
  (markdown-it-py, the parser ``rich`` ships): whenever Sluice takes a line for a command,
  that line must render as plain text at the start of a line of an ordinary paragraph,
  outside any code, quote, list, table, link, image, comment or other HTML element;
- what the bot says (``run_command.on_comment``), driven by real ``issue_comment``
  payloads through an in-memory GitHub (:class:`~sluice.bot.forge.memory.MemoryForge`)
  and through the local forge: the permission is asked before the arguments are read, a
  user without write permission gets one fixed reply holding nothing of theirs but their
  login, and writers' usage errors quote what they wrote as inline code that nothing can
  break out of. That a name which is no GitHub login is never put in a request's URL is
  checked at the wire, on the GitHub forge with PyGithub against the fake GitHub.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import responses
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from sluice.bot.events.command_line import command_line
from sluice.bot.events.commands import Command, parse_command
from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.job import Job
from sluice.bot.flow.run_command import on_comment
from sluice.bot.forge.github.client import github_client
from sluice.bot.forge.github.forge import GitHubForge
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge
from tests.helpers import accounts
from tests.helpers.cases import CASE_REPOSITORY_ID, realcase
from tests.helpers.github_wire import FakeGitHub

# --- what counts as a command ----------------------------------------------------------

HIDDEN = {
    # fenced code: backticks and tildes, any length, info strings, indented fences
    "fence": "```\n/sluice deploy\n```",
    "fence-info": "```bash\n/sluice deploy\n```",
    "fence-info-spaces": "```  shell  title='x'\n/sluice deploy\n```",
    "fence-4": "````\n/sluice deploy\n````",
    "fence-4-holds-3": "````\n```\n/sluice deploy\n```\n````",
    "fence-closed-only-by-longer": "````\n/sluice plan\n```\n/sluice deploy\n````",
    "fence-tilde": "~~~\n/sluice deploy\n~~~",
    "fence-tilde-info": "~~~ {.sh}\n/sluice deploy\n~~~",
    "fence-tilde-7": "~~~~~~~\n/sluice deploy\n~~~~~~~",
    "fence-tilde-not-closed-by-backticks": "~~~\n```\n/sluice deploy\n~~~",
    "fence-indented-3": "   ```\n/sluice deploy\n   ```",
    "fence-unclosed": "```\n/sluice deploy",
    "fence-unclosed-long": "text\n\n`````sql\nselect 1\n\n/sluice deploy\n````",
    "fence-interrupts-paragraph": "Try this:\n```\n/sluice deploy\n```",
    "fence-crlf": "```\r\n/sluice deploy\r\n```\r\n",
    "fence-cr": "```\r/sluice deploy\r```",
    # indented code (four spaces or a tab, not continuing a paragraph)
    "indented-4": "    /sluice deploy",
    "indented-after-blank": "Like this:\n\n    /sluice deploy",
    "indented-tab": "\t/sluice deploy",
    "indented-tab-after-blank": "Like this:\n\n\t/sluice deploy",
    "indented-space-tab": "  \t/sluice deploy",
    "indented-continuation": "Like this:\n    /sluice deploy",  # paragraph text at col 4
    # quotes
    "quote": "> /sluice deploy",
    "quote-no-space": ">/sluice deploy",
    "quote-indented": "   > /sluice deploy",
    "quote-nested": "> > /sluice deploy",
    "quote-lazy": "> @alice wrote:\n/sluice deploy",
    "quote-lazy-2": "> a\n> b\n/sluice deploy",
    "quote-fence": "> ```\n> /sluice deploy\n> ```",
    "gitlab-multiline-quote": ">>>\n/sluice deploy\n>>>",
    "gitlab-multiline-quote-text": "Someone said:\n\n>>>\nhi\n/sluice deploy\n>>>",
    # list items
    "list": "- /sluice deploy",
    "list-star": "* /sluice deploy",
    "list-ordered": "1. /sluice deploy",
    "list-ordered-paren": "2) /sluice deploy",
    "list-lazy": "- steps:\n/sluice deploy",
    "list-continued": "- steps:\n\n  /sluice deploy",
    "list-continued-3": "1. steps:\n\n   /sluice deploy",
    "task": "- [ ] /sluice deploy",
    # HTML blocks, comments and elements
    "comment": "<!-- /sluice deploy -->",
    "comment-multiline": "<!--\n/sluice deploy\n-->",
    "comment-blank-lines": "<!--\n\n/sluice deploy\n\n-->",
    "comment-inline": "Thanks <!--\n/sluice deploy\n-->",
    "comment-unclosed": "<!--\n\n/sluice deploy",
    "comment-after-text": "Template text\n<!--\n/sluice deploy\n-->",
    "pre": "<pre>\n/sluice deploy\n</pre>",
    "pre-blank-lines": "<pre>\n\n/sluice deploy\n\n</pre>",
    "pre-attrs": '<pre lang="sh">\n/sluice deploy\n</pre>',
    "pre-upper": "<PRE>\n/sluice deploy\n</PRE>",
    "code": "<code>\n/sluice deploy\n</code>",
    "code-blank-lines": "<code>\n\n/sluice deploy\n\n</code>",
    "code-inline-open": "see <code>\n/sluice deploy\n</code>",
    "code-in-earlier-paragraph": "see <code>\n\n/sluice deploy\n\n</code>",
    "pre-code": "<pre><code>\n/sluice deploy\n</code></pre>",
    "samp": "<samp>\n/sluice deploy\n</samp>",
    "textarea": "<textarea>\n/sluice deploy\n</textarea>",
    "script": "<script>\n/sluice deploy\n</script>",
    "style": "<style>\n/sluice deploy\n</style>",
    "details": "<details>\n\n/sluice deploy\n\n</details>",
    "div": "<div>\n/sluice deploy\n</div>",
    "div-hidden": "<div hidden>\n\n/sluice deploy\n\n</div>",
    "html-block-custom-tag": "<x-note>\n/sluice deploy\n</x-note>",
    "attribute": "<img alt='\n/sluice deploy\n'>",
    "attribute-over-blank-lines": "<div title='\n\n/sluice deploy\n\n'>x</div>",
    "processing-instruction": "<?\n/sluice deploy\n?>",
    "cdata": "<![CDATA[\n/sluice deploy\n]]>",
    "declaration": "<!X\n/sluice deploy\n>",
    "comment-open-for-browser": "<hr><!--\n\n/sluice plan\n\n-->\n\n/sluice deploy",
    "comment-swallows-list-end": "- <!--\n/sluice plan\n\n   <!-- note -->\n/sluice deploy",
    "tag-after-comment-in-code": "\t<!--\n <a href='x'>\n\n-->\n/sluice deploy",
    "closer-in-code": "<code>\n\n```\n</code>\n```\n\n/sluice deploy",
    "code-reopened": "<x-y>\n<code>\n</x-y>\n\n/sluice deploy",
    "list-after-reference": "[x]: /u\n2. a\n\n   /sluice deploy",
    # inline constructs that run over lines
    "code-span": "`\n/sluice deploy\n`",
    "code-span-2": "see ``\n/sluice deploy\n``",
    "image-alt": "![\n/sluice deploy\n](x.png)",
    "link-title": '[a](x "t\n/sluice deploy\n")',
    "link-destination": "[a](\n/sluice\n)",
    "reference-title": '[a]: /x "t\n/sluice deploy\n"',
    # headings and tables
    "atx-heading": "# /sluice deploy",
    "table-row": "| a |\n|---|\n/sluice deploy",
    # a paragraph that does not start after a blank line, a closed code block or HTML
    # block (readers may differ about where it starts)
    "after-heading": "# Release\n/sluice deploy",
    "after-thematic-break": "---\n/sluice deploy",
    "after-lazy-lines": "> > y\n    ```\n</x>\n- - -\n/sluice deploy",
    # not at the start of a line, or not the prefix at all
    "inline-code": "`/sluice deploy`",
    "mid-line": "I ran /sluice deploy yesterday",
    "escaped": "\\/sluice deploy",
    "entity": "&#47;sluice deploy",
    "nbsp": "\u00a0/sluice deploy",
    "zero-width": "\u200b/sluice deploy",
    "longer-word": "/sluiced deploy",
}


@pytest.mark.parametrize("body", HIDDEN.values(), ids=HIDDEN.keys())
def test_commands_in_code_quotes_lists_and_html_do_not_count(body: str) -> None:
    assert parse_command(body) is None
    assert parse_command(body + "\n") is None
    assert parse_command(body.replace("\n", "\r\n")) is None


# A hidden command, then a real one after a blank line: the region ends where it should
# and the real command runs.
AFTER_HIDDEN = [
    "fence",
    "fence-info",
    "fence-4-holds-3",
    "fence-tilde",
    "fence-tilde-info",
    "indented-after-blank",
    "quote",
    "quote-lazy",
    "quote-fence",
    "list",
    "list-lazy",
    "comment",
    "comment-multiline",
    "comment-blank-lines",
    "comment-inline",
    "pre",
    "pre-blank-lines",
    "code",
    "code-span",
    "image-alt",
    "table-row",
    "atx-heading",
    "gitlab-multiline-quote",
]


@pytest.mark.parametrize("name", AFTER_HIDDEN)
def test_a_command_after_a_hidden_one_still_runs(name: str) -> None:
    assert parse_command(HIDDEN[name] + "\n\n/sluice plan\n") == Command("plan")


VISIBLE = {
    "alone": "/sluice deploy",
    "indent-3": "   /sluice deploy",
    "after-text": "Looks good to me.\n/sluice deploy",
    "after-blank": "Looks good to me.\n\n/sluice deploy",
    "after-fence": "```\n/sluice plan\n```\n/sluice deploy",
    "after-quote-and-blank": "> why?\n\n/sluice deploy",
    "after-list-and-blank": "- one\n- two\n\n/sluice deploy",
    "after-closed-comment": "<!-- PR template -->\n/sluice deploy",
    "after-closed-comment-block": "<!--\ntemplate\n-->\n/sluice deploy",
    "after-closed-pre": "<pre>\nlog\n</pre>\n\n/sluice deploy",
    "after-closed-code": "see <code>x</code>\n\n/sluice deploy",
    "after-html-block": "<details><summary>Log</summary>\n\nx\n\n</details>\n\n/sluice deploy",
    "tab-after-prefix": "/sluice\tdeploy",
    # a heading or a table's header row is shown as text, and what follows a command
    # never changes it
    "setext-heading": "/sluice deploy\n==============",
    "setext-heading-2": "/sluice deploy\n---",
    "upper-case": "/SLUICE DEPLOY",
    "crlf": "thanks\r\n/sluice deploy\r\n",
    "emphasised-before": "**LGTM**\n/sluice deploy",
}


@pytest.mark.parametrize("body", VISIBLE.values(), ids=VISIBLE.keys())
def test_commands_written_plainly_run(body: str) -> None:
    assert parse_command(body) == Command("deploy")


@pytest.mark.parametrize("body", ["/sluice plan | x\n---|---", "text\n/sluice plan | x\n-|-"])
def test_a_table_header_row_is_shown_as_text(body: str) -> None:
    assert command_line(body) == "/sluice plan | x"
    assert rendered_as_plain_line(body, "/sluice plan")  # the first cell


# -- generated documents against an independent CommonMark reader ------------------------

_MD = MarkdownIt("commonmark").enable("table")
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
         "source", "track", "wbr"}  # fmt: skip


class _Plain(HTMLParser):
    """Text that sits directly in a top-level paragraph, heading or table header, with
    nothing else open."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.plain: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self.stack in (["p"], ["h1"], ["h2"], ["table", "thead", "tr", "th"]):
            self.plain.append(data)


def _browser_comments(html: str) -> str:
    """``html`` without its comments as a browser reads them, in order: ``<!-->`` and
    ``<!--->`` end at once, a comment without ``-->`` runs to the end, and ``<?`` or ``<!``
    (bogus comments) end at the first ``>`` (Python's parser differs on the first two)."""
    out, at = [], 0
    while (start := html.find("<", at)) >= 0:
        out.append(html[at:start])
        if html.startswith(("<!-->", "<!--->"), start):
            at = html.index(">", start) + 1
        elif html.startswith("<!--", start):
            end = html.find("-->", start + 4)
            if end < 0:
                return "".join(out)
            at = end + 3
        elif html.startswith(("<?", "<!"), start):
            end = html.find(">", start)
            if end < 0:
                return "".join(out)
            at = end + 1
        else:
            out.append("<")
            at = start + 1
    return "".join(out) + html[at:]


def rendered_as_plain_line(body: str, line: str) -> bool:
    """Whether CommonMark (markdown-it-py, with tables) renders ``line`` as the start of a
    line of plain text in a top-level paragraph (or heading, or table header)."""
    reader = _Plain()
    reader.feed(_browser_comments(_MD.render(body)))
    reader.close()
    text = line.strip()
    for data in reader.plain:
        for part in data.split("\n"):
            if part.strip() == text or part.startswith(text):
                return True
    return False


_PIECES = [
    "```", "````", "~~~", "```sh", "~~~ text", "   ```", "    ```",
    ">", "> ", "> quoted", ">>>", "> ```",
    "- item", "* item", "1. item", "2) item", "-", "  - nested", "   ",
    "    indented", "\tindented",
    "<!--", "-->", "<!-- note -->", "<pre>", "</pre>", "<code>", "</code>", "<div>",
    "</div>", "<details>", "</details>", "<br>", "<?", "?>",
    "`", "``", "see `x", "![", "](x.png)", "[a](x", '"t', ")",
    "| a | b |", "|---|---|", "---", "===", "# title", "***",
    "text", "Looks good", "**bold**", "_em", "a <b", "&amp;",
    "",
]  # fmt: skip
_COMMANDS = ["/sluice plan", "  /sluice plan", "   /sluice help", "/sluice deploy",
             "/Sluice plan", "/sluice"]  # fmt: skip


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A comment of fragments and command lines, each command line made unique."""
    lines: list[str] = []
    commands: list[str] = []
    for _ in range(draw(st.integers(1, 14))):
        if draw(st.integers(0, 3)) == 0:
            command = draw(st.sampled_from(_COMMANDS))
            unique = f"{command} x{len(commands)}" if command.strip() != "/sluice" else command
            lines.append(unique)
            commands.append(unique)
        else:
            lines.append(draw(st.sampled_from(_PIECES)))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return ending.join(lines), commands


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example(("> a\n```\ncode\n\n/sluice plan x0\n```", ["/sluice plan x0"]))
@example(("> ```\n> quoted\n```\n/sluice plan x0\n```", ["/sluice plan x0"]))
@example(("- ```\n  code\n\n/sluice plan x0\n```", ["/sluice plan x0"]))
@example(("text\n<div>\n```\n\n/sluice plan x0\n```", ["/sluice plan x0"]))
def test_a_command_is_always_plain_text_of_a_top_level_paragraph(
    case: tuple[str, list[str]],
) -> None:
    body, _commands = case
    line = command_line(body)
    if line is None:
        return
    assert rendered_as_plain_line(body.replace("\r\n", "\n"), line), (body, line)


@pytest.mark.parametrize("body", VISIBLE.values(), ids=VISIBLE.keys())
def test_the_reader_agrees_the_plain_commands_are_plain(body: str) -> None:
    if "\t" in body:  # markdown-it keeps the tab; the line is plain all the same
        body = body.replace("\t", " ")
    assert rendered_as_plain_line(body, "/sluice deploy".upper() if "SLUICE" in body
                                  else "/sluice deploy")  # fmt: skip


# Where CommonMark shows the line as plain text, Sluice is stricter on purpose: GitLab's
# quotes, a continuation line indented like code, an element left open in an earlier
# paragraph (browsers carry an open <code> into the next paragraph; this reader does not),
# a paragraph that starts right after a heading or a thematic break.
STRICTER = {"indented-continuation", "gitlab-multiline-quote", "gitlab-multiline-quote-text",
            "code-in-earlier-paragraph", "after-heading", "after-thematic-break",
            "code-reopened"}  # fmt: skip


@pytest.mark.parametrize("name", [n for n, b in HIDDEN.items() if re.search(
    r"(?m)^[ \t]*/sluice(?![a-z])", b)])  # fmt: skip
def test_the_reader_agrees_the_hidden_commands_are_hidden(name: str) -> None:
    body = HIDDEN[name]
    line = next(x for x in re.split(r"\r\n|\r|\n", body) if x.lstrip().startswith("/sluice"))
    assert rendered_as_plain_line(body.replace("\r\n", "\n").replace("\r", "\n"), line) == (
        name in STRICTER
    ), body


def test_quotes_and_lists_nested_too_deep_hide_the_rest() -> None:
    assert parse_command("- " * 33 + "x\n\n/sluice plan") is None
    assert parse_command("- " * 30 + "x\n\n/sluice plan") == Command("plan")
    assert parse_command("/sluice plan\n\n" + "> " * 40 + "x") == Command("plan")


HEAVY = {
    "lines": "/sluice plan\n" + "a\n" * 32_000,
    "nested-lists-on-one-line": "/sluice plan\n" + "- " * 30_000,
    "nested-quotes-on-one-line": "/sluice plan\n" + ">" * 60_000,
    "open-tags": "/sluice plan\n" + "<a " * 21_000,
    "tags": "/sluice plan\n" + "<a>" * 21_000,
    "comments": "/sluice plan\n" + "<!--" * 16_000,
    "instructions": "/sluice plan\n" + "<?a>" * 16_000,
    "fences": "/sluice plan\n" + "```\n" * 16_000,
    "quoted-attribute": "/sluice plan\n<a title='" + "<b " * 20_000 + "'>",
    "every-reading": "/sluice plan\n" + ">>>\n<source>\n<search>\n" * 2_500,
    "thematic-breaks": "/sluice plan\n" + ("- " * 100 + "x\n") * 300,
}


@pytest.mark.parametrize("body", HEAVY.values(), ids=HEAVY.keys())
def test_hostile_comments_are_read_in_bounded_time(body: str) -> None:
    # A hang guard, not a speed measure: these read in 0.01-0.6 s; anything quadratic in
    # 16,000-60,000 repetitions takes minutes, far past this bound on any machine.
    started = time.perf_counter()
    assert parse_command(body) == Command("plan")
    assert time.perf_counter() - started < 30.0


def test_long_comments_are_read_up_to_the_scan_limit() -> None:
    filler = ("word " * 15 + "\n") * 2000  # about 160,000 characters
    assert parse_command("/sluice plan\n\n" + filler) == Command("plan")
    assert parse_command(filler + "\n/sluice plan\n") is None


# --- what the bot says ------------------------------------------------------------------

OWNER = "octo/warehouse"
HEAD = "a" * 40
REFUSAL = (
    "@{who} only users with write permission on this repository may run Sluice commands "
    "(your permission: {role}). Ask a maintainer to run it."
)


class Bot:
    """A flow on SQLite talking to an in-memory GitHub."""

    def __init__(self, root: Path, github: MemoryForge) -> None:
        self.github = github
        url = f"sqlite:///{root / 'state.db'}"
        self.deps = make_deps(project_python="on", forge_for=lambda _event: github, workdir=root / "work",
                              state_url=url)  # fmt: skip

    def comment(self, user: str, body: str) -> int:
        """``user`` writes ``body`` on PR 7, then its webhook; the comment's id."""
        comment_id = self.github.add_comment(7, user, body)
        payload = realcase("github/issue_comment/drone-go-scm__comment.json", OWNER,
                           action="created", **{
            "issue.number": 7, "comment.user.login": user, "comment.body": body,
            "comment.id": comment_id,
        })  # fmt: skip
        # Its author's account id, as GitHub's webhook says it (the forge's own).
        event = parse_github("issue_comment", accounts.github(payload, self.github.account_id))
        assert event is not None
        dispatch.handle(self.deps, event)
        return comment_id

    def replies(self) -> list[str]:
        return self.github.bot_comments(7)

    def asked(self) -> list[str]:
        """Whose permission the bot asked the forge."""
        return [str(args[0]) for name, args in self.github.calls if name == "permission"]


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.repositories[CASE_REPOSITORY_ID] = github.repo  # the id the bodies carry
    github.commit("b" * 40, {"config.yaml": "sluice:\n  project: jaffle\n"}, branch="main")
    github.roles.update({"bob": "write", "carol": "admin", "dave": "read"})
    github.open_pull(7, head_sha=HEAD, base="main", author="alice")
    made = Bot(tmp_path, github)
    yield made
    made.deps.close()


def _html(markdown: str) -> tuple[set[str], list[str]]:
    """The elements ``markdown`` renders to (CommonMark, raw HTML allowed, as a forge before
    its sanitiser) and its text outside ``<code>``."""
    tags: set[str] = set()
    outside: list[str] = []

    class Reader(HTMLParser):
        depth = 0

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            tags.add(tag)
            self.depth += tag == "code"

        def handle_endtag(self, tag: str) -> None:
            self.depth -= tag == "code"

        def handle_data(self, data: str) -> None:
            if not self.depth:
                outside.append(data)

    reader = Reader()
    reader.feed(_MD.render(markdown))
    reader.close()
    return tags, outside


MALFORMED = {
    "diff-link-image-mention": "/sluice diff [x](https://evil.example) ![i](https://evil.example/i.png) @octo/admins",
    "plan-html": "/sluice plan <img src=x onerror=alert(1)> @octo/admins",
    "unknown-backticks": "/sluice `x` ``` [click](https://evil.example)",
    "unclosed-quote": "/sluice diff 'a.b <b>bold</b>",
    "bad-option": "/sluice diff a.b --x=<script>alert(1)</script>",
    "long": "/sluice diff " + "[a](https://evil.example)" * 400,
    "help-args": "/sluice help me @everyone",
}  # fmt: skip


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
@pytest.mark.parametrize(("user", "role"), [("mallory", "none"), ("dave", "read")])
def test_a_user_without_write_permission_gets_one_fixed_reply(
    bot: Bot, body: str, user: str, role: str
) -> None:
    bot.comment(user, body)
    assert bot.replies() == [REFUSAL.format(who=user, role=role)]
    assert bot.github.reactions(7) == []
    assert bot.asked() == [user], "the permission is asked before anything is said"
    first = next(i for i, (name, _) in enumerate(bot.github.calls) if name == "permission")
    assert bot.github.writes(first) == bot.github.writes()  # ... before anything is said


def test_a_non_writer_in_code_or_quote_gets_nothing(bot: Bot) -> None:
    for body in ("```\n/sluice deploy\n```", "> /sluice deploy", "<!-- /sluice deploy -->"):
        bot.comment("mallory", body)
    assert bot.replies() == [] and bot.github.reactions(7) == []
    assert bot.github.writes() == []


WRITER_ERRORS = {
    "model-breaks-code-span": ("/sluice diff a`<img/src=x>`b", "is not a model name"),
    "model-mention": ("/sluice diff @octo/admins", "is not a model name"),
    "model-link": ("/sluice diff [x](https://evil.example)", "is not a model name"),
    "option-html": ("/sluice diff a.b --x`<b>`", "unknown option"),
    "unknown-subcommand": ("/sluice `<img src=x>`", "is not a Sluice command"),
    "unknown-mention": ("/sluice @octo/admins", "is not a Sluice command"),
    "plan-args": ("/sluice plan ![i](https://evil.example/i.png)", "takes no arguments"),
    "long-model": ("/sluice diff " + "`a`" * 3000, "is not a model name"),
}


@pytest.mark.parametrize(("body", "said"), WRITER_ERRORS.values(), ids=WRITER_ERRORS.keys())
def test_a_writer_usage_error_quotes_the_text_as_code_nothing_can_leave(
    bot: Bot, body: str, said: str
) -> None:
    bot.comment("bob", body)
    [reply] = bot.replies()
    assert said in reply
    # An unknown subcommand gets the help, which names no one.
    assert reply.startswith("@bob ") or said == "is not a Sluice command"
    tags, outside = _html(reply)
    assert tags <= {"p", "code", "table", "thead", "tbody", "tr", "th", "td", "strong"}, reply
    text = " ".join(outside)
    for word in ("evil", "@octo", "img", "<b>", "src=", "[x]"):
        assert word not in text, (word, reply)
    assert len(reply) < 2500  # the help table is about 900 characters
    assert text.count("@") == text.count("@bob") <= 1  # only @bob, outside code


def test_a_writer_usage_error_says_what_they_wrote_and_the_usage(bot: Bot) -> None:
    comment_id = bot.comment("bob", "/sluice plan now")
    [reply] = bot.replies()
    assert reply == (
        "@bob `/sluice plan` takes no arguments (you wrote `/sluice plan now`). "
        "Usage: `/sluice plan`"
    )
    assert bot.github.reactions(7) == [(comment_id, "confused")]


NOT_LOGINS = [
    "evil<img src=x>",
    "x](https://evil.example)",
    "a b",
    "-dash",
    "@octo",
    "tea`m",
    "../../orgs/octo",
    "x/../../user",
]


@pytest.mark.parametrize("login", NOT_LOGINS)
def test_a_login_that_is_not_one_is_never_a_mention(bot: Bot, login: str) -> None:
    bot.comment(login, "/sluice deploy now")
    [reply] = bot.replies()
    assert not reply.startswith("@")
    tags, outside = _html(reply)
    assert "img" not in tags and "a" not in tags
    assert "@" not in " ".join(outside)
    assert "your permission: none" in reply


@pytest.mark.parametrize("login", NOT_LOGINS)
def test_a_login_that_is_not_one_is_not_asked_of_github(login: str) -> None:
    """Not a GitHub login: the GitHub forge does not ask GitHub (it would be a path in the
    request's URL) and answers ``none``."""
    github = FakeGitHub(repo=OWNER)
    github.permissions[login] = "admin"  # were it asked, the answer would be a writer
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        client = github_client(repo=OWNER, token="ghp_hostileToken",
                               seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
        assert GitHubForge(client, OWNER).permission(login) == "none"
        assert GitHubForge(client, OWNER).permission("dave") == "none"  # asked: a stranger
    assert [url for _, url in github.requests if "/collaborators/" in url] == [
        f"https://api.github.com:443/repos/{OWNER}/collaborators/dave/permission"
    ]


def _local(tmp_path: Path) -> tuple[LocalForge, Deps]:
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"],
                 ["branch", "change"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    forge = LocalForge(repo)
    forge.open_pull("main", "change", "alice")
    store = forge.store
    (store / "collaborators.json").write_text('{"alice": "write"}')
    url = f"sqlite:///{tmp_path / 'state.db'}"
    return forge, make_deps(project_python="on", forge_for=lambda _e: forge, workdir=tmp_path / "w",
                                     state_url=url)  # fmt: skip


@pytest.mark.parametrize(
    ("user", "shown"),
    [("Jane Doe", "`Jane Doe`"), ("x<img src=y>", "`x<img src=y>`"), ("a`b", "`` a`b ``")],
)
def test_the_local_forge_quotes_a_user_name_that_is_no_login(
    tmp_path: Path, user: str, shown: str
) -> None:
    forge, deps = _local(tmp_path)
    try:
        body = "/sluice diff `x`<img src=z>"
        comment_id = forge.add_comment(1, user, body)
        on_comment(Job.start(deps, forge), CommentEvent(
            forge="local", repo=forge.repo, installation_id=None, action="created", number=1,
            comment_id=comment_id, author=user, body=body,
        ))  # fmt: skip
    finally:
        deps.close()
    [reply] = forge.replies(1)
    assert reply.startswith(f"{shown} only users with write permission"), reply
    assert "<img src=z>" not in reply
