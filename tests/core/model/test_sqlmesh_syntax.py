"""SQLMesh syntax the loader reads as SQLMesh does (issue 20, item 4), and checks that
warn instead of failing where SQLMesh loads the project (item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.audits import builtin_audit_sql, parse_audits
from sluice.core.model.parse import parse_model
from tests.core.helpers import BASIC, load, write_project


def error_of(root: Path, files: dict[str, str]) -> SluiceError:
    with pytest.raises(SluiceError) as info:
        load(root, {**BASIC, **files})
    assert not isinstance(info.value, ProjectErrors), str(info.value)
    return info.value


def model(text: str) -> object:
    return parse_model(text, "m.sql", ModelDefaults(), {})


# --- audit arguments written `name = expression` ---------------------------------------


def test_audit_arguments_may_be_given_with_an_equals_sign(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "models/d.sql": """
                MODEL (
                  name s.d,
                  audits (
                    forall(criteria = [LENGTH(name) > 0, id >= 1]),
                    not_null(columns = (id, name)),
                    accepted_values(column = name, is_in = ('x', 'y'), blocking = false)
                  )
                );
                SELECT id, name FROM s.a
            """,
        },
    )
    calls = project.models["s.d"].audits
    assert [(c.name, c.args, c.blocking) for c in calls] == [
        ("forall", (("criteria", "ARRAY(LENGTH(name) > 0, id >= 1)"),), True),
        ("not_null", (("columns", "(id, name)"),), True),
        ("accepted_values", (("column", "name"), ("is_in", "('x', 'y')")), False),
    ]
    # `[a, b]` is a list of criteria, as `(a, b)` is: each becomes one condition.
    sql = builtin_audit_sql(calls[0], "t")
    assert sql == "SELECT * FROM t WHERE (NOT (LENGTH(name) > 0) OR NOT (id >= 1))"


def test_equals_and_walrus_give_the_same_arguments() -> None:
    header = "MODEL (name s.d, audits (forall(criteria {op} (price > 0, qty < 10))));\n"
    query = "SELECT 1 AS price, 2 AS qty"
    one = model(header.format(op="=") + query)
    other = model(header.format(op=":=") + query)
    assert one == other


def test_an_audit_default_may_be_an_expression_after_equals() -> None:
    (audit,) = parse_audits(
        "AUDIT (name positive, defaults (criteria = [LENGTH(name) > 0], column = id));\n"
        "SELECT * FROM @this_model WHERE @column IS NULL OR NOT @criteria",
        "a.sql",
        "spark",
        {},
    )
    assert audit.defaults == (("criteria", "ARRAY(LENGTH(name) > 0)"), ("column", "id"))


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("audits (forall(criteria = ))", "expected a value after '='"),
        ("audits (forall(criteria = [LENGTH(name) > ]))", "cannot parse audit argument"),
        ("audits (not_null(= id))", "unexpected '='"),
    ],
)
def test_a_broken_argument_says_where_and_how(header: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        model(f"MODEL (name s.d, {header});\nSELECT 1 AS id")
    assert message in info.value.message
    assert info.value.path == "m.sql" and info.value.line == 1 and info.value.hint


# --- audit files: comments, several blocks, empty statements -----------------------------


def test_audit_blocks_may_be_separated_by_comments_and_empty_statements() -> None:
    text = (
        "-- audits of the orders\n"
        "AUDIT (name a1);;\n"
        "SELECT * FROM @this_model WHERE id IS NULL;\n"
        "/* the second one\n   spans lines */\n"
        "-- and another comment\n"
        "AUDIT (name a2, blocking false);\n"
        "SELECT * FROM @this_model WHERE amount < 0;;\n"
        "AUDIT(name a3); SELECT * FROM @this_model WHERE amount > 1e9;\n"
        "-- a trailing comment\n"
    )
    audits = parse_audits(text, "a.sql", "spark", {})
    assert [(a.name, a.line, a.blocking) for a in audits] == [
        ("a1", 2, True),
        ("a2", 7, False),
        ("a3", 9, True),
    ]
    assert audits[1].query_sql == "SELECT * FROM __sluice_macro__this_model WHERE amount < 0"


def test_audit_inside_a_query_is_not_a_new_block() -> None:
    # `audit(` inside a query, a string or a comment does not start a block.
    text = (
        "AUDIT (name a1);\n"
        "SELECT * FROM @this_model WHERE note <> 'x; AUDIT (name a9)' -- ; AUDIT (\n"
        "AND audit (1) IS NULL\n"
    )
    (audit,) = parse_audits(text, "a.sql", "spark", {})
    assert "audit(1)" in audit.query_sql.lower().replace(" (", "(")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("AUDIT (name a1);\nSELECT 1;\nSELECT 2;\n", 2, "found 2 statements"),
        ("AUDIT (name a1);\n;;\n-- nothing\n", 3, "audit a1 has no query"),
        ("AUDIT (name a1);\nDELETE FROM t", 2, "audit a1 must be one SELECT query"),
        ("AUDIT (name a1, blocking maybe);\nSELECT 1", 1, "must be true or false"),
        (
            "AUDIT (name a1, depends_on [s.a]);\nSELECT 1",
            1,
            "unknown audit property 'depends_on'",
        ),
    ],
)
def test_bad_audit_files(text: str, line: int, message: str) -> None:
    with pytest.raises(ModelError) as info:
        parse_audits(text, "a.sql", "spark", {})
    assert message in info.value.message, str(info.value)
    assert info.value.line == line and info.value.hint


# --- model files: trailing comments, `;;` ------------------------------------------------


def test_a_model_may_end_with_a_comment_or_empty_statements() -> None:
    plain = model("MODEL (name s.d, kind FULL);\nSELECT 1 AS id")
    for text in (
        "MODEL (name s.d, kind FULL);\nSELECT 1 AS id;\n-- the end\n",
        "MODEL (name s.d, kind FULL);\nSELECT 1 AS id; /* done */",
        "MODEL (name s.d, kind FULL);;\n;SELECT 1 AS id;;\n",
    ):
        assert model(text) == plain, text


def test_two_queries_are_still_refused() -> None:
    with pytest.raises(ModelError, match="found 2 statements"):
        model("MODEL (name s.d, kind FULL);\nSELECT 1 AS id;\n-- x\nSELECT 2 AS id;\n")


# --- inline audits -----------------------------------------------------------------------

INLINE = """
    MODEL (
      name s.items,
      kind FULL,
      audits (does_not_exceed_threshold(column := id, threshold := 1000), price_is_not_null)
    );
    SELECT id, price FROM s.a;

    -- audits of this model
    AUDIT (name does_not_exceed_threshold);
    SELECT * FROM @this_model
    WHERE @column >= @threshold;

    AUDIT (name price_is_not_null);
    SELECT * FROM @this_model
    WHERE price IS NULL;
"""
BASE_A = "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 2.5 AS price\n"


def test_a_model_file_may_define_its_audits_after_the_query(tmp_path: Path) -> None:
    project = load(tmp_path, {"models/a.sql": BASE_A, "models/items.sql": INLINE})
    items = project.models["s.items"]
    assert items.query_sql == "SELECT id, price FROM s.a"
    assert [a.name for a in items.audits] == ["does_not_exceed_threshold", "price_is_not_null"]
    threshold = project.audits["does_not_exceed_threshold"]
    assert threshold.parameters == {"column", "threshold"}
    assert threshold.path.endswith("items.sql") and threshold.line == 9
    assert project.audits["price_is_not_null"].line == 13


def test_two_models_may_define_the_same_inline_audit(tmp_path: Path) -> None:
    other = INLINE.replace("s.items", "s.items2")
    project = load(
        tmp_path, {"models/a.sql": BASE_A, "models/items.sql": INLINE, "models/b.sql": other}
    )
    assert {"s.items", "s.items2"} <= set(project.models)


def test_an_inline_audit_clashing_with_another_is_an_error(tmp_path: Path) -> None:
    clash = INLINE.replace("s.items", "s.items2").replace("price IS NULL", "price < 0")
    error = error_of(
        tmp_path, {"models/a.sql": BASE_A, "models/items.sql": INLINE, "models/x.sql": clash}
    )
    assert isinstance(error, ModelError)
    assert error.message.startswith("audit price_is_not_null is defined twice (also in ")
    assert error.line == 13 and error.hint == "rename one of them"


def test_a_broken_inline_audit_points_at_its_line(tmp_path: Path) -> None:
    broken = INLINE.replace("WHERE price IS NULL;", "WHERE price IS;")
    error = error_of(tmp_path, {"models/a.sql": BASE_A, "models/items.sql": broken})
    assert isinstance(error, ModelError) and error.path is not None
    assert error.path.endswith("items.sql") and error.line == 15
    assert "cannot parse audit price_is_not_null" in error.message and error.hint


def test_a_seed_model_may_have_inline_audits(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "seeds/x.csv": "id,name\n1,a\n",
            "models/x.sql": """
                MODEL (name s.x, kind SEED (path '../seeds/x.csv'), audits (named));
                AUDIT (name named);
                SELECT * FROM @this_model WHERE name IS NULL
            """,
        },
    )
    assert "named" in project.audits and project.models["s.x"].audits[0].name == "named"


# --- standalone audits -------------------------------------------------------------------


def test_a_standalone_audit_is_loaded_and_named_in_the_notes(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "audits/standalone.sql": """
                AUDIT (
                  name assert_a_has_rows,
                  standalone true,
                  depends_on [s.a],
                  owner data_team,
                  cron '@daily'
                );
                SELECT 1 AS missing FROM s.a HAVING COUNT(*) = 0
            """,
        },
    )
    audit = project.audits["assert_a_has_rows"]
    assert audit.standalone and not audit.blocking  # SQLMesh: non-blocking by default
    (note,) = [n for n in project.notes if "standalone" in n]
    assert note.startswith(f"{audit.path}:1: standalone audit assert_a_has_rows is loaded")


def test_a_model_cannot_attach_a_standalone_audit(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        {
            "audits/s.sql": "AUDIT (name lonely, standalone true);\nSELECT 1 AS x FROM s.a",
            "models/d.sql": "MODEL (name s.d, audits (lonely));\nSELECT 1 AS x",
        },
    )
    assert isinstance(error, ModelError)
    assert error.message.startswith("model s.d uses standalone audit 'lonely'")
    assert error.path is not None and error.path.endswith("d.sql") and error.line == 1
    assert error.hint and "standalone true" in error.hint


# --- checks that warn (item 8) -----------------------------------------------------------


def test_a_grain_the_query_does_not_return_is_a_warning(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "models/d.sql": "MODEL (\n  name s.d,\n  grain (id, nme)\n);\nSELECT id, name FROM s.a\n",
        },
    )
    assert project.models["s.d"].grain == ("id", "nme")
    (note,) = [n for n in project.notes if "grain" in n]
    path = str(tmp_path / "models" / "d.sql")
    assert note == (
        f"{path}:3:14: grain 'nme' is not a column of s.d's query\n"
        "  hint: the query returns: id, name; name one of them "
        "(or alias the expression in the query)"
    )


def test_a_grain_that_is_an_expression_is_left_out_with_a_warning(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "models/d.sql": "MODEL (name s.d, grain (id, CONCAT(id, name)));\n"
            "SELECT id, name FROM s.a",
        },
    )
    assert project.models["s.d"].grain == ("id",)
    (note,) = [n for n in project.notes if "grain" in n]
    assert "grain 'CONCAT(id, name)' of s.d is not a column name" in note and "hint:" in note


def test_grain_warnings_survive_the_cache(tmp_path: Path) -> None:
    from sluice.core.model.loader import load_project

    root = write_project(
        tmp_path, {**BASIC, "models/d.sql": "MODEL (name s.d, grain zz);\nSELECT id FROM s.a"}
    )
    first = load_project(root)
    again = load_project(root)  # from .sluice/cache
    assert [n for n in first.notes if "grain" in n] == [n for n in again.notes if "grain" in n]
    assert any("grain 'zz'" in n for n in again.notes)


def test_a_unit_test_of_a_removed_model_is_skipped_with_a_warning(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "tests/t.yaml": """
                test_kept:
                  model: s.b
                  inputs:
                    s.a:
                      rows: [{id: 1, name: x}]
                  outputs:
                    query:
                      rows: [{id: 1, name: x}]
                test_gone:
                  model: s.gone
                  outputs:
                    query:
                      rows: []
            """,
        },
    )
    assert [t.name for t in project.tests] == ["test_kept"]
    (note,) = [n for n in project.notes if "s.gone" in n]
    assert note.startswith(f"{tmp_path / 'tests' / 't.yaml'}:10: test test_gone: model 's.gone'")
    assert "the test is skipped\n  hint: " in note


def test_a_unit_test_still_fails_on_a_bad_input(tmp_path: Path) -> None:
    # Only a missing model is softened: a test of an existing model is checked as before.
    error = error_of(
        tmp_path,
        {
            "tests/t.yaml": "t:\n  model: s.b\n  inputs:\n    s.zz:\n      rows: []\n"
            "  outputs:\n    query: []\n"
        },
    )
    assert "input 's.zz' is not read by s.b" in error.message and error.line == 4
