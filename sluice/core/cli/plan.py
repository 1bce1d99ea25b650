"""``sluice plan`` and ``sluice apply``: show what a change does, then do it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sluice.core import workflow
from sluice.core.cli import policy
from sluice.core.cli.common import (
    DateType,
    fails_cleanly,
    in_process_option,
    notes,
    now_ms,
    out,
    progress,
    project_option,
    state_option,
)
from sluice.core.cli.tree import Node, print_tree
from sluice.core.gate_settings import GateSettings
from sluice.core.plan.explain import Reason
from sluice.core.plan.explain import explain as explain_plan
from sluice.core.plan.lineage import ColumnImpact
from sluice.core.plan.plan import Backfill, ModelChange, Plan
from sluice.core.snapshot.naming import check_environment_name
from sluice.core.state.store import StateReader
from sluice.core.timeutil import format_range
from sluice.core.words import plural, size


def _plan_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("environment", default="prod"),
        project_option,
        state_option,
        click.option(
            "--start",
            type=DateType(),
            default=None,
            help="Backfill from this date (default: each model's start).",
        ),
        click.option(
            "--end",
            type=DateType(inclusive_end=True),
            default=None,
            help="Backfill up to and including this date (default: now).",
        ),
        click.option(
            "--forward-only",
            is_flag=True,
            help="Reuse existing tables for every change; no rebuilds.",
        ),
        click.option(
            "--restate-model",
            "restate",
            multiple=True,
            help="Recompute this model's data in the range (+NAME: and everything downstream).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _run(
    environment: str,
    project_dir: Path,
    state: str | None,
    start: int | None,
    end: int | None,
    forward_only: bool,
    restate: tuple[str, ...],
    as_json: bool,
    apply: bool,
    in_process: bool,
    explain: bool = False,
) -> None:
    check_environment_name(environment)
    project = workflow.load_project(project_dir)
    now = now_ms()
    notes(project.notes)
    url = workflow.state_url(project, state)

    def planned(reader: StateReader) -> Plan:
        result = workflow.plan_environment(
            project,
            reader,
            environment,
            start=start,
            end=end if end is not None else now,
            execution_time=now,
            forward_only=forward_only,
            restate=restate,
        )
        notes(tuple(f"warning: {w}" for w in result.warnings))
        notes(budget_warning(result, project.config.sluice.gate))
        return result

    if not apply:  # a plan only reads state
        reader = workflow.read_project_state(project, state)
        try:
            result = planned(reader)
            base = workflow.read_environment(reader, environment).snapshots
        finally:
            reader.close()
        reasons = explain_plan(result) if explain else None
        verdicts = policy.plan_verdicts(
            project_dir, result, project.models, {n: s.model for n, s in base.items()}
        )
        if as_json:
            document = result.to_json()
            if reasons is not None:
                document["explain"] = [r.to_json() for r in reasons]
            if verdicts:
                document["policies"] = policy.verdicts_json(verdicts)
            click.echo(json.dumps(document, indent=2))
            return
        command = f"sluice apply {environment} --project {project_dir}"
        command += " --forward-only" if forward_only else ""
        print_plan(result, out, next_step=command if reasons is None else None)
        policy.print_verdicts(verdicts, out)
        if reasons is not None:
            print_reasons(reasons, out)
            if result.has_changes:
                out.print(f"Next: [bold]{escape(command)}[/]")
        return
    store = workflow.open_project_state(project, state)
    try:
        result = planned(store)
        if not as_json:
            print_plan(result, out)
        runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
        applied = workflow.apply_plan(project, store, result, runner, url=url, now=now)
    finally:
        store.close()
    held = applied.written
    summary = {
        "tables_built": applied.tables_built,
        "model_views": applied.model_views,
        "views_swapped": applied.views_swapped,
        "seconds": applied.job.seconds if applied.job else 0.0,
        "rows_written": held.rows if held is not None else None,
        "bytes_written": held.bytes if held is not None else None,
    }
    if as_json:
        click.echo(json.dumps({**result.to_json(), "applied": summary}, indent=2))
    elif applied.job is None:
        out.print(f"[green]{environment} is up to date; nothing to apply.[/]")
    else:
        holding = [] if held is None or held.rows is None else [plural(held.rows, "row")]
        holding += [] if held is None or held.bytes is None else [size(held.bytes)]
        holds = f" ({', '.join(holding)})" if holding else ""
        made = f", {plural(applied.model_views, 'model view')} made" if applied.model_views else ""
        out.print(
            f"[green]Applied to {environment}:[/] {plural(applied.tables_built, 'table')} built"
            f"{holds}{made}, {plural(applied.views_swapped, 'view')} pointed at new versions "
            f"({summary['seconds']:.1f} s)."
        )


@click.command()
@_plan_options
@click.option("--apply", "apply", is_flag=True, help="Apply the plan right away.")
@click.option("--explain", is_flag=True, help="Say, model by model, why each is in the plan.")
@in_process_option
@fails_cleanly
def plan(
    environment: str,
    project_dir: Path,
    state: str | None,
    start: int | None,
    end: int | None,
    forward_only: bool,
    restate: tuple[str, ...],
    as_json: bool,
    apply: bool,
    explain: bool,
    in_process: bool,
) -> None:
    """Show what applying the project to ENVIRONMENT (default: prod) would change."""
    _run(
        environment,
        project_dir,
        state,
        start,
        end,
        forward_only,
        restate,
        as_json,
        apply,
        in_process,
        explain,
    )


@click.command()
@_plan_options
@in_process_option
@fails_cleanly
def apply(
    environment: str,
    project_dir: Path,
    state: str | None,
    start: int | None,
    end: int | None,
    forward_only: bool,
    restate: tuple[str, ...],
    as_json: bool,
    in_process: bool,
) -> None:
    """Plan ENVIRONMENT (default: prod) and apply it: build, audit, swap views, commit."""
    _run(
        environment,
        project_dir,
        state,
        start,
        end,
        forward_only,
        restate,
        as_json,
        True,
        in_process,
    )


def budget_warning(plan: Plan, gate: GateSettings) -> tuple[str, ...]:
    """A warning when ``plan`` backfills more intervals, or reads more bytes (its
    estimate), than ``sluice.gate.backfill`` allows (the service then asks the budget's
    ``approver`` to approve the merge too): the budget's own rule
    (:meth:`~sluice.core.gate_settings.BackfillBudget.exceeded`)."""
    budget = gate.backfill
    what = budget.exceeded(plan.backfill_intervals, plan.scan_bytes) if budget else None
    if budget is None or what is None:
        return ()
    return (
        f"warning: this plan's {what} is over sluice.gate.backfill: a pull request with it "
        f"needs the approval of the budget's approver, {budget.approver}, as well",
    )


def register(group: click.Group) -> None:
    """Add plan and apply to ``group``."""
    group.add_command(plan)
    group.add_command(apply)


def print_plan(plan: Plan, console: Console, *, next_step: str | None = None) -> None:
    """The plan as a readable tree: a verdict line first, then each change with the
    columns it touches, what it reaches, and what must be built; ``next_step``: the
    command that applies it."""
    title = f"[bold]Plan for environment [cyan]{plan.environment}[/cyan][/bold]"
    if plan.new_environment:
        title += " [dim](new environment" + (
            ", starting from prod)" if plan.environment != "prod" else ")"
        )
    console.print(verdict(plan))
    tree = Node(title)
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
            through = (
                f" [dim]its query reads the changed columns of {', '.join(change.reshaped_by)}[/]"
                if change.reshaped_by
                else ""
            )
            node = branch.add(
                f"{change.name} [bold]{_category(change.category.value)}[/]"
                + through
                + _columns(change.columns)
            )
            if change.diff:
                node.add(_diff(change.diff))
    if plan.indirectly_modified:
        branch = tree.add(f"[yellow]Indirectly modified ({len(plan.indirectly_modified)})[/]")
        for change in plan.indirectly_modified:
            via = f" [dim]via {', '.join(change.reached_by)}[/]" if change.reached_by else ""
            branch.add(f"{change.name} {_category(change.category.value)}{via}{_reads(change)}")
    if plan.unaffected:
        branch = tree.add(
            f"[dim]Unaffected ({len(plan.unaffected)}): they read none of the changed columns[/]"
        )
        for name in plan.unaffected:
            branch.add(f"[dim]{name}[/]")
    label, names = sections[2]
    if names:
        branch = tree.add(f"{label} ({len(names)})[/]")
        for name in names:
            branch.add(name)
    if plan.backfill:
        reads = f", {escape(plan.scan.reads())}" if plan.scan and plan.scan.bytes else ""
        writes = plan.output.writes() if plan.output is not None else ""
        reads += f", {escape(writes)}" if writes else ""
        branch = tree.add(f"[blue]Backfill ({plural(len(plan.backfill), 'table')}{reads})[/]")
        for item in plan.backfill:
            branch.add(f"{item.name}: {_what_builds(plan, item)}")
    if plan.create_views:  # VIEW models: no table, no data, but made as the apply says
        branch = tree.add(f"[blue]Model views to make ({len(plan.create_views)})[/]")
        for name in plan.create_views:
            branch.add(name)
    print_tree(tree, console)
    if next_step and plan.has_changes:
        console.print(f"Next: [bold]{escape(next_step)}[/]")


_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def _diff(diff: str) -> str:
    """A unified diff as markup, one line each: additions green, removals red."""
    shown = []
    for line in diff.rstrip("\n").split("\n"):
        style = next((s for mark, s in _DIFF_STYLES if line.startswith(mark)), None)
        shown.append(f"[{style}]{escape(line)}[/]" if style else escape(line))
    return "\n".join(shown)


def print_reasons(reasons: list[Reason], console: Console) -> None:
    """``--explain``: a table of why each model is in the plan."""
    if not reasons:
        console.print("[dim]No model is in the plan: nothing to explain.[/]")
        return
    table = Table("model", "in the plan as", "why", title="Why each model is in the plan")
    for reason in reasons:
        table.add_row(escape(reason.model), reason.does, escape(reason.why))
    console.print(table)


def verdict(plan: Plan) -> str:
    """One line saying how risky the plan is (rich markup)."""
    breaking = [c for c in plan.directly_modified if c.category.value == "breaking"]
    reached = [c for c in plan.indirectly_modified if c.category.value == "breaking"]
    if breaking:
        reach = f"; it reaches {plural(len(reached), 'model')} downstream" if reached else ""
        return (
            f"[bold red]⚠ {plural(len(breaking), 'breaking change')}[/]{reach}: "
            f"{plural(len(plan.backfill), 'table')} to build"
        )
    if plan.removed:
        return f"[bold red]⚠ {plural(len(plan.removed), 'model')} removed[/]"
    if plan.added and not (plan.directly_modified or plan.indirectly_modified):
        return (
            f"[bold green]✓ {plural(len(plan.added), 'model')} added[/]: "
            f"{plural(len(plan.backfill), 'table')} to build"
        )
    if plan.changes_models:
        return (
            f"[bold green]✓ No breaking change[/]: {plural(len(plan.backfill), 'table')} to build"
        )
    if plan.backfill:
        return f"[bold]{plural(len(plan.backfill), 'table')} to build[/] (no model changed)"
    return "[bold green]✓ Nothing changes[/]"


def _what_builds(plan: Plan, item: Backfill) -> str:
    reads = escape(plan.scan.reads(item.name)) if plan.scan is not None else ""
    if plan.snapshot(item.name).model.kind.is_scd_type_2:
        merges = plural(len(item.batches), "merge")
        return f"{merges} into its history" + (f" [dim]({reads})[/]" if reads else "")
    if not plan.snapshot(item.name).model.kind.is_incremental_by_time:
        return "full refresh" + (f" [dim]({reads})[/]" if reads else "")
    count = len(item.intervals)
    detail = plural(count, "interval")
    if len(item.batches) != count:
        detail += f" in {plural(len(item.batches), 'batch', 'batches')}"
    if reads:
        detail += f"; {reads}"
    return f"{format_range(item.start, item.end)} [dim]({detail})[/]"


def _columns(impact: ColumnImpact | None) -> str:
    if impact is None:
        return ""
    if impact.unknown:
        return f" [dim](columns: not known: {escape(impact.reason)})[/]" if impact.reason else ""
    signs = {"added": "+", "changed": "~", "removed": "-"}
    parts = [f"{signs[what]}{escape(', '.join(names))}" for what, names in impact.own_changes()]
    if impact.rows_changed:
        parts.append("rows change")
    return f" [dim]({'; '.join(parts)})[/]" if parts else ""


def _reads(change: ModelChange) -> str:
    impact = change.columns
    if impact is None or impact.unknown or impact.rows_changed or not impact.reads:
        return ""
    return f" [dim]reads {escape(', '.join(impact.reads))}[/]"


def _category(value: str) -> str:
    colour = {"breaking": "red", "non-breaking": "green", "forward-only": "magenta"}.get(
        value, "dim"
    )
    return f"[{colour}]\\[{value}][/]"
