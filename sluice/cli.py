"""The ``sluice`` command: the engine's commands and the service's, in one group.

Core's commands know nothing of the bot; this module is where the two meet.
"""

from __future__ import annotations

from sluice.bot.entry import action, demo, jobs, local_pr, serve
from sluice.core.cli import cli

serve.register(cli)
local_pr.register(cli)
action.register(cli)
demo.register(cli)
jobs.register(cli)


def main() -> None:
    """Console-script entry point."""
    cli()
