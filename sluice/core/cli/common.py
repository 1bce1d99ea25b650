"""What every subcommand shares: the group, options, error handling, progress output."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from sluice import __version__
from sluice.core import logs
from sluice.core.errors import SluiceError
from sluice.core.timeutil import DAY_MS, to_ms

F = TypeVar("F", bound=Callable[..., Any])
# Text Sluice prints holds names, paths and messages users and Spark wrote: no Rich emoji
# codes (a location "file:100:" is not an emoji), and every such value goes through
# ``escape`` where markup is on (a file named "[red]x.sql" is a name, not a style).
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)


class LazyGroup(click.Group):
    """A command group whose commands may be registered only when first asked for, so a
    ``sluice plan`` process never imports the modules (and libraries) of other commands."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, Callable[[click.Group], None]] = {}

    def add_lazy(self, name: str, register: Callable[[click.Group], None]) -> None:
        """``register(group)`` adds the command ``name`` when it is first looked up."""
        self.lazy[name] = register

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        register = self.lazy.pop(cmd_name, None)
        if register is not None:
            register(self)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="sluice")
@click.option("-v", "--verbose", is_flag=True, help="Log what Sluice does.")
def cli(verbose: bool) -> None:
    """Sluice: GitOps deployment for SQL data pipelines on Apache Spark."""
    try:
        logs.setup("WARNING", verbose=verbose)
    except SluiceError as exc:
        raise click.ClickException(str(exc)) from None


def now_ms() -> int:
    """The clock, read once per command (workflow functions take time as an argument)."""
    return int(time.time() * 1000)


def fails_cleanly(func: F) -> F:
    """Print a SluiceError as the user's problem (no traceback) and exit 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SluiceError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class DateType(click.ParamType):  # type: ignore[type-arg]
    """A date or timestamp; as an end, a bare date includes that whole day."""

    name = "date"

    def __init__(self, inclusive_end: bool = False) -> None:
        self.inclusive_end = inclusive_end

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            ms = to_ms(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return ms + DAY_MS if self.inclusive_end and len(str(value).strip()) == 10 else ms


project_option = click.option(
    "--project",
    "-p",
    "project_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The project folder (holds config.yaml and models/).",
)
state_option = click.option(
    "--state",
    "state",
    default=None,
    help="State database URL (default: config, then .sluice/state.db).",
)
in_process_option = click.option(
    "--in-process",
    is_flag=True,
    help="Run the Spark work in this process instead of spark-submit (development, fast tests).",
)


def progress(event: dict[str, Any]) -> None:
    """Print the driver's progress on stderr (stdout stays clean for --json)."""
    kind = event.get("event")
    if kind == "step_start":
        err.print(f"[dim]→ {escape(str(event.get('label')))}[/]", highlight=False)
    elif kind == "step_done" and event.get("seconds", 0) >= 1:
        # Builds run at once, so a step's end names it.
        err.print(
            f"[dim]  {escape(str(event.get('label')))}: done in {event['seconds']:.1f} s[/]",
            highlight=False,
        )
    elif kind == "log":
        err.print(f"[dim]  {escape(str(event.get('message')))}[/]", highlight=False)
    elif kind == "waiting":
        err.print(f"[yellow]{escape(str(event.get('message')))}[/]", highlight=False)


def notes(items: tuple[str, ...]) -> None:
    """Print load notes on stderr."""
    for note in items:
        err.print(f"[dim]note: {escape(note)}[/]", highlight=False)
