"""One column's lineage across a project (pure): the columns its value comes from, up to
the tables nobody models, and the columns of the models downstream whose value it reaches.

It reads what :mod:`sluice.core.plan.lineage` already knows of each query (its
:class:`~sluice.core.plan.lineage.Shape`: per output column the table columns it reads,
and the columns deciding its rows), with each parent's columns resolved stars and all
(:class:`~sluice.core.plan.outputs.OutputColumns`), and follows it model to model:
upstream through every column a value reads, downstream through every child's column
reading it. A column a child reads in WHERE, a join condition or GROUP BY decides that
child's rows (``rows``), which is not followed further (every column of it would be).

What cannot be followed is said, never guessed: a model whose lineage is unknown
(``unknown``: a star over a table whose columns nobody declares, a Python model, a
query that does not parse; a seed is where its values start), and the analyses past ``budget`` (``truncated``). A child
whose query names neither the column nor a ``*`` cannot read it and is not analysed.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> full = Kind(KindName.FULL)
>>> graph = ColumnGraph({
...     "s.a": Model("s.a", full, query_sql="SELECT id, amount FROM raw.pay", depends_on=("raw.pay",)),
...     "s.b": Model("s.b", full, query_sql="SELECT id, amount * 2 AS twice FROM s.a WHERE id > 0",
...                  depends_on=("s.a",)),
...     "s.c": Model("s.c", full, query_sql="SELECT twice AS total FROM s.b", depends_on=("s.b",)),
... })
>>> graph.columns("s.b")
('id', 'twice')
>>> found = graph.lineage("s.b", "twice")
>>> found.upstream, found.downstream
((('s.a', 'amount'), ('raw.pay', 'amount')), (('s.c', 'total'),))
>>> graph.lineage("s.a", "id").rows
('s.b',)
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.core.model.definition import Model
from sluice.core.plan.lineage import ROWS, Dep, Shape, model_shape
from sluice.core.plan.outputs import OutputColumns

BUDGET = 300
"""Queries one column's lineage analyses at most (each is cached across calls)."""


@dataclass(frozen=True)
class ColumnLineage:
    """Where one model's column comes from and what it reaches.

    ``upstream``: the ``(table, column)`` its value reads, directly or through other
    models, nearest first; a column ``"*"`` is a table's rows (a scalar subquery over it).
    ``downstream``: the models' ``(model, column)`` whose value reads it, nearest first.
    ``links``: ``(source, target)``, target's value reads source, each once. ``rows``:
    models downstream whose rows it (or a column it reaches) decides. ``unknown``:
    ``(model, why)`` of each model on the way whose lineage could not be followed.
    ``truncated``: the budget was spent, more may be found.
    """

    model: str
    column: str
    upstream: tuple[Dep, ...] = ()
    downstream: tuple[Dep, ...] = ()
    links: tuple[tuple[Dep, Dep], ...] = ()
    rows: tuple[str, ...] = ()
    unknown: tuple[tuple[str, str], ...] = ()
    truncated: bool = False


class ColumnGraph:
    """The column lineage of one set of models (a project's, or an environment's): its
    output columns resolved on demand and its children known, built once and asked many
    times (each query's analysis is cached by :func:`model_shape`)."""

    def __init__(self, models: Mapping[str, Model]) -> None:
        self.models = models
        self.outputs = OutputColumns(models)
        children: dict[str, list[str]] = {}
        for name, model in models.items():
            for parent in dict.fromkeys(model.depends_on):
                if parent in models and parent != name:
                    children.setdefault(parent, []).append(name)
        self.children = {p: tuple(sorted(c)) for p, c in children.items()}

    def columns(self, name: str) -> tuple[str, ...]:
        """Model ``name``'s output columns (stars expanded; its declared ones when its
        query cannot say; none when neither does)."""
        return self.outputs(name) or ()

    def shape(self, name: str) -> Shape:
        """The lineage of model ``name``'s query, its parents' columns resolved."""
        model = self.models[name]
        schema = {parent: self.outputs(parent) for parent in model.depends_on}
        return model_shape(model, schema)

    def lineage(self, model: str, column: str, *, budget: int = BUDGET) -> ColumnLineage:
        """Column ``column`` of ``model``: its sources upstream and its reach downstream.

        Raises:
            KeyError: ``model`` is not one of the models.
        """
        if model not in self.models:
            raise KeyError(model)
        walk = _Walk(self, budget)
        start = (model, column.lower())
        upstream = walk.up(start)
        downstream = walk.down(start)
        return ColumnLineage(
            model=model,
            column=start[1],
            upstream=upstream,
            downstream=downstream,
            links=tuple(walk.links),
            rows=tuple(walk.rows),
            unknown=tuple(walk.unknown.items()),
            truncated=walk.truncated,
        )


class _Walk:
    """One lineage question: the shapes it analysed and what it found."""

    def __init__(self, graph: ColumnGraph, budget: int) -> None:
        self.graph, self.budget = graph, budget
        self.shapes: dict[str, Shape] = {}
        self.links: dict[tuple[Dep, Dep], None] = {}
        self.rows: dict[str, None] = {}
        self.unknown: dict[str, str] = {}
        self.truncated = False

    def shape(self, name: str) -> Shape | None:
        """``name``'s shape, None once the budget is spent or when it is unknown."""
        if name not in self.shapes:
            if self.budget <= 0:
                self.truncated = True
                return None
            self.budget -= 1
            self.shapes[name] = self.graph.shape(name)
        shape = self.shapes[name]
        if shape.unknown:
            self.unknown.setdefault(name, shape.unknown)
            return None
        return shape

    def up(self, start: Dep) -> tuple[Dep, ...]:
        found: dict[Dep, None] = {}
        queue = deque([start])
        while queue:
            target = queue.popleft()
            model = self.graph.models[target[0]]
            if model.query_sql is None and not model.depends_on:
                continue  # a seed (or a declared external): where values start
            shape = self.shape(target[0])
            if shape is None:
                continue
            for source in sorted(shape.deps.get(target[1], ())):
                self.links[(source, target)] = None
                if source in found or source == start:
                    continue
                found[source] = None
                if source[1] != ROWS and source[0] in self.graph.models:
                    queue.append(source)
        return tuple(found)

    def down(self, start: Dep) -> tuple[Dep, ...]:
        found: dict[Dep, None] = {}
        queue = deque([start])
        while queue:
            source = queue.popleft()
            for child in self.graph.children.get(source[0], ()):
                if not _may_read(self.graph.models[child], source[1]):
                    continue
                shape = self.shape(child)
                if shape is None:
                    continue
                if source in shape.row_deps:
                    self.rows[child] = None
                for name in shape.names:
                    if source not in shape.deps.get(name, ()):
                        continue
                    target = (child, name)
                    self.links[(source, target)] = None
                    if target not in found and target != start:
                        found[target] = None
                        queue.append(target)
        return tuple(found)


def _may_read(model: Model, column: str) -> bool:
    """Whether ``model``'s query may read a column named ``column``: it names it, or has
    a ``*`` (which may take it). A model without a query is asked (its lineage is
    unknown, which the answer says)."""
    text = model.query_sql
    if text is None:
        return True
    return (
        "*" in text or re.search(rf"(?<![\w]){re.escape(column)}(?![\w])", text, re.I) is not None
    )
