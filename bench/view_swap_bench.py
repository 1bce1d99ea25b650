"""Benchmark: the cost of one view swap (a promotion's only work) per metastore.

Usage: python bench/view_swap_bench.py [--views 50] [--rounds 5]

A promotion by virtual update issues one ``CREATE OR REPLACE VIEW`` per changed model, all
in one Spark session (``core/spark/steps/environment.py``). This measures what one such
statement costs on the embedded Derby metastore (the default) and on a Hive metastore in
PostgreSQL (the shared catalog of the README; a throwaway server, durable as a real one:
fsync on), each in a Spark session of its own process with Sluice's Spark settings:
``--views`` tables are made once, then each round points ``--views`` views at other
tables, timed as a whole. Prints each round's seconds per view, the medians and their
ratio. Needs Java and PostgreSQL with its JDBC driver (scripts/ensure-java.sh,
scripts/ensure-postgres.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(kind: str, work: Path, views: int, rounds: int, metastore_url: str) -> None:
    """In a process of its own: make the tables, then time the rounds of swaps."""
    from sluice.core.config import SparkSettings
    from sluice.core.spark.session import SparkPaths, local_session

    conf: dict[str, str] = {}
    if kind == "postgres":
        from tests.helpers.hive_metastore import postgres_metastore_conf

        conf = postgres_metastore_conf(metastore_url, work / "warehouse")
    settings = SparkSettings(master="local[2]", conf=conf)
    spark = local_session(settings, SparkPaths(root=work / "spark", logs=work / "logs"))
    spark.sql("CREATE DATABASE IF NOT EXISTS phys")
    spark.sql("CREATE DATABASE IF NOT EXISTS env")
    for i in range(views * 2):
        spark.sql(f"CREATE TABLE IF NOT EXISTS phys.t{i} USING parquet AS SELECT {i} AS id")
    for i in range(views):  # the views exist before the first timed round, as in prod
        spark.sql(f"CREATE OR REPLACE VIEW env.v{i} AS SELECT * FROM phys.t{i}")
    per_view: list[float] = []
    for round_ in range(1, rounds + 1):
        offset = views * (round_ % 2)  # every round points each view at another table
        began = time.monotonic()
        for i in range(views):
            spark.sql(f"CREATE OR REPLACE VIEW env.v{i} AS SELECT * FROM phys.t{i + offset}")
        per_view.append((time.monotonic() - began) / views)
    assert spark.sql("SELECT id FROM env.v0").collect()[0][0] == views * (rounds % 2)
    print(json.dumps({"kind": kind, "per_view": per_view}))


def run_child(kind: str, work: Path, args: argparse.Namespace, url: str) -> list[float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--work", str(work), "--views",
         str(args.views), "--rounds", str(args.rounds), "--metastore-url", url],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the {kind} run failed:\n{done.stderr[-3000:]}")
    per_view: list[float] = json.loads(lines[-1])["per_view"]
    return per_view


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=["derby", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--metastore-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.path.insert(0, str(ROOT))  # tests.helpers and tests.pgcluster, in both processes
    if args.child:
        child(args.child, args.work, args.views, args.rounds, args.metastore_url)
        return 0
    from tests.helpers.hive_metastore import JAR

    if not JAR.exists():
        raise SystemExit(f"{JAR} is missing: run scripts/ensure-postgres.sh")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from tests.pgcluster import throwaway_postgres

    work = Path(tempfile.mkdtemp(prefix="sluice-view-swap-bench-"))
    results: dict[str, list[float]] = {}
    with throwaway_postgres(durable=True) as server:
        admin = create_engine(server, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("CREATE DATABASE hive"))
        admin.dispose()
        hive = make_url(server).set(database="hive").render_as_string(hide_password=False)
        for kind in ("derby", "postgres"):
            results[kind] = run_child(kind, work / kind, args, hive)
    for kind, per_view in results.items():
        rounds = ", ".join(f"{s * 1000:.0f}" for s in per_view)
        print(f"{kind}: ms per view by round: {rounds}; "
              f"median {statistics.median(per_view) * 1000:.0f} ms")  # fmt: skip
    derby, pg = (statistics.median(results[k]) for k in ("derby", "postgres"))
    print(
        f"{args.views} views a round: PostgreSQL metastore {pg / derby:.2f}x Derby's time per view"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
