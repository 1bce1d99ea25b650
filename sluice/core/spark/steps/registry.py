"""The step handlers by type (imported by the driver, which runs under pyspark)."""

from __future__ import annotations

from sluice.core.spark.steps import build, diff, environment, inspect, query, sql, unittest
from sluice.core.spark.steps.context import Handler

HANDLERS: dict[str, Handler] = {
    "sql": sql.run_sql,
    "build": build.run_build,
    "audit": build.run_audit,
    "views": environment.run_views,
    "drop": environment.run_drop,
    "unit_test": unittest.run_unit_test,
    "query": query.run_query,
    "table_diff": diff.run_table_diff,
    "inspect": inspect.run_inspect,
}
