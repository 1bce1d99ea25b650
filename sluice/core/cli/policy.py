"""``sluice policy``: a project's policies (``policies/*.yaml``) tried on plans.

``sluice policy test FIXTURE...`` evaluates every policy on each fixture (a JSON file of
facts, as ``sluice policy facts`` prints them, optionally with ``"expect": {"policy":
"pass" | "fail"}``) and fails when a verdict differs from what the fixture expects;
``sluice policy facts [ENVIRONMENT]`` prints the facts of the project's plan, the
starting point of a fixture. ``sluice plan`` prints the verdicts of the project's
policies under the plan. cel-python is imported only when a command evaluates a policy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape

from sluice.core import workflow
from sluice.core.cli.common import fails_cleanly, now_ms, out, project_option, state_option
from sluice.core.errors import ConfigError

if TYPE_CHECKING:
    from sluice.core.model.definition import Model
    from sluice.core.plan.plan import Plan
    from sluice.core.policy.verdict import Verdict

MAX_FIXTURE_BYTES = 16 * 1024 * 1024


@click.group()
def policy() -> None:
    """Try the project's policies (policies/*.yaml) on plans."""


@policy.command("test")
@click.argument(
    "fixtures", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@project_option
@fails_cleanly
def test(fixtures: tuple[Path, ...], project_dir: Path) -> None:
    """Evaluate every policy on each FIXTURE (facts as JSON); fail on an unexpected verdict."""
    from sluice.core.policy.load import read_policies
    from sluice.core.policy.verdict import evaluate

    policies = read_policies(project_dir)
    if not policies:
        raise ConfigError(
            "the project has no policies", path=project_dir / "policies", hint="add policies/*.yaml"
        )
    report: list[dict[str, Any]] = []
    wrong = 0
    for fixture in fixtures:
        facts, expect = _fixture(fixture)
        unknown = sorted(set(expect) - {p.name for p in policies})
        if unknown:
            raise ConfigError(
                f"the fixture expects a verdict of {', '.join(unknown)}, which no policy is named",
                path=fixture,
                hint=f"the policies are {', '.join(p.name for p in policies)}",
            )
        for verdict in evaluate(policies, facts):
            want = expect.get(verdict.policy.name)
            ok = want is None or want == verdict.outcome
            wrong += not ok
            report.append(
                {**_verdict_json(verdict), "fixture": str(fixture), "expected": want, "ok": ok}
            )
    for row in report:
        mark = "[green]ok[/]" if row["ok"] else "[bold red]UNEXPECTED[/]"
        want = f" (expected {row['expected']})" if row["expected"] else ""
        out.print(
            f"{mark} {escape(row['fixture'])}: {escape(row['policy'])} "
            f"{escape(row['outcome'])}{escape(want)}",
            highlight=False,
            soft_wrap=True,
        )
        if row["error"]:
            out.print(f"    {escape(row['error'])}", highlight=False, soft_wrap=True)
    out.print(f"{len(report)} verdicts, {wrong} unexpected.")
    if wrong:
        raise SystemExit(1)


@policy.command("facts")
@click.argument("environment", default="prod")
@project_option
@state_option
@click.option("--author", default="", help="Who proposes the plan (the fact `author`).")
@fails_cleanly
def facts(environment: str, project_dir: Path, state: str | None, author: str) -> None:
    """Print the facts policies see of the project's plan for ENVIRONMENT, as JSON."""
    from sluice.core.policy.facts import plan_facts

    project = workflow.load_project(project_dir)
    reader = workflow.read_project_state(project, state)
    try:
        now = now_ms()
        plan = workflow.plan_environment(project, reader, environment, end=now, execution_time=now)
        base = {
            n: s.model for n, s in workflow.read_environment(reader, environment).snapshots.items()
        }
    finally:
        reader.close()
    click.echo(json.dumps(plan_facts(plan, project.models, base, author=author), indent=2))


def plan_verdicts(
    project_dir: Path, plan: Plan, models: Mapping[str, Model], base: Mapping[str, Model]
) -> list[Verdict]:
    """The verdicts of the project's policies on ``plan`` (none without ``policies/``)."""
    if not (project_dir / "policies").is_dir():
        return []
    from sluice.core.policy.facts import plan_facts
    from sluice.core.policy.load import read_policies
    from sluice.core.policy.verdict import evaluate

    return evaluate(read_policies(project_dir), plan_facts(plan, models, base))


def print_verdicts(verdicts: list[Verdict], console: Console) -> None:
    """Each policy's verdict, blocking ones first."""
    if not verdicts:
        return
    console.print("[bold]Policies[/]")
    for verdict in sorted(verdicts, key=lambda v: (not v.blocks, v.policy.name)):
        style = "red" if verdict.blocks else ("yellow" if verdict.outcome != "pass" else "green")
        console.print(
            f"  [{style}]{escape(verdict.policy.name)}[/] ({verdict.policy.level}): "
            f"{escape(verdict.summary)}: {escape(verdict.policy.description)}",
            highlight=False,
        )
        if verdict.error:
            console.print(f"    {escape(verdict.error)}", highlight=False)


def verdicts_json(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    return [_verdict_json(v) for v in verdicts]


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "policy": verdict.policy.name,
        "level": verdict.policy.level,
        "outcome": verdict.outcome,
        "blocks": verdict.blocks,
        "description": verdict.policy.description,
        "file": f"{verdict.policy.path}:{verdict.policy.line}",
        "error": verdict.error,
    }


def _fixture(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    try:
        if path.stat().st_size > MAX_FIXTURE_BYTES:
            raise ConfigError(f"the fixture is over {MAX_FIXTURE_BYTES // 2**20} MiB", path=path)
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("no such fixture", path=path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise ConfigError(f"the fixture is not JSON: {exc}", path=path, line=line) from None
    if not isinstance(data, dict):
        raise ConfigError("a fixture is a JSON object of facts", path=path, line=1)
    expect = data.pop("expect", {})
    if not isinstance(expect, dict) or not all(
        v in ("pass", "fail", "error") for v in expect.values()
    ):
        raise ConfigError(
            'a fixture\'s "expect" maps policy names to "pass", "fail" or "error"', path=path
        )
    return data, {str(k): str(v) for k, v in expect.items()}


def register(group: click.Group) -> None:
    group.add_command(policy)
