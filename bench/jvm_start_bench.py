"""Benchmark: a cold Sluice job with and without the driver's class archive.

Usage: python bench/jvm_start_bench.py [--pairs 5] [--quick]

Applies the jaffle_shop example once (not measured), then runs the same one-row
``sluice query`` through spark-submit in pairs, in turn: with ``SLUICE_JVM_CACHE=off``
(the anchor: every JVM loads and verifies Spark's classes) and with a cache folder whose
archive the first measured job of the pair's side has written (``sluice.core.spark.jvm``).
``--quick`` adds ``SLUICE_DRIVER_JAVA_OPTIONS=-XX:TieredStopAtLevel=1`` to both sides (what
the test suite runs). Prints the median wall and CPU seconds of each side and the median
of the per-pair ratios (archive / anchor): the machine is shared, so ratios of runs taken
side by side are what to quote.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUICE = Path(sys.executable).with_name("sluice")
QUERY = "select count(*) from jaffle.orders"


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU of the child processes) seconds of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="C1-only JIT on both sides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluice-jvm-bench-") as tmp:
        project = Path(tmp) / "jaffle_shop"
        shutil.copytree(ROOT / "examples" / "jaffle_shop", project,
                        ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
        base = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
        base.pop("SLUICE_DRIVER_JAVA_OPTIONS", None)
        if args.quick:
            base["SLUICE_DRIVER_JAVA_OPTIONS"] = "-XX:TieredStopAtLevel=1"
        anchor = {**base, "SLUICE_JVM_CACHE": "off"}
        archive = {**base, "SLUICE_JVM_CACHE": str(Path(tmp) / "jvm")}
        print("applying jaffle_shop to prod (not measured) ...", flush=True)
        _run([str(SLUICE), "apply", "--project", str(project)], anchor)
        query = [str(SLUICE), "query", "--project", str(project), "prod", QUERY]
        wall, cpu = _run(query, archive)
        print(f"first job with the cache: writes the archive ({wall:.1f} s, {cpu:.1f} s CPU)")
        sides: dict[str, list[tuple[float, float]]] = {"anchor": [], "archive": []}
        for _ in range(args.pairs):
            sides["anchor"].append(_run(query, anchor))
            sides["archive"].append(_run(query, archive))
        print(f"\n`sluice query` (one row, spark-submit, local[*]), {args.pairs} pairs"
              + (", C1-only JIT on both sides" if args.quick else ""))  # fmt: skip
        print(f"{'':28} {'wall s':>8} {'CPU s':>8}")
        for name, runs in sides.items():
            label = "no archive (anchor)" if name == "anchor" else "class archive"
            walls, cpus = zip(*runs, strict=True)
            print(f"{label:28} {statistics.median(walls):8.2f} {statistics.median(cpus):8.2f}")
        pairs = list(zip(sides["archive"], sides["anchor"], strict=True))
        wall_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in pairs)
        print(f"{'archive / anchor (median)':28} {wall_ratio:8.2f} {cpu_ratio:8.2f}")


if __name__ == "__main__":
    main()
