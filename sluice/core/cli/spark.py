"""``sluice spark start|stop|status``: a warm Spark for a developer's commands."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sluice.core import workflow
from sluice.core.cli.common import err, fails_cleanly, out, project_option
from sluice.core.config import SparkSettings
from sluice.core.spark import dev_server
from sluice.core.spark.session import SparkPaths


@click.group()
def spark() -> None:
    """A Spark Connect server that stays up between this project's commands.

    Every `sluice plan`, `apply`, `run`, `query`, `table-diff`, `test` and `rollback` on the
    project then runs its Spark jobs on it (seconds, not a Spark start each); `stop` ends
    it. With spark.mode: connect or an --in-process command, it is not used."""


def _settings(project_dir: Path) -> tuple[Path, SparkSettings, SparkPaths]:
    project = workflow.load_project(project_dir)
    return (
        Path(project.path),
        project.config.sluice.spark,
        SparkPaths.for_project(Path(project.path)),
    )


@spark.command()
@project_option
@click.option(
    "--foreground",
    is_flag=True,
    help="Keep the server in this process until Ctrl-C (what `start` runs detached).",
)
@fails_cleanly
def start(project_dir: Path, foreground: bool) -> None:
    """Start the project's Spark Connect server (127.0.0.1 only) and return once it answers."""
    path, settings, paths = _settings(project_dir)
    if foreground:
        dev_server.serve(settings, paths)
        return
    err.print("[dim]starting a Spark Connect server (a Spark start, once)…[/]", highlight=False)
    found = dev_server.start(path, settings, paths)
    out.print(
        f"Spark Connect server running on {found.url} (keeper pid {found.pid}); "
        "stop it with: sluice spark stop",
        highlight=False,
    )


@spark.command()
@project_option
@fails_cleanly
def stop(project_dir: Path) -> None:
    """Stop the project's Spark Connect server and free its metastore."""
    _, settings, paths = _settings(project_dir)
    found = dev_server.stop_server(settings, paths)
    if found.running:
        out.print(f"stopped the Spark Connect server (keeper pid {found.pid})", highlight=False)
    else:
        out.print("no Spark Connect server was running for this project", highlight=False)


@spark.command()
@project_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@fails_cleanly
def status(project_dir: Path, as_json: bool) -> None:
    """Say whether the project's Spark Connect server runs and is used (exit 1 when not)."""
    _, settings, paths = _settings(project_dir)
    found = dev_server.status(settings, paths)
    if as_json:
        out.print_json(json.dumps(found.__dict__))
    elif found.url is not None:
        out.print(
            f"running on {found.url} (keeper pid {found.pid}, since {found.started}); "
            "this project's commands use it",
            highlight=False,
        )
    elif found.running:
        out.print(
            f"running (keeper pid {found.pid}) but not used: {found.problem}", highlight=False
        )
    else:
        out.print("not running" + (f": {found.problem}" if found.problem else ""), highlight=False)
    if found.url is None:
        raise SystemExit(1)


def register(cli: click.Group) -> None:
    """Add ``sluice spark`` to ``cli``."""
    cli.add_command(spark)
