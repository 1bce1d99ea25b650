"""@STAR and @UNION with the columns the loader knows: declared columns, seeds, external
tables, and upstream queries that name their columns; read parents first (no Spark)."""

from pathlib import Path

import pytest

from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.loader import load_project
from sluice.core.model.macro import expand_sql
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms

FIXTURE = Path(__file__).parents[2] / "fixtures" / "sqlmesh_projects" / "macros_columns"
COLS = {
    "s.foo": [("a", "STRING"), ("b", "STRING"), ("c", "STRING"), ("d", "INT")],
    "s.bar": [("a", "STRING"), ("b", "INT"), ("d", "INT"), ("e", "")],
    "s.baz": [("d", ""), ("a", "STRING"), ("e", "DATE")],
}


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # SQLMesh's documented example: alias, exclude, prefix, suffix
        (
            "SELECT @STAR(s.foo, bar, [c], 'baz_', '_qux') FROM s.foo AS bar",
            "SELECT CAST(`bar`.`a` AS STRING) AS `baz_a_qux`, CAST(`bar`.`b` AS STRING) AS "
            "`baz_b_qux`, CAST(`bar`.`d` AS INT) AS `baz_d_qux` FROM s.foo AS bar",
        ),
        # two @STARs with different prefixes, and a column of one's own
        (
            "SELECT @STAR(s.foo, bar, exclude := [c, d], prefix := 'ab_', quote_identifiers := FALSE), "
            "@STAR(s.foo, bar, exclude := [a, b, c], prefix := 'd_', quote_identifiers := FALSE), x "
            "FROM s.foo AS bar",
            "SELECT CAST(bar.a AS STRING) AS ab_a, CAST(bar.b AS STRING) AS ab_b, "
            "CAST(bar.d AS INT) AS d_d, x FROM s.foo AS bar",
        ),
        # except_ is the old spelling of exclude; no alias: unqualified columns
        (
            "SELECT @STAR(s.foo, except_ := [a, b, c], quote_identifiers := FALSE) FROM s.foo",
            "SELECT CAST(d AS INT) AS d FROM s.foo",
        ),
        # a column whose type is unknown is selected without a cast
        (
            "SELECT @STAR(s.bar, exclude := [a, b], quote_identifiers := FALSE) FROM s.bar",
            "SELECT CAST(d AS INT) AS d, e AS e FROM s.bar",
        ),
        # the relation and the options may come from macro variables
        (
            "@DEF(t, s.foo); @DEF(gone, [a, b, c]); SELECT @STAR(@t, exclude := @gone, "
            "suffix := @sfx, quote_identifiers := FALSE) FROM s.foo",
            "SELECT CAST(d AS INT) AS d_v FROM s.foo",
        ),
    ],
)
def test_star_options(sql: str, expected: str) -> None:
    assert expand_sql(sql, variables={"sfx": "_v"}, columns=COLS) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # shared columns: same name and type; the type defaults to ALL
        (
            "@UNION(s.foo, s.bar)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.foo UNION ALL "
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.bar",
        ),
        (
            "@UNION('DISTINCT', s.foo, s.bar)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.foo UNION "
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.bar",
        ),
        # a condition first: TRUE unions, FALSE selects the first table alone
        (
            "@UNION(1 > 0, 'all', s.foo, s.bar)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.foo UNION ALL "
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.bar",
        ),
        (
            "@UNION(@flag, s.foo, s.bar)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.foo",
        ),
        # an unknown type on one side takes the other's; three tables
        (
            "@UNION('all', s.bar, s.baz, s.foo)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.bar UNION ALL "
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.baz UNION ALL "
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d FROM s.foo",
        ),
        (
            "@UNION('all', s.bar, s.baz)",
            "SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d, CAST(e AS DATE) AS e FROM s.bar "
            "UNION ALL SELECT CAST(a AS STRING) AS a, CAST(d AS INT) AS d, CAST(e AS DATE) AS e "
            "FROM s.baz",
        ),
    ],
)
def test_union_follows_sqlmesh(sql: str, expected: str) -> None:
    assert expand_sql(sql, variables={"flag": False}, columns=COLS) == expected


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT @STAR(s.foo, exclude := [a, b, c, d]) FROM s.foo", "every column is excluded"),
        ("SELECT @STAR(s.foo, x.y) FROM s.foo", "alias must be a name"),
        ("SELECT @STAR(s.foo, prefix := p) FROM s.foo", "prefix must be a quoted string"),
        ("SELECT @STAR(s.foo, quote_identifiers := 'yes') FROM s.foo", "must be TRUE or FALSE"),
        ("SELECT @STAR(s.nope) FROM s.nope", "needs the columns of s.nope"),
        ("@UNION('some', s.foo, s.bar)", "must be 'ALL' or 'DISTINCT'"),
        ("@UNION(1, s.foo, s.bar)", "condition must be TRUE or FALSE, got 1"),
        ("@UNION(TRUE, 'all')", "needs at least one table"),
        ("@UNION('all', s.foo, s.baz, s.bar)", None),  # a and d are shared: fine
        ("@UNION('all', s.foo, s.other)", "needs the columns of s.other"),
    ],
)
def test_bad_star_and_union(sql: str, message: str | None) -> None:
    cols = {**COLS, "s.lone": [("z", "INT")]}
    if message is None:
        assert expand_sql(sql, columns=cols).startswith("SELECT CAST(a AS STRING) AS a")
        with pytest.raises(ModelError, match="no column of the same name and type"):
            expand_sql("@UNION('all', s.foo, s.lone)", columns=cols)
        return
    with pytest.raises(ModelError) as info:
        expand_sql(sql, columns=cols)
    assert message in info.value.message
    assert info.value.line == 1 and info.value.hint


def test_the_fixture_project_loads_with_every_kind_of_known_columns_and_plans() -> None:
    project = load_project(FIXTURE, use_cache=False)
    sql = {n: m.query_sql or "" for n, m in project.models.items()}
    # The upstream query's output names and casts (shop_stg.orders is read after its child).
    assert sql["shop_mart.orders_enriched"] == (
        "SELECT CAST(o.id AS INT) AS o_id, o.city AS o_city, CAST(o.amount AS DOUBLE) AS "
        "o_amount, o.written_by AS o_written_by, CAST(c.country AS STRING) AS country, "
        "CAST(c.population AS BIGINT) AS population FROM shop_stg.orders AS o LEFT JOIN "
        "shop_raw.cities AS c ON o.city = c.city WHERE o.amount > 0 ORDER BY o.id NULLS LAST"
    )
    # An external table's columns and a model's declared ones: late_by is not shared.
    assert sql["shop_mart.all_events"] == (
        "SELECT CAST(id AS INT) AS id, CAST(city AS STRING) AS city, CAST(amount AS DOUBLE) AS "
        "amount FROM shop_raw.events UNION ALL SELECT CAST(id AS INT) AS id, CAST(city AS STRING) "
        "AS city, CAST(amount AS DOUBLE) AS amount FROM shop_stg.late_events"
    )
    assert sql["shop_stg.orders"].startswith(
        "WITH recent AS (SELECT * FROM shop_raw.events) SELECT"
    )
    assert "GROUP BY" not in sql["shop_stg.orders"]
    assert set(project.models["shop_mart.orders_enriched"].depends_on) == {
        "shop_stg.orders",
        "shop_raw.cities",
    }
    order = list(project.models)
    assert order.index("shop_stg.orders") < order.index("shop_mart.orders_enriched")
    end = to_ms("2024-01-03")
    plan = build_plan(
        PlanRequest(
            environment="prod",
            models=project.models,
            fingerprints=fingerprint_models(project.models, project.audits),
            base={},
            base_plan_id=None,
            end=end,
            execution_time=end,
        )
    )
    assert (
        set(plan.added)
        == set(project.models)
        == {
            "shop_raw.cities",
            "shop_raw.events",
            "shop_stg.orders",
            "shop_stg.late_events",
            "shop_mart.orders_enriched",
            "shop_mart.all_events",
        }
    )


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _errors(root: Path) -> list[SluiceError]:
    with pytest.raises(SluiceError) as info:
        load_project(root, use_cache=False)
    error = info.value
    return list(error.errors) if isinstance(error, ProjectErrors) else [error]


def test_an_upstream_query_that_does_not_name_its_columns_says_what_to_declare(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path,
        {
            "external_models.yaml": "- name: raw.t\n  columns:\n    a: INT\n",
            "models/up.sql": "MODEL (name s.up, kind FULL);\nSELECT *, 1 AS one FROM raw.t\n",
            "models/down.sql": "MODEL (name s.down, kind FULL);\n\nSELECT @STAR(s.up) FROM s.up\n",
        },
    )
    [error] = _errors(root)
    assert str(error).startswith(f"{root / 'models/down.sql'}:3:8: @STAR needs the columns of s.up")
    assert "does not name every column" in (error.hint or "")
    assert "models/up.sql:1" in (error.hint or "")


def test_an_external_table_without_columns_and_an_unknown_table(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "external_models.yaml": "- name: raw.t\n",
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT @STAR(raw.t) FROM raw.t\n",
            "models/b.sql": "MODEL (name s.b, kind FULL);\n@UNION('all', raw.t, raw.nope)\n",
        },
    )
    first, second = _errors(root)
    assert "needs the columns of raw.t" in str(first)
    assert "under `columns:` in" in (first.hint or "")
    assert "needs the columns of raw.t" in str(second)  # the first table it names
    root2 = _project(
        tmp_path / "two",
        {"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT @STAR(raw.nope) FROM raw.nope\n"},
    )
    [error] = _errors(root2)
    assert "needs the columns of raw.nope" in str(error)
    assert "not a model, seed or external table" in (error.hint or "")


def test_a_cycle_of_star_macros_is_named(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT @STAR(s.b) FROM s.b\n",
            "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT @STAR(s.c) FROM s.c\n",
            "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT @STAR(s.a) FROM s.a\n",
        },
    )
    errors = _errors(root)
    assert len(errors) == 3
    assert all("a cycle" in (e.hint or "") for e in errors)
    assert "s.b -> s.c -> s.a -> s.b" in (errors[0].hint or "")


def test_a_chain_to_an_unknown_table_points_at_the_first_missing_one(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT @STAR(s.b) FROM s.b\n",
            "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT @STAR(raw.gone) FROM raw.gone\n",
        },
    )
    first, second = _errors(root)
    assert "needs the columns of s.b" in str(first)
    assert "s.b's own query needs the columns of raw.gone" in (first.hint or "")
    assert "needs the columns of raw.gone" in str(second)
    assert "not a model, seed or external table" in (second.hint or "")


def test_a_model_built_from_upstream_columns_follows_them_through_the_cache(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path,
        {
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT @STAR(s.b) FROM s.b\n",
            "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT 1 AS x\n",
        },
    )
    first = load_project(root).models["s.a"].query_sql
    assert first == "SELECT x AS x FROM s.b"
    (root / "models/b.sql").write_text("MODEL (name s.b, kind FULL);\nSELECT 1 AS x, 2 AS y\n")
    again = load_project(root).models["s.a"].query_sql
    assert again == "SELECT x AS x, y AS y FROM s.b"
    assert load_project(root).models["s.a"].query_sql == again


def test_deduplicate_is_the_same_whatever_the_file_order(tmp_path: Path) -> None:
    # a.sql is read before b.sql: it waits for s.b's columns rather than guess without them.
    files = {
        "models/a.sql": "MODEL (name s.a, kind FULL);\n@DEDUPLICATE(s.b, [id], ['x DESC'])\n",
        "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT 1 AS id, 2 AS x\n",
    }
    one = load_project(_project(tmp_path / "one", files), use_cache=False).models["s.a"]
    renamed = {"models/z.sql" if k == "models/a.sql" else k: v for k, v in files.items()}
    two = load_project(_project(tmp_path / "two", renamed), use_cache=False).models["s.a"]
    assert one.query_sql == two.query_sql
    assert one.query_sql is not None and "SELECT id, x FROM" in one.query_sql
