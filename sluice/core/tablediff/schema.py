"""Which columns are compared, and as what: keys, schema changes, common types (pure).

Works on the tables' Spark schemas (``pyspark.sql.types``; no session needed): it decides
the join keys and skipped columns are valid, what the schema diff is, and for every
compared column the type both sides are cast to, or refuses a pair of types that do not
compare, naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import types as st

from sluice.core.tablediff.result import DiffOptions, SchemaDiff, TableDiffError, TypeChange

_INTEGRAL = (st.ByteType, st.ShortType, st.IntegerType, st.LongType)
_FLOATING = (st.FloatType, st.DoubleType)
_INT_DIGITS: dict[type[st.DataType], int] = {
    st.ByteType: 3,
    st.ShortType: 5,
    st.IntegerType: 10,
    st.LongType: 20,
}
TIMES = (st.DateType, st.TimestampType, st.TimestampNTZType)


@dataclass(frozen=True)
class Compared:
    """One column compared: its name, the type both sides are cast to, how to compare."""

    name: str
    dtype: st.DataType
    rounded: bool  # floating or decimal: rounded to ``decimals`` (or within the tolerance)
    numeric: bool


def check_keys(
    keys: Sequence[str],
    options: DiffOptions,
    fields: list[dict[str, st.StructField]],
    tables: tuple[str, str],
    labels: tuple[str, str],
) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(k.lower() for k in keys))
    if not names:
        raise TableDiffError(
            f"no join keys to compare {labels[0]} with {labels[1]}",
            hint="give the key columns with --on (a model's grain is used by default)",
        )
    for index, side in enumerate(("source", "target")):
        missing = [k for k in names if k not in fields[index]]
        if missing:
            raise TableDiffError(
                f"key column {', '.join(missing)} is not in the {side} ({labels[index]}: "
                f"{tables[index]})",
                hint=f"its columns: {', '.join(fields[index])}; choose keys with --on",
            )
    for column in options.skip:
        if column in names:
            raise TableDiffError(
                f"{column} is a join key and cannot be skipped", hint="remove it from --skip"
            )
        if column not in fields[0] and column not in fields[1]:
            known = ", ".join(dict.fromkeys([*fields[0], *fields[1]]))
            raise TableDiffError(f"--skip {column}: no such column", hint=f"columns: {known}")
    return names


def schema_diff(fields: list[dict[str, st.StructField]]) -> SchemaDiff:
    source, target = fields
    return SchemaDiff(
        added=tuple((n, f.dataType.simpleString()) for n, f in target.items() if n not in source),
        removed=tuple((n, f.dataType.simpleString()) for n, f in source.items() if n not in target),
        changed=tuple(
            TypeChange(n, f.dataType.simpleString(), target[n].dataType.simpleString())
            for n, f in source.items()
            if n in target and f.dataType.simpleString() != target[n].dataType.simpleString()
        ),
    )


def comparison(
    name: str, left: st.DataType, right: st.DataType, labels: tuple[str, str], key: bool = False
) -> Compared:
    """How ``name`` is compared, or a TableDiffError when its two types do not compare."""
    common = common_type(left, right)
    if common is None or (key and isinstance(common, st.MapType | st.ArrayType | st.StructType)):
        what = "join key" if key else "column"
        raise TableDiffError(
            f"{what} {name} is {left.simpleString()} in {labels[0]} and {right.simpleString()} "
            f"in {labels[1]}: these types do not compare",
            hint="choose other keys with --on" if key else f"leave it out with --skip {name}",
        )
    numeric = isinstance(common, st.NumericType)
    rounded = isinstance(common, (*_FLOATING, st.DecimalType))
    return Compared(name, common, rounded, numeric)


def common_type(left: st.DataType, right: st.DataType) -> st.DataType | None:
    """The type both sides are cast to (the wider one), None when they do not compare."""
    if left.simpleString() == right.simpleString():
        return left
    if isinstance(left, st.NumericType) and isinstance(right, st.NumericType):
        if isinstance(left, _FLOATING) or isinstance(right, _FLOATING):
            return st.DoubleType()
        if isinstance(left, _INTEGRAL) and isinstance(right, _INTEGRAL):
            return max(left, right, key=lambda t: _INT_DIGITS[type(t)])
        lp, ls = decimal_shape(left)
        rp, rs = decimal_shape(right)
        scale = max(ls, rs)
        precision = max(lp - ls, rp - rs) + scale
        return st.DecimalType(precision, scale) if precision <= 38 else st.DoubleType()
    strings = (st.StringType, st.VarcharType, st.CharType)
    if isinstance(left, strings) and isinstance(right, strings):
        return st.StringType()
    if isinstance(left, TIMES) and isinstance(right, TIMES):
        return st.TimestampType()
    return None


def decimal_shape(dtype: st.DataType) -> tuple[int, int]:
    if isinstance(dtype, st.DecimalType):
        return dtype.precision, dtype.scale
    return _INT_DIGITS[type(dtype)], 0
