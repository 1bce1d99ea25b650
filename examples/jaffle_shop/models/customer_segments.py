"""A PySpark model, in SQLMesh's Python model format: each customer who ordered, segmented
by how often they ordered and what they spent, with the DataFrame API. Sluice reads this
file without running it when it plans (the decorator's arguments, the parent named in
`context.resolve_table`, the code below: editing `LOYAL_ORDERS` is a change, editing a
comment is not) and runs `execute` in the Spark job."""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention
from sqlmesh import ExecutionContext, model

LOYAL_ORDERS = 3  # orders that make a customer loyal
BIG_SPENDER = 50.0  # dollars spent that make a customer with fewer orders a big spender


def segment(orders: DataFrame) -> DataFrame:
    """One row per customer with orders: loyal, big spender, or occasional."""
    per_customer = orders.groupBy("customer_id").agg(
        F.count("order_id").alias("number_of_orders"),
        F.sum("amount").alias("lifetime_value"),
    )
    return per_customer.select(
        "customer_id",
        "number_of_orders",
        "lifetime_value",
        F.when(F.col("number_of_orders") >= LOYAL_ORDERS, "loyal")
        .when(F.col("lifetime_value") >= BIG_SPENDER, "big spender")
        .otherwise("occasional")
        .alias("segment"),
    )


@model(
    "jaffle.customer_segments",
    kind="FULL",
    columns={
        "customer_id": "int",
        "number_of_orders": "bigint",
        "lifetime_value": "double",
        "segment": "string",
    },
    grain="customer_id",
    owner="marketing",
    description="Each customer who ordered: loyal, big spender or occasional (PySpark).",
)
def execute(context: ExecutionContext, start, end, execution_time, **kwargs) -> DataFrame:
    orders = context.spark.table(context.resolve_table("jaffle.orders"))
    return segment(orders)
