MODEL (
  name jaffle.raw_payments,
  kind SEED (path '../seeds/raw_payments.csv'),
  columns (id INT, order_id INT, payment_method STRING, amount INT),
  grain id,
);
