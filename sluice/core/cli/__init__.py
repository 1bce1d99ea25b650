"""The ``sluice`` command. Each subcommand is a thin call into :mod:`sluice.core.workflow`."""

from __future__ import annotations

from sluice.core.cli import diff, drift, environments, operations, plan, policy, spark
from sluice.core.cli.common import cli

plan.register(cli)
operations.register(cli)
diff.register(cli)
environments.register(cli)
spark.register(cli)
policy.register(cli)
drift.register(cli)
cli.place("Plan and review", "plan", "table-diff", "query", "test", "policy")
cli.place("Run and deploy", "apply", "run", "rollback")
cli.place("Environments", "environments", "drift", "invalidate", "janitor")
cli.place("Develop", "spark")


def main() -> None:
    """Console-script entry point."""
    cli()


__all__ = ["cli", "main"]
