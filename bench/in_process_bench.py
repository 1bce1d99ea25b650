"""Benchmark: ``sluice apply`` through spark-submit against ``--in-process``, in pairs.

Usage: python bench/in_process_bench.py [--pairs 3] [--project examples/jaffle_shop]

Issue 21 found the in-process mode 3.6x slower than spark-submit on a loaded machine. Each
pair applies prod of a fresh copy of the project from an empty state, once per mode, as
whole ``python -m sluice apply`` processes (the order flipped every pair), and prints each
run's wall seconds with the load average before and after, then the in-process /
spark-submit ratio per pair and its median. Run it while the machine is busy (that is
where the stretch showed) and again quiet.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def apply(project: Path, in_process: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="sluice-inproc-") as folder:
        copy = Path(folder) / "project"
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".sluice"))
        command = [sys.executable, "-m", "sluice", "apply", "--project", str(copy)]
        began = time.perf_counter()
        done = subprocess.run(
            command + (["--in-process"] if in_process else []),
            capture_output=True,
            text=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            check=False,
        )
        seconds = time.perf_counter() - began
    if done.returncode != 0 or "Applied to prod" not in done.stdout:
        sys.exit(f"sluice apply failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--project", type=Path, default=REPO / "examples" / "jaffle_shop")
    args = parser.parse_args()
    ratios = []
    for pair in range(1, args.pairs + 1):
        seconds = {}
        for in_process in (False, True) if pair % 2 else (True, False):
            before = os.getloadavg()[0]
            seconds[in_process] = apply(args.project.resolve(), in_process)
            mode = "in-process" if in_process else "spark-submit"
            print(
                f"pair {pair} {mode:12} {seconds[in_process]:8.1f} s"
                f"   load {before:.1f} -> {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        ratios.append(seconds[True] / seconds[False])
        print(f"pair {pair} in-process / spark-submit: {ratios[-1]:.2f}x", flush=True)
    print(f"median of {len(ratios)} pairs: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
