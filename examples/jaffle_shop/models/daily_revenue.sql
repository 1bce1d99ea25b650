-- Written in DuckDB's dialect on purpose: Sluice transpiles every model to Spark SQL.
MODEL (
  name jaffle.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date,
    batch_size 31,
  ),
  dialect duckdb,
  start '2018-01-01',
  end '2018-04-30',
  grain [order_date],
  audits (number_of_rows(threshold := 1)),
);

SELECT
  order_date,
  COUNT(*) AS orders,
  SUM(amount) AS revenue,
  SUM(amount) FILTER (WHERE status = @VAR('revenue_statuses')) AS completed_revenue
FROM jaffle.orders
WHERE order_date BETWEEN @start_date AND @end_date
GROUP BY order_date
