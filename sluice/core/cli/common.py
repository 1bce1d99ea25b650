"""What every subcommand shares: the group, options, error handling, progress output."""

from __future__ import annotations

import json
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
from sluice.core import errors, logs
from sluice.core.cli.progress import JobProgress
from sluice.core.errors import SluiceError
from sluice.core.timeutil import DAY_MS, to_ms

F = TypeVar("F", bound=Callable[..., Any])
# Text Sluice prints holds names, paths and messages users and Spark wrote: no Rich emoji
# codes (a location "file:100:" is not an emoji), and every such value goes through
# ``escape`` where markup is on (a file named "[red]x.sql" is a name, not a style).
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)
# The driver's events of the command's Spark jobs (``make_runner(on_event=progress)``):
# a live bar on a terminal, a line per step otherwise; stopped when the command ends.
progress = JobProgress(err)


# ``sluice --help`` lists the commands under these headings, in this order.
SECTIONS = ("Plan and review", "Run and deploy", "Environments", "Develop", "Service")


def one_line(command: click.Command) -> str:
    """What ``sluice --help`` says of ``command``: its ``short_help``, else the first
    paragraph of its help, whole (click cuts it at 45 characters with "...")."""
    if command.short_help:
        return " ".join(command.short_help.split())
    return " ".join((command.help or "").split("\n\n", 1)[0].split())


class LazyGroup(click.Group):
    """A command group whose commands may be registered only when first asked for, so a
    ``sluice plan`` process never imports the modules (and libraries) of other commands.

    Its help lists the commands by task (:data:`SECTIONS`), each with its whole one-line
    help: a lazy command's is given when it is added, so ``--help`` imports none of them.
    With ``--json`` among a command's arguments, a usage error (or any click error) is
    printed as the JSON object :func:`fails_cleanly` prints for Sluice's own errors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, Callable[[click.Group], None]] = {}
        self.lazy_help: dict[str, str] = {}
        self.sections: dict[str, str] = {}

    def add_lazy(
        self,
        name: str,
        register: Callable[[click.Group], None],
        *,
        help: str,
        section: str,
    ) -> None:
        """``register(group)`` adds the command ``name`` when it is first looked up; until
        then ``help`` (its one-line help, :func:`one_line`) stands for it in ``--help``."""
        self.lazy[name] = register
        self.lazy_help[name] = help
        self.sections[name] = section

    def place(self, section: str, *names: str) -> None:
        """List the commands ``names`` under ``section`` in ``--help``."""
        for name in names:
            self.sections[name] = section

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        register = self.lazy.pop(cmd_name, None)
        if register is not None:
            register(self)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        order = {name: index for index, name in enumerate(self.sections)}  # as placed
        grouped: dict[str, list[tuple[str, str]]] = {}
        names = sorted(self.list_commands(ctx), key=lambda n: (order.get(n, len(order)), n))
        for name in names:
            if name in self.lazy_help:  # not imported for its help
                text = self.lazy_help[name]
            else:
                command = self.commands.get(name)
                if command is None or command.hidden:
                    continue
                text = one_line(command)
            grouped.setdefault(self.sections.get(name, "Other commands"), []).append((name, text))
        # one column for the names of every section
        width = max((len(name) for rows in grouped.values() for name, _ in rows), default=0)
        for title in (*SECTIONS, *sorted(set(grouped) - set(SECTIONS))):
            if grouped.get(title):
                with formatter.section(title):
                    formatter.write_dl([(name.ljust(width), text) for name, text in grouped[title]])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = args[: args.index("--")] if "--" in args else args
        ctx.meta["sluice.json"] = "--json" in given
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not ctx.meta.get("sluice.json"):
                raise
            where = getattr(exc, "ctx", None)
            hint = (
                f"see `{where.command_path} --help`" if isinstance(where, click.Context) else None
            )
            document = {"error": exc.format_message(), "file": None, "line": None, "col": None}
            click.echo(json.dumps({**document, "hint": hint}))
            ctx.exit(exc.exit_code)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="sluice")
@click.option("-v", "--verbose", is_flag=True, help="Log what Sluice does.")
@click.option(
    "--config",
    "config_name",
    default=None,
    metavar="NAME",
    help="Which Config of a project's config.py to read, as SQLMesh's --config (default: config).",
)
def cli(verbose: bool, config_name: str | None) -> None:
    """Sluice: GitOps deployment for SQL data pipelines on Apache Spark."""
    if config_name:
        from sluice.core.model.pycode import config_file  # loaded only when asked for

        config_file.NAME.set(config_name)
    try:
        logs.setup("WARNING", verbose=verbose)
    except SluiceError as exc:
        raise click.ClickException(str(exc)) from None


def now_ms() -> int:
    """The clock, read once per command (workflow functions take time as an argument)."""
    return int(time.time() * 1000)


def fails_cleanly(func: F) -> F:
    """Print a SluiceError as the user's problem (no traceback) and exit 1: with
    ``--json`` (the command's ``as_json``), as one JSON object on stdout; otherwise on
    stderr, with the source line it points at. A job's live progress bar is stopped first,
    and in any case when the command ends."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SluiceError as exc:
            progress.close()
            if kwargs.get("as_json"):
                click.echo(json.dumps(errors.to_json(exc)))
            else:
                print_error(exc, base=kwargs.get("project_dir"))
            sys.exit(1)
        finally:
            progress.close()

    return wrapper  # type: ignore[return-value]


def print_error(
    error: SluiceError, *, base: Path | None = None, console: Console | None = None
) -> None:
    """``error`` on stderr: ``error: file:line:col: what``, the source line with a caret
    under the column, then the hint; each problem so for several. Every piece of user text
    is escaped (a message naming ``[red]x.sql`` prints it, not a style) and its terminal
    codes shown as ``?`` (:func:`~sluice.core.errors.terminal_text`)."""
    console = console or err
    problems = error.errors if isinstance(error, errors.ProjectErrors) else [error]
    for index, problem in enumerate(problems):
        head = "[bold red]error:[/] " if index == 0 else ""
        where = f"{problem.location}: " if problem.location else ""
        said = escape(errors.terminal_text(where + problem.message))
        console.print(f"{head}{said}", highlight=False, soft_wrap=True)
        for line in errors.excerpt(problem, base=base):
            console.print(line, style="dim", highlight=False, markup=False, soft_wrap=True)
        if problem.hint:
            hint = escape(errors.terminal_text(problem.hint))
            console.print(f"  hint: {hint}", highlight=False, soft_wrap=True)


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


def notes(items: tuple[str, ...]) -> None:
    """Print load notes on stderr."""
    for note in items:
        err.print(f"[dim]note: {escape(errors.terminal_text(note))}[/]", highlight=False)
