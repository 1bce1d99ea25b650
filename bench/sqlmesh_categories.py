"""How SQLMesh categorises a change, as JSON: run by SQLMesh's own python (its side
virtualenv, see ``sqlmesh_spark.side_venv``), never by Sluice's. Used by
``sqlmesh_diff.py`` (issue 42, point 6).

``python sqlmesh_categories.py PAIRS.json`` reads a list of ``{"id", "before", "after"}``
(two folders of one project, before and after an edit) and prints one line of JSON: a
list of ``{"id", "models": {name: facts}, "refused": str|None, "error": str|None}``;
``python sqlmesh_categories.py -`` reads one pair per line of its input and answers each
on a line of its own, as they come.

For each pair, offline (an in-memory DuckDB state, nothing is run): the *before* project
is loaded with ``sqlmesh.Context`` and its snapshots are recorded in the state as the
``prod`` environment, each categorised as SQLMesh categorises a new model (breaking, its
own version), as if a first plan had been applied. The *after* project is then loaded in
a context on that state and planned against ``prod`` with the plan builder SQLMesh's
``plan`` uses (``Context.plan_builder``: automatic categorisation, ``full`` mode for
every kind of model, so that every change gets a category rather than a question). A
model's facts: ``direct`` (directly modified or added), ``category`` (SQLMesh's
``SnapshotChangeCategory`` name, or ``ADDED``/``REMOVED``), ``forward_only``,
``rebuilt`` (its version differs from prod's: a new table), ``kind``. A plan SQLMesh
refuses (``PlanError``: a destructive change to a forward-only model...) is reported in
``refused``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Any


def _name(fqn: str, default_catalog: str | None) -> str:
    from sqlglot import exp

    table = exp.to_table(fqn)
    parts = [p.name for p in table.parts]
    if len(parts) == 3 and default_catalog and parts[0].lower() == default_catalog.lower():
        parts = parts[1:]
    return ".".join(parts).lower()


def _forget_project_modules() -> None:
    """Drop the modules a project's Python imported (``models.src.shared``...): the next
    context imports its own copy's, not the previous pair's."""
    import sysconfig

    kept = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    here = str(__import__("pathlib").Path(__file__).parent)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if path and not path.startswith((*kept, here, sys.base_prefix, sys.prefix)):
            del sys.modules[name]


_WARM: dict[str, str] = {}  # project's work folder -> a .cache SQLMesh filled for it


def _context(folder: str, state: Any = None) -> Any:
    """A context of ``folder``, starting from the cache SQLMesh made for an earlier copy
    of the same project (its entries are per file and its mtimes, which the copies keep:
    only the edited files are parsed again)."""
    import shutil
    from pathlib import Path

    from sqlmesh import Context

    project = str(Path(folder).parents[2])
    warm = _WARM.get(project)
    if warm and not (Path(folder) / ".cache").exists():
        shutil.copytree(warm, Path(folder) / ".cache")
    _forget_project_modules()

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from sqlmesh_facts import _stand_ins

    _stand_ins(folder)
    context = Context(paths=[folder])
    if warm is None and (Path(folder) / ".cache").is_dir():
        _WARM.clear()
        _WARM[project] = str(Path(folder) / ".cache")
    if state is not None:
        context._state_sync = state  # one state for both sides of the pair
    return context


_BEFORE: dict[str, tuple[Any, dict[str, Any], str]] = {}


def _digest(folder: str) -> str:
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if (
            path.is_file()
            and ".cache" not in path.parts
            and not path.name.endswith((".db", ".wal"))
        ):
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _before(folder: str) -> tuple[Any, dict[str, Any], str]:
    """The context of a *before* copy, its snapshots, categorised as a first plan does,
    and the folder they were loaded from: loaded once for every pair whose before copy
    has the same files."""
    from sqlmesh.core.snapshot import SnapshotChangeCategory

    key = _digest(folder)
    if key not in _BEFORE:
        context = _context(folder)
        old = {s.name: s for s in context.snapshots.values()}
        for snapshot in old.values():
            snapshot.categorize_as(SnapshotChangeCategory.BREAKING)
        _BEFORE.clear()  # one project at a time: keep one
        _BEFORE[key] = (context, old, folder)
    return _BEFORE[key]


@contextlib.contextmanager
def _in_place_of(folder: str, after: str) -> Iterator[str]:
    """``after``'s files at ``folder``'s path (``folder`` set aside meanwhile): a
    project's Python that reads its own path (sqlmesh_ibis' ``DB_PATH =
    os.path.join(os.path.dirname(__file__), ...)``) gives the same value for both sides
    of a pair, so SQLMesh does not see a change the edit did not make."""
    import shutil

    aside = folder + ".before"
    os.rename(folder, aside)
    try:
        shutil.copytree(after, folder, symlinks=True)
        cache = os.path.join(aside, ".cache")  # SQLMesh's cache, warm (see _context)
        if os.path.isdir(cache) and not os.path.exists(os.path.join(folder, ".cache")):
            shutil.copytree(cache, os.path.join(folder, ".cache"))
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(aside, folder)


def categorise(before: str, after: str) -> dict[str, Any]:
    os.chdir(after)  # where a gateway's relative database is, when the before side connects
    old_context, old, loaded_from = _before(before)
    with _in_place_of(loaded_from, after) as place:
        os.chdir(place)  # a gateway's relative database (state too) is a file of this pair's
        try:
            return _categorise(old_context, old, place)
        finally:
            os.chdir(os.path.dirname(place))


def _categorise(old_context: Any, old: dict[str, Any], after: str) -> dict[str, Any]:
    from sqlmesh.core.config import CategorizerConfig
    from sqlmesh.core.environment import Environment
    from sqlmesh.utils.date import now_timestamp
    from sqlmesh.utils.errors import PlanError

    state = old_context.state_sync
    # A gateway's database may be shared by the pairs (SQLMesh keeps DuckDB connections):
    # each pair starts from an empty state.
    getattr(state, "state_sync", state).reset(default_catalog=old_context.default_catalog)
    if hasattr(state, "clear_cache"):
        state.clear_cache()
    state.push_snapshots(old.values())
    state.promote(
        Environment(
            name="prod",
            snapshots=[s.table_info for s in old.values()],
            start_at="2024-01-01",
            end_at="2024-01-02",
            plan_id="before",
            finalized_ts=now_timestamp(),
        )
    )
    new_context = _context(after, state)
    catalog = new_context.default_catalog
    refused = None
    try:
        builder = new_context.plan_builder(
            "dev",
            create_from="prod",
            start="2024-01-01",
            end="2024-01-02",
            execution_time="2024-01-02",
            skip_tests=True,
            skip_linter=True,
            categorizer_config=CategorizerConfig.all_full(),
        )
        plan = builder.build()
    except PlanError as exc:
        if "requires a change" in str(exc):  # nothing changed for SQLMesh: no plan
            return {"models": {}, "refused": None, "error": None}
        refused = str(exc)
        return {"models": {}, "refused": refused, "error": None}
    diff = plan.context_diff
    models: dict[str, Any] = {}
    direct = {s_id.name for s_id in plan.directly_modified}
    for name, (new, previous) in diff.modified_snapshots.items():
        if not new.is_model:  # a standalone audit: no table (Sluice runs audits by model)
            continue
        category = new.change_category
        models[_name(name, catalog)] = {
            "direct": name in direct,
            "category": category.name if category is not None else None,
            "forward_only": bool(new.is_forward_only),
            "rebuilt": new.version != previous.version,
            "kind": str(getattr(new.model.kind.name, "value", new.model.kind.name))
            if new.is_model
            else "",
        }
    for s_id in diff.added:
        if not diff.snapshots[s_id].is_model:
            continue
        models[_name(s_id.name, catalog)] = {
            "direct": True,
            "category": "ADDED",
            "forward_only": False,
            "rebuilt": True,
            "kind": "",
        }
    for s_id in diff.removed_snapshots:
        models[_name(s_id.name, catalog)] = {
            "direct": True,
            "category": "REMOVED",
            "forward_only": False,
            "rebuilt": False,
            "kind": "",
        }
    return {"models": models, "refused": refused, "error": None}


def _answer(pair: dict[str, str]) -> dict[str, Any]:
    try:
        result = categorise(pair["before"], pair["after"])
    except Exception as exc:
        lines = traceback.format_exc().strip().splitlines()
        result = {
            "models": {},
            "refused": None,
            "error": (f"{type(exc).__name__}: {exc}".strip() or lines[-1])[:600],
        }
    result["id"] = pair["id"]
    return result


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    if sys.argv[1] == "-":  # a pair per line in, an answer per line out, as they come
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(_answer(json.loads(line))), flush=True)
        return
    with open(sys.argv[1], encoding="utf-8") as listing:
        pairs = json.load(listing)
    print(json.dumps([_answer(pair) for pair in pairs]))


if __name__ == "__main__":
    main()
