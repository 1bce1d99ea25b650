"""``sluice gitlab-webhook-token <project id>``: the secret token to type into one GitLab
project's webhook.

Each GitLab project's webhook holds a token of its own, derived from the service's
``SLUICE_GITLAB_WEBHOOK_SECRET`` for the project's numeric id
(:func:`~sluice.bot.intake.verify.gitlab_project_token`), so that a maintainer of one
project, who sees its token, cannot sign the hooks of another. The command reads the
secret from the environment as ``sluice serve`` does and prints the token on stdout,
nothing else; it never takes the secret as an argument (a shell's history keeps those).
"""

from __future__ import annotations

import os

import click

from sluice.bot.intake.verify import gitlab_project_token

SECRET_VARIABLE = "SLUICE_GITLAB_WEBHOOK_SECRET"


def register(cli: click.Group) -> None:
    """Add ``sluice gitlab-webhook-token`` to the ``sluice`` command."""

    @cli.command("gitlab-webhook-token")
    @click.argument("project_id", metavar="PROJECT_ID", type=click.IntRange(min=1))
    def gitlab_webhook_token(project_id: int) -> None:
        """Print the secret token of one GitLab project's webhook (from
        SLUICE_GITLAB_WEBHOOK_SECRET and the project's id).

        PROJECT_ID is the project's numeric id (its overview page shows it, as does the
        API's GET /projects/:path). Type the token printed into the webhook's "Secret
        token" field (Settings > Webhooks). Run this where SLUICE_GITLAB_WEBHOOK_SECRET is
        set as the service has it; changing that secret changes every project's token.
        """
        secret = os.environ.get(SECRET_VARIABLE, "")
        if not secret:
            raise click.ClickException(
                f"{SECRET_VARIABLE} is not set: set it as the service has it (the tokens "
                "derive from it), then run this again"
            )
        click.echo(gitlab_project_token(secret, project_id))
