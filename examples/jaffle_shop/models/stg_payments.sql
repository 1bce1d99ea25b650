MODEL (
  name jaffle.stg_payments,
  kind VIEW,
  grain payment_id,
  audits (assert_positive_amounts),
);

-- Amounts arrive in cents.
SELECT
  id AS payment_id,
  order_id,
  payment_method,
  amount / 100 AS amount
FROM jaffle.raw_payments
