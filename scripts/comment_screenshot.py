"""Render a PR comment's Markdown as GitHub would show it, and take a screenshot.

    .venv/bin/python scripts/comment_screenshot.py tests/fixtures/comments/waiting.md \
        docs/images/pr-comment.png

The Markdown goes through cmark-gfm (GitHub's engine, the ``cmarkgfm`` package), each
```` ```mermaid ```` block through Mermaid's own CLI (``scripts/ensure-mermaid.sh``), and
the page through headless Chromium at 1,000 px wide. The README shows the result.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

ROOT = Path(__file__).resolve().parents[1]
MMDC = ROOT / ".cache/mermaid/node_modules/.bin/mmdc"
STYLE = """
body { font: 14px/1.5 -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif;
       color: #1f2328; margin: 16px; max-width: 968px; }
code { background: #eff1f3; padding: .1em .3em; border-radius: 4px; font-size: 85%; }
pre { background: #f6f8fa; padding: 12px; border-radius: 6px; overflow: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; }
tr:nth-child(2n) { background: #f6f8fa; }
h3, h4 { margin: 18px 0 8px; } details { margin: 6px 0; } summary { cursor: pointer; }
"""
BLOCK = re.compile(r'<pre lang="mermaid"><code>(.*?)</code></pre>', re.S)


def _mermaid_svg(source: str, work: Path, n: int) -> str:
    config = work / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": "/usr/bin/chromium",
                                  "args": ["--no-sandbox", "--disable-gpu"]}))  # fmt: skip
    src, out = work / f"g{n}.mmd", work / f"g{n}.svg"
    src.write_text(source)
    subprocess.run([str(MMDC), "-p", str(config), "-i", str(src), "-o", str(out)], check=True)
    return out.read_text()


def main(markdown_path: str, png_path: str) -> None:
    text = Path(markdown_path).read_text()
    body = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        count = iter(range(1000))
        body = BLOCK.sub(lambda m: _mermaid_svg(html.unescape(m.group(1)), work, next(count)), body)
        page = work / "comment.html"
        page.write_text(f"<!doctype html><meta charset=utf-8><style>{STYLE}</style>{body}")
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={Path(png_path).resolve()}", "--window-size=1000,1500",
             page.as_uri()],
            check=True, capture_output=True,
        )  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:3])
