"""``ExecutionContext``: what a Python model's function receives (see
``sluice.core.model.pycode.run.Context``); here for type annotations only."""

from sluice.core.model.pycode.run import Context as ExecutionContext

__all__ = ["ExecutionContext"]
