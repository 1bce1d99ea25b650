"""``sluice environments``, ``sluice run`` and ``sluice rollback``: an environment's life
between plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from sluice.core import rollback, runs, skip, workflow
from sluice.core.cli.common import (
    DateType,
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
from sluice.core.plan.plan import iso
from sluice.core.snapshot.naming import PROD
from sluice.core.state.records import EnvironmentRecord
from sluice.core.words import duration, plural, size


@click.command()
@project_option
@state_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@fails_cleanly
def environments(project_dir: Path, state: str | None, as_json: bool) -> None:
    """List environments: plan, models, tables of their own (not prod's) and their size,
    last change, expiry."""
    project = workflow.load_project(project_dir)
    store = workflow.open_project_state(project, state)
    try:
        records = sorted(store.list_environments(), key=lambda e: (e.name != PROD, e.name))
        sizes = store.get_table_sizes({r.name for e in records for r in e.snapshots})
    finally:
        store.close()
    now = now_ms()
    prod = next((e for e in records if e.name == PROD), None)
    shared = {(r.name, r.version) for r in prod.snapshots} if prod is not None else set()
    bytes_of = {key: size.bytes for key, size in sizes.items()}
    rows = [_row(e, now, set() if e.name == PROD else shared, bytes_of) for e in records]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        out.print("no environments yet: `sluice apply` builds prod")
        return
    table = Table(
        "environment",
        "plan",
        "models",
        "own tables",
        "size",
        "changed",
        "expires",
        "previous plan",
    )
    for row in rows:
        expires = row["expires"] or "never"
        if row["invalidated"]:
            expires = "invalidated: the next `sluice janitor` removes it"
        table.add_row(
            row["name"],
            row["plan_id"][:12],
            str(row["models"]),
            str(row["own_tables"]),
            size(row["own_bytes"]) if row["own_bytes"] is not None else "-",
            f"{duration(row['age_seconds'])} ago",
            expires,
            (row["previous_plan_id"] or "")[:12],
        )
    out.print(table)


def _row(
    env: EnvironmentRecord,
    now: int,
    prods: set[tuple[str, str]],
    sizes: dict[tuple[str, str], int],
) -> dict[str, Any]:
    """One environment; ``prods``: the (model, version) tables prod's views read, which
    another environment reads too without owning them (its ``own_tables`` leave them out);
    ``sizes``: the measured bytes of tables (``own_bytes``: of its own, None: none
    measured)."""
    own = [(r.name, r.version) for r in env.snapshots if (r.name, r.version) not in prods]
    measured = [sizes[key] for key in set(own) if key in sizes]
    return {
        "name": env.name,
        "plan_id": env.plan_id,
        "previous_plan_id": env.previous_plan_id,
        "models": len(env.snapshots),
        "own_tables": len(own),
        "own_bytes": sum(measured) if measured else None,
        "updated": iso(env.updated_ts),
        "age_seconds": max(0, now - env.updated_ts) // 1000,
        "expires": iso(env.expiration_ts) if env.expiration_ts is not None else None,
        "invalidated": env.invalidated,
    }


@click.command(name="rollback")
@click.argument("environment", default=PROD)
@click.option(
    "--to",
    "to",
    default=None,
    help="The plan to go back to, or the start of its id (default: the previous).",
)
@click.option("--list", "list_only", is_flag=True, help="List the plans it can go back to.")
@click.option("--dry-run", is_flag=True, help="Say what would change, change nothing.")
@project_option
@state_option
@in_process_option
@fails_cleanly
def rollback_command(
    environment: str,
    to: str | None,
    list_only: bool,
    dry_run: bool,
    project_dir: Path,
    state: str | None,
    in_process: bool,
) -> None:
    """Point ENVIRONMENT (default prod) back at an earlier plan's tables: views only."""
    project = workflow.load_project(project_dir)
    store = workflow.open_project_state(project, state)
    try:
        if list_only:
            _print_history(rollback.history(store, environment))
            return
        back = rollback.plan_rollback(store, environment, to=to, now=now_ms())
        out.print(
            f"Rolling {environment} back to plan {back.target.plan_id[:12]} "
            f"(applied {iso(back.target.created_ts)}): "
            f"{plural(len(back.changed), 'model')} change tables, no data is computed",
            highlight=False,
            soft_wrap=True,
        )
        for name, before, after in back.changed:
            out.print(
                f"  {name}: {before or '(absent)'} → {after or '(removed)'}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        if dry_run:
            err.print("[dim]dry run: nothing changed[/]")
            return
        runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
        # prod's models are the target's again: so is the commit they came from, if known
        commit = back.target.project_commit
        result = workflow.apply_plan(project, store, back.plan, runner, now=now_ms(), commit=commit)
    finally:
        store.close()
    out.print(
        f"Rolled {environment} back: {plural(result.views_swapped, 'view')} re-pointed, "
        f"{plural(result.tables_built, 'table')} built"
    )


def _print_history(plans: list[Any]) -> None:
    if not plans:
        out.print("no plans: the environment does not exist")
        return
    table = Table("plan", "applied", "changes", "")
    for index, plan in enumerate(plans):
        payload = plan.payload
        changed = [c["name"] for c in payload.get("directly_modified", [])]
        changed += [f"+{n}" for n in payload.get("added", [])]
        changed += [f"-{n}" for n in payload.get("removed", [])]
        table.add_row(
            plan.plan_id[:12],
            iso(plan.created_ts),
            ", ".join(changed) or "-",
            "current" if index == 0 else "",
        )
    out.print(table)


@click.command(
    name="run",
    short_help="Process the intervals of ENVIRONMENT's models due by their cron (a schedule's "
    "command).",
)
@click.argument("environment", default=PROD)
@click.option(
    "--at",
    type=DateType(),
    default=None,
    help="Process what is due at this time (default: now).",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Say why each model ran, was skipped or had nothing to do.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print what the run did, with why for each model, as JSON.",
)
@project_option
@state_option
@in_process_option
@fails_cleanly
def run_command(
    environment: str,
    at: int | None,
    explain: bool,
    as_json: bool,
    project_dir: Path,
    state: str | None,
    in_process: bool,
) -> None:
    """Process every interval of ENVIRONMENT's models (default prod) that is due by their
    cron, in one Spark job; nothing due means no Spark. A FULL or INCREMENTAL_BY_UNIQUE_KEY
    model is rebuilt on each new interval of its cron, unless its query and the tables it
    reads are unchanged since its last run: then it is skipped. Run it on a schedule from a
    checkout of the branch the environment was applied from."""
    project = workflow.load_project(project_dir)
    notes(project.notes)
    now = at if at is not None else now_ms()
    say = err if as_json else out
    store = workflow.open_project_state(project, state)
    result: workflow.ApplyResult | None = None
    try:
        with runs.recorded(store, environment, now=now) as recording:  # what the web UI shows
            plan = recording.plan = workflow.plan_run(project, store, environment, now=now)
            if not plan.backfill:
                if as_json:
                    lines = skip.explain(plan, {}, {})
                    click.echo(json.dumps(_run_json(environment, plan, None, lines)))
                    return
                out.print(f"{environment} is up to date: no interval is due", highlight=False)
                if explain:
                    _print_explained(skip.explain(plan, {}, {}))
                return
            due = plan.backfill_intervals
            say.print(
                f"Running {environment}: {plural(due, 'interval')} due in "
                f"{plural(len(plan.backfill), 'model')}",
                highlight=False,
            )
            for backfill in plan.backfill:
                say.print(
                    f"  {backfill.name}: {iso(backfill.start)} .. {iso(backfill.end)} "
                    f"({plural(len(backfill.intervals), 'interval')})",
                    highlight=False,
                    markup=False,
                )
            runner = workflow.make_runner(project, in_process=in_process, on_event=progress)
            result = workflow.apply_plan(project, store, plan, runner, now=now, skip_unchanged=True)
            recording.tables_built = result.tables_built
            recording.spark_seconds = result.job.seconds if result.job is not None else None
            recording.skipped = tuple(result.skipped)
    finally:
        store.close()
    assert result is not None  # the block returned where there was nothing to run
    if as_json:
        click.echo(json.dumps(_run_json(environment, result.plan, result, result.explain())))
        return
    skipped = result.skipped
    out.print(
        f"Ran {environment}: {plural(result.tables_built, 'table')} brought up to date"
        + (
            f", {plural(len(skipped), 'model')} skipped (nothing they read changed: "
            f"{', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''})"
            if skipped
            else ""
        ),
        highlight=False,
        markup=False,
    )
    if explain:
        _print_explained(result.explain())


def _print_explained(lines: list[skip.Explanation]) -> None:
    """``sluice run --explain``: a line per model, why it ran, was skipped or not."""
    width = max((len(line.name) for line in lines), default=0)
    for line in lines:
        out.print(
            f"  {line.name.ljust(width)}  {line.outcome}: {line.reason}",
            highlight=False,
            markup=False,
        )


def _run_json(
    environment: str,
    plan: Any,
    result: workflow.ApplyResult | None,
    lines: list[skip.Explanation],
) -> dict[str, Any]:
    """``sluice run --json``: what the run did, and why for each model."""
    return {
        "environment": environment,
        "plan_id": plan.plan_id,
        "intervals_due": plan.backfill_intervals,
        "tables_built": result.tables_built if result is not None else 0,
        "skipped": result.skipped if result is not None else [],
        "spark_seconds": result.job.seconds if result is not None and result.job else None,
        "models": [line.to_json() for line in lines],
    }


def register(group: click.Group) -> None:
    """Add the commands to ``group``."""
    for command in (environments, run_command, rollback_command):
        group.add_command(command)
