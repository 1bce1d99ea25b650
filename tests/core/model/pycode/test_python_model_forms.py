"""The forms of ``@model(...)`` real SQLMesh projects use (issue 41, item 1): the name as a
keyword, SQLMesh's kind objects, constants computed in a project module, audits with
arguments as tuples, ``is_sql=True`` models and relative starts ("1 week ago"). What
``ast`` can read is read from the file; what only the project's code gives is evaluated in
the sandboxed Python process (the macros' one), plain data back; the SQLMesh 0.236.4
results these are checked against are in each test's comment.

The real projects ``../shared/compat/sqlmesh_wursthall`` and ``sqlmesh_ibis`` (SQLMesh's
examples, Apache-2.0) are loaded from work copies at the end.
"""

from __future__ import annotations

import shutil
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError, SluiceError
from sluice.core.model.definition import AuditCall, Kind, KindName, Model
from sluice.core.model.loader import load_project
from sluice.core.model.parse import parse_model
from sluice.core.model.pycode import Refusal
from sluice.core.model.pycode.models import read_text
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms
from tests.core.helpers import load

REPO = Path(__file__).resolve().parents[4]
SHARED = REPO.parent / "shared" / "compat"
CONFIG = "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"


def _read(src: str) -> list[Model]:
    return read_text(textwrap.dedent(src), "models/m.py", "/p")


def test_the_name_may_be_given_as_a_keyword() -> None:
    (model,) = _read(
        """
        from sqlmesh import model
        @model(name="shop.orders", columns={"id": "int"})
        def execute(context, **kwargs):
            return None
        """
    )
    assert model.name == "shop.orders"
    with pytest.raises(ModelError, match="needs the model's name") as exc:
        _read(
            """
            from sqlmesh import model
            @model(columns={"id": "int"})
            def execute(context, **kwargs):
                return None
            """
        )
    assert exc.value.line == 3 and "infer_names" in (exc.value.hint or "")


def test_a_name_less_model_takes_the_name_of_its_path_when_names_are_inferred(
    tmp_path: Path,
) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": CONFIG + "model_naming:\n  infer_names: true\n",
            "models/shop/orders.py": """
                from sqlmesh import model
                @model(columns={"id": "int"})
                def execute(context, **kwargs):
                    return None
            """,
        },
    )
    assert list(project.models) == ["shop.orders"]


def _sql_kind(header_kind: str) -> Kind:
    text = f"MODEL (name s.m, kind {header_kind}, start '2024-01-01');\nSELECT 1 AS ds, 1 AS id"
    model = parse_model(text, "m.sql", ModelDefaults(), {})
    assert model is not None
    return model.kind


def test_a_parent_named_by_a_module_constant_is_read() -> None:
    # SQLMesh's sushi example: ITEMS = "sushi.items", read by a helper of the module.
    (model,) = _read(
        """
        from sqlmesh import model
        ITEMS = "sushi.items"
        def items_table(context):
            return context.resolve_table(ITEMS)
        @model("sushi.order_items", columns={"id": "int"})
        def execute(context, **kwargs):
            context.resolve_table("sushi.orders")
            return items_table(context)
        """
    )
    assert model.depends_on == ("sushi.items", "sushi.orders")
    assert "ITEMS = 'sushi.items'" in (model.python_code or "")  # a change of it is one


@pytest.mark.parametrize(
    "binding",
    [
        'ITEMS = "a.b"\nITEMS = "c.d"',  # bound twice
        "ITEMS = 'a.' + 'b'",  # not a literal
        'ITEMS = "a.b"\ndef rebind():\n    global ITEMS\n    ITEMS = "c.d"',
    ],
)
def test_a_module_name_that_may_name_another_table_is_not_read(binding: str) -> None:
    source = (
        f"from sqlmesh import model\n{binding}\n"
        '@model("s.m", columns={"id": "int"})\n'
        "def execute(context, **kwargs):\n"
        "    return context.resolve_table(ITEMS)\n"
    )
    with pytest.raises(ModelError, match="not a string literal"):
        read_text(source, "models/m.py", "/p")


def test_a_local_name_shadowing_the_constant_is_not_read() -> None:
    source = (
        'from sqlmesh import model\nITEMS = "a.b"\n'
        '@model("s.m", columns={"id": "int"})\n'
        "def execute(context, ITEMS=None, **kwargs):\n"
        "    return context.resolve_table(ITEMS)\n"
    )
    with pytest.raises(ModelError, match="not a string literal"):
        read_text(source, "models/m.py", "/p")


@pytest.mark.parametrize(
    ("python_kind", "header_kind"),
    [
        (
            'IncrementalByTimeRangeKind(time_column=TimeColumn(column="ds", format="%Y-%m-%d"),'
            " batch_size=200, lookback=2)",
            "INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 200, lookback 2)",
        ),
        (
            'IncrementalByTimeRangeKind(time_column=TimeColumn("ds"))',
            "INCREMENTAL_BY_TIME_RANGE (time_column ds)",
        ),
        (
            'IncrementalByTimeRangeKind(time_column="ds")',
            "INCREMENTAL_BY_TIME_RANGE (time_column ds)",
        ),
        (
            'kind.IncrementalByUniqueKeyKind(unique_key=["id", "ds"], batch_size=10)',
            "INCREMENTAL_BY_UNIQUE_KEY (unique_key (id, ds), batch_size 10)",
        ),
        ("FullKind()", "FULL"),
        ("dict(name=ModelKindName.FULL)", "FULL"),
        (
            '{"name": kind.ModelKindName.INCREMENTAL_BY_TIME_RANGE, "time_column": "ds"}',
            "INCREMENTAL_BY_TIME_RANGE (time_column ds)",
        ),
    ],
)
def test_kind_objects_read_as_the_sql_header_reads_the_kind(
    python_kind: str, header_kind: str
) -> None:
    # SQLMesh 0.236.4 loads wursthall's IncrementalByTimeRangeKind(time_column=
    # TimeColumn(column="order_ds", format="%Y-%m-%d"), batch_size=200) as the kind
    # INCREMENTAL_BY_TIME_RANGE, time column ("order_ds", "%Y-%m-%d"), batch size 200.
    (model,) = _read(
        f"""
        from sqlmesh import model
        from sqlmesh.core import model as kind
        from sqlmesh.core.model import FullKind, IncrementalByTimeRangeKind, ModelKindName, TimeColumn
        @model("s.m", kind={python_kind}, columns={{"ds": "text", "id": "int"}})
        def execute(context, **kwargs):
            return None
        """
    )
    assert model.kind == _sql_kind(header_kind)


def test_a_kind_object_s_model_settings_and_unused_parameters() -> None:
    (model,) = _read(
        """
        from sqlmesh import model
        from sqlmesh.core.model import IncrementalByTimeRangeKind
        @model(
            "s.m",
            kind=IncrementalByTimeRangeKind(
                time_column="ds", forward_only=True, on_destructive_change="WARN",
                auto_restatement_cron="@weekly",
            ),
            columns={"ds": "date"},
        )
        def execute(context, **kwargs):
            return None
        """
    )
    assert model.forward_only and model.on_destructive_change == "warn"
    assert any("kind parameter 'auto_restatement_cron' is not used" in w for w in model.warnings)
    with pytest.raises(ModelError, match="SCD_TYPE_2_BY_TIME' is not a kind a Python model"):
        _read(
            """
            from sqlmesh import model
            from sqlmesh.core.model import SCDType2ByTimeKind
            @model("s.m", kind=SCDType2ByTimeKind(unique_key="id"), columns={"id": "int"})
            def execute(context, **kwargs):
                return None
            """
        )


def test_a_class_of_the_project_named_like_a_kind_is_not_read_as_one() -> None:
    with pytest.raises(ModelError, match="is not a literal"):
        _read(
            """
            from sqlmesh import model
            class FullKind:
                pass
            @model("s.m", kind=FullKind(), columns={"id": "int"})
            def execute(context, **kwargs):
                return None
            """
        )


def _shared_module(root: Path) -> None:
    (root / "models" / "lib").mkdir(parents=True)
    (root / "models" / "lib" / "__init__.py").write_text("")
    (root / "models" / "lib" / "shared.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations

            import not_installed_anywhere  # what the model's values do not need never runs
            from datetime import date, timedelta

            DATA_START = date(2022, 6, 1)
            DATA_START_STR = DATA_START.strftime("%Y-%m-%d")
            COLUMNS = dict(zip(["id", "ds"], ["int", "text"]))
            PLAIN = "@daily"


            def broken():
                return 1 / 0


            BROKEN = broken()
            """
        ).lstrip()
    )


def test_constants_computed_in_a_project_module_are_evaluated_in_the_python_process(
    tmp_path: Path,
) -> None:
    # As wursthall's models/src/shared.py: DATA_START_DATE_STR =
    # DATA_START_DATE.strftime("%Y-%m-%d"), which SQLMesh 0.236.4 reads as start 2022-06-01.
    root = tmp_path / "p"
    root.mkdir()
    _shared_module(root)
    files = {
        "config.yaml": CONFIG,
        "models/m.py": """
            from models.lib.shared import COLUMNS, DATA_START_STR, PLAIN
            from sqlmesh import model
            from sqlmesh.core.model import IncrementalByTimeRangeKind

            LOCAL = DATA_START_STR[:4] + "-07-01"

            @model(
                "s.m",
                kind=IncrementalByTimeRangeKind(time_column="ds"),
                start=DATA_START_STR,
                end=LOCAL,
                cron=PLAIN,
                columns=COLUMNS,
            )
            def execute(context, **kwargs):
                return None
        """,
    }
    model = load(root, files).models["s.m"]
    assert model.start == to_ms("2022-06-01") and model.end == to_ms("2022-07-01")
    assert model.columns == (("id", "INT"), ("ds", "STRING")) and model.cron == "@daily"
    # Read without the process (a pure read): the computed value is named as not a literal.
    with pytest.raises(ModelError, match="'DATA_START_STR' is not a literal"):
        read_text((root / "models" / "m.py").read_text(), str(root / "models/m.py"), str(root))


def test_an_evaluation_that_fails_names_the_file_and_line_of_the_project_code(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    _shared_module(root)
    files = {
        "config.yaml": CONFIG,
        "models/m.py": """
            from models.lib.shared import BROKEN
            from sqlmesh import model

            @model("s.m", columns={"id": "int"}, owner=BROKEN)
            def execute(context, **kwargs):
                return None
        """,
    }
    with pytest.raises(ModelError, match="ZeroDivisionError") as exc:
        load(root, files)
    shared = (root / "models" / "lib" / "shared.py").read_text().splitlines()
    assert exc.value.path == str(root / "models" / "lib" / "shared.py")
    assert exc.value.line == shared.index("    return 1 / 0") + 1
    assert "@model owner" in exc.value.message


def test_a_kind_built_by_the_project_s_code_comes_back_as_its_dict(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "config.yaml": CONFIG,
            "models/m.py": """
                from sqlmesh import model
                from sqlmesh.core.model import IncrementalByUniqueKeyKind

                def make_kind(keys):
                    return IncrementalByUniqueKeyKind(unique_key=keys, batch_size=5)

                @model("s.m", kind=make_kind(["id"]), columns={"id": "int"})
                def execute(context, **kwargs):
                    return None
            """,
        },
    )
    kind = project.models["s.m"].kind
    assert (kind.name, kind.unique_key, kind.batch_size) == (
        KindName.INCREMENTAL_BY_UNIQUE_KEY,
        ("id",),
        5,
    )


def test_evaluation_follows_the_policy_of_the_project_s_python(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    _shared_module(root)
    (root / "config.yaml").write_text(textwrap.dedent(CONFIG))
    (root / "models" / "m.py").write_text(
        "from models.lib.shared import DATA_START_STR\nfrom sqlmesh import model\n"
        '@model("s.m", columns={"id": "int"}, start=DATA_START_STR)\n'
        "def execute(context, **kwargs):\n    return None\n"
    )
    with pytest.raises(ModelError, match="is not run for this commit") as exc:
        load_project(root, use_cache=False, python=Refusal("ask the operator"))
    assert exc.value.hint == "ask the operator"


def test_audits_with_arguments_as_tuples() -> None:
    # SQLMesh 0.236.4 converts each argument with exp.convert (a list is a tuple, a string a
    # string literal): ("not_null", {"columns": ["id"]}) is not_null(columns := ('id')).
    (model,) = _read(
        """
        from sqlmesh import model
        @model(
            "s.m",
            columns={"id": "int", "v": "int"},
            audits=[
                "assert_positive",
                ("not_null", {"columns": ["id"]}),
                ("accepted_range", {"column": "v", "min_v": 1, "max_v": 9.5}),
                ("unique_values_non_blocking", {"columns": ("id", "v")}),
            ],
        )
        def execute(context, **kwargs):
            return None
        """
    )
    assert [(a.name, a.args, a.blocking) for a in model.audits] == [
        ("assert_positive", (), True),
        ("not_null", (("columns", "('id')"),), True),
        ("accepted_range", (("column", "'v'"), ("min_v", "1"), ("max_v", "9.5")), True),
        ("unique_values", (("columns", "('id', 'v')"),), False),
    ]
    with pytest.raises(ModelError, match="is not an audit name or"):
        _read(
            """
            from sqlmesh import model
            @model("s.m", columns={"id": "int"}, audits=[("not_null",)])
            def execute(context, **kwargs):
                return None
            """
        )


def test_an_audit_argument_the_project_s_code_builds_as_sql_is_that_sql(tmp_path: Path) -> None:
    # SQLMesh 0.236.4: ("accepted_range", {"column": exp.column("v"), "min_v": 1}) renders
    # WHERE "v" < 1, the column itself.
    project = load(
        tmp_path,
        {
            "config.yaml": CONFIG,
            "models/m.py": """
                from sqlglot import exp
                from sqlmesh import model

                @model(
                    "s.m",
                    columns={"id": "int", "v": "int"},
                    audits=[("in_range", {"column": exp.column("v"), "min_v": 1})],
                )
                def execute(context, **kwargs):
                    return None
            """,
            "audits/in_range.sql": """
                AUDIT (name in_range);
                SELECT * FROM @this_model WHERE @column < @min_v
            """,
        },
    )
    (call,) = project.models["s.m"].audits
    assert call == AuditCall("in_range", (("column", "v"), ("min_v", "1")))


def test_an_audit_argument_is_checked_as_a_sql_model_s_is(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="Spark replaces with a setting"):
        _read(
            """
            from sqlmesh import model
            @model("s.m", columns={"v": "int"}, audits=[("x", {"v": "${spark.secret}"})])
            def execute(context, **kwargs):
                return None
            """
        )
    # The same check on SQL the project's code gives (a sqlglot expression).
    with pytest.raises(ModelError, match="audit x argument v writes") as exc:
        load(
            tmp_path,
            {
                "config.yaml": CONFIG,
                "models/m.py": """
                    import sqlglot
                    from sqlmesh import model

                    @model(
                        "s.m",
                        columns={"v": "int"},
                        audits=[("x", {"v": sqlglot.parse_one("CONCAT('${a', '}', v)")})],
                    )
                    def execute(context, **kwargs):
                        return None
                """,
            },
        )
    assert exc.value.line == 7


IS_SQL = {
    "config.yaml": CONFIG + "variables:\n  source: s.parent\n",
    "models/parent.sql": """
        MODEL (name s.parent, kind FULL);
        SELECT 1 AS id, 'a' AS item
    """,
    "models/q.py": """
        from sqlglot import exp
        from sqlmesh import model
        from sqlmesh.core.macros import MacroEvaluator

        @model("s.q", is_sql=True, kind="FULL", audits=["assert_positive"], description="d")
        def entrypoint(evaluator: MacroEvaluator) -> exp.Select:
            return exp.select("id", "item").from_(evaluator.var("source"))
    """,
    "models/v.py": """
        from sqlmesh import model

        @model("s.v", is_sql=True)
        def entrypoint(evaluator):
            return "SELECT COUNT(DISTINCT id) AS n FROM s.q WHERE @start_ds <= '2030-01-01'"
    """,
    "audits/assert_positive.sql": """
        AUDIT (name assert_positive);
        SELECT * FROM @this_model WHERE id < 0
    """,
}


def test_an_is_sql_model_is_a_sql_model_with_the_query_its_function_returns(
    tmp_path: Path,
) -> None:
    # SQLMesh 0.236.4 loads ibis' ibis_full_model_sql (is_sql=True, kind="FULL") as a SQL
    # model whose query is what entrypoint(evaluator) returns, its parents read from that
    # query; without a kind an is_sql model is a VIEW, as a SQL model is.
    project = load(tmp_path, IS_SQL)
    q, v = project.models["s.q"], project.models["s.v"]
    assert q.kind.name == KindName.FULL and v.kind.name == KindName.VIEW
    assert q.query_sql == "SELECT id, item FROM s.parent"
    assert q.depends_on == ("s.parent",) and v.depends_on == ("s.q",)
    assert q.python_code is None and q.python_entry is None and q.columns == ()
    assert [a.name for a in q.audits] == ["assert_positive"] and q.description == "d"
    assert "__sluice_macro__start_ds" in (v.query_sql or "")  # filled in when the model runs
    # Its version is its query's: an edit that returns the same SQL is no change.
    before = fingerprint_models(project.models, project.audits)["s.q"].version
    path = tmp_path / "models" / "q.py"
    path.write_text(path.read_text().replace('"id", "item"', '"id",\n        "item"'))
    again = load_project(tmp_path, use_cache=False)
    assert fingerprint_models(again.models, again.audits)["s.q"].version == before


def test_an_is_sql_model_s_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="is an is_sql model") as exc:
        _read(
            """
            from sqlmesh import model
            @model("s.q", is_sql=True)
            def entrypoint(evaluator):
                return "SELECT 1 AS x"
            """
        )
    assert exc.value.line == 4
    files = {
        "config.yaml": CONFIG,
        "models/q.py": """
            from sqlmesh import model

            @model("s.q", is_sql=True)
            def entrypoint(evaluator):
                raise ValueError("no query today")
        """,
    }
    with pytest.raises(ModelError, match="no query today") as exc:
        load(tmp_path / "a", files)
    assert exc.value.path == str(tmp_path / "a" / "models" / "q.py") and exc.value.line == 5
    files["models/q.py"] = files["models/q.py"].replace(
        'raise ValueError("no query today")', "return \"SELECT * FROM read_csv('/etc/passwd')\""
    )
    with pytest.raises(SluiceError, match="read"):
        load(tmp_path / "b", files)
    files["models/q.py"] = files["models/q.py"].replace(
        "return \"SELECT * FROM read_csv('/etc/passwd')\"", 'return ["SELECT 1", "SELECT 2"]'
    )
    with pytest.raises(ModelError, match="returned 2 SQL statements"):
        load(tmp_path / "c", files)


def test_a_relative_start_counts_from_today_and_keeps_the_version(tmp_path: Path) -> None:
    # SQLMesh 0.236.4 accepts start="1 week ago" (dateparser): midnight UTC seven days ago
    # for units of a day or more, now (to the minute) for hours and less.
    project = load(
        tmp_path,
        {
            "config.yaml": CONFIG,
            "models/m.py": """
                from sqlmesh import model
                @model("s.m", columns={"id": "int"}, start="1 week ago")
                def execute(context, **kwargs):
                    return None
            """,
            "models/n.sql": """
                MODEL (name s.n, kind FULL, start '2 days ago');
                SELECT 1 AS id
            """,
        },
    )
    today = datetime.now(tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    m, n = project.models["s.m"], project.models["s.n"]
    assert m.start == to_ms(today - timedelta(days=7)) and m.start_relative == "1 week ago"
    assert n.start == to_ms(today - timedelta(days=2)) and n.start_relative == "2 days ago"
    # Tomorrow the start is a day later; the model's version is the same.
    from sluice.core.model.definition import fresh_start

    later = {
        k: fresh_start(v, datetime.now(tz=UTC) + timedelta(days=1))
        for k, v in project.models.items()
    }
    assert later["s.m"].start == to_ms(today - timedelta(days=6))
    assert fingerprint_models(later, project.audits) == fingerprint_models(
        project.models, project.audits
    )
    with pytest.raises(ModelError, match="'a while ago' is not a date") as exc:
        _read(
            """
            from sqlmesh import model
            @model("s.m", columns={"id": "int"}, start="a while ago")
            def execute(context, **kwargs):
                return None
            """
        )
    assert exc.value.line == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 week ago", "2024-03-24 00:00:00"),
        ("3 days ago", "2024-03-28 00:00:00"),
        ("2 hours ago", "2024-03-31 13:30:00"),
        ("30 minutes ago", "2024-03-31 15:00:00"),
        ("1 month ago", "2024-02-29 00:00:00"),
        ("1 year ago", "2023-03-31 00:00:00"),
        ("yesterday", "2024-03-30 00:00:00"),
        ("today", "2024-03-31 00:00:00"),
        ("in 2 days", "2024-04-02 00:00:00"),
        ("2 weeks ago", "2024-03-17 00:00:00"),
        ("a week ago", "2024-03-24 15:30:00"),
        ("now", "2024-03-31 15:30:00"),
    ],
)
def test_relative_times_as_sqlmesh_reads_them(text: str, expected: str) -> None:
    # Each value is what SQLMesh 0.236.4's to_datetime(text, relative_base=base) gives.
    from sluice.core.timeutil import relative_ms

    base = datetime(2024, 3, 31, 15, 30, tzinfo=UTC)  # now(), to the minute
    assert relative_ms(text, base) == to_ms(expected)


# -- the real projects -------------------------------------------------------------------


def _copy(name: str, tmp_path: Path) -> Path:
    source = SHARED / name
    if not source.is_dir():
        pytest.skip(f"{source} is not here (the shared compatibility projects)")
    root = tmp_path / name
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".sluice", "*.db"))
    return root


def test_sqlmesh_s_wursthall_example_plans_every_model(tmp_path: Path) -> None:
    # What SQLMesh 0.236.4 loads from it (names, kinds, time columns, batch sizes, parents).
    project = load_project(_copy("sqlmesh_wursthall", tmp_path), use_cache=False)
    incremental = KindName.INCREMENTAL_BY_TIME_RANGE
    expected = {
        "src.customer_details": (incremental, ("register_ds", "%Y-%m-%d", 200), ()),
        "src.order_item_details": (
            incremental,
            ("order_ds", "%Y-%m-%d", 100),
            ("src.customer_details", "src.menu_item_details"),
        ),
        "db.order_f": (
            incremental,
            ("order_ds", "%Y-%m-%d", 200),
            ("db.item_d", "db.order_item_f"),
        ),
        "db.customer_d": (incremental, None, ("src.customer_details",)),
        "db.order_item_f": (incremental, None, ("db.item_d", "src.order_item_details")),
        "db.item_d": (KindName.VIEW, None, ("src.menu_item_details",)),
        "src.menu_item_details": (KindName.SEED, None, ()),
    }
    assert sorted(project.models) == sorted(expected)
    for name, (kind, time, parents) in expected.items():
        model = project.models[name]
        assert (model.kind.name, model.depends_on) == (kind, parents), name
        if time is not None:
            found = (model.kind.time_column, model.kind.time_column_format, model.kind.batch_size)
            assert found == time, name
            # DATA_START_DATE_STR, computed in models/src/shared.py (which imports faker).
            assert model.start == to_ms("2022-06-01"), name
    assert [a.name for a in project.models["db.order_f"].audits] == ["assert_valid_order_totals"]


def test_sqlmesh_s_ibis_example_reads_its_is_sql_model_by_running_it(tmp_path: Path) -> None:
    # SQLMesh 0.236.4 loads 5 models. ibis_full_model_sql's query comes from ibis (Sluice's
    # `projects` extra, in the dev and runtime locks), which imports subprocess (through
    # webbrowser) and socket when it is imported: the sandboxed process lets a library
    # import them, and runs the model's function for its query.
    root = _copy("sqlmesh_ibis", tmp_path)
    project = load_project(root, use_cache=False)
    assert sorted(project.models) == [
        "ibis.full_model",
        "ibis.ibis_full_model_python",
        "ibis.ibis_full_model_sql",
        "ibis.incremental_model",
        "ibis.seed_model",
    ]
    python = project.models["ibis.ibis_full_model_python"]
    assert python.depends_on == ("ibis.incremental_model",)
    assert python.kind.name == KindName.FULL
    sql = project.models["ibis.ibis_full_model_sql"]
    assert sql.kind.name == KindName.FULL and sql.depends_on == ("ibis.incremental_model",)
    # ibis' SQL: the distinct count per item, ordered, from the table the model names.
    query = sql.query_sql.lower()
    assert "count(distinct" in query and "group by" in query and "order by" in query, query
    assert "item_id" in query and "num_orders" in query, query


def test_a_library_the_sandbox_refuses_is_named_with_what_to_do(tmp_path: Path) -> None:
    # A library may import subprocess and socket (webbrowser imports subprocess, as ibis
    # imports webbrowser) but not use them; ctypes is refused also to a library. The
    # hint says so, not "install it" (a missing module's hint, the control below).
    def files(body: str) -> dict[str, str]:
        return {
            "config.yaml": CONFIG,
            "models/q.py": f"""
                from sqlmesh import model

                @model("s.q", is_sql=True)
                def entrypoint(evaluator):
                    {body}
                    return "SELECT 1 AS x"
            """,
        }

    assert load(tmp_path / "ok", files("import webbrowser")).models["s.q"].query_sql
    with pytest.raises(ModelError, match=r"may not do subprocess\.Popen") as used:
        load(tmp_path / "run", files("import webbrowser; webbrowser.subprocess.run(['true'])"))
    assert "refuses starting processes, opening sockets" in (used.value.hint or "")
    with pytest.raises(ModelError, match="may not import") as refused:
        load(tmp_path / "a", files("import ctypes"))
    assert "loading C code (ctypes, sqlite3" in (refused.value.hint or "")
    with pytest.raises(ModelError, match="No module named") as missing:
        load(tmp_path / "b", files("import no_such_library_here"))
    assert "install what it imports" in (missing.value.hint or "")
