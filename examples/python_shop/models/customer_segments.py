"""A PySpark model, in SQLMesh's Python model format: customers segmented by what they
spent and how often they ordered, with the DataFrame API. Sluice reads this file without
running it when it plans (the decorator's arguments, the parent named in
`context.resolve_table`, the code below) and runs `execute` in the Spark job."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention
from sqlmesh import ExecutionContext, model

LOYAL_ORDERS = 3  # orders that make a customer loyal


def segment(customers: DataFrame) -> DataFrame:
    """One segment per customer: no orders yet, loyal, big spender, or occasional."""
    value = F.coalesce(F.col("customer_lifetime_value"), F.lit(0.0))
    return customers.select(
        "customer_id",
        "number_of_orders",
        value.alias("lifetime_value"),
        F.when(F.col("number_of_orders") == 0, "new")
        .when(F.col("number_of_orders") >= LOYAL_ORDERS, "loyal")
        .when(value >= 50, "big spender")
        .otherwise("occasional")
        .alias("segment"),
    )


@model(
    "pyshop.customer_segments",
    kind="FULL",
    columns={
        "customer_id": "int",
        "number_of_orders": "bigint",
        "lifetime_value": "double",
        "segment": "string",
    },
    grain="customer_id",
    owner="marketing",
    description="Each customer's segment, computed with PySpark.",
)
def execute(context: ExecutionContext, start, end, execution_time, **kwargs) -> DataFrame:
    customers = context.spark.table(context.resolve_table("pyshop.customers"))
    return segment(customers)
