"""The ``sluice`` command: the engine's commands and the service's, in one group.

Core's commands know nothing of the bot; this module is where the two meet. The service's
commands are registered lazily: their modules (and FastAPI, the forges' clients, the job
queue's SQLAlchemy ORM) are imported only when one of them runs, so ``sluice plan`` pays for
none of it (``tests/test_plan_imports.py``), nor ``sluice --help``, which lists them by
the one-line help given here.
"""

from __future__ import annotations

from collections.abc import Callable

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


def _ui(group: click.Group) -> None:
    from sluice.bot.entry import ui

    ui.register(group)


def _jobs(group: click.Group) -> None:
    from sluice.bot.entry import jobs

    jobs.register(group)


def _audit(group: click.Group) -> None:
    from sluice.bot.entry import audit

    audit.register(group)


def _gitlab_webhook_token(group: click.Group) -> None:
    from sluice.bot.entry import webhook_token

    webhook_token.register(group)


# The service's commands: name, registration, one-line help (the command's own, as
# ``one_line`` reads it: tests/core/cli/test_help.py checks they agree), so ``sluice
# --help`` lists them without importing them, and the section of ``sluice --help``.
LAZY_COMMANDS: tuple[tuple[str, Callable[[click.Group], None], str, str], ...] = (
    (
        "demo",
        _demo,
        "Run the whole flow on the example project, locally, on Spark: build prod, then a "
        "pull request's build, gate, merge and promotion.",
        "Develop",
    ),
    ("pr", _pr, "The pull-request flow on a git repository on disk (no GitHub).", "Develop"),
    ("ui", _ui, "Serve the web UI of a local project on 127.0.0.1 (no sign-in).", "Develop"),
    (
        "serve",
        _serve,
        "Run the webhook service (settings from SLUICE_* environment variables).",
        "Service",
    ),
    ("jobs", _jobs, "The service's job queue: list jobs, show one.", "Service"),
    (
        "audit",
        _audit,
        "The audit log: every gate decision and action, oldest first.",
        "Service",
    ),
    (
        "gitlab-webhook-token",
        _gitlab_webhook_token,
        "Print the secret token of one GitLab project's webhook (from "
        "SLUICE_GITLAB_WEBHOOK_SECRET and the project's id).",
        "Service",
    ),
    (
        "action",
        _action,
        "Run as a GitHub Action: handle this job's event (settings from GITHUB_* and "
        "INPUT_* environment variables; see action.yml).",
        "Service",
    ),
)
for _name, _register, _help, _section in LAZY_COMMANDS:
    cli.add_lazy(_name, _register, help=_help, section=_section)


def main() -> None:
    """Console-script entry point: non-dumpable before any child starts."""
    sandbox.keep_from_children()
    cli()
