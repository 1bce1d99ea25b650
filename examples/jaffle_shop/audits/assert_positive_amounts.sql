AUDIT (
  name assert_positive_amounts,
);

-- A negative payment is a data-entry error upstream (zero-amount payments are real).
SELECT *
FROM @this_model
WHERE amount < 0
