"""The table diff on Spark: a narrow pass that counts and narrows, then an exact one.

Phase 1 (one read and one shuffle of each table, narrow rows; ``explain()`` shows it):

1. Each side is projected to its key parts and a 128-bit fingerprint of its compared
   values (:mod:`sluice.core.tablediff.fingerprint`), cast to a type both sides share. A
   key part ``k`` becomes two plain columns, ``coalesce(k, default)`` and ``k IS NULL``:
   joining on both is a null-safe join (NULL matches NULL, part by part) without
   concatenating anything, so ``('a|b', 'c')`` and ``('a', 'b|c')`` stay apart. The keys
   are kept exact, not hashed (a timestamp as its microseconds, which survive Python).
2. Each side is shuffled once by those key columns and sorted within its partitions. A
   window over that very partitioning and order counts the rows of each key and keeps its
   first row, so a duplicated key enters the join once (no m x n blow-up) and carries its
   count; the window needs no shuffle or sort of its own.
3. The two sides are sort-merge joined (full outer) on the same columns: the shuffle and
   sort of step 2 already satisfy the join, so nothing is shuffled again.
4. While the keys of the joined rows whose fingerprints differ are gathered (at most
   :data:`EXACT_LIMIT` + 1 of them, kept on the executors by ``localCheckpoint``), an
   observation computes every count of the result but the per-column ones: rows, joined,
   source and target only, NULL and duplicate keys, and the first ``sample`` keys of each
   side's unmatched rows.

Phase 2 (exact): both tables are filtered to those keys (a broadcast semi-join on the
same null-safe key columns), and the few rows left go through the full comparison: a
window and a full outer join as above, then one aggregation computing, per column, which
rows really differ (rounding, tolerance, NaN, -0.0 and map order are decided here) and
the sample rows, by key. A row whose fingerprints are equal is equal in every column;
per column, ``matched = joined - differing in that column``. Nothing is compared twice.

When more than :data:`EXACT_LIMIT` joined rows have different fingerprints (a change to
most rows), phase 2 gives way to the full comparison of both tables: the window, join and
aggregation above on full rows, with every count. The extra cost is phase 1's narrow pass.

Measured alternatives, slower on 10M rows: deduplicating each side by a hash aggregation
and a shuffled hash join (its hash maps spill: about 1.6x phase 1's time), and one pass
over full rows (about 1.4x both phases; it remains as the fallback).

Semantics: a key that is not unique on either side is left out of the comparison (its
rows are counted in ``duplicate_rows``, its distinct keys per side in ``duplicate_keys``).
Rows with a NULL key part are joined null-safely and counted in ``null_keys``. Floating
and decimal values are rounded to ``decimals`` places before comparing, or with a
``tolerance`` compared as doubles within it (integers too); NULL equals NULL, NaN equals
NaN. Compatible type changes (int to bigint, float to double, decimal widths, date to
timestamp, char/varchar to string) are compared after casting to the wider type; other
changes raise :class:`TableDiffError` naming the column (``--skip`` it to go on). A row
counted as equal because of equal fingerprints differs only if two independent 64-bit
hashes both collide on it (odds about ``2**-128`` per row).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql import types as st

from sluice.core.model.names import quote_column
from sluice.core.spark.steps.query import json_safe
from sluice.core.tablediff.fingerprint import fingerprint
from sluice.core.tablediff.result import (
    ColumnStats,
    DiffOptions,
    Samples,
    SchemaDiff,
    Sides,
    TableDiffError,
    TableDiffResult,
)
from sluice.core.tablediff.schema import TIMES, Compared, check_keys, comparison, schema_diff
from sluice.core.tablediff.where import parse_where

EXACT_LIMIT = 500_000
"""At most this many joined rows with different fingerprints are compared on their own.

Their keys are broadcast, so this also bounds that memory. Measured on 10M rows x 12
columns, 2 cores: phase 2 takes about 5 s for 100k keys and 11 s for 1.1M, the full
comparison about 38 s.
"""

_WANTED = "__sluice_"  # prefix of the key columns gathered in phase 1


def diff_tables(
    spark: SparkSession,
    source: str,
    target: str,
    *,
    keys: Sequence[str],
    options: DiffOptions | None = None,
    name: str | None = None,
    source_label: str | None = None,
    target_label: str | None = None,
) -> TableDiffResult:
    """Compare table (or view) ``source`` with ``target``, joined on ``keys``.

    Raises:
        TableDiffError: a table is missing, a key or filter column is missing on a side,
            the filter is not a condition, or a column changed to an incompatible type.
    """
    options = options or DiffOptions()
    labels = (source_label or source, target_label or target)
    sides = (_read(spark, source, "source", labels[0]), _read(spark, target, "target", labels[1]))
    fields = [{f.name.lower(): f for f in df.schema.fields} for df in sides]
    key_names = check_keys(keys, options, fields, (source, target), labels)
    where = parse_where(options.where) if options.where is not None else None
    if where is not None:
        sides = _filtered(sides, where.sql, where.columns, fields, labels)
    schema = schema_diff(fields)
    compared = [
        comparison(col, fields[0][col].dataType, fields[1][col].dataType, labels)
        for col in fields[0]
        if col in fields[1] and col not in key_names and col not in options.skip
    ]
    key_types = [
        comparison(k, fields[0][k].dataType, fields[1][k].dataType, labels, key=True)
        for k in key_names
    ]
    plan = _Plan(spark, sides, fields, key_types, compared, options)
    counts, wanted = plan.fingerprinted()
    row = plan.full() if wanted is None else plan.narrowed(counts, wanted)
    return _result(
        row,
        name or f"{source} vs {target}",
        (source, target),
        labels,
        key_types,
        compared,
        schema,
        options,
        where.sql if where else None,
    )


@dataclass(frozen=True)
class _Plan:
    """The two tables as compared: their columns, key parts and compared columns."""

    spark: SparkSession
    sides: tuple[DataFrame, DataFrame]
    fields: list[dict[str, st.StructField]]
    key_types: Sequence[Compared]
    compared: Sequence[Compared]
    options: DiffOptions

    def fingerprinted(self) -> tuple[dict[str, Any], DataFrame | None]:
        """Phase 1: the counts, and the keys whose fingerprints differ (None: too many)."""
        narrow = [self._narrow(i) for i in (0, 1)]
        joined = _joined(narrow[0], narrow[1], self.key_types)
        differs = (sf.col("sf") != sf.col("tf")) | (sf.col("sg") != sf.col("tg"))
        key_columns = _key_columns(self.key_types)
        rows = joined.select(
            *_kinds(self.key_types),
            (sf.col("both") & differs).alias("check"),
            *(f"{p}{c}" for p in "st" for c in key_columns),
        )
        aggs = [*_counts(), sf.count_if("check").alias("checks")]
        if self.options.sample:  # the first keys of the unmatched rows, for their samples
            for p in "st":
                only = sf.col(f"{p}_only")
                key = sf.struct(*(sf.col(f"{p}{c}").alias(_WANTED + c) for c in key_columns))
                order = sf.struct(*(_key_value(p, i) for i in range(len(self.key_types))))
                keys = sf.min_by(sf.when(only, key), sf.when(only, order), self.options.sample)
                aggs.append(keys.alias(f"{p}_keys"))
        observation = Observation()
        wanted = (
            rows.observe(observation, *aggs)
            .where("check")
            .select(*(sf.col(f"s{c}").alias(_WANTED + c) for c in key_columns))
            .limit(EXACT_LIMIT + 1)
            .localCheckpoint()
        )
        if wanted.count() > EXACT_LIMIT:
            return {}, None
        counts = dict(observation.get)
        if not counts:
            # Spark Connect does not hand back the metrics of a plan run by a checkpoint:
            # count them in a pass of their own there.
            first = rows.agg(*aggs).first()
            counts = first.asDict() if first is not None else {}
        return counts, wanted

    def narrowed(self, counts: dict[str, Any], wanted: DataFrame) -> dict[str, Any]:
        """Phase 2: phase 1's counts completed by the exact comparison of the wanted keys.

        ``wanted`` holds the keys of the joined rows whose fingerprints differ; the keys
        of the first unmatched rows (samples) come back from Python and join them.
        """
        unmatched = [tuple(r) for p in "st" for r in counts.get(f"{p}_keys") or ()]
        if unmatched:
            wanted = wanted.unionByName(self.spark.createDataFrame(unmatched, wanted.schema))
        exact: dict[str, Any] = {}
        if counts["checks"] or unmatched:
            filtered = [
                _semi(df, self.fields[i], self.key_types, wanted) for i, df in enumerate(self.sides)
            ]
            exact = self._compared(*filtered)
        # The joined rows not compared here have equal fingerprints: equal in every column.
        unchecked = int(counts["joined"]) - int(exact.get("joined", 0))
        out = {**counts, "differing_rows": exact.get("differing_rows", 0)}
        for j in range(len(self.compared)):
            out[f"m{j}"] = unchecked + int(exact.get(f"m{j}", 0))
        return out | {k: exact.get(k) for k in ("s_only", "t_only", "differing")}

    def full(self) -> dict[str, Any]:
        """Every count and sample from the full rows of both tables."""
        return self._compared(*self.sides)

    def _compared(self, source: DataFrame, target: DataFrame) -> dict[str, Any]:
        """One aggregation over the full rows of ``source`` and ``target``, joined."""
        joined = _joined(
            _side(source, "s", self.fields[0], self.key_types, self.compared),
            _side(target, "t", self.fields[1], self.key_types, self.compared),
            self.key_types,
        )
        flagged = _flagged(joined, self.key_types, self.compared, self.options)
        row = flagged.agg(*_aggregates(self.key_types, self.compared, self.options)).collect()[0]
        return row.asDict()

    def _narrow(self, i: int) -> DataFrame:
        prefix, fields = "st"[i], self.fields[i]
        keys = _key_parts(fields, self.key_types, portable=True)
        values = [(_value(fields, c), c) for c in self.compared]
        hashes = fingerprint(values, self.options)
        projected = self.sides[i].select(
            *_named(keys, prefix, self.key_types),
            hashes[0].alias(f"{prefix}f"),
            hashes[1].alias(f"{prefix}g"),
        )
        return _counted(projected, prefix, self.key_types)


def _read(spark: SparkSession, table: str, side: str, label: str) -> DataFrame:
    try:
        return spark.table(table)
    except AnalysisException as exc:
        first = (str(exc).strip().splitlines() or ["not found"])[0]
        named = f" ({label})" if label != table else ""
        raise TableDiffError(
            f"cannot read the {side} table {table}{named}: {first}",
            hint="name an existing table or view (schema.table)",
        ) from None


def _filtered(
    sides: tuple[DataFrame, DataFrame],
    sql: str,
    columns: tuple[str, ...],
    fields: list[dict[str, st.StructField]],
    labels: tuple[str, str],
) -> tuple[DataFrame, DataFrame]:
    out = []
    for index, df in enumerate(sides):
        missing = [c for c in columns if c not in fields[index]]
        if missing:
            raise TableDiffError(
                f"--where reads {', '.join(missing)}, which {labels[index]} does not have",
                hint="filter on columns both sides have",
            )
        try:
            kind = df.select(sf.expr(sql)).schema.fields[0].dataType
        except AnalysisException as exc:
            first = (str(exc).strip().splitlines() or ["invalid"])[0]
            raise TableDiffError(
                f"--where {sql!r} does not run on Spark: {first}", hint="fix the condition"
            ) from None
        if not isinstance(kind, st.BooleanType):
            raise TableDiffError(
                f"--where {sql!r} is {kind.simpleString()}, not a condition",
                hint="give a boolean condition, e.g. amount > 0",
            )
        out.append(df.filter(sql))
    return out[0], out[1]


def _key_columns(key_types: Sequence[Compared]) -> list[str]:
    return [f"k{i}" for i in range(len(key_types))] + [f"n{i}" for i in range(len(key_types))]


def _default(dtype: st.DataType) -> Column:
    """A non-NULL value of ``dtype`` standing in for NULL keys (their flag tells them apart)."""
    if isinstance(dtype, st.StringType):
        return sf.lit("")
    if isinstance(dtype, st.BooleanType):
        return sf.lit(False)
    if isinstance(dtype, st.BinaryType):
        return sf.lit(bytearray())
    if isinstance(dtype, TIMES):
        return sf.lit("1970-01-01").cast(dtype)
    return sf.lit(0).cast(dtype)


def _value(fields: dict[str, st.StructField], column: Compared) -> Column:
    return sf.col(quote_column(fields[column.name].name)).cast(column.dtype)


def _key_parts(
    fields: dict[str, st.StructField], key_types: Sequence[Compared], portable: bool = False
) -> list[Column]:
    """Each key part never NULL, then each is-NULL flag (in the order of ``_key_columns``).

    ``portable`` parts come back unchanged from a trip through Python (phase 1's keys
    do): a timestamp as its microseconds, whatever the time zone of the Python process.
    """
    values, flags = [], []
    for key in key_types:
        value, dtype = _value(fields, key), key.dtype
        flags.append(value.isNull())
        if portable and isinstance(dtype, st.TimestampType):
            value, dtype = sf.unix_micros(value), st.LongType()
        elif portable and isinstance(dtype, st.CharType | st.VarcharType):
            value, dtype = value.cast("string"), st.StringType()
        values.append(sf.coalesce(value, _default(dtype)))
    return values + flags


def _named(parts: list[Column], prefix: str, key_types: Sequence[Compared]) -> list[Column]:
    return [part.alias(prefix + c) for part, c in zip(parts, _key_columns(key_types), strict=True)]


def _counted(df: DataFrame, prefix: str, key_types: Sequence[Compared]) -> DataFrame:
    """``df``'s first row of each key with the key's row count (``{prefix}cnt``).

    The window shares the shuffle and sort the join needs, so it costs no exchange.
    """
    keys = [f"{prefix}{c}" for c in _key_columns(key_types)]
    group = Window.partitionBy(*keys).orderBy(*keys)
    whole = group.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return (
        df.select(
            "*",
            sf.count(sf.lit(1)).over(whole).alias(f"{prefix}cnt"),
            sf.lag(sf.lit(1)).over(group).isNull().alias(f"{prefix}first"),
        )
        .where(sf.col(f"{prefix}first"))
        .drop(f"{prefix}first")
    )


def _side(
    df: DataFrame,
    prefix: str,
    fields: dict[str, st.StructField],
    key_types: Sequence[Compared],
    compared: Sequence[Compared],
) -> DataFrame:
    """One side: key parts (value, is-null), compared values, and its key's row count."""
    keys = _named(_key_parts(fields, key_types), prefix, key_types)
    values = [_value(fields, c).alias(f"{prefix}v{j}") for j, c in enumerate(compared)]
    return _counted(df.select(*keys, *values), prefix, key_types)


def _semi(
    df: DataFrame,
    fields: dict[str, st.StructField],
    key_types: Sequence[Compared],
    wanted: DataFrame,
) -> DataFrame:
    """The rows of ``df`` whose key is one of ``wanted``'s (null-safe, exact)."""
    parts = _key_parts(fields, key_types, portable=True)
    on = [p == sf.col(_WANTED + c) for p, c in zip(parts, _key_columns(key_types), strict=True)]
    return df.join(sf.broadcast(wanted), on, "left_semi")


def _joined(source: DataFrame, target: DataFrame, key_types: Sequence[Compared]) -> DataFrame:
    on = [sf.col(f"s{c}") == sf.col(f"t{c}") for c in _key_columns(key_types)]
    return source.join(target, on, "full_outer")


def _equal(column: Compared, j: int, options: DiffOptions) -> Column:
    """True when the column's two values count as the same (never NULL)."""
    s, t = sf.col(f"sv{j}"), sf.col(f"tv{j}")
    if isinstance(column.dtype, st.MapType):  # maps have no equality: compare sorted entries
        return sf.array_sort(sf.map_entries(s)).eqNullSafe(sf.array_sort(sf.map_entries(t)))
    # Equal values (most rows) short-circuit before the costlier rounding or subtraction.
    if column.numeric and options.tolerance is not None:
        gap = sf.abs(s.cast("double") - t.cast("double"))
        return s.eqNullSafe(t) | sf.coalesce(gap <= sf.lit(options.tolerance), sf.lit(False))
    if column.rounded:
        rounded = sf.round(s, options.decimals) == sf.round(t, options.decimals)
        return s.eqNullSafe(t) | sf.coalesce(rounded, sf.lit(False))
    return s.eqNullSafe(t)


def _key_value(prefix: str, i: int) -> Column:
    return sf.when(~sf.col(f"{prefix}n{i}"), sf.col(f"{prefix}k{i}"))


def _shown(column: Column, dtype: st.DataType) -> Column:
    """A value as it is shown in samples: timestamps as text, in the session's time zone."""
    if isinstance(dtype, st.TimestampType | st.TimestampNTZType):
        return column.cast("string")
    if (
        isinstance(dtype, st.ArrayType | st.MapType | st.StructType)
        and "timestamp" in dtype.simpleString()
    ):
        return sf.to_json(column)
    return column


def _kinds(key_types: Sequence[Compared]) -> list[Column]:
    """What a joined row is: its keys' row counts, and joined, unmatched or duplicated."""
    in_s, in_t = sf.col("scnt").isNotNull(), sf.col("tcnt").isNotNull()
    s_cnt, t_cnt = sf.coalesce(sf.col("scnt"), sf.lit(0)), sf.coalesce(sf.col("tcnt"), sf.lit(0))
    dup = (s_cnt > 1) | (t_cnt > 1)
    keys = range(len(key_types))
    return [
        s_cnt.alias("s_cnt"),
        t_cnt.alias("t_cnt"),
        dup.alias("dup"),
        (in_s & in_t & ~dup).alias("both"),
        (in_s & ~in_t & ~dup).alias("s_only"),
        (in_t & ~in_s & ~dup).alias("t_only"),
        (in_s & _any([sf.col(f"sn{i}") for i in keys])).alias("null_s"),
        (in_t & _any([sf.col(f"tn{i}") for i in keys])).alias("null_t"),
    ]


def _flagged(
    joined: DataFrame,
    key_types: Sequence[Compared],
    compared: Sequence[Compared],
    options: DiffOptions,
) -> DataFrame:
    """The joined rows with what each row is, computed once per row for every aggregate."""
    keys = range(len(key_types))
    equals = [_equal(c, j, options).alias(f"e{j}") for j, c in enumerate(compared)]
    flags = [*_kinds(key_types), *equals]
    if options.sample:
        flags += [_key_value(p, i).alias(f"{p}key{i}") for p in "st" for i in keys]
        flags += [
            _shown(sf.col(f"{p}v{j}"), c.dtype).alias(f"{p}v{j}")
            for p in "st"
            for j, c in enumerate(compared)
        ]
    equal = _all([sf.col(f"e{j}") for j in range(len(compared))])
    return joined.select(*flags).withColumn("differs", sf.col("both") & ~equal)


def _counts() -> list[Column]:
    """The counts of rows and keys, over the rows of ``_kinds``."""
    zero = sf.lit(0).cast("long")
    return [
        sf.sum("s_cnt").alias("source_rows"),
        sf.sum("t_cnt").alias("target_rows"),
        sf.count_if("both").alias("joined"),
        sf.count_if("s_only").alias("source_only"),
        sf.count_if("t_only").alias("target_only"),
        sf.sum(sf.when(sf.col("null_s"), sf.col("s_cnt")).otherwise(zero)).alias("null_s"),
        sf.sum(sf.when(sf.col("null_t"), sf.col("t_cnt")).otherwise(zero)).alias("null_t"),
        sf.count_if(sf.col("s_cnt") > 1).alias("dupkeys_s"),
        sf.count_if(sf.col("t_cnt") > 1).alias("dupkeys_t"),
        sf.sum(sf.when(sf.col("dup"), sf.col("s_cnt")).otherwise(zero)).alias("duprows_s"),
        sf.sum(sf.when(sf.col("dup"), sf.col("t_cnt")).otherwise(zero)).alias("duprows_t"),
    ]


def _aggregates(
    key_types: Sequence[Compared], compared: Sequence[Compared], options: DiffOptions
) -> list[Column]:
    both = sf.col("both")
    aggs = [
        *_counts(),
        sf.count_if("differs").alias("differing_rows"),
        *(sf.count_if(both & sf.col(f"e{j}")).alias(f"m{j}") for j in range(len(compared))),
    ]
    if not options.sample:
        return aggs
    n = options.sample
    for p, only in (("s", sf.col("s_only")), ("t", sf.col("t_only"))):
        row = sf.struct(
            *(sf.col(f"{p}key{i}").alias(k.name) for i, k in enumerate(key_types)),
            *(sf.col(f"{p}v{j}").alias(c.name) for j, c in enumerate(compared)),
        )
        order = sf.struct(*(sf.col(f"{p}key{i}") for i in range(len(key_types))))
        aggs.append(sf.min_by(sf.when(only, row), sf.when(only, order), n).alias(f"{p}_only"))
    differs = sf.col("differs")
    row = sf.struct(
        *(sf.col(f"skey{i}").alias(f"k{i}") for i in range(len(key_types))),
        *(sf.col(f"e{j}") for j in range(len(compared))),
        *(sf.col(f"{p}v{j}").alias(f"{p}{j}") for p in "st" for j in range(len(compared))),
    )
    order = sf.struct(*(sf.col(f"skey{i}") for i in range(len(key_types))))
    aggs.append(sf.min_by(sf.when(differs, row), sf.when(differs, order), n).alias("differing"))
    return aggs


def _any(flags: list[Column]) -> Column:
    return reduce(operator.or_, flags)


def _all(flags: list[Column]) -> Column:
    return reduce(operator.and_, flags, sf.lit(True))


def _result(
    row: Any,
    name: str,
    tables: tuple[str, str],
    labels: tuple[str, str],
    key_types: Sequence[Compared],
    compared: Sequence[Compared],
    schema: SchemaDiff,
    options: DiffOptions,
    where: str | None,
) -> TableDiffResult:
    joined = int(row["joined"])
    columns = {
        c.name: ColumnStats(int(row[f"m{j}"]), joined - int(row[f"m{j}"]))
        for j, c in enumerate(compared)
    }
    samples = Samples()
    if options.sample:
        samples = Samples(
            tuple(json_safe(r) for r in row["s_only"] or ()),
            tuple(json_safe(r) for r in row["t_only"] or ()),
            tuple(_differing(r, key_types, compared) for r in row["differing"] or ()),
        )
    source_only, target_only = int(row["source_only"]), int(row["target_only"])
    differing = int(row["differing_rows"])
    dup_rows = Sides(int(row["duprows_s"] or 0), int(row["duprows_t"] or 0))
    identical = (
        not schema.has_changes
        and source_only == target_only == differing == 0
        and dup_rows.source == dup_rows.target == 0
    )
    notes = []
    if dup_rows.source or dup_rows.target:
        notes.append(
            f"{dup_rows.source} {labels[0]} and {dup_rows.target} {labels[1]} rows have keys "
            "that are not unique: they are counted, not compared"
        )
    return TableDiffResult(
        name=name,
        source=labels[0],
        target=labels[1],
        source_table=tables[0],
        target_table=tables[1],
        keys=tuple(k.name for k in key_types),
        decimals=options.decimals,
        tolerance=options.tolerance,
        where=where,
        skipped=options.skip,
        identical=identical,
        joined=joined,
        null_keys=Sides(int(row["null_s"] or 0), int(row["null_t"] or 0)),
        duplicate_keys=Sides(int(row["dupkeys_s"]), int(row["dupkeys_t"])),
        duplicate_rows=dup_rows,
        schema=schema,
        columns=columns,
        samples=samples,
        note="; ".join(notes) or None,
        source_rows=int(row["source_rows"] or 0),
        target_rows=int(row["target_rows"] or 0),
        source_only=source_only,
        target_only=target_only,
        differing_rows=differing,
    )


def _differing(
    sample: Any, key_types: Sequence[Compared], compared: Sequence[Compared]
) -> dict[str, Any]:
    """``{key: value, ..., column: {"source", "target"}}`` for the columns that differ."""
    out: dict[str, Any] = {k.name: json_safe(sample[f"k{i}"]) for i, k in enumerate(key_types)}
    for j, column in enumerate(compared):
        if not sample[f"e{j}"]:
            out[column.name] = {
                "source": json_safe(sample[f"s{j}"]),
                "target": json_safe(sample[f"t{j}"]),
            }
    return out
