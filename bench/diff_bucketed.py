"""Probe: how close to the scan floor can any exact table diff get on this machine?

Usage: python bench/diff_bucketed.py --dir DIR [--runs 2]

DIR is a data folder of ``bench/diff_bench.py --dir DIR`` (its ``source`` and ``target``
parquet tables: 10,000,000 rows x 12 columns, key ``(k1, k2)``). The probe rewrites both
as Spark tables bucketed and sorted by the key (8 buckets, one sorted file per bucket,
under DIR/bucketed), the layout in which a join on the key needs neither a shuffle nor a
sort. Then, per run: the floor (``count(*)`` and ``bit_xor(xxhash64(every column))`` of
both tables, as in diff_bench.py) and a one-pass diff (a full outer sort-merge join on the
key, every value column compared, doubles at 3 decimals, all counts in one aggregate),
then the duplicate-key check of one side, and a narrow join alone (each side's key and
one 64-bit hash of its values: what a fingerprint phase would join). It prints each time, the counts, and the ratio
to the floor. It is the best case for the issue's "within 2x of the scan floor": no
shuffle, no sort, no second read, no samples and no NULL-key handling.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pyspark.sql import SparkSession

VALUES = ["i1", "i2", "i3", "d1", "d2", "d3", "s1", "s2", "dt1", "dt2"]
DOUBLES = {"d1", "d2", "d3"}
COLUMNS = (
    "k1 BIGINT, k2 STRING, i1 INT, i2 BIGINT, i3 INT, d1 DOUBLE, d2 DOUBLE, d3 DOUBLE, "
    "s1 STRING, s2 STRING, dt1 DATE, dt2 DATE"
)
BUCKETS = 8


def bucketed(spark: SparkSession, data: Path, name: str, source: str) -> None:
    """Table ``name`` over DIR/bucketed/name, written from DIR/source the first time."""
    path = data / "bucketed" / name
    if path.exists():
        spark.sql(f"CREATE TABLE {name} ({COLUMNS}) USING parquet CLUSTERED BY (k1, k2) "
                  f"SORTED BY (k1, k2) INTO {BUCKETS} BUCKETS LOCATION '{path}'")  # fmt: skip
        return
    began = time.monotonic()
    (
        spark.read.parquet(str(data / source))
        .repartition(BUCKETS, "k1", "k2")  # one task, so one file, per bucket
        .sortWithinPartitions("k1", "k2")
        .write.bucketBy(BUCKETS, "k1", "k2")
        .sortBy("k1", "k2")
        .option("path", str(path))
        .saveAsTable(name)
    )
    print(f"wrote {name} bucketed in {time.monotonic() - began:.1f} s", flush=True)


def same(column: str) -> str:
    if column in DOUBLES:
        return f"(round(s.{column}, 3) <=> round(t.{column}, 3))"
    return f"(s.{column} <=> t.{column})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="diff_bench.py's --dir")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    data = args.dir.resolve()
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("sluice-diff-bucketed-probe")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.warehouse.dir", str(data / "bucketed"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # One sorted file per bucket: the scan's order is known, so the join needs no sort.
        .config("spark.sql.legacy.bucketedTableScan.outputOrdering", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    bucketed(spark, data, "probe_source", "source")
    bucketed(spark, data, "probe_target", "target")
    every = ", ".join(["k1", "k2", *VALUES])
    floor = " UNION ALL ".join(
        f"SELECT count(*) AS n, bit_xor(xxhash64({every})) AS h FROM {t}"
        for t in ("probe_source", "probe_target")
    )
    both = "s.k1 IS NOT NULL AND t.k1 IS NOT NULL"
    diff = f"""
        SELECT count_if({both}) AS joined, count_if(t.k1 IS NULL) AS source_only,
               count_if(s.k1 IS NULL) AS target_only,
               count_if({both} AND NOT ({" AND ".join(same(c) for c in VALUES)})) AS differing,
               {", ".join(f"count_if({both} AND NOT {same(c)}) AS {c}" for c in VALUES)}
        FROM probe_source s FULL OUTER JOIN probe_target t ON s.k1 = t.k1 AND s.k2 = t.k2
    """
    values = ", ".join(VALUES)
    narrow = f"""
        SELECT count_if({both}) AS joined, count_if({both} AND s.h <> t.h) AS differing
        FROM (SELECT k1, k2, xxhash64({values}) AS h FROM probe_source) s
        FULL OUTER JOIN (SELECT k1, k2, xxhash64({values}) AS h FROM probe_target) t
        ON s.k1 = t.k1 AND s.k2 = t.k2
    """
    duplicates = (
        "SELECT count_if(n > 1) AS duplicate_keys "
        "FROM (SELECT count(*) AS n FROM probe_source GROUP BY k1, k2)"
    )

    def timed(label: str, sql: str) -> float:
        began = time.monotonic()
        rows = spark.sql(sql).collect()
        took = time.monotonic() - began
        shown = rows[0].asDict() if len(rows) == 1 else f"{len(rows)} rows"
        print(f"  {label}: {took:.2f} s  {shown}", flush=True)
        return took

    timed("warm-up scan", floor)
    for run in range(1, args.runs + 1):
        print(f"run {run}")
        base = timed("floor", floor)
        took = timed("one-pass diff", diff)
        dup = timed("duplicate keys of one side", duplicates)
        thin = timed("narrow join alone (key and one hash of the values)", narrow)
        print(f"  diff / floor = {took / base:.2f}; with both sides' duplicate-key check "
              f"{(took + 2 * dup) / base:.2f}; narrow join alone {thin / base:.2f}")  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
