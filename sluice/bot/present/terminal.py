"""What Sluice wrote on a PR, for a terminal: the same Markdown with what only a forge's
web page shows turned into text, rendered by rich (tables, quotes, code); or, piped or
with ``--raw``, the Markdown itself.

>>> print(for_terminal('<!-- sluice:pr-comment -->\\n<details><summary>SQL diff</summary>\\n\\n'
...                    '```diff\\n+x\\n```\\n</details>\\n<sub>Sluice</sub>'))
**SQL diff**
<BLANKLINE>
```diff
+x
```
<BLANKLINE>
Sluice
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from rich.console import Console
from rich.markdown import Markdown

_HIDDEN = re.compile(r"<!--.*?-->\n?", re.S)
# The impact graph (a Mermaid block and its colour legend): the impact table says the
# same in words, and a terminal cannot draw it.
_GRAPH = re.compile(r"```mermaid\n.*?```\n*(<sub>[^<\n]*</sub>\n)?", re.S)
_FOLD = re.compile(r"<details>\s*<summary>(.*?)</summary>", re.S)
_TAGS = re.compile(r"</details>|</?sub>|<br\s*/?>")


def for_terminal(markdown: str) -> str:
    """``markdown`` with its HTML (folds, small print, comments) and graph made plain."""
    text = _HIDDEN.sub("", markdown)
    text = _GRAPH.sub("", text)
    text = _FOLD.sub(lambda m: f"**{m.group(1).strip()}**", text)
    return re.sub(r"\n{3,}", "\n\n", _TAGS.sub("", text)).strip("\n")


def show(markdown: str, *, raw: bool | None = None, file: TextIO | None = None) -> None:
    """Print ``markdown``: rendered when the output is a terminal (``raw`` None) or
    ``raw`` is False, as it is when ``raw`` is True or the output is piped."""
    out = file or sys.stdout
    if raw is None:
        raw = not out.isatty()
    if raw:
        out.write(markdown.rstrip() + "\n")
        return
    Console(file=out, force_terminal=None if file is None else False, emoji=False).print(
        Markdown(for_terminal(markdown))
    )
