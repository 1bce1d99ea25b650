"""The load benchmark's short version (issue 45, point 2): a few PRs opened at once
against the real service in its own process (``bench/load_bench.py``: in-memory GitHub,
the scripted runner as Spark), a merge and a push mid-build. Every build completes, the
merge is overtaken by no job accepted after it, the push stops the build it supersedes,
and the service stays under its memory bound. The figures are the benchmark's
(docs/reliability.md, Load); this holds its outcomes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A service process, a dozen jobs of a second or two: about 15 s.
pytestmark = pytest.mark.slow


def test_a_burst_of_prs_a_merge_and_a_push_all_complete(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    run = subprocess.run(
        [
            sys.executable, str(ROOT / "bench" / "load_bench.py"), "--prs", "6", "--big", "1",
            "--pushes", "1", "--workers", "3", "--max-running", "3", "--small-seconds", "0.3",
            "--big-seconds", "2", "--limit", "240", "--json", str(out),
        ],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    assert figures["bad"] == 0
    # 8 jobs (6 PRs opened, the merge, the push): the pushed PR's first build stopped
    # (superseded), the 7 others done, nothing failed.
    assert figures["statuses"] == {"done": 7, "superseded": 1}, figures
    assert figures["cancelled"] == 1
    assert figures["overtaken_max"]["promotion"] == 0
    assert figures["rss_within"] is True
