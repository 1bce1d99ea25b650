"""The Python macro process without Spark: calls answered ahead (read from the model
files by the child) are the answers an explicit call gets, and `evaluator.columns_to_types`
answers with the columns the loader knows."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from sqlglot import exp

from sluice.core.errors import SluiceError
from sluice.core.model import macros
from sluice.core.model.loader import load_project
from sluice.core.model.macro.registry import MacroError
from sluice.core.model.pycode import child
from sluice.core.model.pycode import macros as pycode_macros
from sluice.core.model.pycode.macros import PythonMacros
from sluice.core.model.pycode.shim.sqlmesh.core.macros import MacroEvaluator

MACROS = """\
import time

from sqlglot import exp
from sqlmesh import macro

CALLS = []


@macro()
def cents(evaluator, column):
    return exp.Mul(this=exp.Paren(this=column), expression=exp.Literal.number(100))


@macro()
def tagged(evaluator, value, tag: str = "none"):
    CALLS.append(value.sql())
    return f"'{tag}:{value.sql()}:{len(CALLS) > 0}'"


@macro()
def broken(evaluator, value):
    raise ValueError(f"broken on {value.sql()}")


@macro()
def slow(evaluator, value):
    time.sleep(float(value.this))
    return value
"""


def _project(root: Path, models: dict[str, str], macros: str = MACROS) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "macros" / "m.py").write_text(macros)
    (root / "external_models.yaml").write_text("- name: raw.s\n  columns:\n    a: int\n")
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    for name, body in models.items():
        (root / "models" / f"{name}.sql").write_text(
            f"MODEL (name shop.{name}, kind FULL);\n\n{textwrap.dedent(body)}"
        )
    return root


def _macros(root: Path, ahead: bool) -> PythonMacros:
    files = sorted((root / "models").glob("*.sql")) if ahead else []
    macros = PythonMacros(root)
    macros.start([root / "macros" / "m.py"], {}, read_ahead=files)
    return macros


def _settle(macros: PythonMacros, seconds: float = 3.0) -> None:
    """Give the child time to read the files ahead (it has nothing else to do)."""
    assert macros.names
    time.sleep(seconds)


def test_the_child_finds_the_calls_whose_arguments_are_plain_sql() -> None:
    text = textwrap.dedent(
        """\
        SELECT
          @cents(a.x + 1) AS y,            -- @cents(in_a_comment) is no call
          @CENTS( f(a, 'b,)c' ), [1, 2] ), /* @cents(not closed */
          @tagged(x, tag := 'q'),
          @cents(@other(x)),
          @unknown(z),
          '@cents(in, a, string)'
        FROM t
        """
    )
    found = child._calls_in(text, frozenset({"cents", "tagged"}))
    assert found == [
        ("cents", ["a.x + 1"]),
        ("CENTS", ["f(a, 'b,)c' )", "[1, 2]"]),
        ("tagged", ["x", "tag := 'q'"]),  # @cents(@other(x)) not: its argument is a macro
    ]  # nor the calls in comments (-- and /* */) and strings: never run, not even ahead
    assert child._arguments("x, (y", 0) is None
    assert child._arguments(")", 0) == []
    request = child._ahead_request("tagged", ["x", "tag := 'q'"], "spark")
    assert request == {
        "name": "tagged",
        "args": ["x"],
        "kwargs": {"tag": "'q'"},
        "dialect": "spark",
    }
    assert child._ahead_request("cents", ["SELECT FROM ("], "spark") is None


def test_answers_read_ahead_are_those_of_explicit_calls(tmp_path: Path) -> None:
    root = _project(
        tmp_path / "p",
        {
            f"m{i}": f"SELECT @cents(x + {i}) AS v, @tagged(y, tag := 'k{i}') AS t FROM raw.s"
            for i in range(30)
        },
    )
    ahead, asked = _macros(root, ahead=True), _macros(root, ahead=False)
    try:
        _settle(ahead)
        for i in range(30):
            for name, args, kwargs in (
                ("cents", [f"x + {i}"], {}),
                ("tagged", ["y"], {"tag": f"'k{i}'"}),
            ):
                assert ahead.call(name, args, kwargs, "spark") == asked.call(
                    name, args, kwargs, "spark"
                )
        assert ahead.calls == 60 and ahead._next_id == 0  # nothing had to be asked
        assert asked._next_id == 60
        # Other arguments than the files hold, or another dialect: asked as before.
        assert ahead.call("cents", ["z"], {}, "spark") == ["(z) * 100"]
        assert ahead.call("cents", ["x + 1"], {}, "duckdb") == ["(x + 1) * 100"]
        assert ahead._next_id == 2
    finally:
        ahead.close()
        asked.close()


def test_an_error_made_ahead_is_raised_only_by_the_call_and_names_the_macro_line(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path / "p",
        {
            # Never called: the @IF drops it. Called: the second model.
            "dead": "SELECT @IF(1 = 2, @broken(a), 1) AS v FROM raw.s",
            "live": "SELECT @broken(b) AS v FROM raw.s",
        },
    )
    macros = _macros(root, ahead=True)
    try:
        _settle(macros, 1.5)
        with pytest.raises(MacroError) as exc:
            macros.call("broken", ["b"], {}, "spark")
        line = MACROS.splitlines().index('    raise ValueError(f"broken on {value.sql()}")') + 1
        assert f"m.py:{line}" in str(exc.value) and "broken on b" in str(exc.value)
        assert macros._next_id == 0
    finally:
        macros.close()
    (root / "models" / "live.sql").unlink()
    assert load_project(root, use_cache=False).models["shop.dead"].query_sql == (
        "SELECT 1 AS v FROM raw.s"
    )
    (root / "models" / "live.sql").write_text(
        "MODEL (name shop.live, kind FULL);\nSELECT\n @broken(b) AS v FROM raw.s"
    )
    with pytest.raises(SluiceError) as exc:
        load_project(root, use_cache=False)
    assert f"m.py:{line}" in str(exc.value) and "live.sql:3" in str(exc.value)


def test_a_slow_macro_ends_the_reading_ahead_and_is_asked_as_before(tmp_path: Path) -> None:
    root = _project(
        tmp_path / "p",
        {"a": "SELECT @slow(2) AS v FROM raw.s", "b": "SELECT @cents(q) AS v FROM raw.s"},
    )
    macros = _macros(root, ahead=True)
    try:
        _settle(macros, 1.5)
        # The slow call was cut short ahead (and the rest not read): both are asked.
        assert macros.call("slow", ["2"], {}, "spark") == ["2"]
        assert macros.call("cents", ["q"], {}, "spark") == ["(q) * 100"]
        assert macros._next_id == 2
    finally:
        macros.close()


def test_a_plain_project_load_asks_almost_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = {f"m{i:02}": f"SELECT @cents(p.v + {i}) AS v FROM raw.p AS p" for i in range(40)}
    models["odd"] = "@DEF(n, 7);\nSELECT @cents(@n) AS v FROM raw.p"  # a macro argument
    root = _project(tmp_path / "p", models)
    (root / "external_models.yaml").write_text(
        "- name: raw.p\n  columns:\n    v: int\n"
    )  # no raw.s
    asked: list[str] = []
    real = PythonMacros._ask

    def counted(self: PythonMacros, name: str, *rest: object) -> object:
        asked.append(name)
        return real(self, name, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(PythonMacros, "_ask", counted)
    project = load_project(root, use_cache=False)
    assert project.models["shop.m07"].query_sql == "SELECT (p.v + 7) * 100 AS v FROM raw.p AS p"
    assert project.models["shop.odd"].query_sql == "SELECT (7) * 100 AS v FROM raw.p"
    # The first files may be asked for while the child is starting (more of them on a busy
    # machine: 12 of 41 once); without reading ahead all 41 would be. @cents(@n) always is.
    assert len(asked) <= len(models) // 2 and "cents" in asked


# -- columns_to_types -----------------------------------------------------------------

COLUMNS = """\
from sqlglot import exp
from sqlmesh import macro


@macro()
def typed(evaluator, table):
    columns = evaluator.columns_to_types(table.sql())
    assert all(isinstance(t, exp.DataType) for t in columns.values())
    return [
        exp.cast(exp.column(name), kind).as_(f"{name}_{kind.this.value.lower()}")
        for name, kind in columns.items()
    ]


@macro()
def prefixed(evaluator, table, prefix):
    columns = evaluator.columns_to_types(table)
    return [exp.column(c).as_(prefix.name + c) for c in columns]
"""


def test_columns_to_types_knows_externals_seeds_declared_and_upstream_sql(tmp_path: Path) -> None:
    root = _project(
        tmp_path / "p",
        {
            # a_child sorts before z_parent: it is loaded again once z_parent is known.
            "a_child": "SELECT @typed(shop.z_parent) FROM shop.z_parent",
            "b_external": "SELECT @prefixed(raw.events, 'e_') FROM raw.events",
            "c_seed": "SELECT @typed(shop.s) FROM shop.s",
            "d_declared": "SELECT @typed(shop.declared) FROM shop.declared",
            "z_parent": "SELECT id, CAST(amount AS DECIMAL(10, 2)) AS amount, note FROM raw.events",
        },
        COLUMNS,
    )
    (root / "external_models.yaml").write_text(
        "- name: raw.s\n  columns:\n    a: int\n- name: raw.events\n  columns:\n    id: int\n    amount: double\n    note: string\n"
    )
    (root / "seeds").mkdir()
    (root / "seeds" / "s.csv").write_text("k,label\n1,a\n")
    (root / "models" / "s.sql").write_text(
        "MODEL (name shop.s, kind SEED (path '../seeds/s.csv'));"
    )
    (root / "models" / "declared.sql").write_text(
        "MODEL (name shop.declared, kind FULL, columns (k BIGINT, at TIMESTAMP));\n"
        "SELECT 1 AS k, NULL AS at"
    )
    project = load_project(root)
    assert project.models["shop.a_child"].query_sql == (
        "SELECT CAST(id AS UNKNOWN) AS id_unknown, CAST(amount AS DECIMAL(10, 2)) AS "
        "amount_decimal, CAST(note AS UNKNOWN) AS note_unknown FROM shop.z_parent"
    )
    assert project.models["shop.b_external"].query_sql == (
        "SELECT id AS e_id, amount AS e_amount, note AS e_note FROM raw.events"
    )
    seed = project.models["shop.c_seed"].query_sql or ""
    assert "CAST(k AS" in seed and "AS label_text" in seed
    assert project.models["shop.d_declared"].query_sql == (
        "SELECT CAST(k AS BIGINT) AS k_bigint, CAST(at AS TIMESTAMP) AS at_timestamptz "
        "FROM shop.declared"
    )
    # The models that asked are not cached: a change of the parent's columns shows.
    parent = root / "models" / "z_parent.sql"
    parent.write_text(parent.read_text().replace(", note FROM", ", note, 1 AS extra FROM"))
    again = load_project(root)
    assert "extra_unknown" in (again.models["shop.a_child"].query_sql or "")


@pytest.mark.parametrize(
    ("parent", "why"),
    [
        ("SELECT * FROM raw.x", "does not know the columns of shop.z_parent"),
        (None, "does not know the columns of shop.z_parent"),
    ],
)
def test_columns_of_a_table_sluice_cannot_know_fail_naming_the_macro_line(
    tmp_path: Path, parent: str | None, why: str
) -> None:
    models = {"a_child": "SELECT\n  @typed(shop.z_parent)\nFROM shop.z_parent"}
    if parent is not None:
        models["z_parent"] = parent
    root = _project(tmp_path / "p", models, COLUMNS)
    with pytest.raises(SluiceError) as exc:
        load_project(root, use_cache=False)
    text = str(exc.value)
    line = COLUMNS.splitlines().index("    columns = evaluator.columns_to_types(table.sql())") + 1
    assert why in text and f"m.py:{line}" in text and "a_child.sql:4" in text, text


def test_the_evaluator_shape_and_what_it_does_not_offer() -> None:
    known = {"shop.t": [("id", "int"), ("tags", "array<string>")]}
    evaluator = MacroEvaluator("spark", {"Region": "eu"}, known.get)
    for given in ("shop.t", "SHOP.T", exp.to_table("shop.t"), exp.column("t", table="shop")):
        columns = evaluator.columns_to_types(given)
        assert list(columns) == ["id", "tags"]
        assert columns["tags"] == exp.DataType.build("array<string>")
    assert evaluator.var("region") == "eu" and evaluator.locals["region"] == "eu"
    # SQLMesh's time variables, as placeholders the model's build fills in (issue 41).
    assert evaluator.locals["start_date"] == exp.column("__sluice_macro__start_date")
    assert {k for k in evaluator.locals if k != "region"} == macros.TIME_VARIABLES
    with pytest.raises(LookupError, match=r"columns of shop\.other"):
        evaluator.columns_to_types("shop.other")
    with pytest.raises(AttributeError, match="get_snapshot is not offered by Sluice"):
        evaluator.get_snapshot("shop.t")


def test_the_reading_ahead_is_off_without_macro_files(tmp_path: Path) -> None:
    (tmp_path / "macros").mkdir()
    with pycode_macros.active(tmp_path, {}, read_ahead=[tmp_path / "x.sql"]) as macros:
        assert macros is None


def test_the_process_started_early_ends_when_the_load_fails_before_using_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p", {"a": "SELECT @cents(a) AS v FROM raw.s"})
    (root / "config.yaml").write_text("model_defaults: [not, a, mapping\n")
    started: list[PythonMacros] = []
    spawn = pycode_macros.spawn

    def recorded(at: Path) -> PythonMacros | None:
        macros = spawn(at)
        assert macros is not None
        started.append(macros)
        return macros

    monkeypatch.setattr(pycode_macros, "spawn", recorded)
    with pytest.raises(SluiceError, match=r"config\.yaml"):
        load_project(root, use_cache=False)
    assert len(started) == 1 and started[0]._process.poll() is not None
    # A caller that runs no Python starts nothing.
    from sluice.core.model.pycode import Refusal

    with pytest.raises(SluiceError):
        load_project(root, use_cache=False, python=Refusal("no"))
    assert len(started) == 1


def test_a_chain_of_models_asking_columns_loads_in_any_file_order(tmp_path: Path) -> None:
    # a reads b's columns, b reads c's, c reads d's: the reverse of the files' order.
    models = {
        "a": "SELECT @prefixed(shop.b, 'a_') FROM shop.b",
        "b": "SELECT @prefixed(shop.c, 'b_') FROM shop.c",
        "c": "SELECT @prefixed(shop.d, 'c_') FROM shop.d",
        "d": "SELECT 1 AS x, 2 AS y",
        # A parent known only as SELECT *, after its child in the files' order: an error,
        # once (the child is not loaded again and again).
        "e": "SELECT @prefixed(shop.f, 'e_') FROM shop.f",
        "f": "SELECT * FROM shop.d",
    }
    root = _project(tmp_path / "p", models, COLUMNS)
    with pytest.raises(SluiceError) as exc:
        load_project(root, use_cache=False)
    assert "does not know the columns of shop.f" in str(exc.value) and "e.sql" in str(exc.value)
    (root / "models" / "e.sql").unlink()
    project = load_project(root, use_cache=False)
    assert project.models["shop.a"].query_sql == (
        "SELECT b_c_x AS a_b_c_x, b_c_y AS a_b_c_y FROM shop.b"
    )


def test_what_the_evaluator_does_not_offer_names_the_member_and_the_macro_line(
    tmp_path: Path,
) -> None:
    source = MACROS + (
        "\n\n@macro()\ndef adapter(evaluator):\n    return evaluator.engine_adapter.dialect\n"
    )
    root = _project(tmp_path / "p", {"a": "SELECT\n  @adapter() AS v FROM raw.s"}, source)
    with pytest.raises(SluiceError) as exc:
        load_project(root, use_cache=False)
    line = source.splitlines().index("    return evaluator.engine_adapter.dialect") + 1
    text = str(exc.value)
    assert "engine_adapter is not offered by Sluice" in text, text
    assert f"m.py:{line}" in text and "a.sql:4" in text, text
