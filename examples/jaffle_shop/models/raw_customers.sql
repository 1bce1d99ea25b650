MODEL (
  name jaffle.raw_customers,
  kind SEED (path '../seeds/raw_customers.csv'),
  columns (id INT, first_name STRING, last_name STRING),
  grain id,
  description 'Customers as exported from the shop database.',
);
