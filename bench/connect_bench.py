"""Benchmark: one small job through spark-submit vs through a warm Spark Connect server.

Usage: python bench/connect_bench.py [--runs 5] [--master local[2]] [--keep DIR]

The job is the same spec both ways: one query step over the example project's orders
(examples/jaffle_shop/seeds/raw_orders.csv, read as CSV) with a join to its customers.
Measured from this process, whole: ``runner.run(spec)`` of a SubmitRunner (a spark-submit,
JVM and SparkSession per job) and of a ConnectRunner (a Python child per job, one Connect
session each, on a server started once). Prints the medians of ``--runs`` and their ratio,
and the one-off cost of starting the server. Needs Java (scripts/ensure-java.sh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sluice.core.config import SparkSettings
from sluice.core.spark.connect import ConnectRunner, ConnectServer
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner

SEEDS = Path(__file__).resolve().parents[1] / "examples" / "jaffle_shop" / "seeds"


def spec(job_id: str) -> dict[str, Any]:
    orders, customers = SEEDS / "raw_orders.csv", SEEDS / "raw_customers.csv"
    sql = (  # the files have a header row, read here as data and dropped by the join
        "SELECT o._c3 AS status, COUNT(*) AS orders, COUNT(DISTINCT c._c0) AS customers "
        f"FROM csv.`{orders}` AS o JOIN csv.`{customers}` AS c ON o._c1 = c._c0 "
        "GROUP BY o._c3 ORDER BY status"
    )
    return {
        "job_id": job_id,
        "kind": "bench",
        "steps": [{"type": "sql", "label": "orders by status", "statements": [sql]}],
    }


def timed(runner: SubmitRunner, job_id: str) -> tuple[float, Any]:
    began = time.monotonic()
    result = runner.run(spec(job_id))
    return time.monotonic() - began, result.results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = args.keep or Path(tempfile.mkdtemp(prefix="sluice-connect-bench-"))
    paths = SparkPaths(root=work / "spark", logs=work / "logs")
    settings = SparkSettings(master=args.master, mode="connect")

    submit = SubmitRunner(settings, paths)
    timed(submit, "warm-up-submit")  # Derby's first boot creates its schema: not measured
    submit_s, expected = [], None
    for run in range(args.runs):
        seconds, results = timed(submit, f"submit-{run}")
        submit_s.append(seconds)
        expected = expected or results
        print(f"submit  run {run + 1}: {seconds:6.2f} s", flush=True)

    server = ConnectServer(settings, paths)
    began = time.monotonic()
    server.endpoint()
    start_s = time.monotonic() - began
    print(f"connect server start (once, incl. a SELECT 1): {start_s:6.2f} s", flush=True)
    connect = ConnectRunner(settings, paths, server=server)
    connect_s = []
    try:
        for run in range(args.runs):
            seconds, results = timed(connect, f"connect-{run}")
            assert results == expected, (results, expected)
            connect_s.append(seconds)
            print(f"connect run {run + 1}: {seconds:6.2f} s", flush=True)
        assert server.starts == 1
    finally:
        server.stop()

    sub, con = statistics.median(submit_s), statistics.median(connect_s)
    print(
        f"\nmedian of {args.runs}: spark-submit {sub:.2f} s, connect {con:.2f} s, "
        f"ratio {sub / con:.1f}x (server start {start_s:.1f} s, once; cpus {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
