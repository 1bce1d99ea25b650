"""What a table diff found: frozen values with a JSON form (pure).

The result is computed once, on Spark, and read many times without it: the CLI prints it,
the state store keeps it (``JobResult.payload``), and the bot renders it on the pull
request later. :meth:`TableDiffResult.to_json` and :meth:`TableDiffResult.from_json` are
exact inverses, so a stored result renders the same as a fresh one.

Counting rules (documented once, here, and relied on by the renderers):

- ``source_rows = joined + source_only + duplicate_rows.source`` and likewise for the
  target: a row is either joined to exactly one row of the other side, or has no partner,
  or has a key that is not unique (on either side) and is left out of the comparison.
- ``null_keys`` counts rows with a NULL in any key column; they are still joined, NULL
  matching NULL part by part.
- ``columns`` covers the joined rows only; ``matched + differed == joined`` per column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sluice.core.errors import SluiceError

JsonRow = Mapping[str, Any]


class SidesJson(TypedDict):
    """:meth:`Sides.to_json`."""

    source: int | None
    target: int | None


class ColumnJson(TypedDict):
    """A column only one side has."""

    name: str
    type: str


class TypeChangeJson(TypedDict):
    """:class:`TypeChange`, as JSON."""

    name: str
    source_type: str
    target_type: str


class SchemaJson(TypedDict):
    """:meth:`SchemaDiff.to_json`."""

    added: list[ColumnJson]
    removed: list[ColumnJson]
    changed: list[TypeChangeJson]


class ColumnStatsJson(TypedDict):
    """:class:`ColumnStats`, as JSON (``match_rate`` derived)."""

    matched: int
    differed: int
    match_rate: float | None


class SamplesJson(TypedDict):
    """:meth:`Samples.to_json`: rows of JSON values."""

    source_only: list[dict[str, Any]]
    target_only: list[dict[str, Any]]
    differing: list[dict[str, Any]]


class TableDiffJson(TypedDict):
    """:meth:`TableDiffResult.to_json`: the keys of ``sluice table-diff --json``, of a
    stored result, and of a ``table_diff`` step's result
    (:class:`sluice.core.spark.results.TableDiffDone`)."""

    name: str
    source: str
    target: str
    source_table: str
    target_table: str
    keys: list[str]
    decimals: int
    tolerance: float | None
    where: str | None
    skipped: list[str]
    same_table: bool
    identical: bool
    source_rows: int | None
    target_rows: int | None
    row_change_pct: float | None
    joined: int | None
    source_only: int | None
    target_only: int | None
    differing_rows: int | None
    null_keys: SidesJson
    duplicate_keys: SidesJson
    duplicate_rows: SidesJson
    schema: SchemaJson
    columns: dict[str, ColumnStatsJson]
    samples: SamplesJson
    note: str | None


class TableDiffError(SluiceError):
    """A table diff cannot run as asked: unknown model or environment, bad keys or filter."""


@dataclass(frozen=True)
class DiffOptions:
    """How to compare, as the user gave it.

    Attributes:
        on: Join key columns; empty means the model's grain.
        skip: Columns left out of the value comparison.
        where: A boolean SQL condition applied to both sides (as typed; parsed before use).
        decimals: Floating and decimal values are rounded to this many places first.
        tolerance: When set, numeric values match within this absolute difference
            (instead of rounding).
        sample: At most this many sample rows of each kind.
    """

    on: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    where: str | None = None
    decimals: int = 3
    tolerance: float | None = None
    sample: int = 5

    def __post_init__(self) -> None:
        # Spark resolves names case-insensitively; so do the checks against the schemas.
        object.__setattr__(self, "on", tuple(dict.fromkeys(c.lower() for c in self.on)))
        object.__setattr__(self, "skip", tuple(dict.fromkeys(c.lower() for c in self.skip)))
        if self.decimals < 0:
            raise TableDiffError(
                f"--decimals {self.decimals} is negative", hint="give 0 or more places"
            )
        if self.tolerance is not None and not self.tolerance >= 0:
            raise TableDiffError(
                f"--tolerance {self.tolerance} is not a non-negative number",
                hint="give an absolute difference such as 0.01",
            )
        if self.sample < 0:
            raise TableDiffError(f"--sample {self.sample} is negative", hint="give 0 or more rows")

    def to_json(self) -> dict[str, Any]:
        return {
            "on": list(self.on),
            "skip": list(self.skip),
            "where": self.where,
            "decimals": self.decimals,
            "tolerance": self.tolerance,
            "sample": self.sample,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiffOptions:
        tolerance = data.get("tolerance")
        return cls(
            on=tuple(data.get("on", ())),
            skip=tuple(data.get("skip", ())),
            where=data.get("where"),
            decimals=int(data.get("decimals", 3)),
            tolerance=float(tolerance) if tolerance is not None else None,
            sample=int(data.get("sample", 5)),
        )


@dataclass(frozen=True)
class Sides:
    """One count for each side; None when it was not computed (same table)."""

    source: int | None = None
    target: int | None = None

    def to_json(self) -> SidesJson:
        return {"source": self.source, "target": self.target}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sides:
        return cls(data.get("source"), data.get("target"))


@dataclass(frozen=True)
class TypeChange:
    """A column present on both sides with a different type."""

    name: str
    source_type: str
    target_type: str


@dataclass(frozen=True)
class SchemaDiff:
    """Columns only in the target (added), only in the source (removed), retyped."""

    added: tuple[tuple[str, str], ...] = ()
    removed: tuple[tuple[str, str], ...] = ()
    changed: tuple[TypeChange, ...] = ()

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_json(self) -> SchemaJson:
        return {
            "added": [{"name": n, "type": t} for n, t in self.added],
            "removed": [{"name": n, "type": t} for n, t in self.removed],
            "changed": [
                {"name": c.name, "source_type": c.source_type, "target_type": c.target_type}
                for c in self.changed
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SchemaDiff:
        return cls(
            added=tuple((c["name"], c["type"]) for c in data.get("added", ())),
            removed=tuple((c["name"], c["type"]) for c in data.get("removed", ())),
            changed=tuple(
                TypeChange(c["name"], c["source_type"], c["target_type"])
                for c in data.get("changed", ())
            ),
        )


@dataclass(frozen=True)
class ColumnStats:
    """How one column compares over the joined rows."""

    matched: int
    differed: int

    @property
    def match_rate(self) -> float | None:
        """Matched over joined rows (0..1); None when no row joined."""
        total = self.matched + self.differed
        return self.matched / total if total else None


@dataclass(frozen=True)
class Samples:
    """Example rows: keys and compared values.

    ``differing`` rows hold the key columns and, for each column that differs in that row,
    ``{"source": value, "target": value}``.
    """

    source_only: tuple[JsonRow, ...] = ()
    target_only: tuple[JsonRow, ...] = ()
    differing: tuple[JsonRow, ...] = ()

    def to_json(self) -> SamplesJson:
        return {
            "source_only": [dict(r) for r in self.source_only],
            "target_only": [dict(r) for r in self.target_only],
            "differing": [dict(r) for r in self.differing],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Samples:
        return cls(
            tuple(data.get("source_only", ())),
            tuple(data.get("target_only", ())),
            tuple(data.get("differing", ())),
        )


@dataclass(frozen=True)
class TableDiffResult:
    """The whole comparison of a source and a target table.

    Attributes:
        name: The model compared, or ``"a vs b"`` for two tables.
        source: The source's label (environment name, or table name).
        target: The target's label.
        source_table: The table read for the source.
        target_table: The table read for the target.
        keys: The join key columns.
        same_table: Both sides are the same physical table: identical without reading it,
            and the counts are None.
        identical: Same schema, same rows, same values (within ``decimals``/``tolerance``,
            on the compared columns and the rows ``where`` selects).
    """

    name: str
    source: str
    target: str
    source_table: str
    target_table: str
    keys: tuple[str, ...]
    decimals: int
    tolerance: float | None
    where: str | None
    skipped: tuple[str, ...] = ()
    same_table: bool = False
    identical: bool = False
    source_rows: int | None = None
    target_rows: int | None = None
    joined: int | None = None
    source_only: int | None = None
    target_only: int | None = None
    differing_rows: int | None = None
    null_keys: Sides = field(default_factory=Sides)
    duplicate_keys: Sides = field(default_factory=Sides)
    duplicate_rows: Sides = field(default_factory=Sides)
    schema: SchemaDiff = field(default_factory=SchemaDiff)
    columns: Mapping[str, ColumnStats] = field(default_factory=dict)
    samples: Samples = field(default_factory=Samples)
    note: str | None = None

    @property
    def row_change_pct(self) -> float | None:
        """Target rows relative to source rows, in percent; None when not computable."""
        if self.source_rows is None or self.target_rows is None or self.source_rows == 0:
            return None
        return round((self.target_rows - self.source_rows) * 100 / self.source_rows, 4)

    @property
    def changed_columns(self) -> tuple[str, ...]:
        """Compared columns with at least one differing row, in column order."""
        return tuple(name for name, stats in self.columns.items() if stats.differed)

    def to_json(self) -> TableDiffJson:
        """One JSON object; the keys of ``sluice table-diff --json``."""
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "source_table": self.source_table,
            "target_table": self.target_table,
            "keys": list(self.keys),
            "decimals": self.decimals,
            "tolerance": self.tolerance,
            "where": self.where,
            "skipped": list(self.skipped),
            "same_table": self.same_table,
            "identical": self.identical,
            "source_rows": self.source_rows,
            "target_rows": self.target_rows,
            "row_change_pct": self.row_change_pct,
            "joined": self.joined,
            "source_only": self.source_only,
            "target_only": self.target_only,
            "differing_rows": self.differing_rows,
            "null_keys": self.null_keys.to_json(),
            "duplicate_keys": self.duplicate_keys.to_json(),
            "duplicate_rows": self.duplicate_rows.to_json(),
            "schema": self.schema.to_json(),
            "columns": {
                name: {"matched": s.matched, "differed": s.differed, "match_rate": s.match_rate}
                for name, s in self.columns.items()
            },
            "samples": self.samples.to_json(),
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: TableDiffJson) -> TableDiffResult:
        """The result :meth:`to_json` gave (``row_change_pct`` and rates are derived)."""
        return cls(
            name=data["name"],
            source=data["source"],
            target=data["target"],
            source_table=data["source_table"],
            target_table=data["target_table"],
            keys=tuple(data["keys"]),
            decimals=int(data["decimals"]),
            tolerance=data.get("tolerance"),
            where=data.get("where"),
            skipped=tuple(data.get("skipped", ())),
            same_table=bool(data.get("same_table")),
            identical=bool(data["identical"]),
            source_rows=data.get("source_rows"),
            target_rows=data.get("target_rows"),
            joined=data.get("joined"),
            source_only=data.get("source_only"),
            target_only=data.get("target_only"),
            differing_rows=data.get("differing_rows"),
            null_keys=Sides.from_json(data.get("null_keys", {})),
            duplicate_keys=Sides.from_json(data.get("duplicate_keys", {})),
            duplicate_rows=Sides.from_json(data.get("duplicate_rows", {})),
            schema=SchemaDiff.from_json(data.get("schema", {})),
            columns={
                name: ColumnStats(int(s["matched"]), int(s["differed"]))
                for name, s in data.get("columns", {}).items()
            },
            samples=Samples.from_json(data.get("samples", {})),
            note=data.get("note"),
        )


def same_table_result(
    name: str,
    source: str,
    target: str,
    table: str,
    keys: tuple[str, ...],
    options: DiffOptions,
    where: str | None = None,
) -> TableDiffResult:
    """The answer when both sides read one physical table: identical, nothing read."""
    return TableDiffResult(
        name=name,
        source=source,
        target=target,
        source_table=table,
        target_table=table,
        keys=keys,
        decimals=options.decimals,
        tolerance=options.tolerance,
        where=where,
        skipped=options.skip,
        same_table=True,
        identical=True,
        note=f"{source} and {target} use the same table {table}: identical without reading it",
    )
