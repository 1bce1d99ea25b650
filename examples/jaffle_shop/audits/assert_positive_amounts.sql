AUDIT (
  name assert_positive_amounts,
);

-- A payment of zero or less is a data-entry error upstream.
SELECT *
FROM @this_model
WHERE amount <= 0
