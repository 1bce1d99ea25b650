"""Row fingerprints: a 128-bit hash of a row's compared values, a filter for the table diff.

Two rows whose fingerprints are equal are counted as equal in every column; two rows
whose fingerprints differ are compared exactly, column by column (they may still be equal:
``-0.0`` and ``0.0``, two NaNs, the same map in another order, values within the
``tolerance``). So a fingerprint can only err by calling two different rows equal, which
takes both of two independent 64-bit hashes colliding on that very pair: about ``2**-128``
per row, ``3e-28`` for 10^11 rows compared.

The hashed values are made unambiguous first. ``xxhash64`` skips NULLs, so each value is
preceded by its is-NULL flag ((1, NULL) and (NULL, 1) do not hash alike), and inside
arrays, maps and structs every element and field carries its flag too, and every array
its size. Given the columns' types, distinct rows then feed the hash distinct sequences.

Rounded columns (without a ``tolerance``) hash what the comparison compares, not the raw
value, so noise below ``decimals`` does not send a row to the exact comparison: a
decimal is hashed rounded (``round``, as compared), a double by its rounding bin
``floor(x * 10^decimals + 0.5)``, computed in floating point. That bin is Spark's
``round(x, decimals)`` (scaled) unless ``x * 10^decimals`` is within a relative
``2^-40`` of a rounding tie ``n + 0.5`` or beyond ``2^50``; such doubles are hashed raw,
flagged so, and left to the exact comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as sf
from pyspark.sql import types as st

from sluice.core.tablediff.result import DiffOptions
from sluice.core.tablediff.schema import Compared

_MAX_BINNED_DECIMALS = 15  # 10**15 is exact as a double; beyond, doubles are hashed raw


def fingerprint(values: Sequence[tuple[Column, Compared]], options: DiffOptions) -> list[Column]:
    """Two independent 64-bit hashes of the ``(value, column)`` pairs of one row."""
    inputs = [part for value, column in values for part in _hashed(value, column, options)]
    if not inputs:
        return [sf.lit(0).cast("long"), sf.lit(0).cast("long")]
    return [sf.xxhash64(*inputs), sf.xxhash64(sf.lit("sluice"), *inputs)]


def _hashed(value: Column, column: Compared, options: DiffOptions) -> list[Column]:
    flag = value.isNull()
    if column.rounded and options.tolerance is None:
        dtype = column.dtype
        if isinstance(dtype, st.DoubleType) and options.decimals <= _MAX_BINNED_DECIMALS:
            return [flag, *_bin(value, options.decimals)]
        if isinstance(dtype, st.DecimalType) and dtype.scale > options.decimals:
            return [flag, sf.round(value, options.decimals)]
    return [flag, _unambiguous(value, column.dtype)]


def _bin(value: Column, decimals: int) -> list[Column]:
    """Whether the bin is exact, then the bin or else the raw value (see the docstring).

    With ``q = x * 10^d`` computed, ``|q - 10^d * D| < |q| * 2^-51`` for the decimal
    ``D`` that ``round`` reads ``x`` as (its shortest string, within half an ulp); a
    margin of ``|q| * 2^-40 + 2^-30`` from the tie ``n + 0.5`` keeps both in one bin.
    """
    scaled = value * sf.lit(float(10**decimals))
    margin = sf.abs(scaled) * sf.lit(2.0**-40) + sf.lit(2.0**-30)
    tie = sf.abs(scaled - sf.floor(scaled) - sf.lit(0.5))
    exact = (sf.abs(scaled) < sf.lit(2.0**50)) & (tie > margin)
    return [exact, sf.when(exact, sf.floor(scaled + sf.lit(0.5))), sf.when(~exact, value)]


def _unambiguous(value: Column, dtype: st.DataType) -> Column:
    """``value`` with the NULLs nested in it flagged (hashing skips NULLs, not flags)."""
    if isinstance(dtype, st.ArrayType):
        element = dtype.elementType
        flagged = sf.transform(value, lambda x: sf.struct(x.isNull(), _unambiguous(x, element)))
        return sf.struct(sf.size(value), flagged)
    if isinstance(dtype, st.MapType):  # maps do not hash: their entries, in their order
        entry = st.StructType(
            [
                st.StructField("key", dtype.keyType, False),
                st.StructField("value", dtype.valueType, dtype.valueContainsNull),
            ]
        )
        return _unambiguous(sf.map_entries(value), st.ArrayType(entry, False))
    if isinstance(dtype, st.StructType):
        parts = [value.getField(f.name) for f in dtype.fields]
        return sf.struct(
            sf.lit(len(parts)),
            *(
                c
                for part, f in zip(parts, dtype.fields, strict=True)
                for c in (part.isNull(), _unambiguous(part, f.dataType))
            ),
        )
    return value
