"""SQLMesh macro operators: own examples against the documented semantics (no Spark)."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import sluice.core.model.macro as macro_pkg
from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model.loader import load_project
from sluice.core.model.macro import OPERATORS, expand_sql
from sluice.core.model.parse import parse_model
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms

FIXTURES = Path(__file__).parents[2] / "fixtures" / "sqlmesh_projects"
COLS = {
    "s.foo": [("a", "INT"), ("b", "STRING"), ("c", "STRING")],
    "s.bar": [("a", "INT"), ("b", "INT"), ("c", "STRING")],
}


def test_every_operator_module_runs_its_docstring_example() -> None:
    modules = [f"{macro_pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(macro_pkg.__path__)]
    tried = 0
    for name in [macro_pkg.__name__, *modules]:
        result = doctest.testmod(importlib.import_module(name))
        assert result.failed == 0, name
        tried += result.attempted
    assert tried >= len(OPERATORS)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT @EACH([4, 5], x -> x) FROM t", "SELECT 4, 5 FROM t"),
        (
            "SELECT @EACH(['4', '5'], x -> CASE WHEN n = x THEN 1 ELSE 0 END AS col_@x) FROM t",
            "SELECT CASE WHEN n = '4' THEN 1 ELSE 0 END AS col_4, "
            "CASE WHEN n = '5' THEN 1 ELSE 0 END AS col_5 FROM t",
        ),
        ("SELECT a, @IF(1 > 0, b) FROM t", "SELECT a, b FROM t"),
        ("SELECT a, @IF(1 > 2, b) FROM t", "SELECT a FROM t"),
        ("SELECT @IF('a' != 'b', 1, 2), @IF(2 BETWEEN 1 AND 3, 3)", "SELECT 1, 3"),
        ("@DEF(x, 1); SELECT @EVAL(5 + @x) AS six", "SELECT 6 AS six"),
        ("SELECT @REDUCE([1, 2, 3, 4], (x, y) -> x + y)", "SELECT 1 + 2 + 3 + 4"),
        ("SELECT @EACH(@FILTER([1, 2, 3], x -> x > 1), y -> y)", "SELECT 2, 3"),
        (
            "@DEF(area, r -> PI() * r * r); @DEF(vol, (r, h) -> @area(@r) * h); "
            "SELECT @vol(d, h) AS v FROM t",
            "SELECT PI() * d * d * h AS v FROM t",
        ),
        ("SELECT @AND(TRUE, NULL)", "SELECT TRUE"),
        ("SELECT @OR(TRUE, NULL)", "SELECT TRUE"),
        ("SELECT @SQL('a' || ' + 1') FROM t", "SELECT a + 1 FROM t"),
        ("SELECT @x, @{x}_y, z_@x FROM t", "SELECT 'v', v_y, z_v FROM t"),
        ("SELECT @start_ds FROM t", "SELECT __sluice_macro__start_ds FROM t"),
        ("SELECT * FROM @this_model", "SELECT * FROM __sluice_macro__this_model"),
    ],
)
def test_operators_follow_sqlmesh(sql: str, expected: str) -> None:
    assert expand_sql(sql, variables={"x": "v"}) == expected


def test_star_and_union_use_known_columns() -> None:
    assert expand_sql(
        "SELECT @STAR(s.foo, f, [c], 'p_', quote_identifiers := FALSE) FROM s.foo AS f",
        columns=COLS,
    ) == ("SELECT CAST(f.a AS INT) AS p_a, CAST(f.b AS STRING) AS p_b FROM s.foo AS f")
    union = expand_sql("@UNION('all', s.foo, s.bar)", columns=COLS)
    assert union == (
        "SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.foo UNION ALL "
        "SELECT CAST(a AS INT) AS a, CAST(c AS STRING) AS c FROM s.bar"
    )


def test_duckdb_dialect_is_read_and_written_as_spark() -> None:
    assert (
        expand_sql("SELECT @EACH([a, b], x -> x::INT) FROM t", dialect="duckdb")
        == "SELECT CAST(a AS INT), CAST(b AS INT) FROM t"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT @EACH([1, 2]) FROM t", "@EACH is missing its function"),
        ("SELECT @EACH([1], x -> x, 3) FROM t", "takes at most 2 arguments"),
        ("SELECT @EACH([1], 3) FROM t", "needs a function"),
        ("SELECT @IF(a > 1, b) FROM t", "must be evaluable when the model loads"),
        ("SELECT @IF(@start_ds > '2024', b) FROM t", "known only when the model runs"),
        ("SELECT @VAR(name) FROM t", "must be a quoted string"),
        ("SELECT @VAR('nope') FROM t", "variable 'nope' is not defined"),
        ("SELECT @nope FROM t", "unknown macro @nope"),
        ("SELECT @my_macro(1) FROM t", "unknown macro @my_macro"),
        ("SELECT @STAR(s.unknown) FROM t", "needs the columns of s.unknown"),
        ("SELECT @DATE_SPINE('hour', '2024-01-01', '2024-01-02')", "unknown datepart"),
        ("SELECT @DATE_SPINE('day', 'x', '2024-01-02')", "is not a date"),
        ("SELECT @HAVERSINE_DISTANCE(a, b, c, d, 'ly') FROM t", "unknown unit"),
        ("SELECT @PIVOT(s, ['a'], cmp := 'LIKE') FROM t", "unknown comparison"),
        (
            "SELECT * FROM @RESOLVE_TEMPLATE('@{table_name}$p', mode := 'table')",
            "cannot check at plan time",
        ),
        ("SELECT @REDUCE([], (a, b) -> a) FROM t", "empty list"),
        ("SELECT @EACH([1], x -> x, x := 1) FROM t", "has no argument 'x'"),
        ("SELECT @SQL(1) FROM t", "needs a string of SQL"),
        ("SELECT @DEF(a, 1) FROM t", "must be a statement of its own"),
    ],
)
def test_bad_macros_say_what_and_where(sql: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        expand_sql(sql, columns=COLS)
    assert message in info.value.message
    assert info.value.line == 1 and info.value.hint


def test_recursion_and_expansion_bombs_are_capped() -> None:
    with pytest.raises(ModelError, match="nest more than"):
        expand_sql("@DEF(f, x -> @f(x)); SELECT @f(1)")
    ten = "[" + ", ".join(str(i) for i in range(40)) + "]"
    bomb = f"SELECT @EACH({ten}, a -> @EACH({ten}, b -> @EACH({ten}, c -> @EACH({ten}, d -> a + b + c + d))))"
    with pytest.raises(ModelError, match=r"more than .* SQL nodes"):
        expand_sql(bomb)


def test_unknown_macro_in_a_model_names_file_and_line() -> None:
    text = "MODEL (name s.t, kind FULL);\n\nSELECT\n  @my_macro(a) AS b\nFROM s.u\n"
    with pytest.raises(ModelError) as info:
        parse_model(text, "models/t.sql", ModelDefaults(), {})
    assert str(info.value).startswith("models/t.sql:4:3: unknown macro @my_macro")
    assert "Python macros" in (info.value.hint or "")


def test_fingerprint_does_not_depend_on_dates_but_on_variables() -> None:
    text = "MODEL (name s.t, kind FULL);\nSELECT a * @k AS b, @start_ds AS d FROM s.u"
    one = parse_model(text, "t.sql", ModelDefaults(), {"k": 1})
    two = parse_model(text, "t.sql", ModelDefaults(), {"k": 2})
    assert one is not None and two is not None
    assert one.query_sql == "SELECT a * 1 AS b, __sluice_macro__start_ds AS d FROM s.u"
    assert one.query_sql != two.query_sql


def _plan(root: Path) -> tuple[set[str], dict[str, str]]:
    project = load_project(root, use_cache=False)
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
    assert set(plan.added) == set(project.models)
    return set(plan.added), {n: m.query_sql or "" for n, m in project.models.items()}


def test_operators_project_plans() -> None:
    added, sql = _plan(FIXTURES / "macros_operators")
    assert added == {
        "raw.rides",
        "mart.rides_wide",
        "mart.rides_by_status",
        "mart.calendar",
        "mart.daily",
    }
    assert "amount * 2 AS amount_twice" in sql["mart.rides_wide"]
    assert "AS n_ok" in sql["mart.rides_by_status"]
    assert "SEQUENCE(CAST('2024-01-01' AS DATE)" in sql["mart.calendar"]


def test_variables_project_plans_with_gateway_variables() -> None:
    added, sql = _plan(FIXTURES / "macros_variables")
    assert added == {"staging.src_v2", "mart.copy", "mart.dedup"}
    assert (
        sql["mart.copy"] == "SELECT id, name AS v2_name, 0 AS fallback FROM staging.src_v2 LIMIT 5"
    )
    assert "ROW_NUMBER() OVER (PARTITION BY id ORDER BY name DESC)" in sql["mart.dedup"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, 'x@y.z' AS email FROM s.u",  # an @ in a string: lexed, nothing to do
        "SELECT a AS b FROM s.u WHERE c IN (SELECT d FROM s.v) -- a comment",
        "SELECT `a b`, TRANSFORM(xs, x -> x + 1) AS ys FROM s.u",  # a Spark lambda
        "WITH w AS (SELECT 1 AS a) SELECT * FROM w",
    ],
)
def test_a_query_without_macros_reads_the_same_with_or_without_the_walk(
    query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"MODEL (name s.t, kind FULL);\n{query}\n"
    quick = parse_model(text, "t.sql", ModelDefaults(), {})
    from sluice.core.model import macros

    monkeypatch.setattr(macros, "_no_macros", lambda subst: False)  # always walk
    walked = parse_model(text, "t.sql", ModelDefaults(), {})
    assert quick is not None and walked is not None
    assert quick.query_sql == walked.query_sql and quick.depends_on == walked.depends_on


def test_a_name_that_spells_a_macro_marker_is_still_read_as_the_macro() -> None:
    """The lexer's markers are names sqlglot parses; written directly they are evaluated
    as before (here an unknown variable), not passed through by the macro-free path."""
    text = "MODEL (name s.t, kind FULL);\nSELECT __sluice_macro__nope AS a FROM s.u\n"
    with pytest.raises(ModelError, match="nope"):
        parse_model(text, "t.sql", ModelDefaults(), {})
