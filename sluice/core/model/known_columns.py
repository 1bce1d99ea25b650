"""The columns of the tables a project load has read so far, for @STAR and @UNION.

The loader reads model files in passes (:mod:`sluice.core.model.loader`): a file whose
macros ask for the columns of a model not read yet raises :class:`Pending` and waits for
the next pass (parents before children). When a pass reads nothing new, the last pass
reads the rest with the columns known, and :meth:`KnownColumns.unknown_hint` says what to
declare (a cycle of models, or a table whose columns nobody declares).

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> known = KnownColumns([Model("raw.e", Kind(KindName.EXTERNAL), columns=(("id", "INT"),))])
>>> known("raw.e")
[('id', 'INT')]
>>> known("mart.daily")
Traceback (most recent call last):
...
sluice.core.model.known_columns.Pending: mart.daily
>>> known.last_pass({})
>>> known("mart.daily") is None
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.core.model.definition import KindName, Model
from sluice.core.model.macro.columns import query_columns


class Pending(Exception):
    """A file's macros need the columns of ``table``, a model not read yet."""

    def __init__(self, table: str) -> None:
        super().__init__(table)
        self.table = table


class KnownColumns:
    """The columns of the tables read so far, for @STAR and @UNION (``ColumnsOf``): a
    model's declared columns, a seed's, an external table's, or the columns an upstream
    model's query names."""

    def __init__(self, externals: Sequence[Model]) -> None:
        self.models: dict[str, Model] = {}
        self.waits: dict[str, str] = {}
        """File -> the table it waited for in the last pass it was read."""
        self.waiting: dict[str, str] = {}
        """Model (of a file that waited) -> the table it waits for."""
        self.final = False
        self.asked = 0
        self.learn(externals)

    def learn(self, models: Sequence[Model]) -> None:
        for model in models:
            self.models.setdefault(model.name, model)

    def last_pass(self, files: Mapping[str, str]) -> None:
        """Unknown tables are unknown from now on; ``files``: model -> its waiting file."""
        self.final = True
        self.waiting = {name: self.waits[file] for name, file in files.items()}

    def __call__(self, table: str) -> list[tuple[str, str]] | None:
        self.asked += 1
        model = self.models.get(table)
        if model is None:
            if not self.final:
                raise Pending(table)
            return None
        if model.columns:
            return list(model.columns)
        if model.query_sql:
            return query_columns(model.query_sql)
        return None

    def unknown_hint(self, table: str) -> str:
        """Why ``table``'s columns are unknown, and what to declare."""
        model = self.models.get(table)
        if model is not None and model.kind.name == KindName.EXTERNAL:
            return f"list the columns of {table} under `columns:` in {model.path}"
        if model is not None and model.query_sql:
            return (
                f"the query of {table} ({model.path}:{model.line}) does not name every "
                f"column it returns (SELECT * or an expression without an alias): declare "
                f"`columns (...)` in its MODEL, or name each column in its query"
            )
        if model is not None:
            return f"declare `columns (...)` in the MODEL of {table} ({model.path}:{model.line})"
        if table in self.waiting:
            chain = [table]
            while chain[-1] in self.waiting and len(chain) <= len(self.waiting):
                chain.append(self.waiting[chain[-1]])
                if chain[-1] in chain[:-1]:
                    cycle = chain[chain.index(chain[-1]) :]
                    return (
                        "the models' @STAR/@UNION need each other's columns in a cycle: "
                        + " -> ".join(cycle)
                        + "; declare `columns (...)` in one of these MODELs to break it"
                    )
            return (
                f"{table}'s own query needs the columns of {chain[-1]}, which Sluice does "
                f"not know either (see the error on {chain[-2]})"
            )
        return (
            f"{table} is not a model, seed or external table of this project: declare it "
            "in external_models.yaml with its `columns:`"
        )


class Placeholder:
    """Columns for every table, to learn the model names of files that wait."""

    def __call__(self, table: str) -> list[tuple[str, str]]:
        return [("__sluice_unknown__", "")]
