"""A Python macro, in SQLMesh's format: Sluice runs it in a separate process when it
loads the project (see the README's "Python in projects")."""

from sqlglot import exp
from sqlmesh import macro


@macro()
def cents_to_dollars(evaluator, column):
    """The shop stores amounts in cents: `@cents_to_dollars(amount)` is `amount / 100`."""
    return exp.Div(this=column, expression=exp.Literal.number(100))
