"""The table diff's two phases give the same numbers as the full comparison.

Phase 1 compares fingerprints and phase 2 compares exactly the rows whose fingerprints
differ; with ``EXACT_LIMIT`` at 0 every diff with such a row takes the full comparison
instead. Each case runs both ways and must agree to the last sample, and the cases are
the ones a fingerprint gets wrong if done naively: NULLs moved between columns (also
inside arrays and structs), noise below the rounding, -0.0 and NaN, maps in another
order, timestamp and NULL keys of unmatched rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql import functions as sf

from sluice.core.tablediff import compute
from sluice.core.tablediff.result import ColumnStats, DiffOptions, TableDiffResult

pytestmark = pytest.mark.spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = (
    "id INT, a INT, b INT, x DOUBLE, amount DECIMAL(12,5), tags ARRAY<INT>, "
    "pair STRUCT<p: INT, q: INT>, attrs ARRAY<STRUCT<k: STRING, v: INT>>"
)
D = Decimal
A, AB, BA = [("a", 1)], [("a", 1), ("b", 2)], [("b", 2), ("a", 1)]  # map entries, in order
SOURCE = [
    (1, 1, None, 1.0, D("1.00000"), [1, None], (1, None), AB),
    (2, 2, 2, 2.0001, D("2.00010"), [2], (2, 2), A),  # noise below 3 decimals
    (3, 3, 3, 0.0, D("3.00000"), [3], (3, 3), A),  # -0.0 in the target
    (4, 4, 4, math.nan, D("4.00000"), [4], (4, 4), A),  # NaN on both sides
    (5, 5, 5, 0.0625, D("5.00000"), [5], (5, 5), A),  # a rounding tie, hashed raw
    (6, 6, 6, 6.0, D("6.00000"), [6, None], (None, 6), A),  # NULLs moved inside
    (7, 7, 7, 7.0, D("7.00000"), [7], (7, 7), AB),  # map in another order
    (8, 8, 8, 8.0, D("8.00000"), [8], (8, 8), A),  # a real change of x
    (9, 9, 9, 9.0, D("9.00049"), [9], (9, 9), None),  # decimal noise below 3 decimals
    (10, 10, 10, 10.0, D("10.0"), [10], (10, 10), A),  # source only
    (None, 0, 0, 0.0, D("0.0"), [], (0, 0), []),  # source only, NULL key
]
TARGET = [
    (1, None, 1, 1.0, D("1.00000"), [None, 1], (None, 1), AB),
    (2, 2, 2, 2.0004, D("2.00040"), [2], (2, 2), A),
    (3, 3, 3, -0.0, D("3.00000"), [3], (3, 3), A),
    (4, 4, 4, math.nan, D("4.00000"), [4], (4, 4), A),
    (5, 5, 5, 0.06250000000000001, D("5.00000"), [5], (5, 5), A),
    (6, 6, 6, 6.0, D("6.00000"), [None, 6], (6, None), A),
    (7, 7, 7, 7.0, D("7.00000"), [7], (7, 7), BA),
    (8, 8, 8, 8.5, D("8.00000"), [8], (8, 8), A),
    (9, 9, 9, 9.0, D("9.00001"), [9], (9, 9), None),
    (11, 11, 11, 11.0, D("11.0"), [11], (11, 11), A),  # target only
]
LIMIT, FULL, NARROWED = compute.EXACT_LIMIT, compute._Plan.full, compute._Plan.narrowed
TIMES = "at TIMESTAMP, v INT"
TIMES_SOURCE = [(datetime(2021, 3, 28, 2, 30), 1), (datetime(2021, 3, 28, 3, 0), 2), (None, 3)]
TIMES_TARGET = [(datetime(2021, 3, 28, 3, 0), 20)]


@pytest.fixture(scope="module")
def spark(local_spark: SparkSession) -> Iterator[SparkSession]:
    views = {"exact_src": (SCHEMA, SOURCE), "exact_tgt": (SCHEMA, TARGET),
             "exact_ts_src": (TIMES, TIMES_SOURCE), "exact_ts_tgt": (TIMES, TIMES_TARGET)}  # fmt: skip
    for name, (schema, rows) in views.items():
        df = local_spark.createDataFrame(rows, schema)
        if "attrs" in df.columns:
            df = df.withColumn("attrs", sf.map_from_entries("attrs"))
        df.createOrReplaceTempView(name)
    yield local_spark
    for name in views:
        local_spark.catalog.dropTempView(name)


def _both_ways(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, ...] = ("id",),
    source: str = "exact_src", target: str = "exact_tgt", **options: Any,
) -> tuple[TableDiffResult, dict[str, Any]]:  # fmt: skip
    """The diff through phase 2 and through the full comparison (both asserted equal).

    Without a differing fingerprint there is nothing to compare in full: both go to phase 2.
    """
    paths: list[str] = []
    checks: list[int] = []

    def spy_full(plan: Any) -> dict[str, Any]:
        paths.append("full")
        return FULL(plan)

    def spy_narrowed(plan: Any, counts: dict[str, Any], wanted: Any) -> dict[str, Any]:
        paths.append("narrowed")
        checks.append(int(counts["checks"]))
        return NARROWED(plan, counts, wanted)

    monkeypatch.setattr(compute._Plan, "full", spy_full)
    monkeypatch.setattr(compute._Plan, "narrowed", spy_narrowed)
    monkeypatch.setattr(compute, "EXACT_LIMIT", LIMIT)
    run = {"source": source, "target": target, "keys": keys, "options": DiffOptions(**options)}
    exact = compute.diff_tables(spark, **run)
    monkeypatch.setattr(compute, "EXACT_LIMIT", 0)
    fallback = compute.diff_tables(spark, **run)
    assert paths == ["narrowed", "full" if checks[0] else "narrowed"]
    assert fallback.to_json() == exact.to_json()
    return exact, {"checks": checks[0]}


def test_fingerprints_only_filter_what_is_compared(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, phase1 = _both_ways(spark, monkeypatch)
    # Fingerprints differ for 1 and 6 (NULLs moved), 5 (a tie: x hashed raw), 7 (map
    # order) and 8 (x changed); 2 and 9 (noise) and 3 (-0.0) hash the same rounding bin.
    assert (result.joined, result.source_only, result.target_only) == (9, 2, 1)
    assert result.differing_rows == 3  # 1, 6 and 8
    assert result.columns == {
        "a": ColumnStats(8, 1),
        "b": ColumnStats(8, 1),
        "x": ColumnStats(8, 1),  # 2.0001 ~ 2.0004, -0.0 = 0.0, NaN = NaN, the tie
        "amount": ColumnStats(9, 0),  # decimals rounded alike
        "tags": ColumnStats(7, 2),
        "pair": ColumnStats(7, 2),
        "attrs": ColumnStats(9, 0),  # the same map in another order
    }
    assert phase1["checks"] == 5
    differing = list(result.samples.differing)
    assert [row["id"] for row in differing] == [1, 6, 8]
    assert differing[0] == {"id": 1, "a": {"source": 1, "target": None},
                            "b": {"source": None, "target": 1},
                            "tags": {"source": [1, None], "target": [None, 1]},
                            "pair": {"source": {"p": 1, "q": None}, "target": {"p": None, "q": 1}}}  # fmt: skip
    assert differing[2] == {"id": 8, "x": {"source": 8.0, "target": 8.5}}
    assert [row["id"] for row in result.samples.source_only] == [None, 10]
    assert [row["id"] for row in result.samples.target_only] == [11]
    assert result.null_keys.source == 1


def test_tolerance_and_more_decimals_hash_raw_values(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a tolerance, values are hashed raw: 2.0001 vs 2.0004 reaches phase 2 and matches.
    loose, phase1 = _both_ways(spark, monkeypatch, tolerance=0.001, sample=2)
    assert loose.columns["x"] == ColumnStats(8, 1) and loose.columns["amount"] == ColumnStats(9, 0)  # fmt: skip
    assert phase1["checks"] >= 7  # the raw x of 2 and amount of 9 differ too
    assert len(loose.samples.differing) == 2 and loose.differing_rows == 3
    fine, _ = _both_ways(spark, monkeypatch, decimals=5)
    assert fine.columns["x"] == ColumnStats(7, 2)  # 2.0001 vs 2.0004 now differs
    assert fine.columns["amount"] == ColumnStats(7, 2)
    assert fine.differing_rows == 5
    none, _ = _both_ways(spark, monkeypatch, sample=0, skip=("attrs",))
    assert none.differing_rows == 3 and none.samples.differing == ()
    assert "attrs" not in none.columns


def test_unmatched_timestamp_and_null_keys_are_sampled_exactly(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = _both_ways(spark, monkeypatch, keys=("at",), source="exact_ts_src", target="exact_ts_tgt")  # fmt: skip
    assert (result.joined, result.source_only, result.target_only) == (1, 2, 0)
    assert result.columns == {"v": ColumnStats(0, 1)}
    assert [row["v"] for row in result.samples.source_only] == [3, 1]  # NULL key first


def test_no_fingerprint_differs(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    same = compute.diff_tables(spark, "exact_tgt", "exact_tgt", keys=["id"])
    monkeypatch.setattr(compute, "EXACT_LIMIT", 0)  # no key to compare: phase 2 is skipped
    assert compute.diff_tables(spark, "exact_tgt", "exact_tgt", keys=["id"]) == same
    assert same.identical and same.differing_rows == 0 and same.joined == 10
    assert all(stats == ColumnStats(10, 0) for stats in same.columns.values())


def test_timestamp_keys_survive_the_python_time_zone(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 02:30 twice on 2021-10-31 in Berlin: Python's naive local times cannot tell them apart.
    both = "SELECT timestamp_seconds(s) AS at, v FROM VALUES (1635640200, 1), (1635643800, 2) AS t(s, v)"  # fmt: skip
    spark.sql(both).createOrReplaceTempView("exact_dst_src")
    spark.sql(f"{both} WHERE false").createOrReplaceTempView("exact_dst_tgt")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        result, _ = _both_ways(spark, monkeypatch, keys=("at",), source="exact_dst_src", target="exact_dst_tgt")  # fmt: skip
    finally:
        monkeypatch.undo()
        time.tzset()
        for name in ("exact_dst_src", "exact_dst_tgt"):
            spark.catalog.dropTempView(name)
    assert result.source_only == 2
    assert [row["v"] for row in result.samples.source_only] == [1, 2]


def test_extreme_doubles(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = "(1, 'inf', 'inf'), (2, '-inf', '1e300'), (3, '1e300', '1e300'), (4, '5e-324', '0'), (5, '1e15', '1e15'), (6, '123456789.0004', '123456789.0001')"  # fmt: skip
    for side, column in (("src", "s"), ("tgt", "t")):
        query = f"SELECT id, CAST({column} AS DOUBLE) AS x FROM VALUES {rows} AS v(id, s, t)"
        spark.sql(query).createOrReplaceTempView(f"exact_far_{side}")
    try:
        result, _ = _both_ways(spark, monkeypatch, source="exact_far_src", target="exact_far_tgt")  # fmt: skip
    finally:
        for side in ("src", "tgt"):
            spark.catalog.dropTempView(f"exact_far_{side}")
    assert result.columns == {"x": ColumnStats(5, 1)}  # only -inf vs 1e300 differs
    assert [row["id"] for row in result.samples.differing] == [2]
