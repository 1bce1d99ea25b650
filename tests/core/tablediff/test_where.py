"""`--where`: one boolean condition, re-generated from its parse tree (pure)."""

from __future__ import annotations

import pytest

from sluice.core.tablediff.result import TableDiffError
from sluice.core.tablediff.where import parse_where


@pytest.mark.parametrize(
    ("text", "sql", "columns"),
    [
        ("amount > 0", "amount > 0", ("amount",)),
        (
            "order_date >= '2018-02-01' and status <> 'returned'",
            "order_date >= '2018-02-01' AND status <> 'returned'",
            ("order_date", "status"),
        ),
        ("Status IN ('a', 'b') OR x IS NULL", "Status IN ('a', 'b') OR x IS NULL", ("status", "x")),
        ("NOT is_active", "NOT is_active", ("is_active",)),
        ("is_active", "is_active", ("is_active",)),
        ("a BETWEEN 1 AND 2 -- note", "a BETWEEN 1 AND 2", ("a",)),
        ("a = 1 /* ; not a statement */", "a = 1", ("a",)),
        ("(a = ';')", "(a = ';')", ("a",)),
        ("`weird col` = 1", "`weird col` = 1", ("weird col",)),
        ("lower(name) LIKE 'a%'", "LOWER(name) LIKE 'a%'", ("name",)),
        ("exists(tags, t -> t = 'x')", "EXISTS(tags, t -> t = 'x')", ("tags",)),
        ("a = b AND b = a", "a = b AND b = a", ("a", "b")),
    ],
)
def test_a_condition_is_regenerated_and_its_columns_listed(
    text: str, sql: str, columns: tuple[str, ...]
) -> None:
    parsed = parse_where(text)
    assert parsed.sql == sql
    assert parsed.columns == columns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--where is empty"),
        ("   ", "--where is empty"),
        ("a > 1; DROP TABLE t", "contains `;`"),
        ("a > 1;", "contains `;`"),
        ("a >", "does not parse as a Spark SQL condition"),
        ("(a = 1", "does not parse as a Spark SQL condition: Expecting )"),
        ("1) UNION SELECT (1", "does not parse as a Spark SQL condition"),
        ("a = 1 OR", "does not parse"),
        ("'unclosed", "does not parse"),
        ("a IN (SELECT id FROM other.t)", "subqueries and tables are not allowed"),
        ("EXISTS (SELECT 1)", "subqueries and tables are not allowed"),
        ("a > (SELECT max(a) FROM t)", "subqueries and tables are not allowed"),
        ("sum(a) > 1", "aggregate and window functions are not allowed"),
        ("row_number() OVER (ORDER BY a) = 1", "aggregate and window functions are not allowed"),
        ("reflect('java.lang.System', 'exit', 0) IS NULL", "reflect() is not allowed"),
        ("rand() < 0.5", "rand() is not allowed"),
        ("t.a = 1", "t.a is qualified: use the plain column name"),
        ("a = ?", "parameters are not allowed"),
        ("a = :x", "parameters are not allowed"),
        ("42", "is a value, not a condition"),
        ("'yes'", "is a value, not a condition"),
        ("a + 1", "is a value, not a condition"),
        ("(a || 'x')", "is a value, not a condition"),
    ],
)
def test_anything_but_one_plain_condition_is_refused(text: str, message: str) -> None:
    with pytest.raises(TableDiffError) as info:
        parse_where(text)
    assert message in info.value.message
    assert info.value.hint


def test_the_message_quotes_the_filter_shortened() -> None:
    with pytest.raises(TableDiffError) as info:
        parse_where("a = 1 AND " + "b = 2 AND " * 20 + "c =")
    assert "'a = 1 AND b = 2" in info.value.message
    assert "...'" in info.value.message
