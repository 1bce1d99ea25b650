"""Run a Python model's function in the Spark driver (never in the service).

The build step (:mod:`sluice.core.spark.steps.build`) calls :func:`frame` for each batch;
the DataFrame it returns becomes the temporary view :data:`VIEW`, and the batch's query
reads it, so a Python model is written, partitioned, merged and audited exactly as a SQL
model is. The function may return a PySpark DataFrame (``context.spark`` is the job's
session), a pandas DataFrame, or yield several of either; the result is cast to the
declared columns, in their order.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sluice.core.model.pycode import files

VIEW = "__sluice_python_model"
"""The temporary view holding a batch's rows."""


class Context:
    """What a Python model's function receives first (SQLMesh's ``ExecutionContext``):
    ``spark`` (the session), ``resolve_table(name)`` (the physical table of a model for
    the environment being built), ``table(name)`` (the same), ``var(name, default)``."""

    def __init__(self, spark: Any, tables: Mapping[str, str], variables: Mapping[str, Any]) -> None:
        self.spark = spark
        self._tables = {k.lower(): v for k, v in tables.items()}
        self._variables = {k.lower(): v for k, v in variables.items()}

    def resolve_table(self, name: str) -> str:
        key = name.replace("`", "").replace('"', "").lower()
        if key not in self._tables:
            raise KeyError(
                f"{name} is not a parent of this model: name it in depends_on, or call "
                "context.resolve_table with a string literal so Sluice sees it"
            )
        return self._tables[key]

    table = resolve_table

    def var(self, name: str, default: Any = None) -> Any:
        return self._variables.get(name.lower(), default)

    def fetchdf(self, sql: str) -> Any:
        return self.spark.sql(sql).toPandas()


class FunctionError(RuntimeError):
    """A Python model's function raised: the message names the model and the line of its
    file the error came from (the deepest frame in that file)."""

    def __init__(self, model: str, path: str, exc: Exception, root: str | None = None) -> None:
        line = None
        frame = exc.__traceback__
        while frame is not None:
            if frame.tb_frame.f_code.co_filename == path:
                line = frame.tb_lineno
            frame = frame.tb_next
        # The file as its author names it (relative to the project), never a host path:
        # the driver runs a copy of the sources (confine.python_sources).
        shown = os.path.relpath(path, root) if root else path
        where = f"{shown}:{line}" if line is not None else shown
        super().__init__(f"{model}: {type(exc).__name__}: {exc} (at {where})")


_IMPORTERS: dict[str, files.SourceImporter] = {}
"""The project's folder -> the importer of its Python sources in this process."""


def _importer(root: str) -> files.SourceImporter:
    """The importer of the project's Python (:mod:`.files`: the sources read once, held
    in memory; no project folder on ``sys.path``, no bytecode read or written for them).
    A process that builds twice (in-process runs) reads them again: it sees edits."""
    files.no_bytecode()
    old = _IMPORTERS.pop(root, None)
    if old is not None and old in sys.meta_path:
        sys.meta_path.remove(old)
    importer = files.SourceImporter(root, files.sources(Path(root)))
    importer.install()
    _IMPORTERS[root] = importer
    return importer


def _function(path: str, entry: str, root: str, shim: str) -> Any:
    importer = _IMPORTERS.get(root) or _importer(root)
    if shim not in sys.path:
        sys.path.insert(0, shim)
    rel = Path(path).relative_to(root).as_posix()
    # Keyed by content: a process that builds twice (in-process runs) sees an edited file.
    source = importer.files.get(rel)
    if source is None or _stale(importer, rel, path):
        importer = _importer(root)
        source = importer.files.get(rel, b"")
    name = f"__sluice_model_{hashlib.sha256(source).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:
        module = importer.load(rel, name)
    return getattr(module, entry)


def _stale(importer: files.SourceImporter, rel: str, path: str) -> bool:
    """Whether the model file changed since the importer read the sources."""
    try:
        with open(path, "rb") as handle:
            return handle.read() != importer.files.get(rel)
    except OSError:
        return True


def frame(
    spark: Any,
    model: str,
    spec: Mapping[str, Any],
    start: datetime,
    end: datetime,
    execution: datetime,
) -> Any:
    """The model's rows for one batch, as a DataFrame with the declared columns."""
    from sluice.core.model.pycode.shim import PATH

    function = _function(spec["path"], spec["entry"], spec["root"], PATH)
    context = Context(spark, dict(spec["tables"]), spec.get("variables") or {})
    try:
        results = _results(function(context, start=start, end=end, execution_time=execution))
    except Exception as exc:
        raise FunctionError(model, spec["path"], exc, spec["root"]) from exc
    columns: Sequence[Sequence[str]] = spec["columns"]
    frames = [_spark_frame(spark, model, r, columns) for r in results]
    if not frames:
        schema = ", ".join(f"`{c}` {t}" for c, t in columns)
        return spark.createDataFrame([], schema)
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


def _results(result: Any) -> list[Any]:
    if result is None:
        return []
    if hasattr(result, "__next__"):
        return [r for r in result if r is not None]
    return [result]


def _spark_frame(spark: Any, model: str, result: Any, columns: Sequence[Sequence[str]]) -> Any:
    kind = type(result).__module__.split(".")[0]
    if kind == "pandas":
        names = [c for c, _ in columns]
        missing = [c for c in names if c not in {str(n).lower() for n in result.columns}]
        if missing:
            raise ValueError(
                f"{model}: the pandas DataFrame has no column {missing[0]} (declared in columns=)"
            )
        result = result.rename(columns={n: str(n).lower() for n in result.columns})[names]
        rows = [
            tuple(None if _missing(v) else _plain(v) for v in row)
            for row in result.itertuples(index=False, name=None)
        ]
        schema = ", ".join(f"`{c}` {t}" for c, t in columns)
        return spark.createDataFrame(rows, schema)
    if kind != "pyspark" or not hasattr(result, "selectExpr"):
        raise TypeError(
            f"{model}: the model returned {type(result).__module__}.{type(result).__name__}; "
            "on Spark a Python model returns a PySpark DataFrame or a pandas DataFrame "
            "(or yields several)"
        )
    present = {c.lower() for c in result.columns}
    missing = [c for c, _ in columns if c not in present]
    if missing:
        raise ValueError(
            f"{model}: the DataFrame has no column {missing[0]} (declared in columns=)"
        )
    return result.selectExpr(*[f"CAST(`{c}` AS {t}) AS `{c}`" for c, t in columns])


def _missing(value: Any) -> bool:
    try:
        return bool(value != value)  # noqa: PLR0124 - NaN and NaT are not equal to themselves
    except (TypeError, ValueError):
        return False


def _plain(value: Any) -> Any:
    """A pandas/numpy scalar as the Python value Spark takes."""
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    to_py = getattr(value, "to_pydatetime", None)
    return to_py() if callable(to_py) else value
