"""A Spark job's progress as a command shows it (issue 43): fed the driver's events, the
renderer shows the steps done of the total, the steps running, the time elapsed and an
estimate of the rest, as rich's live bar on a terminal and as a plain line per step when
piped; and the commands that run Spark jobs hand it to their runner."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from sluice.core import workflow
from sluice.core.cli import cli
from sluice.core.cli.progress import JobProgress, remaining, wants_live
from tests.core.helpers import BASIC, write_project

REPO = Path(__file__).resolve().parents[3]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _job(show: JobProgress, clock: Clock) -> None:
    """A three-step job: the schemas, two builds at once (one with markup in its name),
    a log line and a write (not shown) between."""
    show({"event": "job_start", "job_id": "j1", "steps": 3})
    clock.now += 3  # the Spark start: not counted in the pace
    show({"event": "session_ready"})
    show({"event": "step_start", "index": 0, "type": "create_schemas", "label": "schemas"})
    clock.now += 1
    show({"event": "step_done", "index": 0, "label": "schemas", "seconds": 1.0})
    show({"event": "step_start", "index": 1, "type": "build", "label": "build s.[red]a"})
    show({"event": "step_start", "index": 2, "type": "build", "label": "build s.b"})
    show({"event": "write", "op": "add_intervals", "model": "s.b", "intervals": []})
    show({"event": "log", "message": "metastore [locked]: waiting"})
    clock.now += 2


def test_piped_a_line_per_finished_step_with_elapsed_and_an_estimate() -> None:
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    show = JobProgress(console, live=False, clock=clock)
    _job(show, clock)
    show({"event": "step_done", "index": 2, "label": "build s.b", "seconds": 2.0})
    clock.now += 4
    show({"event": "step_done", "index": 1, "label": "build s.[red]a", "seconds": 6.0})
    show({"event": "job_done", "job_id": "j1", "results": {}})
    assert buffer.getvalue().splitlines() == [
        # 1 step in 1 s of work: the 2 left take about 2 s
        "[1/3] schemas: done in 1.0 s; 4 s elapsed, about 2 s left",
        "  metastore [locked]: waiting",
        # 2 steps in 3 s: the one left about 1.5 s (rounded to 2)
        "[2/3] build s.b: done in 2.0 s; 6 s elapsed, about 2 s left",
        "[3/3] build s.[red]a: done in 6.0 s; 10 s elapsed",  # markup is a name
    ]


def test_piped_a_failed_step_is_said_with_its_time() -> None:
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    show = JobProgress(console, live=False, clock=clock)
    _job(show, clock)
    show({"event": "step_failed", "index": 2, "label": "build s.b", "error": "boom"})
    assert buffer.getvalue().splitlines()[-1] == (
        "[1/3] build s.b: failed after 2.0 s; 6 s elapsed"
    )


def test_on_a_terminal_a_live_bar_with_the_running_steps_elapsed_and_what_is_left() -> None:
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system=None, width=120)
    show = JobProgress(console, live=True, clock=clock)
    _job(show, clock)
    assert show.drawing
    assert show.running_text() == "build s.[red]a (+1 more)"
    show({"event": "step_done", "index": 2, "label": "build s.b", "seconds": 2.0})
    assert show.running_text() == "build s.[red]a"
    clock.now += 1
    show.refresh()
    drawn = buffer.getvalue()
    # the latest frame: 2 of 3 steps, 7 s since the job started, 3 s of work for 2 steps
    # done: 1.5 s for the last, 1 s of which has passed; the step running, its markup shown
    frame = drawn.rsplit("\r", 1)[-1]
    assert "2/3 steps" in frame and "0:00:07" in frame, frame
    assert "almost done" in frame and "build s.[red]a" in frame, frame
    assert "  metastore [locked]: waiting\n" in drawn  # printed above the bar
    assert "[1/3]" not in drawn  # no plain lines on a terminal
    show({"event": "step_done", "index": 1, "label": "build s.[red]a", "seconds": 6.0})
    show({"event": "job_done", "job_id": "j1", "results": {}})
    assert not show.drawing
    last = buffer.getvalue().rstrip().rsplit("\r", 1)[-1]
    assert "3/3 steps" in last and "done" in last, last  # the bar's last frame stays


def test_a_bar_left_drawn_by_a_job_that_never_ended_is_stopped_by_close() -> None:
    """A driver killed (no job_done), Ctrl-C: the command's end stops the bar, so the
    error is printed on a clean line and the cursor is shown again."""
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system=None, width=120)
    show = JobProgress(console, live=True, clock=clock)
    _job(show, clock)
    assert show.drawing
    show.close()
    assert not show.drawing
    assert buffer.getvalue().endswith("\x1b[?25h")  # the cursor back
    show.close()  # twice is harmless


def test_a_second_job_starts_its_own_count() -> None:
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    show = JobProgress(console, live=False, clock=clock)
    _job(show, clock)
    show({"event": "job_failed", "error": "lost"})
    show({"event": "job_start", "steps": 1})
    show({"event": "step_start", "index": 0, "label": "query"})
    show({"event": "step_done", "index": 0, "label": "query", "seconds": 0.25})
    assert buffer.getvalue().splitlines()[-1] == "[1/1] query: done in 0.2 s; 0 s elapsed"


def test_the_estimate_is_the_pace_of_the_steps_done() -> None:
    assert remaining(1, 4, first_start=0.0, last_done=2.0, now=2.0) == 6.0
    assert remaining(1, 4, first_start=0.0, last_done=2.0, now=5.0) == 3.0  # time passes
    assert remaining(0, 4, 0.0, 0.0, 9.0) == 0.0 and remaining(4, 4, 0.0, 8.0, 9.0) == 0.0


def test_live_only_when_stdout_and_the_console_are_terminals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(isatty=lambda: True))
    assert wants_live(terminal)
    assert not wants_live(Console(file=io.StringIO()))  # the console piped
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(isatty=lambda: False))
    assert not wants_live(terminal)  # stdout piped
    monkeypatch.setattr(sys, "stdout", SimpleNamespace())  # no isatty at all
    assert not wants_live(terminal)


# -- the commands hand it to their runner ------------------------------------------------


def test_apply_shows_its_jobs_steps_piped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sluice apply` (no Spark: the runner and the apply are replaced, the apply emitting
    through the runner's ``on_event`` what a driver emits) prints a line per step on
    stderr; stdout keeps the plan and the summary."""
    root = write_project(tmp_path / "project", BASIC)
    given: dict[str, Any] = {}

    def make_runner(project: Any, **kwargs: Any) -> object:
        given.update(kwargs)
        return object()

    def apply_plan(project: Any, store: Any, plan: Any, runner: Any, **kwargs: Any) -> Any:
        emit = given["on_event"]
        emit({"event": "job_start", "steps": 2})
        for index, label in enumerate(("build s.a", "point prod's views at the new versions")):
            emit({"event": "step_start", "index": index, "type": "build", "label": label})
            emit({"event": "step_done", "index": index, "label": label, "seconds": 0.5})
        emit({"event": "job_done", "results": {}})
        job = SimpleNamespace(seconds=1.0)
        return SimpleNamespace(
            written=None, tables_built=1, model_views=0, views_swapped=3, job=job
        )

    monkeypatch.setattr(workflow, "make_runner", make_runner)
    monkeypatch.setattr(workflow, "apply_plan", apply_plan)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    result = CliRunner().invoke(cli, ["apply", "--project", str(root), "--state", state])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("[1/2] build s.a: done in 0.5 s; "), result.stderr
    assert lines[1].startswith("[2/2] point prod's views at the new versions: done"), lines
    assert "[1/2]" not in result.stdout and "Applied to prod" in result.stdout


RENDER = """
import sys, time
from sluice.core.cli.common import progress
progress({"event": "job_start", "steps": 2})
progress({"event": "step_start", "index": 0, "label": "build s.a"})
progress({"event": "step_done", "index": 0, "label": "build s.a", "seconds": 0.1})
progress({"event": "step_start", "index": 1, "label": "build s.b"})
progress({"event": "step_done", "index": 1, "label": "build s.b", "seconds": 0.1})
progress({"event": "job_done"})
print("done", flush=True)
"""


def test_the_commands_renderer_draws_a_bar_on_a_terminal() -> None:
    """The one ``progress`` every command passes its runner, in a real process under a
    pseudo-terminal (stdout and stderr): it draws rich's bar, not lines (piped, the
    CliRunner test above gets lines)."""
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", RENDER], stdout=follower, stderr=follower, env=env, cwd=REPO
    )
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the process ended: the terminal is closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode("utf-8", "replace"))
    assert "2/2 steps" in text and "━" in text and "done" in text, json.dumps(text)
    last = [frame for frame in text.split("\r") if "steps" in frame][-1]
    assert "2/2 steps" in last and "left" not in last and "almost" not in last, last
    assert "[1/2]" not in text, json.dumps(text)


def test_a_step_label_s_escape_sequences_never_reach_the_terminal() -> None:
    # The label comes from the driver's event, which a PR's code in the driver can print:
    # OSC 52 would set the developer's clipboard (red team, round 3).
    clock = Clock()
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system=None, width=120)
    show = JobProgress(console, live=True, clock=clock)
    show({"event": "job_start", "job_id": "j1", "steps": 1})
    hostile = "build s.a\x1b]52;c;ZWNobw==\x07\x1b[2J"
    show({"event": "step_start", "index": 0, "type": "build", "label": hostile})
    assert "\x1b]52" not in show.running_text() and "\x07" not in show.running_text()
    clock.now += 1
    show.refresh()
    show({"event": "step_done", "index": 0, "label": hostile, "seconds": 1.0})
    show({"event": "job_done", "job_id": "j1", "results": {}})
    drawn = buffer.getvalue()
    assert "\x1b]52" not in drawn and "\x07" not in drawn and "\x1b[2J" not in drawn
