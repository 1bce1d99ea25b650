MODEL (name pyshop.segment_counts, kind FULL, grain segment);

SELECT segment, COUNT(*) AS customers FROM pyshop.customer_segments GROUP BY segment
