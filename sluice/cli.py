"""The ``sluice`` command: the engine's commands and the service's, in one group.

Core's commands know nothing of the bot; this module is where the two meet.
"""

from __future__ import annotations

from sluice.bot import action as action_cli
from sluice.bot import cli as bot_cli
from sluice.bot import demo, local_cli
from sluice.core.cli import cli

bot_cli.register(cli)
local_cli.register(cli)
action_cli.register(cli)
demo.register(cli)


def main() -> None:
    """Console-script entry point."""
    cli()
