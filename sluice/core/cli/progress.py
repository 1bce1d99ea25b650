"""A Spark job's progress, from the driver's events, as a command runs it.

The runners pass every event of a job to an ``on_event`` callback
(:data:`sluice.core.spark.events.OnEvent`): ``job_start`` (``steps``: how many), then
``step_start`` / ``step_done`` / ``step_failed`` for each step (``index``, ``label``: e.g.
``build jaffle.orders``; builds run at once, so several may be running), ``log``
messages, and ``job_done`` or ``job_failed``. :class:`JobProgress` is that
callback. It shows the steps done of the total, the steps running, the time since the
job started and an estimate of the time left:

- on a terminal (stdout and stderr both one, and not ``TERM=dumb``), as rich's
  ``Progress`` bar on stderr, redrawn in place;
- otherwise (piped, a file, a CI log), one plain line per finished step on stderr::

    [3/12] build jaffle.orders: done in 1.2 s; 4 s elapsed, about 12 s left

stdout stays what the command prints (a plan, ``--json``). The estimate is the pace of the
steps done so far (from the first step's start, so the Spark start is not counted as
work) applied to the steps left, less the time since the last one finished.

>>> import io
>>> from rich.console import Console
>>> console = Console(file=io.StringIO(), width=100)
>>> ticks = iter([0.0, 0.0, 0.5, 2.0])
>>> show = JobProgress(console, live=False, clock=lambda: next(ticks))
>>> show({"event": "job_start", "steps": 2})
>>> show({"event": "step_start", "index": 0, "label": "build s.[a]"})
>>> show({"event": "step_done", "index": 0, "label": "build s.[a]", "seconds": 1.5})
>>> print(console.file.getvalue(), end="")
[1/2] build s.[a]: done in 1.5 s; 2 s elapsed, about 2 s left
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from sluice.core.errors import terminal_text
from sluice.core.spark.events import Event
from sluice.core.words import duration

Clock = Callable[[], float]
_SHOWN = frozenset(
    (
        "job_start",
        "step_start",
        "step_done",
        "step_failed",
        "job_done",
        "job_failed",
        "log",
    )
)


def remaining(done: int, total: int, first_start: float, last_done: float, now: float) -> float:
    """Seconds left, at the pace of the steps done so far: ``done`` steps took from
    ``first_start`` to ``last_done``, so the ``total - done`` left take as long each, less
    the time already spent on them since ``last_done`` (never below zero).

    >>> remaining(2, 6, first_start=10.0, last_done=14.0, now=15.0)
    7.0
    >>> remaining(6, 6, 10.0, 14.0, 15.0), remaining(1, 3, 0.0, 1.0, 9.0)
    (0.0, 0.0)
    """
    if done <= 0 or total <= done:
        return 0.0
    pace = (last_done - first_start) / done
    return max(0.0, pace * (total - done) - (now - last_done))


def _label(label: str | None, kind: str | None = None) -> str:
    """What a step is called in a line: its label, else its type, with no control
    character (the label comes from the driver's event, which a PR's code in the driver
    can print; the live bar shows it as written, so escape sequences are taken out here).

    >>> _label("build s.a\x1b]52;c;ZWNobw==\x07")
    'build s.a?]52;c;ZWNobw==?'
    """
    return terminal_text(str(label or kind or "step"))


def wants_live(console: Console) -> bool:
    """Whether to draw a live bar: ``console`` is an interactive terminal and so is stdout
    (piped output, a file or a CI log gets plain lines)."""
    try:
        stdout_tty = sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced by something without a descriptor
        stdout_tty = False
    return console.is_interactive and stdout_tty


class _Left(ProgressColumn):
    """The estimate of the time left, from :func:`remaining` (not rich's speed, which
    forgets a job whose steps are minutes apart)."""

    def __init__(self, owner: JobProgress) -> None:
        super().__init__()
        self.owner = owner

    def render(self, task: Task) -> Text:
        left = self.owner.left()
        if left is None:
            return Text("")
        return Text(f"about {duration(left)} left" if left >= 1 else "almost done", style="cyan")


class JobProgress:
    """The ``on_event`` callback that shows a job's progress on ``console`` (stderr).

    Args:
        console: Where to draw it.
        live: True, rich's live bar; False, a plain line per step; None, chosen at each
            job's start by :func:`wants_live`.
        clock: Seconds, monotonic (tests pass their own).

    Events may come from the runner's threads; each is handled under a lock. A live bar is
    stopped when its job ends, and by :meth:`close` (every command calls it, also when a
    job ends without saying so: a driver killed, Ctrl-C).
    """

    def __init__(
        self, console: Console, *, live: bool | None = None, clock: Clock = time.monotonic
    ) -> None:
        self.console = console
        self.live = live
        self.clock = clock
        self._lock = threading.RLock()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._reset(0, clock())

    def _reset(self, total: int, now: float) -> None:
        self.total = total
        self.done = 0
        self.started = now
        self.first_start: float | None = None
        self.last_done = now
        self.running: dict[Any, tuple[str, float]] = {}  # index -> (label, started)

    # -- what is shown -------------------------------------------------------------------

    def left(self, now: float | None = None) -> float | None:
        """Seconds left at ``now`` (default: the clock's); None until a step is done, and
        once all are."""
        if self.first_start is None or self.done == 0 or self.done >= self.total:
            return None
        now = self.clock() if now is None else now
        return remaining(self.done, self.total, self.first_start, self.last_done, now)

    def running_text(self) -> str:
        """The steps running, oldest first (plain text, not markup)."""
        labels = [label for label, _ in self.running.values()]
        if not labels:
            if self.done == 0:
                return "starting"
            return "done" if self.done >= self.total else ""
        more = f" (+{len(labels) - 1} more)" if len(labels) > 1 else ""
        return labels[0] + more

    def _line(self, label: str, what: str, now: float, *, estimate: bool = True) -> str:
        elapsed = duration(now - self.started)
        left = self.left(now)
        tail = f"; {elapsed} elapsed"
        if estimate and left is not None:
            tail += f", about {duration(left)} left"
        return f"[{self.done}/{self.total}] {label}: {what}{tail}"

    # -- the callback --------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: Event) -> None:
        if event["event"] not in _SHOWN:
            return  # writes, session_ready, ...: nothing to show
        now = self.clock()
        if event["event"] == "job_start":
            self._stop()
            steps = event.get("steps")
            self._reset(steps if isinstance(steps, int) and steps >= 0 else 0, now)
            if self.live if self.live is not None else wants_live(self.console):
                self._start_bar()
        elif event["event"] == "step_start":
            label = _label(event.get("label"), event.get("type"))
            if self.first_start is None:
                self.first_start = now
            self.running[event.get("index")] = (label, now)
            self._update()
        elif event["event"] == "step_done":
            label = _label(event.get("label"))
            self.running.pop(event.get("index"), None)
            self.done += 1
            self.last_done = now
            self.total = max(self.total, self.done)
            seconds = event.get("seconds")
            took = f"done in {seconds:.1f} s" if isinstance(seconds, (int, float)) else "done"
            if self._bar is None:
                self._plain(self._line(label, took, now))
            self._update()
        elif event["event"] == "step_failed":
            label = _label(event.get("label"), event.get("type"))
            _, began = self.running.pop(event.get("index"), (label, now))
            line = self._line(label, f"failed after {now - began:.1f} s", now, estimate=False)
            self._stop()
            self._plain(line, style="red")
        elif event["event"] == "job_done" or event["event"] == "job_failed":
            self._stop()
        elif event["event"] == "log":
            self._plain(f"  {event.get('message')}", style="dim")

    @property
    def drawing(self) -> bool:
        """Whether a live bar is on the console."""
        return self._bar is not None

    def refresh(self) -> None:
        """Redraw the live bar now (it redraws itself ten times a second anyway)."""
        with self._lock:
            if self._bar is not None:
                self._update()
                self._bar.refresh()

    def close(self) -> None:
        """Stop a live bar still drawn (the command is ending)."""
        with self._lock:
            self._stop()

    # -- drawing -------------------------------------------------------------------------

    def _plain(self, text: str, *, style: str | None = None) -> None:
        text = terminal_text(text)  # a driver's log line may hold a project's text
        shown = escape(text) if style is None else f"[{style}]{escape(text)}[/]"
        # Above the live bar when there is one: the same console.
        self.console.print(shown, highlight=False, soft_wrap=True)

    def _start_bar(self) -> None:
        self._bar = Progress(
            SpinnerColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            BarColumn(bar_width=24),
            TimeElapsedColumn(),
            _Left(self),
            TextColumn(
                "{task.description}",
                markup=False,
                table_column=Column(no_wrap=True, overflow="ellipsis"),
            ),
            console=self.console,
            get_time=self.clock,
            transient=False,
        )
        self._task = self._bar.add_task(self.running_text(), total=self.total or None)
        self._bar.start()

    def _update(self) -> None:
        if self._bar is None or self._task is None:
            return
        self._bar.update(
            self._task,
            completed=self.done,
            total=self.total or None,
            description=self.running_text(),
        )

    def _stop(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            if self._task is not None:
                bar.update(self._task, description=self.running_text())
            bar.stop()
        self._task = None
