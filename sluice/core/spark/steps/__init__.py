"""What the driver can do: one handler per step type.

A handler is ``handler(spark, step, ctx) -> dict | None``: ``step`` is the step's JSON
object from the job spec, ``ctx`` a :class:`sluice.core.spark.steps.context.StepContext`;
the returned dict (JSON-serialisable) is emitted as the step's result.
"""
