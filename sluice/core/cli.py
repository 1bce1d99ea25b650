"""The ``sluice`` command. Each subcommand is a thin call into :mod:`sluice.core.workflow`."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.syntax import Syntax
from rich.tree import Tree

from sluice import __version__
from sluice.core import workflow
from sluice.core.errors import SluiceError
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import check_environment_name
from sluice.core.timeutil import DAY_MS, format_range, to_ms

F = TypeVar("F", bound=Callable[..., Any])
out = Console()
err = Console(stderr=True)


def _fails_cleanly(func: F) -> F:
    """Print a SluiceError as the user's problem (no traceback) and exit 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SluiceError as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class _Date(click.ParamType):  # type: ignore[type-arg]
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


@click.group()
@click.version_option(__version__, prog_name="sluice")
@click.option("-v", "--verbose", is_flag=True, help="Log what Sluice does.")
def cli(verbose: bool) -> None:
    """Sluice: GitOps deployment for SQL data pipelines on Apache Spark."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


_project_option = click.option(
    "--project", "-p", "project_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
    show_default=True, help="The project folder (holds config.yaml and models/).",
)  # fmt: skip
_state_option = click.option(
    "--state",
    "state",
    default=None,
    help="State database URL (default: config, then .sluice/state.db).",
)


@cli.command()
@click.argument("environment", default="prod")
@_project_option
@_state_option
@click.option(
    "--start",
    type=_Date(),
    default=None,
    help="Backfill from this date (default: each model's start).",
)
@click.option(
    "--end",
    type=_Date(inclusive_end=True),
    default=None,
    help="Backfill up to and including this date (default: now).",
)
@click.option(
    "--forward-only", is_flag=True, help="Reuse existing tables for every change; no rebuilds."
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
@_fails_cleanly
def plan(
    environment: str, project_dir: Path, state: str | None, start: int | None, end: int | None,
    forward_only: bool, as_json: bool,
) -> None:  # fmt: skip
    """Show what applying the project to ENVIRONMENT (default: prod) would change."""
    check_environment_name(environment)
    project = workflow.load_project(project_dir)
    now = int(time.time() * 1000)
    for note in project.notes:
        err.print(f"[dim]note: {note}[/]", highlight=False)
    store = workflow.open_project_state(project, state)
    try:
        result = workflow.plan_environment(
            project, store, environment, start=start, end=end if end is not None else now,
            execution_time=now, forward_only=forward_only,
        )  # fmt: skip
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_plan(result, out)


def print_plan(plan: Plan, console: Console) -> None:
    """The plan as a readable tree."""
    title = f"[bold]Plan for environment [cyan]{plan.environment}[/cyan][/bold]"
    if plan.new_environment:
        title += " [dim](new environment" + (
            ", starting from prod)" if plan.environment != "prod" else ")"
        )
    tree = Tree(title)
    if not plan.has_changes and not plan.backfill:
        tree.add("[green]No changes: the environment is up to date.[/]")
    sections: list[tuple[str, list[str]]] = [
        ("[green]Added", list(plan.added)),
        ("[red]Removed", list(plan.removed)),
        ("[dim]Metadata only", list(plan.metadata_only)),
    ]
    for label, names in sections[:2]:
        if names:
            branch = tree.add(f"{label} ({len(names)})[/]")
            for name in names:
                branch.add(name)
    if plan.directly_modified:
        branch = tree.add(f"[yellow]Directly modified ({len(plan.directly_modified)})[/]")
        for change in plan.directly_modified:
            node = branch.add(f"{change.name} [bold]{_category(change.category.value)}[/]")
            if change.diff:
                node.add(Syntax(change.diff, "diff", theme="ansi_dark", background_color="default"))
    if plan.indirectly_modified:
        branch = tree.add(f"[yellow]Indirectly modified ({len(plan.indirectly_modified)})[/]")
        for change in plan.indirectly_modified:
            branch.add(f"{change.name} {_category(change.category.value)}")
    label, names = sections[2]
    if names:
        branch = tree.add(f"{label} ({len(names)})[/]")
        for name in names:
            branch.add(name)
    if plan.backfill:
        branch = tree.add(f"[blue]Backfill ({len(plan.backfill)} tables)[/]")
        for item in plan.backfill:
            count = len(item.intervals)
            detail = f"{count} interval{'s' if count != 1 else ''}"
            if len(item.batches) != count:
                detail += f" in {len(item.batches)} batch{'es' if len(item.batches) != 1 else ''}"
            branch.add(f"{item.name}: {format_range(item.start, item.end)} [dim]({detail})[/]")
    console.print(tree)


def _category(value: str) -> str:
    colour = {"breaking": "red", "non-breaking": "green", "forward-only": "magenta"}.get(
        value, "dim"
    )
    return f"[{colour}]\\[{value}][/]"


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
