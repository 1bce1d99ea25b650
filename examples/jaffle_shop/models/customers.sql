MODEL (
  name jaffle.customers,
  kind FULL,
  grain customer_id,
  owner marketing,
  audits (unique_values(columns := [customer_id])),
);

WITH customer_orders AS (
  SELECT
    customer_id,
    MIN(order_date) AS first_order,
    MAX(order_date) AS most_recent_order,
    COUNT(order_id) AS number_of_orders,
    SUM(amount) AS customer_lifetime_value
  FROM jaffle.orders
  GROUP BY customer_id
)
SELECT
  c.customer_id,
  c.first_name,
  c.last_name,
  co.first_order,
  co.most_recent_order,
  COALESCE(co.number_of_orders, 0) AS number_of_orders,
  co.customer_lifetime_value
FROM jaffle.stg_customers AS c
LEFT JOIN customer_orders AS co
  ON c.customer_id = co.customer_id
