"""A unified diff laid out side by side (:mod:`sluice.bot.web.sidebyside`)."""

from __future__ import annotations

from sluice.bot.web.sidebyside import Row, side_by_side

DIFF = """--- s.a (before)
+++ s.a (after)
@@ -3,4 +3,5 @@
 SELECT
-  a,
-  b
+  a AS x,
+  b,
+  c
 FROM t
@@ -20 +21 @@
-LIMIT 1
+LIMIT 2
"""


def test_removed_lines_sit_beside_the_lines_that_replace_them() -> None:
    assert side_by_side(DIFF) == [
        Row("hunk", left="@@ -3,4 +3,5 @@"),
        Row("same", 3, "SELECT", 3, "SELECT"),
        Row("change", 4, "  a,", 4, "  a AS x,"),
        Row("change", 5, "  b", 5, "  b,"),
        Row("change", None, None, 6, "  c"),
        Row("same", 6, "FROM t", 7, "FROM t"),
        Row("hunk", left="@@ -20 +21 @@"),
        Row("change", 20, "LIMIT 1", 21, "LIMIT 2"),
    ]


def test_a_line_starting_with_dashes_inside_a_hunk_is_a_removed_line() -> None:
    rows = side_by_side("@@ -1,1 +1,1 @@\n--- a comment\n+-- another\n")
    assert rows[1] == Row("change", 1, "-- a comment", 1, "-- another")
    assert side_by_side("") == []
