"""The lineage page's answers: the model graph of prod (or of the environment a chosen
plan points at), coloured by that plan's impact as the plan recorded it, cut around one
model when asked; and one model's columns with a column's lineage, from core's
:class:`~sluice.core.plan.column_lineage.ColumnGraph`.

The models are the ones the Models page shows, decoded once per set of snapshots
(:class:`ModelSets`, shared by both pages through the reader): a snapshot's id names
its content, so a set decoded once stays right until prod (or the plan) points elsewhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sluice.bot.web import schema as s
from sluice.core.plan.column_lineage import ColumnGraph
from sluice.core.snapshot.snapshot import Snapshot

Ids = frozenset[tuple[str, str]]
KEPT = 3
"""Sets of snapshots kept decoded (prod's and a plan or two)."""

DIRECT = ("breaking", "non-breaking", "forward-only", "metadata")
"""A direct change's categories, each an impact of its own."""


class ModelSets:
    """The last :data:`KEPT` sets of snapshots decoded (``decode``: ids -> the stored
    snapshots), sorted by name, each with its column graph made on first use."""

    def __init__(self, decode: Callable[[Ids], Iterable[Snapshot]]) -> None:
        self._decode = decode
        self._kept: OrderedDict[Ids, tuple[list[Snapshot], list[ColumnGraph]]] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, ids: Ids) -> tuple[list[Snapshot], list[ColumnGraph]]:
        with self._lock:  # one decode of a set, whoever asks first
            entry = self._kept.get(ids)
            if entry is None:
                snapshots = sorted(self._decode(ids), key=lambda n: n.name)
                entry = self._kept[ids] = (snapshots, [])
                while len(self._kept) > KEPT:
                    self._kept.popitem(last=False)
            self._kept.move_to_end(ids)
            return entry

    def snapshots(self, ids: Iterable[tuple[str, str]]) -> list[Snapshot]:
        return self._entry(frozenset(ids))[0]

    def graph(self, ids: Iterable[tuple[str, str]]) -> ColumnGraph:
        snapshots, graphs = self._entry(frozenset(ids))
        with self._lock:
            if not graphs:
                graphs.append(ColumnGraph({n.name: n.model for n in snapshots}))
            return graphs[0]


def _list(payload: Mapping[str, Any], key: str) -> list[Any]:
    value = payload.get(key)
    return value if isinstance(value, list) else []


def impacts(payload: Mapping[str, Any]) -> dict[str, s.LineageNode]:
    """What a recorded plan (``Plan.to_json``) does to each model it names: its direct
    changes by category, indirect ones with theirs and the changes reaching them, added,
    metadata only; "unaffected" (new snapshots, same data) is unchanged. Only ``name``
    and the impact fields are filled.

    >>> found = impacts({"directly_modified": [{"name": "a", "category": "breaking"}],
    ...     "indirectly_modified": [{"name": "b", "category": "non-breaking",
    ...                              "reached_by": ["a"]}], "added": ["c"]})
    >>> [(n.name, n.impact, n.category, n.why) for n in found.values()]
    [('b', 'indirect', 'non-breaking', ['a']), ('c', 'added', None, []), ('a', 'breaking', None, [])]
    """
    found: dict[str, s.LineageNode] = {}

    def put(name: object, impact: str, category: str | None = None, why: Any = ()) -> None:
        why = [str(w) for w in why] if isinstance(why, list) else []
        found[str(name)] = s.LineageNode(
            name=str(name), kind="", impact=impact, category=category, why=why
        )

    for name in _list(payload, "unaffected"):
        put(name, "unchanged")
    for change in _list(payload, "indirectly_modified"):
        if isinstance(change, dict):
            category = change.get("category")
            put(change.get("name"), "indirect", str(category), change.get("reached_by"))
    for name in _list(payload, "metadata_only"):
        put(name, "metadata")
    for name in _list(payload, "added"):
        put(name, "added")
    for change in _list(payload, "directly_modified"):
        if isinstance(change, dict):
            category = str(change.get("category"))
            impact = category if category in DIRECT else "breaking"  # unknown: the worst
            put(change.get("name"), impact, None, change.get("reshaped_by"))
    return found


def neighbourhood(edges: Sequence[tuple[str, str]], focus: str, *, up: int, down: int) -> set[str]:
    """``focus`` and the models at most ``up`` steps upstream of it and ``down`` steps
    downstream (``edges``: parent, child).

    >>> sorted(neighbourhood([("a", "b"), ("b", "c"), ("c", "d"), ("x", "c")], "c", up=1, down=5))
    ['b', 'c', 'd', 'x']
    """
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for parent, child in edges:
        parents.setdefault(child, []).append(parent)
        children.setdefault(parent, []).append(child)
    kept = {focus}
    for links, depth in ((parents, up), (children, down)):
        seen = {focus}
        queue = deque([(focus, 0)])
        while queue:
            name, steps = queue.popleft()
            if steps == depth:
                continue
            for other in links.get(name, ()):
                if other not in seen:
                    seen.add(other)
                    queue.append((other, steps + 1))
        kept |= seen
    return kept


def graph(
    snapshots: Sequence[Snapshot],
    *,
    environment: str,
    plan_id: str | None,
    payload: Mapping[str, Any] | None,
    focus: str | None = None,
    up: int = 0,
    down: int = 0,
) -> s.LineageGraph | None:
    """The model graph of ``snapshots`` coloured by ``payload`` (a recorded plan; None:
    not coloured), cut around ``focus`` when given (None: ``focus`` is not a model)."""
    names = {n.name for n in snapshots}
    edges = [
        (parent, snap.name)
        for snap in snapshots
        for parent in dict.fromkeys(snap.model.depends_on)
        if parent in names and parent != snap.name
    ]
    kept = names
    if focus is not None:
        if focus not in names:
            return None
        kept = neighbourhood(edges, focus, up=up, down=down)
    coloured = impacts(payload) if payload is not None else {}
    nodes = []
    for snap in snapshots:
        if snap.name not in kept:
            continue
        impact = coloured.get(snap.name)
        node = s.LineageNode(name=snap.name, kind=snap.model.kind.name.value)
        if payload is not None:
            node.impact = impact.impact if impact is not None else "unchanged"
            if impact is not None:
                node.category, node.why = impact.category, impact.why
        nodes.append(node)
    return s.LineageGraph(
        environment=environment,
        plan_id=plan_id,
        focus=focus,
        nodes=nodes,
        edges=[s.LineageEdge(source=a, target=b) for a, b in edges if a in kept and b in kept],
        removed=[str(n) for n in _list(payload, "removed")] if payload is not None else [],
        total=len(names),
    )


def _ref(dep: tuple[str, str]) -> s.ColumnRef:
    return s.ColumnRef(model=dep[0], column=dep[1])


def columns(
    columns_of: ColumnGraph, snapshot: Snapshot, column: str | None
) -> s.ColumnLineageView | None:
    """``snapshot``'s model's columns and ``column``'s lineage (None: only the columns);
    None when the model's columns are known and ``column`` is not one of them."""
    model = snapshot.model
    declared = {n.lower(): t for n, t in model.columns}
    names = columns_of.columns(model.name)
    view = s.ColumnLineageView(
        model=model.name,
        kind=model.kind.name.value,
        columns=[s.ModelColumn(name=n, type=declared.get(n)) for n in names],
        column=None,
    )
    if column is None:
        return view
    if names and column.lower() not in names:
        return None
    found = columns_of.lineage(model.name, column)
    view.column = found.column
    view.upstream = [_ref(d) for d in found.upstream]
    view.downstream = [_ref(d) for d in found.downstream]
    view.links = [s.ColumnLink(source=_ref(a), target=_ref(b)) for a, b in found.links]
    view.rows = list(found.rows)
    view.unknown = dict(found.unknown)
    view.truncated = found.truncated
    return view
