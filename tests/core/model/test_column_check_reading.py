"""The column check's own reading of a plain SELECT (issue 42's cost): a query with one
scope is read without building sqlglot's scopes, and that reading must be exactly
sqlglot's (``sluice/core/model/column_check.py``: ``_walk`` and ``_single_record``).
Held over every model of the repository's projects and of ``../shared/compat/``, as the
loader hands them to the check, and over constructs those projects may not have."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import build_scope

from sluice.core.errors import SluiceError
from sluice.core.model import column_check
from sluice.core.model.loader import load_project

REPO = Path(__file__).resolve().parents[3]
PROJECTS = sorted(
    p
    for pattern in (
        "examples/*",
        "tests/fixtures/sqlmesh_init_duckdb",
        "tests/fixtures/sqlmesh_projects/*",
        "../shared/compat/*",
    )
    for p in REPO.glob(pattern)
    if (p / "models").is_dir()
)


def readings(
    tree: exp.Expr, located: exp.Expr | None = None, position: Any = None
) -> tuple[str | None, str | None]:
    """The references as the check reads them, and as sqlglot's scopes give them (None:
    not checked, as :func:`column_check.extract` says when reading fails)."""

    def read(scoped: bool) -> str | None:
        try:
            return column_check._extract(tree, located, position, scoped=scoped)
        except Exception:  # what extract says of a query it fails to read
            return None

    return read(False), read(True)


def test_the_projects_are_there() -> None:
    names = {p.name for p in PROJECTS}
    assert {"jaffle_shop", "scd_type_2"} <= names
    if (REPO.parent / "shared" / "compat").is_dir():
        assert {"omop_synthea", "sqlmesh_sushi"} <= names


@pytest.mark.parametrize("root", PROJECTS, ids=lambda p: p.name)
def test_every_plain_select_of_a_project_is_read_as_sqlglot_scopes_it(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / root.name
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".sluice", ".cache"))
    seen: list[tuple[bool, str | None, str | None]] = []
    extract = column_check.extract

    def spy(tree: exp.Expr, located: exp.Expr | None = None, position: Any = None) -> Any:
        walked = column_check._walk(tree) if isinstance(tree, exp.Query) else None
        own, scoped = readings(tree, located, position)
        seen.append((walked is not None and walked.single, own, scoped))
        return extract(tree, located, position)

    monkeypatch.setattr(column_check, "extract", spy)
    with contextlib.suppress(SluiceError):  # a project refused had its queries read first
        load_project(copy, use_cache=False)
    assert seen, f"{root.name}: no query was read"
    for _, own, scoped in seen:
        assert own == scoped
    if root.name in ("jaffle_shop", "omop_synthea", "sqlmesh_sushi"):
        assert any(single and own for single, own, _ in seen)  # the fast reading ran


CASES = [
    # what the bench's models are: tables by alias, joins, CASE
    "SELECT p0.id, p0.v0 + 1 AS v0, CASE WHEN p1.v0 > 10 THEN 'a' END AS label "
    "FROM s.a AS p0 JOIN s.b AS p1 ON p0.id = p1.id AND p0.ds = p1.ds WHERE p0.v3 IS NOT NULL",
    "SELECT id, amount FROM raw.orders",
    "SELECT o.id, c.name FROM raw.orders o LEFT JOIN raw.customers c ON o.customer_id = c.id",
    "SELECT id FROM raw.orders, raw.customers",
    "SELECT id FROM raw.orders JOIN raw.customers USING (id)",
    "SELECT id FROM raw.orders NATURAL JOIN raw.customers",
    # a semi / anti join's table is no source of the SELECT
    "SELECT o.id FROM raw.orders o LEFT SEMI JOIN raw.customers c ON o.customer_id = c.id",
    "SELECT id FROM raw.orders o LEFT ANTI JOIN raw.customers c ON o.customer_id = c.id",
    "SELECT id FROM raw.orders o LEFT SEMI JOIN raw.customers o ON o.id = o.id",
    # two tables of one name: sqlglot refuses, the check leaves the query
    "SELECT id FROM raw.orders JOIN raw.orders ON orders.id = orders.id",
    "SELECT a.id FROM s.t AS a JOIN s.u AS A ON a.id = A.id",
    # names a clause may take from the SELECT's outputs
    "SELECT id AS k, count(*) AS n FROM raw.orders GROUP BY id HAVING n > 1 ORDER BY k, amount",
    "SELECT id AS k FROM raw.orders QUALIFY row_number() OVER (PARTITION BY k ORDER BY ds) = 1",
    "SELECT DISTINCT id FROM raw.orders ORDER BY id",
    "SELECT id, sum(amount) OVER (ORDER BY id) AS s FROM raw.orders CLUSTER BY id",
    "SELECT orders.id AS id FROM raw.orders ORDER BY orders.id",
    "SELECT /*+ BROADCAST(c) */ o.id FROM raw.orders o JOIN raw.customers c ON o.id = c.id",
    # stars
    "SELECT * FROM raw.orders",
    "SELECT o.* EXCEPT (amount), c.name FROM raw.orders o JOIN raw.customers c ON o.id = c.id",
    "SELECT * REPLACE (amount * 2 AS amount) FROM raw.orders",
    "SELECT count(*) AS n, count(DISTINCT customer_id) AS c FROM raw.orders",
    # structs, lambdas, functions, macros' placeholders
    "SELECT address.city, o.address.zip, transform(items, x -> x.qty + 1) AS q FROM raw.orders o",
    "SELECT filter(items, (x, i) -> i > 0 AND x.qty > amount) AS f FROM raw.orders",
    "SELECT id FROM raw.orders WHERE ds BETWEEN @start_ds AND @end_ds",
    "SELECT CAST(id AS STRING) AS id, coalesce(amount, 0) AS amount FROM raw.orders",
    "SELECT id, input_file_name() AS f, _metadata.file_path AS p FROM raw.orders",
    "SELECT `weird name`, `Mixed`.`Case` FROM raw.orders AS `Mixed`",
    "SELECT 1 AS one",
    "SELECT id FROM cat.raw.orders",
    # not plain: sqlglot's scopes read these
    "WITH x AS (SELECT id FROM raw.orders) SELECT id FROM x",
    "SELECT id FROM (SELECT id FROM raw.orders) AS t",
    "SELECT id FROM raw.orders WHERE id IN (SELECT id FROM raw.customers)",
    "SELECT id FROM raw.orders UNION ALL SELECT id FROM raw.customers",
    "SELECT id, i.sku FROM raw.orders LATERAL VIEW explode(items) t AS i",
    "SELECT * FROM raw.orders PIVOT (sum(amount) FOR ds IN ('a', 'b'))",
    "SELECT * FROM range(10)",
    "SELECT a FROM VALUES (1), (2) AS t(a)",
    "SELECT id FROM (raw.orders JOIN raw.customers ON orders.id = customers.id)",
]


def places(line: int, col: int) -> tuple[int, int]:
    return line + 10, col


@pytest.mark.parametrize("sql", CASES)
def test_constructs_are_read_as_sqlglot_scopes_them(sql: str) -> None:
    tree = sqlglot.parse_one(sql, read="spark")
    own, scoped = readings(tree, tree, places)
    assert own == scoped
    # read from another dialect's tree too (columns placed by their names in that tree)
    other = sqlglot.parse_one(sql, read="spark")
    assert readings(tree, other, places)[0] == readings(tree, other, places)[1]


def single(sql: str) -> bool:
    walked = column_check._walk(sqlglot.parse_one(sql, read="spark"))
    assert walked is not None
    return walked.single


def test_a_plain_select_is_read_without_sqlglot_s_scopes_and_anything_else_with_them() -> None:
    assert single(CASES[0]) and single(CASES[6]) and single(CASES[12])
    plain = CASES.index("SELECT 1 AS one")
    for sql in CASES[plain + 2 :]:
        assert not single(sql), sql


def test_the_walk_keeps_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    tree = sqlglot.parse_one("SELECT a + a + a + a AS x FROM t", read="spark")
    assert column_check._walk(tree) is not None
    monkeypatch.setattr(column_check, "MAX_NODES", 10)
    assert column_check._walk(tree) is None
    monkeypatch.setattr(column_check, "MAX_NODES", 50_000)
    monkeypatch.setattr(column_check, "MAX_ANCESTRY", 10)
    assert column_check._walk(tree) is None
    assert column_check.extract(tree) is None


def test_the_fast_reading_is_what_the_check_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain SELECT never builds sqlglot's scopes (so the saving is real)."""
    built: list[exp.Expr] = []

    def counting(tree: exp.Expr) -> Any:
        built.append(tree)
        return build_scope(tree)

    monkeypatch.setattr(column_check, "build_scope", counting)
    assert column_check.extract(sqlglot.parse_one(CASES[0], read="spark")) is not None
    assert built == []
    assert column_check.extract(sqlglot.parse_one(CASES[-9], read="spark")) is not None
    assert len(built) == 1
