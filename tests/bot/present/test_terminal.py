"""The PR comment for a terminal (``sluice pr``, ``sluice demo``): the golden comments
made plain, then rendered by rich."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sluice.bot.present.terminal import for_terminal, show

COMMENTS = Path(__file__).resolve().parents[2] / "fixtures" / "comments"


@pytest.mark.parametrize("name", sorted(p.stem for p in COMMENTS.glob("*.md")))
def test_every_comment_state_reads_as_text(name: str) -> None:
    markdown = (COMMENTS / f"{name}.md").read_text()
    text = for_terminal(markdown)
    for html in ("<!--", "<details", "</details>", "<summary>", "<sub>", "```mermaid"):
        assert html not in text, (name, html)
    # Each fold keeps its title, as a bold line.
    for title in [part.split("</summary>", 1)[0] for part in markdown.split("<summary>")[1:]]:
        assert f"**{title.strip()}**" in text, (name, title)
    out = io.StringIO()
    show(markdown, raw=False, file=out)
    shown = out.getvalue()
    headline = next(line for line in markdown.splitlines() if line.startswith("### "))
    assert headline.removeprefix("### ").split(" ", 1)[0] in shown  # the verdict's icon
    assert "**" not in shown and "| ---" not in shown  # Markdown rendered, not echoed


def test_raw_prints_the_markdown_as_the_forge_gets_it() -> None:
    markdown = (COMMENTS / "approved.md").read_text()
    out = io.StringIO()
    show(markdown, raw=True, file=out)
    assert out.getvalue() == markdown.rstrip() + "\n"
    piped = io.StringIO()  # not a terminal: raw unless asked otherwise
    show(markdown, file=piped)
    assert piped.getvalue() == out.getvalue()
