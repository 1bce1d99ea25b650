"""Benchmark: Sluice's table diff against SQLMesh's, datacompy's and a plain scan.

Usage: python bench/diff_bench.py [--rows 10000000] [--side-rows N] [--dir DIR]
                                  [--venv DIR] [--no-sqlmesh] [--no-datacompy] [--hand-sql]

Generates two parquet tables (12 columns: a composite key of a bigint and a string, three
ints, three doubles, two strings, two dates) with Spark: the target has 1% of its rows
changed (one column each, in turn), 0.001% removed and as many added, and float noise far
below 3 decimals on a tenth of the rows. Then, each in its own process on the same local
Spark settings (local[*], same memory and shuffle partitions), after one warm-up scan:

- the floor: one checksum aggregation over every column of both tables;
- Sluice: ``sluice.core.tablediff.compute.diff_tables`` (statistics and samples);
- the hand query: the fastest exact diff written by hand, one Spark SQL query (a
  null-safe full outer join on the key and one aggregate of per-column mismatch counts,
  doubles rounded to 3 decimals as Sluice compares them; ``--hand-sql`` prints it). It
  must report Sluice's counts exactly, or the bench fails;
- SQLMesh 0.236.4's ``TableDiff`` on its Spark engine, installed with pyspark and
  datacompy into a virtualenv of its own under the bench folder (falls back to its DuckDB
  engine over the same parquet files, and says so, if the Spark engine cannot run);
- datacompy's ``SparkSQLCompare`` if it installs.

Prints each time, the ratios, and the counts each tool reports (they must agree).
``--side-rows`` runs the side tools on the first N keys only, when 10M is too slow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SQLMESH = "sqlmesh==0.236.4"
MEMORY = "6g"
PARTITIONS = 8
MARK = "@@bench "
RUNS = 2  # timed runs of Sluice and of the hand query, best shown
DECIMALS = 3  # Sluice's default --decimals, the rounding of doubles in the hand query

SESSION = f"""
import json, sys, time
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[*]").appName("diff-bench")
         .config("spark.driver.memory", "{MEMORY}").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "{PARTITIONS}")
         .config("spark.sql.warehouse.dir", sys.argv[1] + "/warehouse")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
DATA, LIMIT = sys.argv[1], int(sys.argv[2])
def side(name):
    df = spark.read.parquet(f"{{DATA}}/{{name}}")
    return df.where(F.col("k1") < LIMIT // 3) if LIMIT else df
source, target = side("source"), side("target")
COLUMNS = source.columns
def scan():
    began = time.monotonic()
    counts = [df.agg(F.count("*"), F.bit_xor(F.xxhash64(*COLUMNS))).collect()[0][0] for df in (source, target)]
    return time.monotonic() - began, counts
scan()  # warm-up: JIT, file listing, page cache
def report(**fields):
    print("{MARK}" + json.dumps(fields), flush=True)
"""

GENERATE = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[*]").config("spark.driver.memory", "{memory}")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out, n = sys.argv[1], int(sys.argv[2])
columns = {columns!r}
base = spark.range(n + 100).selectExpr(*columns, "id")
base.where(f"id < {{n}}").drop("id").write.mode("overwrite").parquet(out + "/source")
# 1% of the rows change one column each, in turn; 100 rows go, 100 new ones come; a tenth
# of the rows get float noise far below 3 decimals (not a difference).
change = "id % 100 = 7"
slot = "(id DIV 100) % 6"
target = base.where(f"id >= {{n}} OR id % 100000 <> 3").selectExpr(
    "k1", "k2",
    f"IF({{change}} AND {{slot}} = 0, i1 + 1, i1) AS i1",
    f"IF({{change}} AND {{slot}} = 4, i2 - 5, i2) AS i2", "i3",
    f"IF({{change}} AND {{slot}} = 1, d1 + 0.5D, d1) AS d1",
    f"IF({{change}} AND {{slot}} = 5, d2 * 2, d2) AS d2",
    "IF(id % 10 = 1, d3 + 1e-7D, d3) AS d3",
    f"IF({{change}} AND {{slot}} = 2, concat(s1, '!'), s1) AS s1", "s2",
    f"IF({{change}} AND {{slot}} = 3, date_add(dt1, 1), dt1) AS dt1", "dt2",
)
target.write.mode("overwrite").parquet(out + "/target")
"""
COLUMNS = [
    "id DIV 3 AS k1", "concat('p|', CAST(id % 3 AS STRING)) AS k2",
    "CAST(id % 1000 AS INT) AS i1", "id * 7 AS i2", "CAST(id % 97 AS INT) AS i3",
    "id / 7.0D AS d1", "sqrt(CAST(id AS DOUBLE)) AS d2", "CAST(id % 1013 AS DOUBLE) * 0.25D AS d3",
    "concat('name_', CAST(id % 100000 AS STRING)) AS s1", "sha1(CAST(id % 5000 AS STRING)) AS s2",
    "date_add(DATE'2020-01-01', CAST(id % 2000 AS INT)) AS dt1",
    "date_add(DATE'2015-06-01', CAST(id % 333 AS INT)) AS dt2",
]  # fmt: skip
VALUES = ["i1", "i2", "i3", "d1", "d2", "d3", "s1", "s2", "dt1", "dt2"]
DOUBLES = {"d1", "d2", "d3"}


def hand_sql() -> str:
    """The hand-written diff: one query, Sluice's counts (no samples, no duplicate check).

    A value matches when the two are null-safe equal (``<=>``: NULL matches NULL) or,
    for doubles, when both rounded to ``DECIMALS`` places are: Sluice's default rule
    (``round(s, 3) = round(t, 3)``, Spark's ``round``, half up). Equal values skip the
    rounding, as in Sluice. The key is joined null-safely too, as Sluice does.
    """

    def equal(c: str) -> str:
        same = f"s.{c} <=> t.{c}"
        if c in DOUBLES:
            same = f"({same} OR round(s.{c}, {DECIMALS}) <=> round(t.{c}, {DECIMALS}))"
        return f"{same} AS e_{c}"

    every = " AND ".join(f"e_{c}" for c in VALUES)
    return "\n".join(
        [
            "SELECT count_if(b) AS joined,",
            "       count_if(t_in IS NULL) AS source_only,",
            "       count_if(s_in IS NULL) AS target_only,",
            f"       count_if(b AND NOT ({every})) AS differing,",
            ",\n".join(f"       count_if(b AND NOT e_{c}) AS c_{c}" for c in VALUES),
            "FROM (",
            "  SELECT s._in AS s_in, t._in AS t_in, s._in IS NOT NULL AND t._in IS NOT NULL AS b,",
            ",\n".join(f"         {equal(c)}" for c in VALUES),
            "  FROM (SELECT *, true AS _in FROM bench_source) s",
            "  FULL OUTER JOIN (SELECT *, true AS _in FROM bench_target) t",
            "    ON s.k1 <=> t.k1 AND s.k2 <=> t.k2",
            ")",
        ]
    )


SLUICE = """
sys.path.insert(0, {repo!r})
from sluice.core.tablediff.compute import diff_tables
source.createOrReplaceTempView("bench_source"); target.createOrReplaceTempView("bench_target")
floors, runs = [], []
for _ in range({runs}):
    floors.append(scan()[0])
    began = time.monotonic()
    result = diff_tables(spark, "bench_source", "bench_target", keys=["k1", "k2"])
    runs.append(time.monotonic() - began)
floors.append(scan()[0])
report(tool="floor", seconds=min(floors), all=floors, rows=scan()[1])
report(tool="sluice", seconds=min(runs), all=runs, joined=result.joined,
       source_only=result.source_only, target_only=result.target_only,
       differing=result.differing_rows,
       columns={{n: s.differed for n, s in result.columns.items()}})
"""

HAND = """
source.createOrReplaceTempView("bench_source"); target.createOrReplaceTempView("bench_target")
runs = []
for _ in range({runs}):
    began = time.monotonic()
    row = spark.sql({query!r}).collect()[0]
    runs.append(time.monotonic() - began)
report(tool="hand", seconds=min(runs), all=runs, joined=row["joined"],
       source_only=row["source_only"], target_only=row["target_only"],
       differing=row["differing"], columns={{c: row["c_" + c] for c in {values!r}}})
"""

SQLMESH_RUN = """
from sqlmesh.core.table_diff import TableDiff
engine = sys.argv[3]
if engine == "spark":
    from sqlmesh.core.config.connection import SparkConnectionConfig
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    for name, df in (("source", source), ("target", target)):
        df.createOrReplaceTempView("v_" + name)
        spark.sql(f"DROP TABLE IF EXISTS bench.{{name}}")
        if LIMIT:
            spark.sql(f"CREATE TABLE bench.{{name}} USING parquet AS SELECT * FROM v_{{name}}")
        else:
            spark.sql(f"CREATE TABLE bench.{{name}} USING parquet LOCATION '{{DATA}}/{{name}}'")
    adapter = SparkConnectionConfig(config={{}}).create_engine_adapter()
else:
    import duckdb
    from sqlmesh.core.config.connection import DuckDBConnectionConfig
    adapter = DuckDBConnectionConfig(database=DATA + "/bench.duckdb").create_engine_adapter()
    adapter.execute("CREATE SCHEMA IF NOT EXISTS bench")
    for name in ("source", "target"):
        limit = f" WHERE k1 < {{LIMIT // 3}}" if LIMIT else ""
        adapter.execute(f"CREATE OR REPLACE VIEW bench.{{name}} AS SELECT * FROM read_parquet('{{DATA}}/{{name}}/*.parquet'){{limit}}")
began = time.monotonic()
diff = TableDiff(adapter, "bench.source", "bench.target", on=["k1", "k2"], decimals=3, limit=5)
diff.schema_diff()
rows = diff.row_diff()
seconds = time.monotonic() - began
stats = rows.stats
columns = {{c: int(round(stats["join_count"] - stats[c + "_matches"])) for c in {values!r}}}
report(tool="sqlmesh", engine=engine, seconds=seconds, joined=int(stats["join_count"]),
       source_only=int(stats["s_only_count"]), target_only=int(stats["t_only_count"]),
       differing=int(stats["join_count"] - stats["full_match_count"]), columns=columns)
"""

DATACOMPY_RUN = """
import datacompy
from datacompy.spark import SparkSQLCompare
# datacompy 1.1's max-diff step casts every column to double, which Spark 4 refuses for
# DATE: hand it the dates as day numbers (unix_date), the same comparison.
def days(df):
    return df.select(*[F.unix_date(c).alias(c) if t == "date" else F.col(c) for c, t in df.dtypes])
began = time.monotonic()
compare = SparkSQLCompare(spark, days(source), days(target), join_columns=["k1", "k2"], abs_tol=0.0005)
matching = compare.count_matching_rows()
joined = compare.intersect_rows.count()
source_only, target_only = compare.df1_unq_rows.count(), compare.df2_unq_rows.count()
seconds = time.monotonic() - began
columns = {{s["column"]: int(s["unequal_cnt"]) for s in compare.column_stats if s["column"] not in ("k1", "k2")}}
report(tool="datacompy", version=datacompy.__version__, seconds=seconds, joined=joined,
       source_only=source_only, target_only=target_only, differing=joined - matching,
       columns=columns)
"""


def run(python: str, script: str, *args: str, timeout: float = 3600) -> list[dict[str, Any]]:
    """Run ``script`` with ``python``; its reports, or raise with its last output lines."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": python}
    proc = subprocess.run(
        [python, "-c", script, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    reports = [
        json.loads(line[len(MARK) :]) for line in proc.stdout.splitlines() if line.startswith(MARK)
    ]
    if proc.returncode != 0 or not reports:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln[:80] or "Exception" in ln[:80]]
        raise RuntimeError("\n".join(ln[:300] for ln in (errors[-3:] or lines[-5:])))
    return reports


def side_venv(
    folder: Path, log_path: Path, requested: Path | None
) -> subprocess.Popen[bytes] | None:
    """Start creating the side tools' virtualenv (None when ``requested`` already has it)."""
    if requested is not None and (requested / "bin" / "python").exists():
        return None
    import pyspark

    commands = (
        f"{sys.executable} -m venv {folder} && {folder}/bin/pip install --quiet "
        f"'{SQLMESH}' 'pyspark=={pyspark.__version__}' duckdb datacompy"
    )
    log = open(log_path, "wb")  # noqa: SIM115 - closed by the child's exit
    return subprocess.Popen(["bash", "-c", commands], stdout=log, stderr=subprocess.STDOUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--side-rows", type=int, default=0, help="rows for the side tools")
    parser.add_argument("--dir", type=Path, default=None, help="keep data here (reused)")
    parser.add_argument("--venv", type=Path, default=None, help="an existing side virtualenv")
    parser.add_argument("--no-sqlmesh", action="store_true")
    parser.add_argument("--no-datacompy", action="store_true")
    parser.add_argument("--hand-sql", action="store_true", help="print the hand query, exit")
    args = parser.parse_args()
    if args.hand_sql:
        print(hand_sql())
        return
    folder = args.dir or Path(tempfile.mkdtemp(prefix="sluice-diff-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    data = str(folder.resolve())
    venv = args.venv or folder / "side-venv"
    installing = None
    if not (args.no_sqlmesh and args.no_datacompy):
        installing = side_venv(venv, folder / "side-venv.log", args.venv)
    if not (folder / "target" / "_SUCCESS").exists():
        print(f"generating {args.rows:,} rows x 12 columns in {folder} ...", flush=True)
        script = GENERATE.format(memory=MEMORY, columns=COLUMNS)
        subprocess.run([sys.executable, "-c", script, data, str(args.rows)], check=True,
                       env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})  # fmt: skip
    # Nothing else may run while the tools are timed.
    if installing is not None and installing.wait() != 0:
        print(f"the side virtualenv did not install: see {folder / 'side-venv.log'}")
    results: dict[str, dict[str, Any]] = {}
    for report in run(
        sys.executable, SESSION + SLUICE.format(repo=str(REPO), runs=RUNS), data, "0"
    ):
        results[report["tool"]] = report
    hand = HAND.format(runs=RUNS, query=hand_sql(), values=VALUES)
    results["hand"] = run(sys.executable, SESSION + hand, data, "0")[0]
    side = str(venv / "bin" / "python")
    side_rows = str(args.side_rows) if args.side_rows else "0"
    if not args.no_sqlmesh and Path(side).exists():
        script = SESSION + SQLMESH_RUN.format(values=VALUES)
        try:
            results["sqlmesh"] = run(side, script, data, side_rows, "spark")[0]
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"SQLMesh on Spark failed, using its DuckDB engine instead:\n{exc}")
            results["sqlmesh"] = run(side, script, data, side_rows, "duckdb")[0]
    if not args.no_datacompy and Path(side).exists():
        try:
            results["datacompy"] = run(side, SESSION + DATACOMPY_RUN.format(), data, side_rows)[0]
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"datacompy did not run:\n{exc}")
    summary(results, args.rows, args.side_rows)


def summary(results: dict[str, dict[str, Any]], rows: int, side_rows: int) -> None:
    floor, sluice = results["floor"], results["sluice"]
    print(f"\n{rows:,} rows per table (rows read: {floor['rows']}); times are the best run")
    print(f"  floor (checksum scan of both tables)   {floor['seconds']:8.2f} s")
    print(f"  sluice table diff                      {sluice['seconds']:8.2f} s"
          f"   {sluice['seconds'] / floor['seconds']:.2f}x the floor")  # fmt: skip
    hand = results["hand"]
    print(f"  hand query (one Spark SQL diff)        {hand['seconds']:8.2f} s"
          f"   Sluice {sluice['seconds'] / hand['seconds']:.2f}x its time (target <= 1.25x)")  # fmt: skip
    for tool in ("sqlmesh", "datacompy"):
        if tool not in results:
            continue
        other = results[tool]
        engine = f" on {other['engine']}" if "engine" in other else ""
        size = f" ({side_rows:,} rows)" if side_rows else ""
        line = f"  {tool}{engine}{size}".ljust(41) + f"{other['seconds']:8.2f} s"
        if not side_rows:
            line += f"   {other['seconds'] / sluice['seconds']:.2f}x Sluice's time"
        print(line)
    print("\ncounts (joined, source only, target only, differing rows, differing per column):")
    for tool in ("sluice", "hand", "sqlmesh", "datacompy"):
        if tool in results:
            r = results[tool]
            counts = (r["joined"], r["source_only"], r["target_only"], r["differing"])
            print(f"  {tool:10} {counts} {json.dumps(r['columns'], sort_keys=True)}")
    if not side_rows:
        keys = ("joined", "source_only", "target_only", "differing", "columns")
        same = all(
            {k: results[t][k] for k in keys} == {k: sluice[k] for k in keys}
            for t in ("hand", "sqlmesh", "datacompy")
            if t in results
        )
        print(f"\ncounts agree: {'yes' if same else 'NO'}")
    print(
        textwrap.dedent(f"""
        expected: joined {rows - rows // 100_000:,}, source only {rows // 100_000}, target only 100,
        differing {rows // 100:,} rows (each changed column {rows // 100 // 6:,} or so)""")
    )
    # The hand query always runs on every row: its counts must be Sluice's.
    keys = ("joined", "source_only", "target_only", "differing", "columns")
    if {k: hand[k] for k in keys} != {k: sluice[k] for k in keys}:
        sys.exit("FAILED: the hand query's counts differ from Sluice's (see above)")


if __name__ == "__main__":
    main()
