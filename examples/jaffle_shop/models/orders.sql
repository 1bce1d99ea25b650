MODEL (
  name jaffle.orders,
  kind FULL,
  grain order_id,
  owner finance,
  description 'One row per order, with what was paid by each method.',
  column_descriptions (
    order_id = 'The order''s id in the shop database',
    amount = 'Total paid for the order, in dollars',
  ),
  audits (
    unique_values(columns := [order_id]),
    not_null(columns := [order_id, customer_id]),
  ),
);

WITH order_payments AS (
  SELECT
    order_id,
    SUM(CASE WHEN payment_method = 'credit_card' THEN amount ELSE 0 END) AS credit_card_amount,
    SUM(CASE WHEN payment_method = 'coupon' THEN amount ELSE 0 END) AS coupon_amount,
    SUM(CASE WHEN payment_method = 'bank_transfer' THEN amount ELSE 0 END) AS bank_transfer_amount,
    SUM(CASE WHEN payment_method = 'gift_card' THEN amount ELSE 0 END) AS gift_card_amount,
    SUM(amount) AS total_amount
  FROM jaffle.stg_payments
  GROUP BY order_id
)
SELECT
  o.order_id,
  o.customer_id,
  o.order_date,
  o.status,
  p.credit_card_amount,
  p.coupon_amount,
  p.bank_transfer_amount,
  p.gift_card_amount,
  COALESCE(p.total_amount, 0) AS amount
FROM jaffle.stg_orders AS o
LEFT JOIN order_payments AS p
  ON o.order_id = p.order_id
