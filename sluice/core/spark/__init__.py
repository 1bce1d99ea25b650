"""Spark execution: plans rendered to job specs, run by one driver program per command.

The service and the CLI never start a JVM themselves: they render a job spec (JSON) and
run :mod:`sluice.core.spark.driver` through ``spark-submit`` (or, with ``--in-process``,
call the same driver code in this process).
"""
