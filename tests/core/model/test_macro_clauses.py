"""SQL clause operators (@WITH, @JOIN, @WHERE, @GROUP_BY, @HAVING, @ORDER_BY, @LIMIT):
the clause is kept when the condition is TRUE, dropped when FALSE (no Spark)."""

import pytest
from sqlglot.errors import ParseError

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model.audits import parse_audits
from sluice.core.model.macro import expand_sql
from sluice.core.model.parse import parse_model


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # @WHERE, with SQLMesh's documented examples and macro variables in the condition
        ("SELECT * FROM t @WHERE(TRUE) city = 'Toronto'", "SELECT * FROM t WHERE city = 'Toronto'"),
        ("SELECT * FROM t @WHERE(FALSE) city = 'Toronto'", "SELECT * FROM t"),
        (
            "@DEF(l, 1); @DEF(r, 2); @DEF(size, 1); SELECT item FROM t "
            "@WHERE(@l < @r) item > @size GROUP BY item",
            "SELECT item FROM t WHERE item > 1 GROUP BY item",
        ),
        ("SELECT a FROM t @WHERE(@x = 'v') a = 1 OR b = 2", "SELECT a FROM t WHERE a = 1 OR b = 2"),
        ("SELECT a FROM t @WHERE(@x <> 'v') a = 1 OR b = 2", "SELECT a FROM t"),
        ("SELECT a FROM t @WHERE(NULL) a = 1", "SELECT a FROM t"),
        ("SELECT a FROM t @where(2 BETWEEN 1 AND 3) a = 1", "SELECT a FROM t WHERE a = 1"),
        # the condition may use other macros
        ("SELECT a FROM t @WHERE(@IF(1 > 0, TRUE, FALSE)) a = 1", "SELECT a FROM t WHERE a = 1"),
        (
            "SELECT a FROM t @WHERE(@AND(TRUE, 'x' IN ('x', 'y'))) a = 1",
            "SELECT a FROM t WHERE a = 1",
        ),
        # @GROUP_BY, @HAVING
        ("SELECT a FROM t @GROUP_BY(TRUE) a, b", "SELECT a FROM t GROUP BY a, b"),
        ("SELECT a FROM t @GROUP_BY(FALSE) a, b", "SELECT a FROM t"),
        (
            "SELECT COUNT(p) AS n FROM t GROUP BY c @HAVING(TRUE) n > 1000",
            "SELECT COUNT(p) AS n FROM t GROUP BY c HAVING n > 1000",
        ),
        (
            "SELECT COUNT(p) AS n FROM t GROUP BY c @HAVING(1 > 2) n > 1000",
            "SELECT COUNT(p) AS n FROM t GROUP BY c",
        ),
        # @ORDER_BY, @LIMIT
        ("SELECT * FROM t @ORDER_BY(TRUE) pop DESC, id", "SELECT * FROM t ORDER BY pop DESC, id"),
        (
            "SELECT FIRST(a) OVER (PARTITION BY b @ORDER_BY(FALSE) a) AS f FROM t",
            "SELECT FIRST(a) OVER (PARTITION BY b) AS f FROM t",
        ),
        ("SELECT * FROM t @ORDER_BY(FALSE) pop", "SELECT * FROM t"),
        ("SELECT * FROM t @LIMIT(TRUE) 10", "SELECT * FROM t LIMIT 10"),
        ("SELECT * FROM t @LIMIT(FALSE) 10", "SELECT * FROM t"),
        (
            "SELECT * FROM t ORDER BY a @LIMIT(TRUE) 10 + 5",
            "SELECT * FROM t ORDER BY a LIMIT 10 + 5",
        ),
        # @JOIN: the side and kind written before it go with it
        (
            "SELECT * FROM c LEFT OUTER @JOIN(TRUE) k ON c.k = k.name",
            "SELECT * FROM c LEFT OUTER JOIN k ON c.k = k.name",
        ),
        ("SELECT * FROM c LEFT OUTER @JOIN(FALSE) k ON c.k = k.name", "SELECT * FROM c"),
        ("SELECT * FROM c RIGHT @JOIN(FALSE) k ON c.k = k.name", "SELECT * FROM c"),
        (
            "SELECT * FROM c FULL OUTER @JOIN(TRUE) k USING (id)",
            "SELECT * FROM c FULL OUTER JOIN k USING (id)",
        ),
        ("SELECT * FROM c INNER @JOIN(FALSE) k ON TRUE", "SELECT * FROM c"),
        ("SELECT * FROM c CROSS @JOIN(TRUE) k", "SELECT * FROM c CROSS JOIN k"),
        (
            "SELECT * FROM c @JOIN(FALSE) k ON c.id = k.id JOIN m ON c.id = m.id @JOIN(TRUE) (SELECT 1 AS id) AS s ON s.id = c.id",
            "SELECT * FROM c JOIN m ON c.id = m.id JOIN (SELECT 1 AS id) AS s ON s.id = c.id",
        ),
        # @WITH drops or keeps the WITH clause
        (
            "@WITH(TRUE) all_cities AS (SELECT * FROM city) SELECT * FROM all_cities",
            "WITH all_cities AS (SELECT * FROM city) SELECT * FROM all_cities",
        ),
        ("@WITH(FALSE) x AS (SELECT 1) SELECT * FROM city", "SELECT * FROM city"),
        # each subquery and CTE may have its own clause operators
        (
            "WITH c AS (SELECT a FROM t @WHERE(FALSE) a = 1) SELECT a FROM c @WHERE(TRUE) a = 2",
            "WITH c AS (SELECT a FROM t) SELECT a FROM c WHERE a = 2",
        ),
        (
            "SELECT * FROM (SELECT a FROM t @LIMIT(TRUE) 1) AS s @ORDER_BY(FALSE) a",
            "SELECT * FROM (SELECT a FROM t LIMIT 1) AS s",
        ),
        # every clause of one query at once, on a set operation too
        (
            "SELECT a FROM t @WHERE(TRUE) a > 0 UNION ALL SELECT a FROM u @ORDER_BY(TRUE) a @LIMIT(FALSE) 3",
            "SELECT a FROM t WHERE a > 0 UNION ALL SELECT a FROM u ORDER BY a",
        ),
        # inside @EACH/@IF values the operators are not needed, but ordinary macros still work
        (
            "SELECT @EACH([a, b], c -> MAX(c) AS m_@c) FROM t @GROUP_BY(TRUE) d",
            "SELECT MAX(a) AS m_a, MAX(b) AS m_b FROM t GROUP BY d",
        ),
        # a clause in an @IF branch: evaluated when the branch is taken, ignored when not
        (
            "SELECT @IF(FALSE, (SELECT a FROM t @WHERE(TRUE) a = 1), 2) AS x",
            "SELECT 2 AS x",
        ),
        (
            "SELECT @IF(TRUE, (SELECT a FROM t @WHERE(FALSE) a = 1), 2) AS x",
            "SELECT (SELECT a FROM t) AS x",
        ),
        # SQL text given to @SQL has its own clause operators
        (
            "SELECT * FROM (@SQL('SELECT a FROM t @WHERE(FALSE) a = 1 @LIMIT(TRUE) 3')) AS s "
            "@WHERE(TRUE) a > 0",
            "SELECT * FROM (SELECT a FROM t LIMIT 3) AS s WHERE a > 0",
        ),
        # blank lines and comments between the operator and its clause
        (
            "SELECT a FROM t\n@WHERE(TRUE)\n\n  -- why\n  a = 1",
            "SELECT a FROM t WHERE a /* why */ = 1",
        ),
        # a comment in a condition or a string with a parenthesis does not end it early
        ("SELECT a FROM t @WHERE(')' = ')' /* ) */) a = 1", "SELECT a FROM t WHERE a = 1"),
    ],
)
def test_clause_is_kept_when_true_and_dropped_when_false(sql: str, expected: str) -> None:
    assert expand_sql(sql, variables={"x": "v"}) == expected


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT a FROM t @WHERE(1) a = 1", "must be TRUE or FALSE, got 1"),
        ("SELECT a FROM t @WHERE('yes') a = 1", "must be TRUE or FALSE, got 'yes'"),
        ("SELECT a FROM t @WHERE() a = 1", "@WHERE needs a condition"),
        ("SELECT a FROM t @WHERE(a > 1) a = 1", "must be evaluable when the model loads"),
        ("SELECT a FROM t @WHERE(@start_ds > '2024') a = 1", "known only when the model runs"),
        ("SELECT a FROM t @WHERE(TRUE, FALSE) a = 1", "@WHERE's condition does not parse"),
        ("SELECT a FROM t @LIMIT(@nope) 1", "unknown macro @nope"),
        ("SELECT a FROM t @HAVING(TRUE) a > 1", None),  # HAVING without GROUP BY is SQL's business
    ],
)
def test_bad_conditions_say_what_and_where(sql: str, message: str | None) -> None:
    if message is None:
        assert expand_sql(sql) == "SELECT a FROM t HAVING a > 1"
        return
    with pytest.raises(ModelError) as info:
        expand_sql(sql)
    assert message in info.value.message
    assert info.value.line == 1 and info.value.col == 17 and info.value.hint


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT @LIMIT(TRUE) 5 FROM t",  # in the projection
        "SELECT a FROM t WHERE @WHERE(TRUE) a = 1",  # after its own keyword
        "SELECT a FROM t @WHERE(TRUE) a = 1 @WHERE(TRUE) b = 1",  # twice in one query
        "SELECT a FROM t @WHERE(TRUE a = 1",  # never closed
    ],
)
def test_a_clause_operator_in_the_wrong_place_does_not_parse(sql: str) -> None:
    with pytest.raises((ModelError, ParseError)):
        expand_sql(sql)


def test_without_parentheses_the_name_is_a_variable() -> None:
    with pytest.raises(ModelError, match="unknown macro @where"):
        expand_sql("SELECT @where FROM t")
    assert expand_sql("SELECT @where FROM t", variables={"where": 1}) == "SELECT 1 FROM t"


def test_forged_marker_comments_are_refused() -> None:
    with pytest.raises(ModelError, match="no clause operator was written"):
        expand_sql("SELECT a FROM t WHERE /*__sluice_clause_0__*/ a = 1")
    # A marker on another clause than its operator's.
    with pytest.raises(ModelError, match=r"@LIMIT\(\.\.\.\) is not in front of a LIMIT clause"):
        expand_sql("SELECT a FROM t ORDER BY /*__sluice_clause_0__*/ a @LIMIT(TRUE) 1")


def test_in_a_model_the_dropped_join_is_no_reference_and_lines_stay_right() -> None:
    text = (
        "MODEL (name s.t, kind FULL);\n"
        "@DEF(with_v, FALSE);\n"
        "SELECT u.a\n"
        "FROM s.u\n"
        "LEFT @JOIN(\n"
        "  @with_v\n"
        ") s.v ON u.a = v.a\n"
        "@WHERE(NOT @with_v) u.a > 1\n"
    )
    model = parse_model(text, "models/t.sql", ModelDefaults(), {})
    assert model is not None
    assert model.query_sql == "SELECT u.a FROM s.u WHERE u.a > 1"
    assert [r.name for r in model.references] == ["s.u"]
    broken = text.replace("u.a > 1", "u.a > )")
    with pytest.raises(ModelError) as info:
        parse_model(broken, "models/t.sql", ModelDefaults(), {})
    assert info.value.line == 8  # the condition's newlines are kept
    bad = text.replace("@with_v\n)", "1\n)")
    with pytest.raises(ModelError) as info:
        parse_model(bad, "models/t.sql", ModelDefaults(), {})
    assert (info.value.line, info.value.col) == (5, 6)
    assert "@JOIN's condition must be TRUE or FALSE" in info.value.message


def test_audits_use_clause_operators_too() -> None:
    [audit] = parse_audits(
        "AUDIT (name positive);\nSELECT * FROM @this_model @WHERE(1 < 2) amount <= 0 "
        "@LIMIT(FALSE) 1\n",
        "audits/a.sql",
        "spark",
        {},
    )
    assert audit.query_sql == "SELECT * FROM __sluice_macro__this_model WHERE amount <= 0"
