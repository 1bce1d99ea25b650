"""Failure messages of Spark jobs: one builder for both runners (pure).

A failed job is reported by the step that failed and its Spark error, never by the JVM's
log; when the driver died before reporting anything, by the lines of its output that look
like errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from sluice.core.errors import DriverLost, ExecutionError
from sluice.core.spark.events import Event, JobFailure, StepFailure, StepStart

_SHOWN_LINES = 15
# spark-submit exits with its Python driver's status, which is 128 + N when a signal N
# killed the driver (the JVM reports it as a shell would).
_SIGNAL_STATUS = range(129, 129 + 64)


_JVM_NOISE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN|DEBUG|TRACE) ")
_STACK_FRAME = re.compile(r"^\s+(at [\w$./<>]+\(|\.\.\. \d+ more)")
_ERRORISH = re.compile(
    r"Error|ERROR|Exception|error:|Traceback|FATAL|Caused by|not found|not set|No such file|"
    r"[Cc]annot |[Cc]ould not|[Ff]ailed|[Rr]efused"
)


def _readable(line: str) -> str | None:
    """``line`` as a user wants to see it, or None when it is log noise."""
    line = line.rstrip()
    if not line.strip() or _JVM_NOISE.match(line) or _STACK_FRAME.match(line):
        return None
    if line.startswith('{"ts"'):  # PySpark 4 logs JSON records from Python
        try:
            record = json.loads(line)
        except ValueError:
            return line
        if record.get("level") in ("INFO", "WARN", "WARNING", "DEBUG"):
            return None
        first = str(record.get("msg", "")).splitlines()[:1]
        return f"{record.get('level')} {record.get('logger')}: {first[0] if first else ''}"
    return line


def error_lines(output: Iterable[str], limit: int = _SHOWN_LINES) -> list[str]:
    """The last ``limit`` lines of ``output`` that look like errors, without JVM noise."""
    readable = [r for r in (_readable(line) for line in output) if r is not None]
    errors = [r for r in readable if _ERRORISH.search(r)]
    return (errors or readable)[-limit:]


def during(seen: list[Event]) -> str:
    """`` during step 'x'`` (or ``steps 'x', 'y'``: builds run at once) for the steps a
    job's events show started and not finished; "" when none was running."""
    started: list[StepStart] = []
    finished: set[int | None] = set()
    for e in seen:
        if e["event"] == "step_start":
            started.append(e)
        elif e["event"] == "step_done" or e["event"] == "step_failed":
            finished.add(e.get("index"))
    running = [e["label"] for e in started if e.get("index") not in finished]
    named = ", ".join(f"'{label}'" for label in running)
    return f" during step{'s' if len(running) > 1 else ''} {named}" if running else ""


def server_lost(
    why: str,
    seen: list[Event],
    *,
    restarted: bool,
    server_log: Path | None = None,
    log_path: Path | None = None,
) -> DriverLost:
    """The error for a Connect job whose server died or stopped answering mid-job (``why``:
    "died (...)", "stopped answering (...)"): :class:`~sluice.core.errors.DriverLost`,
    since the job did not fail on its own and running it again finishes it.
    ``restarted``: the server is ours, started again for the next job."""
    total = next((e["steps"] for e in seen if e["event"] == "job_start"), None)
    done = sum(1 for e in seen if e["event"] == "step_done")
    recorded = sum(1 for e in seen if e["event"] == "write")
    of = f" of {total}" if total is not None else ""
    kept = (
        f"what it finished is kept ({done}{of} steps done, {recorded} results recorded), "
        "so running it again finishes it: the service runs it again by itself; on the "
        "command line, run the command again"
    )
    then = (
        "; the server is started again for the next job"
        if restarted
        else "; the server is not Sluice's (spark.remote): ask its operator"
    )
    where = []
    if server_log is not None:
        where.append(f"the server's log: {server_log}")
    if log_path is not None:
        where.append(f"the job's log: {log_path}")
    tail = f" ({'; '.join(where)})" if where else ""
    return DriverLost(
        f"Spark job failed: the Spark Connect server {why}{during(seen)}; the job was stopped",
        hint=f"{kept}{then}{tail}",
    )


def job_failure(
    job_id: str,
    seen: list[Event],
    *,
    exit_code: int | None = None,
    log_path: Path | None = None,
    output: Iterable[str] = (),
) -> ExecutionError:
    """The error for a failed job, from its events (else from its output's error lines).

    A driver killed by a signal without reporting a failure of its own is
    :class:`~sluice.core.errors.DriverLost`: running the job again is the remedy.
    """
    where = []
    if exit_code is not None:
        where.append(f"exit code {exit_code}")
    if log_path is not None:
        where.append(f"full log: {log_path}")
    tail = f" ({'; '.join(where)})" if where else ""
    # The first failure stopped the job; builds running then may have failed too.
    failed: list[StepFailure] = []
    job: JobFailure | None = None  # the last one
    for e in seen:
        if e["event"] == "step_failed":
            failed.append(e)
        elif e["event"] == "job_failed":
            job = e
    step = failed[0] if failed else None
    reported = step is not None or job is not None
    signum = None
    if exit_code is not None and exit_code < 0:
        signum, which = -exit_code, "driver"  # the JVM spark-submit started
    elif exit_code is not None and exit_code in _SIGNAL_STATUS and not reported:
        signum, which = exit_code - 128, "Python driver"  # the process the JVM runs
    if signum is not None:
        # The driver died from a signal (kill -9, the OOM killer): say so, and where.
        return DriverLost(
            f"Spark job failed: the {which} was killed by signal {signum}{during(seen)}",
            hint="apply again: finished intervals are kept and the rest is computed; "
            f"if it was the OOM killer, give the driver more memory{tail}",
        )
    if step is not None:
        also = "".join(
            f"\n  also failed: step '{e['label']}': {e['error'].splitlines()[0]}"
            for e in failed[1:]
            if e["error"]
        )
        # A build names its model's file:line first, as every error at a file does (the
        # Action turns it into an annotation on that file).
        source = f"{step['source']}: " if step.get("source") else ""
        return ExecutionError(
            f"{source}Spark job failed at step '{step['label']}': {step['error']}{also}",
            hint=f"fix the step's cause and run again{tail}",
        )
    if job is not None:
        return ExecutionError(
            f"Spark job {job_id} failed: {job['error']}",
            hint="the error is outside any step: check the Spark setup (sluice.spark in "
            f"config.yaml) and the environment{tail}",
        )
    shown = "".join(f"\n  {line}" for line in error_lines(output))
    return ExecutionError(
        f"Spark job {job_id} failed before reporting an error (exit code {exit_code}){shown}",
        hint=f"the lines above are the last errors in Spark's output; full log: {log_path}",
    )


def sandbox_refusal(output: Iterable[str]) -> str | None:
    """The line bubblewrap wrote when it could not make a job's sandbox (``bwrap: ...``:
    nothing of the job started), if ``output`` holds one."""
    return next((line.rstrip() for line in output if line.startswith("bwrap: ")), None)


def archive_changed(what: str, log_path: Path | None) -> DriverLost:
    """The error for ``what`` (``Spark job <id>``, ``the Spark Connect server``), whose
    sandbox did not start because the class archive its JVM maps
    (:mod:`sluice.core.spark.jvm`), checked and held open, was replaced or removed before
    the sandbox bound it: nothing of the job ran, so running it again is the remedy (a
    :class:`~sluice.core.errors.DriverLost`: callers that retry do)."""
    where = f"; full log: {log_path}" if log_path is not None else ""
    return DriverLost(
        f"{what} did not start: the Spark class archive its JVM maps (the Java classes "
        "of Spark the service keeps so that jobs start faster, written again by prod's "
        "jobs) changed or vanished while its sandbox was being made, so the sandbox could "
        "not show it; nothing of the job ran",
        hint="run the job again: it maps the archive as it is then (a prod job publishing "
        "a new archive at that moment is the usual cause). If it happens on every run, "
        "something else changes the archive's folder (`.sluice/jvm` beside the Spark "
        f"root): tell the service's operator{where}",
    )


# --- fail-fast checks ---------------------------------------------------------------
