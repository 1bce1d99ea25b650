"""``sluice ui --project DIR``: the web UI of one local project, on 127.0.0.1, without
sign-in: its state (the one ``sluice apply`` and ``sluice pr`` use), its jobs' logs and
the pull requests of its local forge (``sluice pr``'s, under the git repository's
``.sluice/forge/``). Read only; prints the URL, serves until interrupted."""

from __future__ import annotations

import os
from pathlib import Path

import click

from sluice.bot.forge.base import repo_key
from sluice.bot.forge.local import LocalForge
from sluice.bot.web.access import Everyone
from sluice.bot.web.pulls import LocalPulls
from sluice.bot.web.reader import Reader
from sluice.bot.web.site import Site
from sluice.bot.web.standalone import ui_app
from sluice.core.cli.common import fails_cleanly
from sluice.core.errors import SluiceError
from sluice.core.workflow import STATE_URL_ENV

HOST = "127.0.0.1"


class UiError(SluiceError):
    """``sluice ui`` cannot serve the project (no state, not in a git repository)."""


def register(cli: click.Group) -> None:
    """Add ``sluice ui`` to the ``sluice`` command."""
    cli.add_command(ui)


def _git_root(folder: Path) -> Path:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    raise UiError(
        f"{folder} is not in a git repository",
        hint="sluice ui shows a project of a git repository (its pull requests are "
        "`sluice pr`'s); run `git init` there, or point --project at one",
    )


def site_of(project: Path, state: str | None = None) -> tuple[Site, str]:
    """The site of the local project at ``project`` and its repository's key."""
    project = project.resolve()
    forge = LocalForge(_git_root(project))
    url = state or os.environ.get(STATE_URL_ENV)
    if not url:
        path = project / ".sluice" / "state.db"
        if not path.is_file():
            raise UiError(
                f"{project} has no state yet ({path} does not exist)",
                hint="build it first: `sluice apply` (or `sluice pr open`, or `make demo "
                "KEEP=1` and --project .sluice-demo)",
            )
        url = f"sqlite:///{path}"
    repo = repo_key(forge)  # the key sluice pr's jobs give the ledger
    logs = project / ".sluice" / "logs"
    pulls = LocalPulls(forge)
    site = Site(
        lambda: [repo],
        lambda key: Reader(key, url, logs=logs, pulls=pulls, queue=False),
        Everyone(),  # loopback only, the user's own project
    )
    return site, repo


@click.command(short_help="Serve the web UI of a local project on 127.0.0.1 (no sign-in).")
@click.option(
    "--project",
    "project",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The project's folder (in a git repository; its state in .sluice/state.db).",
)
@click.option(
    "--state",
    "state",
    default=None,
    help="State database URL (default: $SLUICE_DATABASE_URL, else <project>/.sluice/state.db).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8844,
    show_default=True,
    help="The port on 127.0.0.1 (0: any free one).",
)
@fails_cleanly
def ui(project: Path, state: str | None, port: int) -> None:
    """Serve the web UI of one local project on 127.0.0.1, without sign-in: its
    environments, pull requests and plans, jobs and their logs, prod's history and
    models. Read only. Prints the URL; stop it with Ctrl-C."""
    import socket

    import uvicorn

    site, _repo = site_of(project, state)
    app = ui_app(site)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise UiError(
            f"cannot listen on {HOST}:{port}: {exc.strerror}",
            hint="choose another port with --port (0: any free one)",
        ) from exc
    sock.listen(128)  # connections wait for the server from the moment the URL is printed
    chosen = sock.getsockname()[1]
    click.echo(f"Sluice UI of {project.resolve()}: http://{HOST}:{chosen}/ui/", err=False)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
