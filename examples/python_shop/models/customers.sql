MODEL (name pyshop.customers, kind FULL, grain customer_id);

SELECT
  customer_id,
  COUNT(*) AS number_of_orders,
  SUM(amount) AS customer_lifetime_value
FROM pyshop.payments
GROUP BY customer_id
