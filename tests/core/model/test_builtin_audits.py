"""SQLMesh's built-in audits (issue 41, item 5): every one of SQLMesh 0.236.4's, with its
arguments, rendered as Spark SQL built from checked sqlglot trees; a missing, unknown or
wrongly typed argument is refused at the model's file:line; hostile arguments stay what
they are (a value, a name), never SQL of their own. Their queries run on Spark in
tests/core/spark/test_builtin_audits_spark.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.audits import builtin_audit_sql
from sluice.core.model.builtin_audits import (
    BUILTIN_AUDITS,
    ArgumentError,
    check_arguments,
    render_builtin,
)
from sluice.core.model.definition import AuditCall, Project
from sluice.core.model.fileaccess import find_in_tree
from sluice.core.spark.render import build_steps
from tests.core.helpers import BASIC, load, plan_of

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "compat"

# The audits of SQLMesh 0.236.4 (sqlmesh/core/audit/builtin.py, BUILT_IN_AUDITS less the
# `_non_blocking` copies).
SQLMESH_BUILTINS = {
    "accepted_range",
    "accepted_values",
    "at_least_one",
    "chi_square",
    "forall",
    "kl_divergence",
    "match_like_pattern_list",
    "match_regex_pattern_list",
    "mean_in_range",
    "mutually_exclusive_ranges",
    "not_accepted_values",
    "not_constant",
    "not_empty_string",
    "not_match_like_pattern_list",
    "not_match_regex_pattern_list",
    "not_null",
    "not_null_proportion",
    "number_of_rows",
    "sequential_values",
    "stddev_in_range",
    "string_length_between",
    "string_length_equal",
    "unique_combination_of_columns",
    "unique_values",
    "valid_email",
    "valid_http_method",
    "valid_url",
    "valid_uuid",
    "z_score",
}

# One use of each, as a MODEL header writes it, and the columns its query must read.
USES: dict[str, tuple[str, set[str]]] = {
    "forall": ("forall(criteria := (price > 0, LENGTH(name) > 0))", {"price", "name"}),
    "number_of_rows": ("number_of_rows(threshold := 10)", set()),
    "not_null": ("not_null(columns := (id, name))", {"id", "name"}),
    "at_least_one": ("at_least_one(column := zip)", {"zip"}),
    "not_null_proportion": ("not_null_proportion(column := zip, threshold := 0.8)", {"zip"}),
    "not_constant": ("not_constant(column := id)", {"id"}),
    "unique_values": ("unique_values(columns := (id, name))", {"id", "name"}),
    "unique_combination_of_columns": (
        "unique_combination_of_columns(columns = [id, ds])",
        {"id", "ds"},
    ),
    "accepted_values": ("accepted_values(column := name, is_in := ('a', 'b'))", {"name"}),
    "not_accepted_values": ("not_accepted_values(column := name, is_in := ('x'))", {"name"}),
    "sequential_values": ("sequential_values(column := id, interval := 2)", {"id"}),
    "accepted_range": ("accepted_range(column := price, min_v := 0, max_v := 100)", {"price"}),
    "mutually_exclusive_ranges": (
        "mutually_exclusive_ranges(lower_bound_column := lo, upper_bound_column := hi)",
        {"lo", "hi"},
    ),
    "not_empty_string": ("not_empty_string(column := name)", {"name"}),
    "string_length_equal": ("string_length_equal(column := zip, v := 5)", {"zip"}),
    "string_length_between": (
        "string_length_between(column := name, min_v := 1, max_v := 50)",
        {"name"},
    ),
    "valid_uuid": ("valid_uuid(column := uid)", {"uid"}),
    "valid_email": ("valid_email(column := email)", {"email"}),
    "valid_url": ("valid_url(column := url)", {"url"}),
    "valid_http_method": ("valid_http_method(column := method)", {"method"}),
    "match_regex_pattern_list": (
        r"match_regex_pattern_list(column := todo, patterns := ('^\d.*', '.*!$'))",
        {"todo"},
    ),
    "not_match_regex_pattern_list": (
        "not_match_regex_pattern_list(column := todo, patterns := ('^!.*'))",
        {"todo"},
    ),
    "match_like_pattern_list": (
        "match_like_pattern_list(column := name, patterns := ('jim%', 'pam%'))",
        {"name"},
    ),
    "not_match_like_pattern_list": (
        "not_match_like_pattern_list(column := name, patterns := ('%doe', '%smith'))",
        {"name"},
    ),
    "mean_in_range": ("mean_in_range(column := age, min_v := 21, max_v := 50)", {"age"}),
    "stddev_in_range": ("stddev_in_range(column := age, max_v := 5)", {"age"}),
    "z_score": ("z_score(column := age, threshold := 3)", {"age"}),
    "kl_divergence": (
        "kl_divergence(source_column := age, target_column := ref_age, threshold := 0.1)",
        {"age", "ref_age"},
    ),
    "chi_square": (
        "chi_square(column_a := tier, column_b := segment, critical_value := 9.48773)",
        {"tier", "segment"},
    ),
}

COLUMNS = (
    "1 AS id, 'x' AS name, 2.0 AS price, '12345' AS zip, DATE '2024-01-01' AS ds, 1 AS lo, "
    "2 AS hi, 'u' AS uid, 'e' AS email, 'w' AS url, 'GET' AS method, 't' AS todo, 30 AS age, "
    "31 AS ref_age, 'a' AS tier, 'b' AS segment, 'k' AS kind"
)


def project_with(tmp_path: Path, audits: str, dialect: str = "spark") -> Project:
    return load(
        tmp_path,
        {
            **BASIC,
            "models/d.sql": f"MODEL (\n  name s.d,\n  dialect {dialect},\n  audits ({audits})\n);\n"
            f"SELECT {COLUMNS}\n",
        },
    )


def refused(tmp_path: Path, audits: str, dialect: str = "spark") -> ModelError:
    with pytest.raises(SluiceError) as info:
        project_with(tmp_path, audits, dialect)
    error = info.value
    assert not isinstance(error, ProjectErrors), str(error)
    assert isinstance(error, ModelError), str(error)
    return error


def read_columns(sql: str) -> set[str]:
    """The names of the columns a query reads (its own aliases and CTE columns aside)."""
    tree = sqlglot.parse_one(sql, read="spark")
    return {c.name for c in tree.find_all(exp.Column)}


# --- every built-in audit, rendered ------------------------------------------------------


def test_every_sqlmesh_builtin_audit_is_here() -> None:
    assert set(BUILTIN_AUDITS) == SQLMESH_BUILTINS
    assert set(USES) == SQLMESH_BUILTINS


@pytest.mark.parametrize("name", sorted(SQLMESH_BUILTINS))
def test_each_builtin_renders_spark_sql_reading_its_columns(tmp_path: Path, name: str) -> None:
    use, columns = USES[name]
    project = project_with(tmp_path, use)
    (call,) = project.models["s.d"].audits
    assert call.name == name and call.blocking
    sql = builtin_audit_sql(call, "sluice__s.s__d__abc")
    tree = sqlglot.parse_one(sql, read="spark")
    assert isinstance(tree, exp.Query)
    assert {t.sql("spark") for t in tree.find_all(exp.Table)} >= {"sluice__s.s__d__abc"}
    assert columns <= read_columns(sql), sql
    # No column of the model it was not given (the query's own names aside).
    others = {"id", "name", "price", "zip", "ds", "lo", "hi", "uid", "email", "url", "method"}
    others |= {"todo", "age", "ref_age", "tier", "segment", "kind"}
    assert read_columns(sql) & others == columns, sql
    assert find_in_tree(tree) == []


@pytest.mark.parametrize("name", sorted(SQLMESH_BUILTINS))
def test_each_builtin_has_its_non_blocking_variant(tmp_path: Path, name: str) -> None:
    use, _ = USES[name]
    project = project_with(tmp_path, use.replace("(", "_non_blocking(", 1))
    (call,) = project.models["s.d"].audits
    assert call.name == name and not call.blocking


@pytest.mark.parametrize("name", sorted(SQLMESH_BUILTINS - {"valid_http_method"}))
def test_each_builtin_takes_a_condition(tmp_path: Path, name: str) -> None:
    use, _ = USES[name]
    use = use[:-1] + ", condition := kind = 'k', blocking := false)"
    project = project_with(tmp_path, use)
    (call,) = project.models["s.d"].audits
    assert not call.blocking
    sql = builtin_audit_sql(call, "t")
    tree = sqlglot.parse_one(sql, read="spark")
    conditions = [
        e for e in tree.find_all(exp.EQ) if e.this.name == "kind" and e.expression.name == "k"
    ]
    assert len(conditions) >= 1, sql
    assert "kind" in read_columns(sql)


def test_the_queries_mean_what_sqlmesh_s_do() -> None:
    def sql(name: str, **args: str) -> str:
        return render_builtin(name, args, "t")

    # number_of_rows fails unless the table has MORE than `threshold` rows.
    assert sql("number_of_rows", threshold="0") == (
        "SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM t WHERE TRUE LIMIT 1) AS _sample "
        "HAVING COUNT(*) <= 0"
    )
    # unique_values counts NULL as a value (SQLMesh partitions by the column).
    assert "IS NOT NULL" not in sql("unique_values", columns="(id)")
    assert sql("accepted_values", column="name", is_in="('a', 'b')", condition="id > 1") == (
        "SELECT * FROM t WHERE NOT name IN ('a', 'b') AND (id > 1)"
    )
    assert sql("forall", criteria="ARRAY(a > 0, b < 1)") == (
        "SELECT * FROM t WHERE (NOT (a > 0) OR NOT (b < 1))"
    )
    # Inclusive bounds by default; `inclusive := false` makes the bounds violations.
    assert sql("accepted_range", column="p", min_v="0", max_v="100") == (
        "SELECT * FROM t WHERE (p < 0 OR p > 100)"
    )
    assert sql("accepted_range", column="p", max_v="100", inclusive="FALSE") == (
        "SELECT * FROM t WHERE p >= 100"
    )
    assert sql("string_length_between", column="z", min_v="5") == (
        "SELECT * FROM t WHERE LENGTH(z) < 5"
    )
    assert sql("not_match_like_pattern_list", column="n", patterns="('%doe', '%smith')") == (
        "SELECT * FROM t WHERE (n LIKE '%doe' OR n LIKE '%smith')"
    )
    # chi_square expects dependence unless `dependent := false`.
    assert sql("chi_square", column_a="a", column_b="b", critical_value="3.84").endswith(
        "WHERE NOT (chi_square > 3.84)"
    )
    assert sql(
        "chi_square", column_a="a", column_b="b", critical_value="3.84", dependent="FALSE"
    ).endswith("WHERE NOT (chi_square <= 3.84)")
    # mutually_exclusive_ranges: partition_clause names the columns to partition by.
    ranges = sql(
        "mutually_exclusive_ranges",
        lower_bound_column="lo",
        upper_bound_column="hi",
        partition_clause="(account, region)",
    )
    assert ranges.count("OVER (PARTITION BY account, region ORDER BY") == 2


def test_the_builtin_regular_expressions_keep_their_backslashes_for_spark() -> None:
    # Spark reads '\.' in a string literal as '.': the email pattern's dot must reach
    # the regular expression as '\.', so the literal is written '\\.'.
    sql = render_builtin("valid_email", {"column": "e"}, "t")
    tree = sqlglot.parse_one(sql, read="spark")
    (pattern,) = [lit.this for lit in tree.find_all(exp.Literal) if lit.is_string]
    assert pattern == r"^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+$"
    assert r"'^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\\.[a-zA-Z0-9-.]+$'" in sql


def test_a_pattern_written_in_another_dialect_reaches_spark_as_written(tmp_path: Path) -> None:
    # DuckDB keeps '\d' as two characters; Spark would read '\d' as 'd' unless escaped.
    project = project_with(
        tmp_path, r"match_regex_pattern_list(column := todo, patterns := ('^\d+$'))", "duckdb"
    )
    sql = builtin_audit_sql(project.models["s.d"].audits[0], "t")
    literals = [lit.this for lit in sqlglot.parse_one(sql, read="spark").find_all(exp.Literal)]
    assert literals == [r"^\d+$"]


def test_the_sushi_moderate_audits_load_as_written(tmp_path: Path) -> None:
    # tobiko_examples_sushi_moderate's audits (upper case, `=`, lists in brackets).
    project = load(
        tmp_path,
        {
            **BASIC,
            "models/d.sql": """
                MODEL(
                    name s.d,
                    audits (
                        NOT_NULL(columns=[id, ds]),
                        UNIQUE_COMBINATION_OF_COLUMNS(columns=[id, ds]),
                        FORALL(criteria=[
                            quantity > 0,
                        ]),
                        NUMBER_OF_ROWS(threshold=0)
                    )
                );
                SELECT 1 AS id, 2 AS quantity, '2024-01-01' AS ds
            """,
        },
    )
    calls = project.models["s.d"].audits
    assert [c.name for c in calls] == [
        "not_null",
        "unique_combination_of_columns",
        "forall",
        "number_of_rows",
    ]
    assert builtin_audit_sql(calls[1], "t") == (
        "SELECT id, ds FROM t GROUP BY id, ds HAVING COUNT(*) > 1"
    )


def test_tobiko_sushi_moderate_plans(tmp_path: Path) -> None:
    source = SHARED / "tobiko_examples_sushi_moderate"
    if not source.is_dir():
        pytest.skip(f"{source} is not here (the shared compatibility projects)")
    root = tmp_path / "moderate"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".sluice"))
    project = load(root, {})
    assert len(project.models) == 14
    plan = plan_of(project, end=1_717_200_000_000)
    assert len(plan.snapshots) == 14
    audits = {c.name for m in project.models.values() for c in m.audits}
    assert "unique_combination_of_columns" in audits
    for model in project.models.values():
        for call in model.audits:
            sqlglot.parse_one(builtin_audit_sql(call, "t"), read="spark")


def test_a_project_audit_named_like_a_builtin_is_the_one_used(tmp_path: Path) -> None:
    # As in SQLMesh, whose project audits override its built-in ones.
    project = load(
        tmp_path,
        {
            **BASIC,
            "audits/not_null.sql": """
                AUDIT (name not_null);
                SELECT * FROM @this_model WHERE @column IS NULL AND @other > 0
            """,
            "models/d.sql": """
                MODEL (name s.d, audits (not_null(column := id, other := price)));
                SELECT 1 AS id, 2 AS price
            """,
        },
    )
    assert project.models["s.d"].audits[0].args == (("column", "id"), ("other", "price"))


def test_a_model_using_one_audit_twice_has_a_result_for_each_use(tmp_path: Path) -> None:
    project = project_with(
        tmp_path,
        "accepted_range(column := price, min_v := 0), accepted_range(column := age, max_v := 9),"
        " not_null(columns := id), accepted_range_non_blocking(column := lo, min_v := 1)",
    )
    plan = plan_of(project, end=1_717_200_000_000)
    steps = [s for s in build_steps(plan, project.audits, project.path, "parquet")]
    audits = [s for s in steps if s["type"] == "audit"]
    assert [(s["audit"], s["blocking"]) for s in audits] == [
        ("accepted_range", True),
        ("accepted_range#2", True),
        ("not_null", True),
        ("accepted_range#3", False),
    ]
    assert "age > 9" in audits[1]["sql"] and "price < 0" in audits[0]["sql"]


# --- arguments: missing, unknown, of the wrong kind ---------------------------------------


@pytest.mark.parametrize(
    ("use", "message", "hint"),
    [
        (
            "unique_combination_of_columns(column := id)",
            "audit unique_combination_of_columns on s.d: takes no argument column",
            "unique_combination_of_columns(columns := (id, ds))",
        ),
        (
            "accepted_range(column := price)",
            "audit accepted_range on s.d: needs min_v or max_v",
            "accepted_range(column := id, min_v := 0, max_v := 0)",
        ),
        (
            "accepted_range(column := price, min_v := NULL)",
            "audit accepted_range on s.d: needs min_v or max_v (not NULL)",
            "without one SQLMesh's query reports every row",
        ),
        (
            "number_of_rows(threshold := 3000000000)",
            "argument threshold must be a whole number of 0 or more, got '3000000000' "
            "(it is not below 2147483647",
            "threshold := 10",
        ),
        (
            "not_null_proportion(column := zip)",
            "audit not_null_proportion on s.d: needs threshold (a number)",
            "not_null_proportion(column := id, threshold := 0.5)",
        ),
        (
            "accepted_values(column := 'name', is_in := ('a'))",
            "argument column must be a column name, got ''name'' (a string is not a column",
            "column := id",
        ),
        (
            "number_of_rows(threshold := -1)",
            "argument threshold must be a whole number of 0 or more, got '-1'",
            "threshold := 10",
        ),
        (
            "number_of_rows(threshold := 2.5)",
            "argument threshold must be a whole number of 0 or more, got '2.5'",
            "threshold := 10",
        ),
        (
            "z_score(column := age, threshold := age)",
            "argument threshold must be a number, got 'age'",
            "threshold := 0.5",
        ),
        (
            "accepted_range(column := price, min_v := 0, inclusive := 'no')",
            "argument inclusive must be true or false, got ''no''",
            "inclusive := false",
        ),
        (
            "accepted_values(column := name, is_in := (name, 'b'))",
            "argument is_in must be a literal value or a list of them, got '(name, 'b')' "
            "('name' is not a literal value)",
            "is_in := ('a', 'b')",
        ),
        (
            "match_like_pattern_list(column := name, patterns := (1, 2))",
            "argument patterns must be a quoted string or a list of them",
            "patterns := ('^a.*', '.*z$')",
        ),
        (
            "not_null(columns := (id, LOWER(name)))",
            "argument columns must be a column name or a list of them, got '(id, LOWER(name))' "
            "('LOWER(name)': it is not a column name)",
            "columns := (id, ds)",
        ),
        (
            "not_null(columns := (t.id))",
            "('t.id': name a column of the model alone",
            "columns := (id, ds)",
        ),
        (
            "forall(criteria := (price > 0), condition := 'price > 1')",
            "argument condition must be a SQL condition on the model's columns, got "
            "''price > 1'' (a string is not a condition",
            "condition := ds > '2024-01-01'",
        ),
        (
            "kl_divergence(column := age, target_column := ref_age, threshold := 1)",
            "audit kl_divergence on s.d: takes no argument column",
            "reads source_column (its documentation says column)",
        ),
        (
            "chi_square(column := tier, target_column := segment, critical_value := 3.8)",
            "audit chi_square on s.d: takes no argument column",
            "write column_a := ..., column_b := ...",
        ),
        (
            "valid_http_method(column := method, condition := id > 1)",
            "audit valid_http_method on s.d: takes no argument condition",
            "has no condition",
        ),
        (
            "string_length_equal(column := zip)",
            "audit string_length_equal on s.d: needs v (a whole number of 0 or more)",
            "string_length_equal(column := id, v := 10)",
        ),
    ],
)
def test_a_wrong_argument_is_refused_at_the_model_s_line(
    tmp_path: Path, use: str, message: str, hint: str
) -> None:
    error = refused(tmp_path, f"\n    not_null(columns := id),\n    {use}\n  ")
    assert message in error.message, error.message
    assert error.hint is not None and hint in error.hint, error.hint
    assert error.location is not None and error.location.endswith("models/d.sql:6:5")


def test_an_audit_sqlmesh_does_not_define_says_so(tmp_path: Path) -> None:
    error = refused(tmp_path, "relationship(to := s.a, source_column := id, target_column := id)")
    assert "unknown audit 'relationship'" in error.message
    assert error.hint is not None and "SQLMesh 0.236.4 has no built-in relationship" in error.hint


def test_render_checks_its_arguments_too() -> None:
    # A call that did not come through the loader (a stored plan, another reader).
    with pytest.raises(ArgumentError) as info:
        render_builtin("accepted_values", {"column": "x", "is_in": "(1) OR 1 = 1"}, "t")
    assert info.value.argument == "is_in"
    with pytest.raises(ArgumentError):
        render_builtin("number_of_rows", {"threshold": "1 + 1"}, "t")


# --- hostile arguments ----------------------------------------------------------------------


def test_a_value_with_quotes_stays_one_literal(tmp_path: Path) -> None:
    project = project_with(
        tmp_path, "accepted_values(column := name, is_in := ('a', 'b'' OR ''1''=''1'))", "duckdb"
    )
    sql = builtin_audit_sql(project.models["s.d"].audits[0], "t")
    tree = sqlglot.parse_one(sql, read="spark")
    (member,) = tree.find_all(exp.In)
    assert [e.this for e in member.expressions] == ["a", "b' OR '1'='1"]
    assert not list(tree.find_all(exp.Or))


def test_an_argument_that_is_more_sql_than_its_kind_is_refused(tmp_path: Path) -> None:
    error = refused(tmp_path, "accepted_values(column := name, is_in := ('a') OR 1 = 1)")
    assert "argument is_in must be a literal value" in error.message
    error = refused(tmp_path, "not_null(columns := (id) OR TRUE)")
    assert "argument columns must be a column name" in error.message
    error = refused(tmp_path, "number_of_rows(threshold := (SELECT 1))")
    assert "argument threshold must be a whole number" in error.message


@pytest.mark.parametrize(
    "column",
    [
        "\"x' OR '1'='1\"",  # a quoted name with quotes: shown as a string, used as a name
        '"a`b) OR (1"',  # a backtick in a name Spark quotes with backticks
        '"__condition"',  # named like a placeholder of the templates
        '"__model"',
    ],
)
def test_a_hostile_column_name_stays_a_name(tmp_path: Path, column: str) -> None:
    project = project_with(
        tmp_path,
        f"unique_values(columns := ({column})), not_null(columns := {column}), "
        f"not_constant(column := {column}), z_score(column := {column}, threshold := 1)",
        "duckdb",
    )
    name = column.strip('"')
    for call in project.models["s.d"].audits:
        sql = builtin_audit_sql(call, "s.t")
        tree = sqlglot.parse_one(sql, read="spark")
        assert name in {c.name for c in tree.find_all(exp.Column)}, sql
        assert not list(tree.find_all(exp.Or)), sql
        assert {(t.db, t.name) for t in tree.find_all(exp.Table)} <= {("s", "t"), ("", "stats")}
        assert find_in_tree(tree) == []


@pytest.mark.parametrize(
    "use",
    [
        "match_regex_pattern_list(column := todo, patterns := ('${env:AWS_SECRET_ACCESS_KEY}'))",
        "accepted_values(column := name, is_in := ('a', '${system:user.home}'))",
        "accepted_range(column := zip, min_v := '${hiveconf:x}')",
        'not_null(columns := ("${env:HOME}"))',
        "forall(criteria := (name <> '${spark.app.name}'))",
        "not_null(columns := id, condition := name = '${env:X}')",
    ],
)
def test_a_spark_substitution_in_an_argument_is_refused(tmp_path: Path, use: str) -> None:
    error = refused(tmp_path, use, "duckdb")
    assert "which Spark replaces with a setting" in error.message, error.message
    assert error.location is not None and "models/d.sql:4" in error.location


def test_a_substitution_is_refused_when_rendering_too() -> None:
    with pytest.raises(ArgumentError) as info:
        check_arguments("accepted_values", {"column": "x", "is_in": "('${env:X}')"})
    assert "Spark replaces" in info.value.message


def test_a_condition_reading_a_file_is_refused(tmp_path: Path) -> None:
    error = refused(
        tmp_path,
        "not_null(columns := id, condition := id IN (SELECT 1 FROM text.`/etc/passwd`))",
    )
    assert "/etc/passwd" in error.message


def test_a_builtin_call_built_by_hand_is_checked() -> None:
    call = AuditCall("not_null", (("columns", "(id); DROP TABLE x"),))
    with pytest.raises(ArgumentError):
        builtin_audit_sql(call, "t")


def test_a_misspelt_builtin_is_named(tmp_path: Path) -> None:
    error = refused(tmp_path, "unique_combination_of_column(columns := (id, ds))")
    assert error.hint is not None
    assert error.hint.startswith("did you mean 'unique_combination_of_columns'?")


def test_the_audits_of_an_external_model_are_noted_not_dropped(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "external_models.yaml": """
                - name: raw.demographics
                  audits:
                    - name: not_null
                      columns: "[customer_id]"
                  columns:
                    customer_id: int
            """,
        },
    )
    (note,) = [n for n in project.notes if "raw.demographics" in n]
    assert note.split(": ", 1)[0].endswith("external_models.yaml:2")
    assert "the audits of external model raw.demographics are not run" in note


def test_the_readme_lists_every_builtin_audit() -> None:
    text = (REPO / "README.md").read_text()
    section = text.split("#### Built-in audits", 1)[1].split("\n### ", 1)[0]
    listed = {
        line.split("|")[1].strip().strip("`")
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert listed == SQLMESH_BUILTINS
