"""A Spark driver killed by a signal is ``DriverLost`` (run the job again), not a job error.

Found by bench/chaos.py: kill -9 of the Python driver makes spark-submit exit 137 without
an event, which read as "failed before reporting an error", so the bot reported a broken
build (or a failed promotion with prod's views half swapped) instead of retrying. Also
found there: the job's log was block-buffered, so it showed nothing while the job ran and
a killed service left it empty.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.errors import DriverLost, ExecutionError
from sluice.core.spark.failures import job_failure
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner

STARTED = [
    {"event": "job_start", "job_id": "j", "steps": 2},
    {"event": "session_ready"},
    {"event": "step_start", "index": 0, "type": "build", "label": "build jaffle.orders"},
]


@pytest.mark.parametrize(
    ("code", "which", "number"), [(-9, "driver", 9), (137, "Python driver", 9), (143, "Python driver", 15)]
)  # fmt: skip
def test_a_driver_killed_by_a_signal_is_lost_and_says_where(
    code: int, which: str, number: int
) -> None:
    error = job_failure("j", STARTED, exit_code=code, log_path=Path("/x/j.log"))
    assert isinstance(error, DriverLost)
    assert error.message == (
        f"Spark job failed: the {which} was killed by signal {number} during step "
        "'build jaffle.orders'"
    )
    assert f"exit code {code}" in (error.hint or "")


@pytest.mark.parametrize(
    "seen",
    [
        [*STARTED, {"event": "step_failed", "index": 0, "label": "build jaffle.orders",
                    "error": "AnalysisException: no such column"}],
        [{"event": "job_failed", "error": "cannot read the job spec"}],
    ],
)  # fmt: skip
def test_a_driver_that_reported_its_failure_is_not_lost(seen: list[dict[str, Any]]) -> None:
    # Exit 137 after the driver reported a failure: the failure is the job's own.
    error = job_failure("j", seen, exit_code=137)
    assert type(error) is ExecutionError


@pytest.mark.parametrize("code", [1, 3, 52, 128, 200])
def test_other_exit_codes_are_job_errors(code: int) -> None:
    assert type(job_failure("j", STARTED, exit_code=code)) is ExecutionError


@pytest.mark.spark
def test_killing_the_python_driver_of_a_real_job_is_driver_lost(
    spark_dirs: Path, tmp_path: Path
) -> None:
    paths = SparkPaths(root=spark_dirs, logs=tmp_path / "logs")
    spec = {
        "job_id": "lost-python-driver",
        "kind": "test",
        "steps": [{"type": "sql", "label": "wait", "statements": [
            "SELECT java_method('java.lang.Thread', 'sleep', 120000L)"
        ]}],
    }  # fmt: skip
    started = threading.Event()
    logged: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "step_start":
            # The log shows the job as it runs (and keeps it when the service is killed).
            logged.append((paths.logs / "lost-python-driver.log").read_text())
            started.set()

    def kill_the_python_driver() -> None:
        assert started.wait(300), "the step never started"
        mine = str(paths.logs / "lost-python-driver.json")
        for pid in os.listdir("/proc"):
            try:
                args = Path("/proc", pid, "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue
            jvm = any(a.endswith(b"SparkSubmit") for a in args)  # it names driver.py too
            # bubblewrap's own processes name the whole command too: not the driver
            box = bool(args) and args[0].endswith((b"bwrap", b"setpriv"))
            driver = any(a.endswith(b"driver.py") for a in args) and mine.encode() in args
            if driver and not jvm and not box:
                os.kill(int(pid), signal.SIGKILL)
                return
        raise AssertionError("no Python driver found")

    killer = threading.Thread(target=kill_the_python_driver, daemon=True)
    killer.start()
    runner = SubmitRunner(SparkSettings(master="local[1]"), paths, on_event=on_event)
    began = time.monotonic()
    with pytest.raises(DriverLost) as caught:
        runner.run(spec)
    killer.join(5)
    assert time.monotonic() - began < 300
    assert caught.value.message == (
        "Spark job failed: the Python driver was killed by signal 9 during step 'wait'"
    )
    assert '"event":"step_start"' in logged[0], logged[0][-500:]
