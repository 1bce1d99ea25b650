"""The ``sluice`` command: the engine's commands and the service's, in one group.

Core's commands know nothing of the bot; this module is where the two meet. The service's
commands are registered lazily: their modules (and FastAPI, the forges' clients, the job
queue's SQLAlchemy ORM) are imported only when one of them runs, so ``sluice plan`` pays for
none of it (``tests/test_plan_imports.py``).
"""

from __future__ import annotations

import click

from sluice.core import sandbox
from sluice.core.cli import cli


def _serve(group: click.Group) -> None:
    from sluice.bot.entry import serve

    serve.register(group)


def _pr(group: click.Group) -> None:
    from sluice.bot.entry import local_pr

    local_pr.register(group)


def _action(group: click.Group) -> None:
    from sluice.bot.entry import action

    action.register(group)


def _demo(group: click.Group) -> None:
    from sluice.bot.entry import demo

    demo.register(group)


def _jobs(group: click.Group) -> None:
    from sluice.bot.entry import jobs

    jobs.register(group)


for _name, _register in (
    ("serve", _serve),
    ("pr", _pr),
    ("action", _action),
    ("demo", _demo),
    ("jobs", _jobs),
):
    cli.add_lazy(_name, _register)


def main() -> None:
    """Console-script entry point: non-dumpable before any child starts."""
    sandbox.keep_from_children()
    cli()
