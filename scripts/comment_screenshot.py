"""Render a PR comment's Markdown as GitHub would show it, and take a screenshot.

    .venv/bin/python scripts/comment_screenshot.py tests/fixtures/comments/waiting.md \
        docs/images/pr-comment.png [--width 1000] [--column 880]

The comment is the golden file the product rendered (tests/fixtures/comments/, rewritten
with ``SLUICE_UPDATE_GOLDEN=1``, see tests/bot/present/test_comment_states.py). Its
Markdown goes through cmark-gfm (GitHub's engine, the ``cmarkgfm`` package), each
```` ```mermaid ```` block through Mermaid's own CLI (``scripts/ensure-mermaid.sh``), and
the page, styled as GitHub styles a comment (:data:`GITHUB_CSS`: tables scroll inside
themselves rather than widen the page, code wraps at spaces only), through Debian's
headless Chromium. The README shows the result; the tests lay out every golden comment
with the same page at 1,280 px and check that nothing in it is wider than that.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parents[1]
MMDC = ROOT / ".cache/mermaid/node_modules/.bin/mmdc"
CHROMIUM = "/usr/bin/chromium"
GITHUB_CSS = """
body { margin: 0; background: #fff; }
.markdown-body { box-sizing: border-box; padding: 16px 24px; color: #1f2328;
  font: 14px/1.5 -apple-system, 'Segoe UI', 'Noto Sans', Helvetica, Arial, sans-serif;
  word-wrap: break-word; }
.markdown-body > :first-child { margin-top: 0; }
.markdown-body p, .markdown-body blockquote, .markdown-body ul, .markdown-body table,
.markdown-body pre, .markdown-body details { margin: 0 0 16px; }
.markdown-body h3, .markdown-body h4 { margin: 24px 0 16px; font-weight: 600; line-height: 1.25; }
.markdown-body h3 { font-size: 1.25em; } .markdown-body h4 { font-size: 1em; }
.markdown-body ul { padding-left: 2em; }
.markdown-body code { padding: .2em .4em; margin: 0; font-size: 85%; white-space: break-spaces;
  background: rgba(129, 139, 152, .12); border-radius: 6px;
  font-family: ui-monospace, SFMono-Regular, 'SF Mono', Menlo, Consolas, 'Liberation Mono',
  monospace; }
.markdown-body pre { padding: 16px; overflow: auto; font-size: 85%; line-height: 1.45;
  background: #f6f8fa; border-radius: 6px; }
.markdown-body pre code { padding: 0; font-size: 100%; white-space: pre; word-break: normal;
  background: transparent; }
.markdown-body table { display: block; width: max-content; max-width: 100%; overflow: auto;
  border-spacing: 0; border-collapse: collapse; }
.markdown-body th, .markdown-body td { padding: 6px 13px; border: 1px solid #d1d9e0; }
.markdown-body th { font-weight: 600; }
.markdown-body tr:nth-child(2n) { background: #f6f8fa; }
.markdown-body blockquote { padding: 0 1em; color: #59636e; border-left: .25em solid #d1d9e0; }
.markdown-body summary { cursor: pointer; }
.markdown-body sub { font-size: 75%; }
.markdown-body svg { max-width: 100%; height: auto; }
"""
"""What of GitHub's own comment styles decides widths: padding, fonts, code that breaks
only at spaces, tables that scroll inside their box (``display: block; max-width: 100%;
overflow: auto``) and code blocks that do too."""
BLOCK = re.compile(r'<pre lang="mermaid"><code>(.*?)</code></pre>', re.S)


def github_html(markdown: str) -> str:
    """``markdown`` as GitHub's engine renders it (cmark-gfm with GitHub's extensions)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


COLUMN_AT_1280 = 880
"""The width of a comment's box on a pull request's page in a window 1,280 px wide: the
page's padding, the sidebar (about 300 px) and the avatars' column take the rest."""


def page(
    markdown: str, mermaid: Callable[[str], str] | None = None, *, column: int | None = None
) -> str:
    """A whole HTML page showing ``markdown`` as a GitHub comment; ``mermaid``: what a
    Mermaid block's source becomes (an SVG), else its block stays as code; ``column``:
    the comment box's width in px (else the page's)."""
    body = github_html(markdown)
    if mermaid is not None:
        body = BLOCK.sub(lambda m: mermaid(html.unescape(m.group(1))), body)
    width = "" if column is None else f' style="width: {column}px"'
    return (
        f"<!doctype html><meta charset=utf-8><style>{GITHUB_CSS}</style>"
        f'<div class="markdown-body"{width}>{body}</div>'
    )


def _mermaid_svg(source: str, work: Path, n: int) -> str:
    config = work / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": CHROMIUM,
                                  "args": ["--no-sandbox", "--disable-gpu"]}))  # fmt: skip
    src, out = work / f"g{n}.mmd", work / f"g{n}.svg"
    src.write_text(source)
    subprocess.run([str(MMDC), "-p", str(config), "-i", str(src), "-o", str(out)], check=True)
    return out.read_text()


def main(markdown_path: str, png_path: str, width: int = 1000, column: int | None = None) -> None:
    text = Path(markdown_path).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        count = iter(range(1000))
        document = work / "comment.html"
        draw = lambda src: _mermaid_svg(src, work, next(count))  # noqa: E731
        document.write_text(page(text, draw, column=column))
        subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={Path(png_path).resolve()}", f"--window-size={width},1500",
             document.as_uri()],
            check=True, capture_output=True,
        )  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("markdown")
    parser.add_argument("png")
    parser.add_argument("--width", type=int, default=1000, help="the page's width in px")
    parser.add_argument("--column", type=int, help="the comment box's width in px")
    args = parser.parse_args()
    main(args.markdown, args.png, args.width, args.column)
