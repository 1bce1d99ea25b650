"""What SQLMesh loads from a project, as JSON: run by SQLMesh's own python (its side
virtualenv, see ``sqlmesh_spark.side_venv``), never by Sluice's.

``python sqlmesh_facts.py PROJECT START END EXECUTION`` loads PROJECT with
``sqlmesh.Context`` (offline: a DuckDB gateway, nothing is planned or run) and prints one
line of JSON: ``{"models": {name: facts}, "default_catalog": ..., "error": ...}``, where a
model's facts are its kind's name, its dependencies, its columns and types (Spark's type
names, "" where SQLMesh does not know one) and its query rendered for the interval
[START, END] (inclusive dates, as ``sqlmesh render`` takes them) in the model's dialect
(None for a Python, seed or external model). Names are lower case without the default
catalog, as Sluice names models. Used by ``sqlmesh_compat.py``.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


def _name(fqn: str, default_catalog: str | None) -> str:
    from sqlglot import exp

    table = exp.to_table(fqn)
    parts = [p.name for p in table.parts]
    if len(parts) == 3 and default_catalog and parts[0].lower() == default_catalog.lower():
        parts = parts[1:]
    return ".".join(parts).lower()


def _type(data_type: Any) -> str:
    from sqlglot import exp

    if data_type is None or data_type.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return ""
    return str(data_type.sql(dialect="spark"))


_KEPT: list[type] = []  # subclasses are found through weak references: keep them


def _stand_ins(project: str) -> list[str]:
    """Define a do-nothing custom materialization for each one the project's models name
    that nobody defines (SQLMesh's own example ``sushi`` names two from SQLMesh's tests):
    what loads is compared, nothing is materialized."""
    import re
    from pathlib import Path

    from sqlmesh import CustomMaterialization
    from sqlmesh.core.snapshot.evaluator import get_custom_materialization_type

    named = set()
    for path in sorted(Path(project).glob("models/**/*.sql")):
        text = path.read_text(encoding="utf-8", errors="replace")
        named |= set(re.findall(r"materialization\s+'([^']+)'", text, flags=re.IGNORECASE))
    missing = sorted(n for n in named if get_custom_materialization_type(n, False) is None)
    for name in missing:
        _KEPT.append(type(f"StandIn{len(_KEPT)}", (CustomMaterialization,), {"NAME": name}))
    if missing:
        from sqlmesh.core.snapshot import evaluator

        evaluator._custom_materialization_type_cache = None  # read the stand-ins too
    return missing


def facts(project: str, start: str, end: str, execution: str) -> dict[str, Any]:
    import logging

    logging.disable(logging.WARNING)
    from sqlmesh import Context
    from sqlmesh.core.model import SqlModel

    stand_ins = _stand_ins(project)
    context = Context(paths=[project])
    catalog = context.default_catalog
    models: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for model in context.models.values():
        name = _name(model.fqn, catalog)
        query = None
        if isinstance(model, SqlModel):
            try:
                rendered = model.render_query(start=start, end=end, execution_time=execution)
                query = None if rendered is None else rendered.sql(dialect=model.dialect)
            except Exception as exc:  # a model that loads but does not render
                errors[name] = f"{type(exc).__name__}: {exc}"
        columns = model.columns_to_types or {}
        models[name] = {
            "kind": str(
                model.kind.name.value if hasattr(model.kind.name, "value") else model.kind.name
            ),
            "depends_on": sorted(_name(d, catalog) for d in model.depends_on),
            "columns": [[str(c).lower(), _type(t)] for c, t in columns.items()],
            "dialect": model.dialect or "",
            "query": query,
            "python": bool(getattr(model, "is_python", False)),
        }
    return {
        "models": models,
        "default_catalog": catalog,
        "render_errors": errors,
        "stand_ins": stand_ins,
        "error": None,
    }


if __name__ == "__main__":
    folder, first, last, execution = sys.argv[1:5]
    try:
        result = facts(folder, first, last, execution)
    except Exception as exc:
        tail = traceback.format_exc().strip().splitlines()[-1]
        result = {"models": {}, "error": f"{type(exc).__name__}: {exc}".strip() or tail}
    print(json.dumps(result))
