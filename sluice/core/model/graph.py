"""The dependency graph of a project's models (pure)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from sluice.core.errors import GraphError, did_you_mean
from sluice.core.model.definition import KindName, Model
from sluice.core.model.fileaccess import FILE_FORMATS
from sluice.core.snapshot.naming import REPOSITORY_MARK, reserved_schema


def check_references(models: Mapping[str, Model]) -> None:
    """Every table a model reads must be a model or a declared external table, and none
    of them in a repository's namespace (a schema starting with ``sluice_r_``: those are
    Sluice's, each made for one repository, issue 46).

    Raises:
        GraphError: naming the file:line of the first unknown reference or reserved name.
    """
    for model in models.values():
        if reserved_schema(model.name.rsplit(".", 1)[0]):
            what = "external table" if model.kind.name == KindName.EXTERNAL else "model"
            raise GraphError(
                f"{what} {model.name} is in a schema starting with '{REPOSITORY_MARK}', "
                "where Sluice keeps each repository's tables and views apart",
                path=model.path,
                line=model.line,
                hint="name your models and sources in schemas of your own; read another "
                "model by its name, never by the schema Sluice made for it",
            )
    for model in models.values():
        for ref in model.references:
            if ref.name not in models:
                schema, table = ref.name.split(".")[-2:]
                # Spark reads `parquet.orders` as the files at the relative path `orders`
                # when the catalog has no such table.
                files = (
                    f" (Spark would read the {schema} files at the relative path '{table}')"
                    if schema in FILE_FORMATS
                    else ""
                )
                raise GraphError(
                    f"model {model.name} reads '{ref.name}', which is neither a model nor an "
                    f"external table{files}",
                    path=model.path,
                    line=ref.line,
                    col=ref.col,
                    hint=_unknown_hint(ref.name, models),
                )
        for dep in model.depends_on:
            if dep not in models:
                raise GraphError(
                    f"model {model.name} depends on unknown '{dep}'",
                    path=model.path,
                    line=model.line,
                    hint="fix depends_on in the MODEL header",
                )


def topological_order(models: Mapping[str, Model]) -> list[str]:
    """Model names, parents before children, ties broken by name (deterministic).

    Raises:
        GraphError: listing the models of a cycle.
    """
    indegree = {name: 0 for name in models}
    children: dict[str, list[str]] = {name: [] for name in models}
    for name, model in models.items():
        for dep in model.depends_on:
            if dep in models:
                indegree[name] += 1
                children[dep].append(name)
    ready = [name for name, degree in indegree.items() if degree == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for child in children[name]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, child)
    if len(order) != len(models):
        cycle = find_cycle(models, {n for n, d in indegree.items() if d > 0})
        first = models[cycle[0]]
        raise GraphError(
            "models depend on each other in a cycle: " + " -> ".join([*cycle, cycle[0]]),
            path=first.path,
            line=first.line,
            hint="a model cannot read, directly or through others, a model that reads it",
        )
    return order


def find_cycle(models: Mapping[str, Model], candidates: Iterable[str]) -> list[str]:
    """One cycle among ``candidates`` (models left over by the topological sort)."""
    left = set(candidates)
    start = min(left)
    path: list[str] = []
    seen: dict[str, int] = {}
    node = start
    # Every leftover node has a leftover parent, so walking parents must revisit a node.
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(dep for dep in models[node].depends_on if dep in left)
    cycle = path[seen[node] :]
    cycle.reverse()  # parents first, the way data flows
    first = cycle.index(min(cycle))
    return cycle[first:] + cycle[:first]


def descendants(models: Mapping[str, Model], roots: Iterable[str]) -> set[str]:
    """All models downstream of ``roots`` (not including the roots themselves)."""
    children: dict[str, list[str]] = {}
    for name, model in models.items():
        for dep in model.depends_on:
            children.setdefault(dep, []).append(name)
    found: set[str] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _unknown_hint(name: str, models: Mapping[str, Model]) -> str:
    """How to fix a reference to ``name``, which is not a model: the closest model's name
    first when one is close."""
    fix = f"add a model named {name}, or declare it in external_models.yaml"
    close = did_you_mean(name, models)
    return f"{close} Otherwise {fix}" if close else f"check the name, {fix}"
