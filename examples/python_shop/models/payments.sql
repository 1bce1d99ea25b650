MODEL (name pyshop.payments, kind FULL, grain payment_id);

-- Amounts arrive in cents; the macro is Python (macros/money.py).
SELECT
  payment_id,
  customer_id,
  @cents_to_dollars(amount_cents) AS amount
FROM VALUES
  (1, 1, 1000), (2, 1, 2550), (3, 2, 700), (4, 3, 9900), (5, 1, 300), (6, 1, 1200)
  AS t(payment_id, customer_id, amount_cents)
