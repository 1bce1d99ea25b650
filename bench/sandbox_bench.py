"""Benchmark: what the sandbox (issue 40) adds to the children a project load starts.

Usage: python bench/sandbox_bench.py [--reps 30]

Each repetition starts, once sandboxed (``SLUICE_SANDBOX=auto``: bubblewrap) and once not
(``off``), alternating which goes first: the Jinja child rendering a one-line config.yaml
(start, render, exit), and the Python macro child of a one-macro project until it has
imported the macro and answered its names. Prints the medians and the ratio sandboxed /
unsandboxed for each, measured in the same run (the machine is shared and noisy). A plan
starts at most one of each per project load, so the difference is what a load pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sluice.core import sandbox
from sluice.core.model import jinja
from sluice.core.model.pycode.macros import PythonMacros

MACRO = "from sqlmesh import macro\n\n@macro()\ndef cents(evaluator, x):\n    return x\n"


def _jinja() -> None:
    jinja.render_config("a: {{ 1 + 1 }}\n", "config.yaml")


def _macros(root: Path) -> Callable[[], None]:
    def run() -> None:
        child = PythonMacros(root)
        try:
            child.start([root / "macros" / "m.py"], {})
            assert child.names == frozenset({"cents"}), child.names
        finally:
            child.close()

    return run


def _time(fn: Callable[[], None], mode: str) -> float:
    os.environ[sandbox.SETTING] = mode
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    print(f"isolation here: {sandbox.isolation()}")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "macros").mkdir()
        (root / "macros" / "m.py").write_text(MACRO)
        for name, fn in (("jinja child", _jinja), ("macro child", _macros(root))):
            times: dict[str, list[float]] = {"auto": [], "off": []}
            for rep in range(args.reps):
                order = ("auto", "off") if rep % 2 == 0 else ("off", "auto")
                for mode in order:
                    times[mode].append(_time(fn, mode))
            on, off = statistics.median(times["auto"]), statistics.median(times["off"])
            print(
                f"{name}: sandboxed {on * 1000:.1f} ms, unsandboxed {off * 1000:.1f} ms "
                f"(medians of {args.reps}); ratio {on / off:.2f}, added {(on - off) * 1000:.1f} ms"
            )


if __name__ == "__main__":
    main()
