"""A Python macro, in SQLMesh's format: Sluice runs it in a separate process when it
loads the project (see the README's "Python in projects"). `stg_payments` calls it."""

from sqlglot import exp
from sqlmesh import macro

CENTS_PER_DOLLAR = 100


@macro()
def cents_to_dollars(evaluator, column):
    """The shop's payments are in cents: `@cents_to_dollars(amount)` is `amount / 100`."""
    return exp.Div(this=column, expression=exp.Literal.number(CENTS_PER_DOLLAR))
