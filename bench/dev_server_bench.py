"""Benchmark: `sluice query` as a developer types it, cold vs on `sluice spark start`'s server.

Usage: python bench/dev_server_bench.py [--pairs 3] [--keep DIR]

Two copies of a one-model project, each applied to prod once. Copy A has no server: each
`sluice query` pays a Spark start (spark-submit, JVM, SparkSession, metastore). Copy B has
a server from `sluice spark start` (its start is timed once): each `sluice query` is a
Spark Connect client of it. The two commands alternate, pair by pair, so a busy machine
slows both alike; whole processes (`python -m sluice ...`) are timed from here. Prints
each pair, the medians and their ratio. Needs Java (scripts/ensure-java.sh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
MODEL = (
    "MODEL (name bench.items, kind FULL);\nSELECT id, id % 7 AS bucket FROM RANGE(1000) AS t(id)\n"
)
QUERY = "SELECT bucket, COUNT(*) AS n FROM bench.items GROUP BY bucket ORDER BY bucket"


def sluice(*args: str) -> float:
    """Run one `sluice` command to the end; its wall time in seconds."""
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "sluice", *args], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"sluice {' '.join(args)} failed:\n{done.stderr}{done.stdout}")
    return time.monotonic() - began


def project(folder: Path) -> Path:
    (folder / "models").mkdir(parents=True)
    (folder / "config.yaml").write_text(CONFIG)
    (folder / "models" / "items.sql").write_text(MODEL)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.pop("SLUICE_SPARK_DIR", None)  # each copy keeps its own metastore
    work = args.keep or Path(tempfile.mkdtemp(prefix="sluice-dev-server-bench-"))
    cold, warm = project(work / "cold"), project(work / "warm")
    for copy in (cold, warm):
        sluice("apply", "--project", str(copy), "--end", "2024-01-02")
    started = sluice("spark", "start", "--project", str(warm))
    print(f"server start (once): {started:.1f} s")
    cold_s: list[float] = []
    warm_s: list[float] = []
    try:
        for pair in range(1, args.pairs + 1):
            cold_s.append(sluice("query", "prod", QUERY, "--project", str(cold)))
            warm_s.append(sluice("query", "prod", QUERY, "--project", str(warm)))
            ratio = warm_s[-1] / cold_s[-1]
            print(f"pair {pair}: cold {cold_s[-1]:.1f} s, on the server {warm_s[-1]:.1f} s "
                  f"({ratio:.2f}x)")  # fmt: skip
    finally:
        sluice("spark", "stop", "--project", str(warm))
    median_cold, median_warm = statistics.median(cold_s), statistics.median(warm_s)
    print(f"median: cold {median_cold:.1f} s, on the server {median_warm:.1f} s: "
          f"{median_warm / median_cold:.2f}x the time; the server's start pays for itself "
          f"after {started / max(median_cold - median_warm, 0.1):.1f} queries")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
