"""``sluice table-diff``: what a change does to a model's data, row by row."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sluice.core import workflow
from sluice.core.cli.common import (
    fails_cleanly,
    in_process_option,
    now_ms,
    out,
    progress,
    project_option,
    state_option,
)
from sluice.core.tablediff.result import DiffOptions, TableDiffError

_USAGE_HINT = (
    "sluice table-diff prod:pr_12 jaffle.orders, or sluice table-diff --tables a.x b.x --on id"
)


@click.command(name="table-diff")
@click.argument("args", nargs=-1, metavar="SOURCE:TARGET MODEL")
@click.option("--tables", nargs=2, default=None, metavar="A B", help="Compare two tables instead.")
@click.option("--on", "on", multiple=True, help="Join key column (repeat); default: the grain.")
@click.option("--skip", multiple=True, help="Leave this column out of the comparison (repeat).")
@click.option("--where", default=None, help="Compare only rows matching this SQL condition.")
@click.option("--decimals", default=3, show_default=True, help="Round numbers to this many places.")
@click.option("--tolerance", type=float, default=None, help="Numbers match within this difference.")
@click.option("--sample", default=5, show_default=True, help="Sample rows of each kind.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--markdown", is_flag=True, help="Print the Markdown a pull request shows.")
@project_option
@state_option
@in_process_option
@fails_cleanly
def table_diff(
    args: tuple[str, ...],
    tables: tuple[str, str] | None,
    on: tuple[str, ...],
    skip: tuple[str, ...],
    where: str | None,
    decimals: int,
    tolerance: float | None,
    sample: int,
    as_json: bool,
    markdown: bool,
    project_dir: Path,
    state: str | None,
    in_process: bool,
) -> None:
    """Compare MODEL between environments SOURCE and TARGET (e.g. prod:pr_12).

    Each side reads the physical table of the model's version in that environment.
    """
    model = None
    if tables:
        if args:
            raise TableDiffError(
                f"--tables compares two tables: drop {' '.join(args)}", hint=_USAGE_HINT
            )
        source, target = tables
    else:
        if len(args) != 2 or args[0].count(":") != 1:
            raise TableDiffError(
                "give SOURCE:TARGET and a MODEL (or --tables A B)", hint=_USAGE_HINT
            )
        source, target = args[0].split(":")
        model = args[1]
    options = DiffOptions(
        on=on, skip=skip, where=where, decimals=decimals, tolerance=tolerance, sample=sample
    )
    project = workflow.load_project(project_dir)
    store = workflow.open_project_state(project, state)
    try:
        runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
        result = workflow.table_diff(
            store,
            runner,
            source=source,
            target=target,
            model=model,
            options=options,
            url=workflow.state_url(project, state),
            now=now_ms(),
        )
    finally:
        store.close()
    # Imported here: its Jinja templates are no cost for the other commands (sluice plan).
    from sluice.core.tablediff import render

    if as_json:
        click.echo(json.dumps(result.to_json(), default=str))
    elif markdown:
        click.echo(render.markdown([result]), nl=False)
    else:
        out.print(render.terminal(result))


def register(group: click.Group) -> None:
    """Add ``table-diff`` to ``group``."""
    group.add_command(table_diff)
