MODEL (
  name jaffle.stg_orders,
  kind VIEW,
  grain order_id,
  audits (
    not_null(columns := (order_id, customer_id, order_date)),
    accepted_values(column := status, is_in := ('placed', 'shipped', 'completed', 'return_pending', 'returned')),
  ),
);

SELECT
  id AS order_id,
  user_id AS customer_id,
  order_date,
  status
FROM jaffle.raw_orders
