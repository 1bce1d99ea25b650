"""The chaos bench's own waits (bench/chaos.py, issue 45): a SIGSTOP that lands after the
job's last step is found by no job, so nothing would ever wake the server, and the bench's
checks waited on it for good. Once the job ended, a stop still in force is reported as
"fault landed after completion" (not as a fault that landed) and the process is woken.
Real processes and signals; no Spark."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from bench.chaos import Fault, settle_stop, stopped


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _until(check: object, what: str) -> None:
    for _ in range(200):  # the kernel applies a signal at once; bounded all the same
        if check():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError(what)


def test_a_stop_no_job_found_is_reported_after_completion_and_woken(
    sleeper: subprocess.Popen[bytes],
) -> None:
    sleeper.send_signal(signal.SIGSTOP)
    _until(lambda: stopped(sleeper.pid), "the process never showed as stopped")
    fault = Fault(injected=True, target="stop", pid=sleeper.pid)
    settle_stop(fault)
    assert fault.after_completion and not fault.injected, fault
    assert "fault landed after completion" in fault.note
    assert fault.to_json()["after_completion"] is True
    _until(lambda: not stopped(sleeper.pid), "the stopped process was not woken")
    assert sleeper.poll() is None  # woken, not killed


def test_a_stop_a_job_found_stays_a_fault_that_landed(
    sleeper: subprocess.Popen[bytes],
) -> None:
    # The job's watch (or its time limit) killed the stopped server: not stopped any more.
    sleeper.send_signal(signal.SIGSTOP)
    sleeper.kill()
    sleeper.wait()
    fault = Fault(injected=True, target="stop", pid=sleeper.pid)
    settle_stop(fault)
    assert fault.injected and not fault.after_completion, fault
    # Kills are not stops: a killed server's fault is never "after completion".
    killed = Fault(injected=True, target="server", pid=sleeper.pid)
    settle_stop(killed)
    assert killed.injected and not killed.after_completion
