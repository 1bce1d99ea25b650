MODEL (
  name jaffle.stg_customers,
  kind VIEW,
  grain customer_id,
);

SELECT
  id AS customer_id,
  first_name,
  last_name
FROM jaffle.raw_customers
