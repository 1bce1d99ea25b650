"""``sluice drift``: an environment on Spark held against what Sluice recorded of it, and
the plan that mends it (:mod:`sluice.core.drift`).

Exit codes: 0, no drift (or a repair applied); 3, drift found (the report printed, or the
repair plan shown without ``--apply``); 4, the repair refused by the policies (``--apply``:
nothing applied); 1, an error (as every command: nothing checked).

Policies: ``--repair`` judges the repair plan as the service's gate does (issue 47,
``sluice.bot.flow.repair_gate``): the same facts (each model rebuilt a ``plan.models`` entry
of change ``rebuild``, each view made again one of change ``repoint``, no file, ``author``
and ``pushers`` who asks: ``--author``) and the same verdicts
(:func:`~sluice.core.policy.verdict.repair_verdicts`), with the policies of this checkout's
``policies/`` (the CLI has no prod branch in force to read: run it from a checkout of the
prod branch), and it says so. A hard policy that fails, or one that cannot be evaluated,
refuses ``--apply``; so does a soft one that fails, unless ``--override POLICY --reason
TEXT`` names it: the user of the CLI holds the state database's credentials and could apply
by other means, so their override is their own word, shown with the verdicts (and in
``--json``), never checked against the policy's ``override_by`` (no forge to ask).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

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
from sluice.core.cli.policy import print_verdicts, verdicts_json
from sluice.core.drift.compare import DriftReport
from sluice.core.drift.repair import Repair
from sluice.core.errors import terminal_text
from sluice.core.plan.plan import Plan, iso
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.state import StateReader, StateStore
from sluice.core.words import plural

if TYPE_CHECKING:
    from sluice.core.model.definition import Model
    from sluice.core.policy.verdict import Verdict

POLICIES = "policies"
"""The checkout's folder of policies (``sluice.core.policy.load.POLICIES``)."""

DRIFT_EXIT = 3
"""The exit code of a check that found drift (1 is an error, 2 a usage error)."""
REFUSED_EXIT = 4
"""The exit code of ``--repair --apply`` refused by the policies (nothing applied)."""

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
@click.option(
    "--author",
    default="",
    help="With --repair: who asks for the repair (the policies' facts `author` and "
    "`pushers`, as the service sets them to who asked).",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="POLICY",
    help="With --repair --apply: apply even though the soft policy POLICY fails on the "
    "repair plan (repeatable; needs --reason). A hard policy, or one that cannot be "
    "evaluated, is never overridden.",
)
@click.option("--reason", default="", help="Why the --override policies are overridden.")
@in_process_option
@fails_cleanly
def drift_command(
    environment: str,
    project_dir: Path,
    state: str | None,
    as_json: bool,
    repair: bool,
    apply: bool,
    author: str,
    overrides: tuple[str, ...],
    reason: str,
    in_process: bool,
) -> None:
    """Compare ENVIRONMENT (default prod) on Spark with what Sluice recorded: each view's
    definition, each table's existence, columns, rows and last write, and the intervals
    recorded against the data present. Reads only; exits 3 when it finds drift.

    With --repair, the plan that mends what Sluice can mend (views made again; prod's
    missing, reshaped or overwritten tables dropped and built again); with --repair
    --apply, that plan applied as `sluice apply` applies one. Run it from a checkout of
    the branch the environment was applied from.

    The repair plan is judged by this checkout's policies (policies/*.yaml) on the facts
    the service's gate judges a repair on; each verdict is printed. A hard policy that
    fails (or cannot be evaluated) refuses --apply, as does a soft one not named by
    --override POLICY --reason TEXT: exit 4, nothing applied."""
    check_environment_name(environment)
    if apply and not repair:
        raise click.UsageError("--apply applies a repair: give --repair too")
    if (overrides or author) and not repair:
        raise click.UsageError("--author and --override judge a repair: give --repair too")
    if overrides and not reason.strip():
        raise click.UsageError("--override needs --reason: say why the policy is overridden")
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
        verdicts: list[Verdict] = []
        if mend is not None:
            verdicts = _judge(project_dir, project.models, store, environment, mend.plan, now,
                              author=author, overrides=overrides, reason=reason)  # fmt: skip
        refusal = _refusal(verdicts)
        if mend is not None and apply and mend.plan.has_changes and refusal is None:
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
                "policies_from": str(project_dir / POLICIES),
                "policies": [
                    {
                        **row,
                        "overridden_by": v.overridden_by,
                        "override_reason": reason.strip() if v.overridden_by else None,
                    }
                    for row, v in zip(verdicts_json(verdicts), verdicts, strict=True)
                ],
                "refused": refusal,
            }
        click.echo(json.dumps(document, indent=2))
    else:
        print_report(report)
        if mend is not None:
            _print_repair(mend)
            _print_verdicts(verdicts, project_dir, apply, refusal)
            _print_outcome(mend, environment, project_dir, applied is not None, refusal)
    if mend is not None and apply and mend.plan.has_changes and refusal is not None:
        sys.exit(REFUSED_EXIT)
    if report.drifted and applied is None:
        sys.exit(DRIFT_EXIT)


def _judge(
    project_dir: Path,
    models: dict[str, Model],
    store: StateReader,
    environment: str,
    plan: Plan,
    now: int,
    *,
    author: str,
    overrides: tuple[str, ...],
    reason: str,
) -> list[Verdict]:
    """The checkout's policies on the repair ``plan``, as the service judges a repair
    (:func:`~sluice.core.policy.verdict.repair_verdicts`, ``author`` who asks), the soft
    failures ``overrides`` names lifted in the name of ``author`` (or the command line)."""
    from sluice.core.policy.load import read_policies
    from sluice.core.policy.verdict import repair_verdicts

    policies = read_policies(project_dir)
    named = {p.name: p for p in policies}
    unknown = [o for o in overrides if o not in named]
    if unknown:
        listed = ", ".join(named) or "none"
        raise click.UsageError(
            f"--override {unknown[0]}: no policy of {project_dir / POLICIES} has that name "
            f"(its policies: {listed})"
        )
    for name in overrides:
        if named[name].level != "soft":
            raise click.UsageError(
                f"--override {name}: it is a {named[name].level} policy; only a soft policy "
                "is overridden (change a hard one on the prod branch, through a pull request)"
            )
    if not policies:
        return []
    prod = {n: s.model for n, s in workflow.read_environment(store, environment).snapshots.items()}
    moment = dt.datetime.fromtimestamp(now / 1000, dt.UTC)
    verdicts = repair_verdicts(policies, plan, models, prod, [author] if author else [], moment)
    who = f"{author or 'the command line'} (--override: {reason.strip()})"
    return [
        replace(v, overridden_by=who) if v.policy.name in overrides and v.outcome == "fail" else v
        for v in verdicts
    ]


def _refusal(verdicts: list[Verdict]) -> str | None:
    """Why the policies refuse the repair (None: they do not)."""
    blocking = [v for v in verdicts if v.blocks]
    if not blocking:
        return None
    return "blocked by " + ", ".join(
        f"{v.policy.name} ({v.policy.level}, {v.policy.path}:{v.policy.line})" for v in blocking
    )


def _print_verdicts(
    verdicts: list[Verdict], project_dir: Path, apply: bool, refusal: str | None
) -> None:
    folder = project_dir / POLICIES
    if not verdicts:
        out.print(
            f"[dim]No policies in {escape(str(folder))}: nothing judges the repair here "
            "(the service judges it by the prod branch's).[/]",
            highlight=False,
        )
        return
    out.print(
        f"[dim]The repair plan judged by this checkout's policies ({escape(str(folder))}), "
        "on the facts the service's gate judges a repair on.[/]",
        highlight=False,
    )
    print_verdicts(verdicts, out)
    if refusal is not None:
        out.print(
            f"[bold red]{'Not repaired' if apply else '--apply would refuse it'}:[/] "
            f"{escape(refusal)}. A soft policy is lifted with --override POLICY --reason "
            "TEXT; a hard one, or one that cannot be evaluated, is not.",
            highlight=False,
            soft_wrap=True,
        )


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


def _print_repair(mend: Repair) -> None:
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


def _print_outcome(
    mend: Repair, environment: str, project_dir: Path, applied: bool, refusal: str | None
) -> None:
    plan = mend.plan
    if applied:
        out.print(f"[green]Repaired {escape(environment)}[/] (plan {plan.plan_id[:12]}).")
    elif plan.has_changes and refusal is None:
        command = f"sluice drift {environment} --repair --apply --project {project_dir}"
        out.print(f"Next: [bold]{escape(command)}[/]")
    elif not plan.has_changes:
        out.print("Nothing Sluice can repair: see above.")


def register(group: click.Group) -> None:
    """Add ``sluice drift`` to ``group``."""
    group.add_command(drift_command)
