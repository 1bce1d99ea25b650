"""``sluice test``, ``query``, ``invalidate`` and ``janitor``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from sluice.core import workflow
from sluice.core.cli.common import (
    err,
    fails_cleanly,
    in_process_option,
    notes,
    now_ms,
    out,
    progress,
    project_option,
    state_option,
)
from sluice.core.rollback import kept_tables
from sluice.core.snapshot.naming import PROD
from sluice.core.words import plural

DAY_MS = 86_400_000


@click.command(name="test")
@project_option
@click.option("-k", "pattern", default=None, help="Run only tests whose name contains this.")
@in_process_option
@fails_cleanly
def test_command(project_dir: Path, pattern: str | None, in_process: bool) -> None:
    """Run the project's unit tests (tests/*.yaml) on Spark."""
    project = workflow.load_project(project_dir)
    notes(project.notes)
    runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
    url = workflow.state_url(project)
    results = workflow.run_unit_tests(project, runner, pattern=pattern, now=now_ms(), url=url)
    if not results:
        out.print("[yellow]no unit tests matched[/]")
        return
    failed = [r for r in results if not r["passed"]]
    for result in results:
        mark = "[green]PASS[/]" if result["passed"] else "[red]FAIL[/]"
        out.print(f"{mark} {escape(result['name'])}", highlight=False)
        for note in result["notes"]:
            err.print(f"[dim]  note: {escape(note)}[/]", highlight=False)
        if not result["passed"] and result["diff"]:
            out.print(result["diff"], highlight=False, markup=False)
    out.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    if failed:
        sys.exit(1)


@click.command()
@click.argument("environment")
@click.argument("sql")
@project_option
@state_option
@click.option("--limit", default=100, show_default=True, help="At most this many rows.")
@click.option("--json", "as_json", is_flag=True, help="Print {columns, rows} as JSON.")
@in_process_option
@fails_cleanly
def query(
    environment: str,
    sql: str,
    project_dir: Path,
    state: str | None,
    limit: int,
    as_json: bool,
    in_process: bool,
) -> None:
    """Run a read-only SQL query against ENVIRONMENT (model names read its views)."""
    project = workflow.load_project(project_dir)
    store = workflow.open_project_state(project, state)
    try:
        runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
        result = workflow.query_environment(project, store, environment, sql, runner, limit=limit)
    finally:
        store.close()
    if as_json:
        shown = {"columns": result["columns"], "types": result["types"], "rows": result["rows"]}
        click.echo(json.dumps(shown, default=str))
        return
    table = Table(*result["columns"])
    for row in result["rows"]:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    out.print(table)
    err.print(f"[dim]{len(result['rows'])} row(s)[/]")


@click.command()
@click.argument("environment")
@project_option
@state_option
@fails_cleanly
def invalidate(environment: str, project_dir: Path, state: str | None) -> None:
    """Mark ENVIRONMENT for removal; the next `sluice janitor` drops its views."""
    project = workflow.load_project(project_dir)
    store = workflow.open_project_state(project, state)
    try:
        workflow.invalidate_environment(store, environment)
    finally:
        store.close()
    out.print(f"{environment} is invalidated; `sluice janitor` will remove it.")


@click.command()
@project_option
@state_option
@click.option(
    "--table-ttl-days",
    type=float,
    default=None,
    help="Drop tables unreferenced for this long (default: config).",
)
@in_process_option
@fails_cleanly
def janitor(
    project_dir: Path, state: str | None, table_ttl_days: float | None, in_process: bool
) -> None:
    """Drop invalidated or expired environments and tables no environment uses."""
    project = workflow.load_project(project_dir)
    ttl = table_ttl_days if table_ttl_days is not None else project.config.sluice.table_ttl_days
    store = workflow.open_project_state(project, state)
    try:
        runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
        report = workflow.run_janitor(
            store,
            runner,
            url=workflow.state_url(project, state),
            now=now_ms(),
            table_ttl_ms=int(ttl * DAY_MS),
            keep=kept_tables(store, PROD, project.config.sluice.keep_prod_plans),
        )
    finally:
        store.close()
    waits = "waits for its TTL" if report.waiting == 1 else "wait for their TTL"
    removed = ", ".join(report.environments)
    out.print(
        f"removed {plural(len(report.environments), 'environment')}"
        f"{' ' + removed if removed else ''}; dropped {plural(len(report.tables), 'table')}; "
        f"{plural(report.waiting, 'unused table')} {waits}"
    )


def register(group: click.Group) -> None:
    """Add the operations to ``group``."""
    for command in (test_command, query, invalidate, janitor):
        group.add_command(command)
