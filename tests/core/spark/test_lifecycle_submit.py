"""The default path: the `sluice` command running the driver through spark-submit.

On local[2], a driver killed with SIGKILL in the middle of a backfill, then the same apply
run again (its output, progress and log read as a user would); a master that cannot be
reached. (A job on a real standalone master and worker is test_submit.py's.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
SLUICE = str(Path(sys.executable).parent / "sluice")


def _project(dest: Path, master: str, schema: str) -> Path:
    """The example project, renamed to its own schema and pointed at ``master``."""
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", dest, ignore=shutil.ignore_patterns(".sluice")
    )
    for path in [*dest.rglob("*.sql"), *dest.rglob("*.yaml"), *dest.rglob("*.py")]:
        path.write_text(path.read_text().replace("jaffle.", f"{schema}."))
    settings = dest / "sluice.yaml"
    text = settings.read_text()
    assert "project: jaffle\n" in text, text  # the example's, to replace (never silently)
    settings.write_text(
        text.replace("project: jaffle\n", f"project: {schema}\nspark:\n  master: '{master}'\n")
    )
    return dest


def _sluice(
    project: Path, spark_root: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLUICE_SPARK_DIR": str(spark_root), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SLUICE_DATABASE_URL", None)
    result = subprocess.run(
        [SLUICE, *args, "--project", str(project)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def _query(project: Path, spark_root: Path, env: str, sql: str) -> list[list[object]]:
    out = _sluice(project, spark_root, "query", env, sql, "--json").stdout
    rows: list[list[object]] = json.loads(out)["rows"]
    return rows


def test_a_killed_driver_is_finished_by_applying_again(tmp_path: Path, spark_dirs: Path) -> None:
    project = _project(tmp_path / "p", "local[2]", "ksub")
    # Small batches, so the kill lands between recorded intervals of the backfill.
    model = project / "models" / "daily_revenue.sql"
    # Without its blocking audit: an audited model's batches are recorded only once its
    # audits passed (tests/security/test_driver_isolation.py), so a kill would lose them.
    text = model.read_text().replace("batch_size 31", "batch_size 6")
    model.write_text(text.replace("  audits (number_of_rows(threshold := 1)),\n", ""))
    assert "audits" not in model.read_text()
    env = {**os.environ, "SLUICE_SPARK_DIR": str(spark_dirs), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SLUICE_DATABASE_URL", None)
    proc = subprocess.Popen(
        [SLUICE, "apply", "--end", "2018-04-30", "--project", str(project)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    state = project / ".sluice" / "state.db"
    deadline = time.monotonic() + 300
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.3)
        done = _intervals(state, "ksub.daily_revenue")
        if done >= 12:
            break
    assert proc.poll() is None, "the apply finished before it could be killed"
    # kill -9 the Spark driver (the JVM spark-submit started for this project's job).
    jvm = subprocess.run(
        ["pgrep", "-f", f"SparkSubmit.*{project}"], capture_output=True, text=True, check=False
    )
    pids = [int(p) for p in jvm.stdout.split()]
    assert pids, "no driver JVM found"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "Spark job failed" in stderr and "Traceback" not in stderr
    assert 12 <= done < 120
    assert _environment(state, "prod") is None  # nothing was promoted

    result = _sluice(project, spark_dirs, "apply", "--end", "2018-04-30")
    # Only what the killed driver had not recorded is built again; what it holds is what
    # the driver measured (test_apply checks each table's).
    assert re.search(
        r"Applied to prod: 1 table built \([1-9][\d,]* rows, [\d.]+ [KM]?B\), 10 views pointed",
        result.stdout,
    ), result.stdout
    assert "build ksub.daily_revenue: done in" in result.stderr  # progress streamed from the driver
    assert list((project / ".sluice" / "logs").glob("*.log"))
    assert _intervals(state, "ksub.daily_revenue") == 120
    # No day twice, and every order counted once.
    check = "SELECT COUNT(*) - COUNT(DISTINCT order_date), SUM(orders) FROM ksub.daily_revenue"
    assert _query(project, spark_dirs, "prod", check) == [[0, 99]]


def _intervals(state: Path, name: str) -> int:
    """Days recorded as built for ``name`` (reading the SQLite state directly)."""
    if not state.exists():
        return 0
    try:
        with sqlite3.connect(state) as conn:
            rows = conn.execute(
                "SELECT start_ts, end_ts FROM sluice_intervals WHERE name = ?", (name,)
            ).fetchall()
    except sqlite3.OperationalError:
        return 0
    return sum((end - start) // 86_400_000 for start, end in rows)


def _environment(state: Path, name: str) -> object:
    with sqlite3.connect(state) as conn:
        row = conn.execute(
            "SELECT plan_id FROM sluice_environments WHERE name = ?", (name,)
        ).fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("master", ["spark://127.0.0.1:1"])
def test_an_unreachable_master_is_a_clear_error(
    tmp_path: Path, spark_dirs: Path, master: str
) -> None:
    project = _project(tmp_path / "p", master, "usub")
    result = _sluice(project, spark_dirs, "apply", check=False)
    assert result.returncode == 1
    assert master in result.stderr and "sluice.spark.master" in result.stderr
    assert _environment(project / ".sluice" / "state.db", "prod") is None
