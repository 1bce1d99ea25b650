"""The impact graph of the PR comment: a Mermaid flowchart (GitHub draws ```` ```mermaid ````
blocks) of the changed models and the models downstream they reach, coloured by kind of
change and labelled with their row change.

A big PR's graph collapses by depth: every model the PR changes itself (directly modified,
added, metadata) is always drawn, whatever their number; the models a change reaches are
drawn a depth at a time (their distance from the nearest change), as many whole depths as
keep the graph within :data:`MAX_NODES`, and the deeper ones are one "and N more
downstream" node, linked from the drawn models they read. Nodes are in risk order, names
in natural order within it.

Model names come from a pull request, so nothing of theirs reaches Mermaid's syntax:
node ids are made here (``m0``, ``m1``...), and every label is a quoted string in which
any character but ASCII letters, digits, space, ``_``, ``.`` and ``-`` is written as
Mermaid's entity code (``#35;``), which Mermaid shows as that character and never reads
as syntax, HTML or a directive.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.bot.present.impact import Row, risk, short_change
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


def _parents(plan: Plan, name: str) -> tuple[str, ...]:
    try:
        return tuple(plan.snapshot(name).model.depends_on)
    except StopIteration:
        return ()


def depths(plan: Plan, rows: Sequence[Row]) -> dict[str, int]:
    """Each row's distance from the nearest model the PR changes itself (0: it does):
    a model a change reaches is one deeper than the nearest changed model it reads."""
    indirect = {c.name for c in plan.indirectly_modified}
    names = {r.name for r in rows}
    depth = {r.name: 0 for r in rows if r.name not in indirect}
    waiting = [r.name for r in rows if r.name in indirect]
    while waiting:
        later = []
        for name in waiting:
            known = [depth[p] for p in _parents(plan, name) if p in depth]
            unknown = [p for p in _parents(plan, name) if p in names and p not in depth]
            if known and not unknown:
                depth[name] = min(known) + 1
            else:
                later.append(name)
        if len(later) == len(waiting):  # parents outside the rows (or a cycle): next to them
            for name in later:
                known = [depth[p] for p in _parents(plan, name) if p in depth]
                depth[name] = min(known) + 1 if known else 1
            break
        waiting = later
    return depth


def shown(plan: Plan, rows: Sequence[Row], max_nodes: int = MAX_NODES) -> list[Row]:
    """The rows the graph draws (see the module's docstring), in risk order."""
    nodes = sorted((r for r in rows if r.kind != "removed"), key=risk)
    depth = depths(plan, nodes)
    keep = {r.name for r in nodes if depth[r.name] == 0}
    for level in sorted({d for d in depth.values() if d > 0}):
        at = {r.name for r in nodes if depth[r.name] == level}
        if len(keep) + len(at) > max_nodes:
            break
        keep |= at
    return [r for r in nodes if r.name in keep]


def mermaid(plan: Plan, rows: Sequence[Row]) -> str:
    """The ```` ```mermaid ```` block, or "" when fewer than two models changed."""
    if len(rows) < 2:
        return ""
    nodes = [r for r in rows if r.kind != "removed"]
    drawn = shown(plan, rows)
    ids = {row.name: f"m{i}" for i, row in enumerate(drawn)}
    lines = ["flowchart LR"]
    for row in drawn:
        change = short_change(row)
        text = f"{row.name} · {change}" if change else row.name
        lines.append(f"  {ids[row.name]}[{label(text)}]:::{CLASSES.get(row.kind, 'metadata')}")
    edges = []
    for row in drawn:
        edges += [f"  {ids[p]} --> {ids[row.name]}" for p in _parents(plan, row.name) if p in ids]
    hidden = [r for r in nodes if r.name not in ids]
    if hidden:
        # The drawn models the hidden ones read (directly): where the graph goes on.
        edges += [
            f"  {ids[p]} --> more" for r in hidden for p in _parents(plan, r.name) if p in ids
        ]
    lines += sorted(set(edges), key=edges.index)
    if hidden:
        words = f"and {len(hidden)} more downstream"
        lines.append(f"  more[{label(words)}]:::more")
    used = {CLASSES.get(r.kind, "metadata") for r in drawn} | ({"more"} if hidden else set())
    lines += [f"  classDef {name} {STYLES[name]}" for name in STYLES if name in used]
    return md.fence("\n".join(lines), "mermaid")


def legend(plan: Plan, rows: Sequence[Row]) -> str:
    """One line saying what the colours mean (only those the graph uses)."""
    drawn = shown(plan, rows)
    words = {
        "breaking": "red: breaking",
        "reached": "yellow: reached by a breaking change",
        "added": "green: added",
        "nonbreaking": "blue: non-breaking",
        "metadata": "grey: metadata only",
    }
    used = {CLASSES.get(r.kind, "metadata") for r in drawn}
    return "; ".join(text for name, text in words.items() if name in used)
