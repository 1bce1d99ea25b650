"""docs/architecture.md names every module of the package (its layout block), so that a
newcomer can name each module's job from the page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("## Layout", 1)[1].split("```")[1]


def _named(module: Path, layout: str) -> bool:
    """The module's file name is listed, or a folder holding it is, with its job."""
    if re.search(rf"(?<![\w/]){re.escape(module.name)}\b", layout):
        return True
    if re.search(rf"(?<![\w/]){re.escape(module.parent.name)}/{re.escape(module.name)}\b", layout):
        return True
    folders = module.relative_to(ROOT / "sluice").parts[1:-1]
    return any(re.search(rf"(?m)^\s*{re.escape(f)}/\s+\S", layout) for f in folders)


def test_every_module_is_named_in_the_architecture_page() -> None:
    layout = _layout()
    modules = [p for p in (ROOT / "sluice").rglob("*.py") if p.name != "__init__.py"]
    assert len(modules) > 50
    missing = [str(p.relative_to(ROOT)) for p in modules if not _named(p, layout)]
    assert missing == [], f"add these to docs/architecture.md's layout: {missing}"


def test_a_module_left_out_is_found(tmp_path: Path) -> None:
    layout = "sluice/\n  core/\n    errors.py   errors\n    spark/\n      steps/   handlers\n"
    assert _named(ROOT / "sluice" / "core" / "errors.py", layout)
    assert _named(ROOT / "sluice" / "core" / "spark" / "steps" / "build.py", layout)
    assert not _named(ROOT / "sluice" / "core" / "config.py", layout)
    assert _named(ROOT / "sluice" / "bot" / "forge" / "base.py", "    forge/base.py   the port\n")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round and round (strongly connected
    components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    # Imports under `if TYPE_CHECKING:` are for annotations only and do not count.
    import grimp

    graph = grimp.build_graph("sluice", exclude_type_checking_imports=True, cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 150
    assert _cycles(edges) == []


def test_a_cycle_is_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert _cycles(edges) == [["a", "b", "c"]]
