"""The impact graph of the PR comment: a Mermaid flowchart (GitHub draws ```` ```mermaid ````
blocks) of the changed models and the models downstream they reach, coloured by kind of
change and labelled with their row change; at most :data:`MAX_NODES` nodes, then one
"and N more" node.

Model names come from a pull request, so nothing of theirs reaches Mermaid's syntax:
node ids are made here (``m0``, ``m1``...), and every label is a quoted string in which
any character but ASCII letters, digits, space, ``_``, ``.`` and ``-`` is written as
Mermaid's entity code (``#35;``), which Mermaid shows as that character and never reads
as syntax, HTML or a directive.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.bot.present.impact import Row, short_change
from sluice.core import markdown as md
from sluice.core.plan.plan import Plan

MAX_NODES = 25
MAX_LABEL = 60

# kind of row -> Mermaid class (and its colours)
CLASSES = {
    "removed": "removed",
    "breaking": "breaking",
    "breaking-indirect": "reached",
    "added": "added",
    "non-breaking": "nonbreaking",
    "non-breaking-indirect": "nonbreaking",
    "forward-only": "nonbreaking",
    "forward-only-indirect": "nonbreaking",
    "metadata": "metadata",
}
STYLES = {
    "breaking": "fill:#ffd7d5,stroke:#cf222e,color:#1f2328",
    "reached": "fill:#fff1c2,stroke:#bf8700,color:#1f2328",
    "removed": "fill:#eaeef2,stroke:#cf222e,color:#1f2328,stroke-dasharray:4",
    "added": "fill:#dafbe1,stroke:#1a7f37,color:#1f2328",
    "nonbreaking": "fill:#ddf4ff,stroke:#0969da,color:#1f2328",
    "metadata": "fill:#f6f8fa,stroke:#8c959f,color:#1f2328",
    "more": "fill:#ffffff,stroke:#8c959f,color:#1f2328,stroke-dasharray:4",
}
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.-")


def label(text: str) -> str:
    """``text`` as a quoted Mermaid label: safe characters as they are, all others as
    Mermaid entity codes; on one line, cut to :data:`MAX_LABEL` characters.

    >>> label('a.b"]; click x')
    '"a.b#34;#93;#59; click x"'
    """
    plain = " ".join(str(text).split())
    if len(plain) > MAX_LABEL:
        plain = plain[: MAX_LABEL - 1] + "…"
    return '"' + "".join(c if c in _SAFE else f"#{ord(c)};" for c in plain) + '"'


def mermaid(plan: Plan, rows: Sequence[Row]) -> str:
    """The ```` ```mermaid ```` block, or "" when fewer than two models changed or none
    reaches another (a table says it all)."""
    nodes = [r for r in rows if r.kind != "removed"]
    if len(rows) < 2:
        return ""
    shown = nodes[:MAX_NODES]
    ids = {row.name: f"m{i}" for i, row in enumerate(shown)}
    lines = ["flowchart LR"]
    for row in shown:
        change = short_change(row)
        text = f"{row.name} · {change}" if change else row.name
        lines.append(f"  {ids[row.name]}[{label(text)}]:::{CLASSES.get(row.kind, 'metadata')}")
    edges = []
    for row in shown:
        try:
            parents = plan.snapshot(row.name).model.depends_on
        except StopIteration:
            continue
        edges += [f"  {ids[p]} --> {ids[row.name]}" for p in parents if p in ids]
    lines += sorted(set(edges), key=edges.index)
    hidden = len(nodes) - len(shown)
    if hidden > 0:
        lines.append(f"  more[{label(f'and {hidden} more')}]:::more")
    used = {CLASSES.get(r.kind, "metadata") for r in shown} | ({"more"} if hidden > 0 else set())
    lines += [f"  classDef {name} {STYLES[name]}" for name in STYLES if name in used]
    return md.fence("\n".join(lines), "mermaid")


def legend(rows: Sequence[Row]) -> str:
    """One line saying what the colours mean (only those the graph uses)."""
    words = {
        "breaking": "red: breaking",
        "reached": "yellow: reached by a breaking change",
        "added": "green: added",
        "nonbreaking": "blue: non-breaking",
        "metadata": "grey: metadata only",
    }
    used = {CLASSES.get(r.kind, "metadata") for r in rows[:MAX_NODES]}
    return "; ".join(text for name, text in words.items() if name in used)
