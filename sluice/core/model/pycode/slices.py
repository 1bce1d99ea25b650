"""The part of a Python module a value needs (pure, ``ast`` only).

A ``@model(...)`` argument such as ``start=DATA_START_STR`` may be computed by the
project's code (``DATA_START_STR = DATA_START.strftime("%Y-%m-%d")``). The sandboxed
process evaluates it with only the module-level statements that bind the names it reads,
and those that bind what they read, in the module's order (:func:`needed`): not the whole
module, whose other imports (``faker``, ``ibis``) the model's function needs when it runs,
not the plan.

>>> tree = ast.parse('''
... import os, faker
... from datetime import date
... START = date(2022, 6, 1)
... TEXT = START.isoformat()
... FAKE = faker.Faker()
... ''')
>>> needed(tree, {"TEXT"})
[(1, ('date',)), (2, None), (3, None)]
"""

from __future__ import annotations

import ast


def bound(node: ast.stmt) -> set[str]:
    """The module-level names a statement binds (inside if/try/with/for blocks too, not
    inside functions or classes)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    found: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [node.target]
    elif isinstance(node, ast.With | ast.AsyncWith):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    for target in targets:
        found |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(node, field, ()) or ():
            if isinstance(child, ast.ExceptHandler):
                for inner in child.body:
                    found |= bound(inner)
            elif isinstance(child, ast.stmt):
                found |= bound(child)
    return found


def bindings(tree: ast.Module) -> dict[str, list[int]]:
    """Each module-level name, with the statements (indices in ``tree.body``) binding it."""
    found: dict[str, list[int]] = {}
    for index, node in enumerate(tree.body):
        for name in bound(node):
            found.setdefault(name, []).append(index)
    return found


def free_names(node: ast.AST) -> set[str]:
    """Every name ``node`` reads (over-approximated: a function's locals count too)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def needed(tree: ast.Module, names: set[str]) -> list[tuple[int, tuple[str, ...] | None]]:
    """The statements of ``tree`` that bind ``names`` and what those read, in order, each
    with the names an import must keep (None: the whole statement). ``from __future__``
    imports are always kept."""
    where = bindings(tree)
    chosen: dict[int, set[str] | None] = {}
    todo = list(names)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for index in where.get(name, ()):
            node = tree.body[index]
            if isinstance(node, ast.Import | ast.ImportFrom):
                kept = chosen.setdefault(index, set())
                if kept is not None:
                    kept.add(name)
            elif index not in chosen:
                chosen[index] = None
                todo.extend(free_names(node))
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            chosen[index] = None
    return [
        (index, tuple(sorted(kept)) if kept is not None else None)
        for index, kept in sorted(chosen.items())
    ]


def keep(node: ast.stmt, names: tuple[str, ...] | None) -> ast.stmt:
    """An import statement binding only ``names`` (any other statement as it is)."""
    if names is None or not isinstance(node, ast.Import | ast.ImportFrom):
        return node
    aliases = [a for a in node.names if (a.asname or a.name).split(".")[0] in names]
    copy = type(node)(**{**node.__dict__, "names": aliases})
    return ast.copy_location(copy, node)
