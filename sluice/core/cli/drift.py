"""``sluice drift``: an environment on Spark held against what Sluice recorded of it, and
the plan that mends it (:mod:`sluice.core.drift`).

Exit codes: 0, no drift (or a repair applied); 3, drift found (the report printed, or the
repair plan shown without ``--apply``); 1, an error (as every command: nothing checked).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import cast

import click
from rich.markup import escape

from sluice.core import drift, workflow
from sluice.core.cli.common import (
    fails_cleanly,
    in_process_option,
    notes,
    now_ms,
    out,
    progress,
    project_option,
    state_option,
)
from sluice.core.cli.plan import print_plan
from sluice.core.drift.compare import DriftReport
from sluice.core.drift.repair import Repair
from sluice.core.errors import terminal_text
from sluice.core.plan.plan import iso
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.state import StateStore
from sluice.core.words import plural

DRIFT_EXIT = 3
"""The exit code of a check that found drift (1 is an error, 2 a usage error)."""

_REPAIRS = {
    "repoint": "make the view again (sluice drift --repair)",
    "rebuild": "drop and build the table again (sluice drift --repair)",
    "none": "by hand",
}


@click.command(
    name="drift",
    short_help="Compare ENVIRONMENT (default prod) on Spark with what Sluice recorded; "
    "--repair plans the fix.",
)
@click.argument("environment", default=PROD)
@project_option
@state_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--repair",
    is_flag=True,
    help="Plan the repair: views made again, missing or changed tables rebuilt.",
)
@click.option("--apply", "apply", is_flag=True, help="With --repair: apply the repair plan.")
@in_process_option
@fails_cleanly
def drift_command(
    environment: str,
    project_dir: Path,
    state: str | None,
    as_json: bool,
    repair: bool,
    apply: bool,
    in_process: bool,
) -> None:
    """Compare ENVIRONMENT (default prod) on Spark with what Sluice recorded: each view's
    definition, each table's existence, columns, rows and last write, and the intervals
    recorded against the data present. Reads only; exits 3 when it finds drift.

    With --repair, the plan that mends what Sluice can mend (views made again; prod's
    missing, reshaped or overwritten tables dropped and built again); with --repair
    --apply, that plan applied as `sluice apply` applies one. Run it from a checkout of
    the branch the environment was applied from."""
    check_environment_name(environment)
    if apply and not repair:
        raise click.UsageError("--apply applies a repair: give --repair too")
    project = workflow.load_project(project_dir)
    notes(project.notes)
    now = now_ms()
    runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
    store = (
        workflow.open_project_state(project, state)
        if apply
        else workflow.read_project_state(project, state)
    )
    try:
        report = drift.check(store, environment, runner, now=now)
        mend = drift.plan_repair(store, report, now=now) if repair and report.drifted else None
        if mend is not None and apply and mend.plan.has_changes:
            writable = cast(StateStore, store)  # opened to write: --apply
            applied = workflow.apply_plan(project, writable, mend.plan, runner, now=now)
        else:
            applied = None
    finally:
        store.close()
    if as_json:
        document = report.to_json()
        if mend is not None:
            document["repair"] = {
                **mend.plan.to_json(),
                "left": [{"model": m, "why": why} for m, why in mend.left],
                "applied": applied is not None,
            }
        click.echo(json.dumps(document, indent=2))
    else:
        print_report(report)
        if mend is not None:
            _print_repair(mend, environment, project_dir, applied is not None)
    if report.drifted and applied is None:
        sys.exit(DRIFT_EXIT)


def print_report(report: DriftReport) -> None:
    """The report for people: each difference (catalog text shown as text, never as
    markup or terminal codes), then where each table's last write was read from."""
    env = report.environment
    read = ", ".join(f"{source} ({plural(n, 'table')})" for source, n in report.sources.items())
    if not report.drifted:
        out.print(
            f"[green]No drift:[/] {escape(env)} is as Sluice recorded it "
            f"({plural(report.models, 'model')} checked"
            + (f"; last writes read from {read})" if read else ")"),
            highlight=False,
        )
        return
    models = report.drifted_models
    out.print(
        f"[bold red]Drift in {escape(env)}[/] (plan {report.plan_id[:12]}): "
        f"{plural(len(models), 'model')} of {report.models} "
        f"{'differs' if len(models) == 1 else 'differ'} from what Sluice recorded",
        highlight=False,
    )
    for difference in report.differences:
        since = f", since {iso(difference.since)}" if difference.since is not None else ""
        out.print(
            f"  {terminal_text(difference.model)}: {difference.kind}{since}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        out.print(
            f"    {terminal_text(difference.detail)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        out.print(
            f"    repair: {_REPAIRS.get(difference.repair, difference.repair)}",
            markup=False,
            highlight=False,
        )
    if read:
        out.print(f"[dim]Last writes read from {escape(read)}.[/]", highlight=False)


def _print_repair(mend: Repair, environment: str, project_dir: Path, applied: bool) -> None:
    plan = mend.plan
    if plan.repoint:
        out.print(
            f"[bold]Views to make again ({len(plan.repoint)}):[/] {escape(', '.join(plan.repoint))}",
            highlight=False,
        )
    if plan.rebuild:
        out.print(
            f"[bold]Tables to drop and build again ({len(plan.rebuild)}):[/] "
            f"{escape(', '.join(plan.rebuild))}",
            highlight=False,
        )
    if plan.backfill or plan.create_views:
        print_plan(plan, out)
    for model, why in mend.left:
        out.print(
            f"  not repaired: {terminal_text(model)}: {terminal_text(why)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if applied:
        out.print(f"[green]Repaired {escape(environment)}[/] (plan {plan.plan_id[:12]}).")
    elif plan.has_changes:
        command = f"sluice drift {environment} --repair --apply --project {project_dir}"
        out.print(f"Next: [bold]{escape(command)}[/]")
    else:
        out.print("Nothing Sluice can repair: see above.")


def register(group: click.Group) -> None:
    """Add ``sluice drift`` to ``group``."""
    group.add_command(drift_command)
