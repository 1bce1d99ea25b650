import pytest
import sqlglot

from sluice.core.plan.categorize import only_adds_projections


def q(sql: str) -> sqlglot.exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


@pytest.mark.parametrize(
    ("old", "new", "non_breaking"),
    [
        ("SELECT a FROM t", "SELECT a, b FROM t", True),
        ("SELECT a, c FROM t", "SELECT a, b, c FROM t", True),
        ("SELECT a FROM t", "SELECT a, SUM(b) OVER (PARTITION BY a) AS s FROM t", True),
        ("SELECT a FROM t", "SELECT b, a FROM t WHERE x", False),
        ("SELECT a FROM t", "SELECT a FROM t WHERE x > 1", False),
        ("SELECT a, b FROM t", "SELECT a FROM t", False),
        ("SELECT a FROM t", "SELECT a AS b FROM t", False),
        ("SELECT a FROM t", "SELECT a, COUNT(*) AS n FROM t", False),
        ("SELECT a FROM t", "SELECT a, EXPLODE(xs) AS x FROM t", False),
        ("SELECT DISTINCT a FROM t", "SELECT DISTINCT a, b FROM t", False),
        ("SELECT a FROM t", "SELECT a, 1 AS a FROM t", False),
        (
            "SELECT a FROM t UNION ALL SELECT a FROM u",
            "SELECT a, b FROM t UNION ALL SELECT a, b FROM u",
            False,
        ),
        ("SELECT a FROM t", "SELECT a FROM t", False),
    ],
)
def test_only_added_projections_are_non_breaking(old: str, new: str, non_breaking: bool) -> None:
    assert only_adds_projections(q(old), q(new)) is non_breaking


def test_count_star_is_not_a_star_projection() -> None:
    assert only_adds_projections(
        q("SELECT a, COUNT(*) AS n FROM t GROUP BY a"),
        q("SELECT a, COUNT(*) AS n, MAX(b) AS m FROM t GROUP BY a"),
    )
    assert not only_adds_projections(q("SELECT a FROM t"), q("SELECT a, t.* FROM t"))
