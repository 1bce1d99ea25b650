"""A tree of lines for the terminal, drawn with guide characters, printed in one write.

rich's ``Tree`` lays out and wraps every node on its own, which costs about a tenth of a
millisecond per node: a 1,000-model plan has 2,000 of them. A plan's tree only needs its
guides, so this module draws them itself and prints the whole tree at once. Labels are
rich markup; each line is left whole (a terminal wraps a long one), and output without
colours (a pipe, a file, a CI log) skips rich altogether.

>>> import io
>>> from rich.console import Console
>>> root = Node("plan")
>>> added = root.add("[green]Added (2)[/]")
>>> _ = added.add("s.orders"), added.add("s.\\\\[x]")
>>> _ = root.add("Backfill").add("s.orders: full refresh\\nand one more line")
>>> console = Console(file=io.StringIO(), color_system=None)
>>> print_tree(root, console)
>>> print(console.file.getvalue(), end="")
plan
├── Added (2)
│   ├── s.orders
│   └── s.[x]
└── Backfill
    └── s.orders: full refresh
        and one more line
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

# (space, continuing line, a child that has siblings after it, the last child)
UNICODE_GUIDES = ("    ", "│   ", "├── ", "└── ")
ASCII_GUIDES = ("    ", "|   ", "+-- ", "`-- ")


@dataclass
class Node:
    """A label (rich markup; lines after its first are indented under it) and the
    nodes under it."""

    label: str
    children: list[Node] = field(default_factory=list)

    def add(self, label: str) -> Node:
        """A new child labelled ``label`` (rich markup); returned so it can have children."""
        child = Node(label)
        self.children.append(child)
        return child


def lines(root: Node, guides: tuple[str, str, str, str] = UNICODE_GUIDES) -> Iterator[str]:
    """The tree's lines, top to bottom: each label after the guides that place it. The
    guides hold no markup, so each line is still markup."""
    yield root.label
    todo: list[tuple[str, Node, bool]] = [
        ("", child, i == len(root.children) - 1) for i, child in enumerate(root.children)
    ][::-1]
    while todo:
        prefix, node, last = todo.pop()
        below = prefix + (guides[0] if last else guides[1])
        first, *more = node.label.split("\n")
        yield f"[dim]{prefix}{guides[3] if last else guides[2]}[/]{first}"
        yield from (f"[dim]{below}[/]{line}" for line in more)
        count = len(node.children)
        todo.extend((below, node.children[i], i == count - 1) for i in reversed(range(count)))


def print_tree(root: Node, console: Console) -> None:
    """Print ``root``'s tree on ``console``: guides in ASCII where its encoding has no box
    characters; plain text, without rich's layout, where it shows no colour."""
    utf = console.encoding.lower().startswith("utf")
    drawn = lines(root, UNICODE_GUIDES if utf else ASCII_GUIDES)
    if console.color_system is None and not console.record:
        console.file.write("".join(Text.from_markup(line).plain + "\n" for line in drawn))
        console.file.flush()
        return
    console.print("\n".join(drawn), soft_wrap=True, highlight=False)
