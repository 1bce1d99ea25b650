MODEL (
  name jaffle.raw_orders,
  kind SEED (path '../seeds/raw_orders.csv'),
  columns (id INT, user_id INT, order_date DATE, status STRING),
  grain id,
);
