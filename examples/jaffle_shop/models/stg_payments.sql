MODEL (
  name jaffle.stg_payments,
  kind VIEW,
  grain payment_id,
  audits (assert_positive_amounts),
);

-- Amounts arrive in cents; the macro is Python (macros/money.py).
SELECT
  id AS payment_id,
  order_id,
  payment_method,
  @cents_to_dollars(amount) AS amount
FROM jaffle.raw_payments
