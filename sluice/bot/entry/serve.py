"""``sluice serve``: the webhook service."""

from __future__ import annotations

import logging

import click

from sluice.core import logs, sandbox
from sluice.core.errors import ConfigError


def register(cli: click.Group) -> None:
    """Add the service's commands to the ``sluice`` command."""

    @cli.command()
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
    @click.option(
        "--insecure",
        is_flag=True,
        help="Development only: accept deliveries without a valid signature.",
    )
    def serve(host: str, port: int, insecure: bool) -> None:
        """Run the webhook service (settings from SLUICE_* environment variables)."""
        import uvicorn

        from sluice.bot.entry.app import create_app
        from sluice.bot.entry.settings import ServiceSettings

        try:
            logs.setup("INFO", verbose=click.get_current_context().find_root().params["verbose"])
            settings = (
                ServiceSettings(insecure_no_signature=True) if insecure else ServiceSettings()
            )
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        problem = settings.forge_problem()
        if problem is not None:
            raise click.ClickException(str(problem))
        say = logging.getLogger(__name__)
        if settings.insecure_no_signature:
            say.warning("INSECURE: webhook signatures are not checked; never expose this service")
        try:
            found = sandbox.isolation()
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        # One block says what starts: version, forges, repositories, Spark, workers, state
        # (its password hidden), sandbox; a sandbox-less start is a warning.
        (say.info if found == "bwrap" else say.warning)(
            "%s\n  listening:    http://%s:%s",
            settings.summary(sandbox.describe()),
            host,
            port,
        )
        # log_config=None: uvicorn's loggers go through the root logger set up above.
        # access_log=False: a line per request, with the path a client chose, would let
        # anyone grow the log without bound; the app logs its own lines (app.AccessLog:
        # verified deliveries at INFO, /healthz and /metrics polls at DEBUG, the rest
        # rate-limited).
        uvicorn.run(create_app(settings), host=host, port=port, log_config=None, access_log=False)
