"""Python in projects without Spark: Python models read without running them, Python
macros run in a child process with no environment and a guard, and what each change
means for the fingerprint and the category."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from sluice.core.errors import ModelError, SluiceError
from sluice.core.model.loader import load_project
from sluice.core.model.pycode.models import read_text
from sluice.core.plan.categorize import categorize_direct
from sluice.core.snapshot.fingerprint import fingerprint_models

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "python_shop"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "shop"))


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_the_example_plans_every_model_with_the_python_parents(project: Path) -> None:
    loaded = load_project(project, use_cache=False)
    assert list(loaded.models) == [
        "pyshop.payments",
        "pyshop.customers",
        "pyshop.customer_segments",
        "pyshop.segment_counts",
    ]
    segments = loaded.models["pyshop.customer_segments"]
    assert segments.depends_on == ("pyshop.customers",)
    assert segments.columns[-1] == ("segment", "STRING")
    assert "def segment(" in (segments.python_code or "")
    assert "LOYAL_ORDERS = 3" in (segments.python_code or "")
    # The Python macro expanded on the tree: the query reads as if written by hand.
    assert "amount_cents / 100 AS amount" in (loaded.models["pyshop.payments"].query_sql or "")


def _version(root: Path, name: str = "pyshop.customer_segments") -> str:
    loaded = load_project(root, use_cache=False)
    return fingerprint_models(loaded.models, loaded.audits)[name].version


def test_a_comment_is_no_change_and_a_helper_or_constant_is(project: Path) -> None:
    before = _version(project)
    rel = "models/customer_segments.py"
    _edit(project, rel, "# orders that make a customer loyal", "# edited comment")
    _edit(project, rel, '"""One segment per customer', '"""Edited docstring. One segment')
    assert _version(project) == before
    _edit(project, rel, "LOYAL_ORDERS = 3", "LOYAL_ORDERS = 4")
    assert _version(project) != before
    _edit(project, rel, "LOYAL_ORDERS = 4", "LOYAL_ORDERS = 3")
    _edit(project, rel, 'otherwise("occasional")', 'otherwise("rare")')
    assert _version(project) != before


def test_a_helper_in_a_project_module_is_part_of_the_code(project: Path) -> None:
    (project / "helpers").mkdir()
    (project / "helpers" / "__init__.py").write_text("")
    (project / "helpers" / "tiers.py").write_text("def tier(x):\n    return x * 2\n")
    _edit(
        project,
        "models/customer_segments.py",
        "from sqlmesh import ExecutionContext, model",
        "from helpers.tiers import tier\nfrom sqlmesh import ExecutionContext, model",
    )
    _edit(
        project,
        "models/customer_segments.py",
        "return segment(customers)",
        "return segment(tier(customers))",
    )
    before = _version(project)
    (project / "helpers" / "tiers.py").write_text("def tier(x):\n    return x * 3\n")
    assert _version(project) != before


def test_python_model_categories(project: Path) -> None:
    old = load_project(project, use_cache=False).models["pyshop.customer_segments"]
    _edit(
        project,
        "models/customer_segments.py",
        '"segment": "string",',
        '"segment": "string",\n        "tier": "int",',
    )
    _edit(
        project,
        "models/customer_segments.py",
        '.alias("segment"),',
        '.alias("segment"),\n        F.lit(1).alias("tier"),',
    )
    added = load_project(project, use_cache=False).models["pyshop.customer_segments"]
    assert categorize_direct(old, added)  # only a declared column added
    _edit(project, "models/customer_segments.py", "LOYAL_ORDERS = 3", "LOYAL_ORDERS = 5")
    changed = load_project(project, use_cache=False).models["pyshop.customer_segments"]
    assert not categorize_direct(added, changed)


def _read(src: str) -> list[object]:
    return list(read_text(textwrap.dedent(src), "models/m.py", "/p"))


def test_decorator_arguments_must_be_literals_and_parents_known() -> None:
    with pytest.raises(ModelError) as exc:
        _read(
            """
            from sqlmesh import model
            @model("s.m", columns=make_columns())
            def execute(context, start, end, execution_time, **kwargs):
                return None
            """
        )
    assert exc.value.line == 3 and "not a literal" in str(exc.value)
    with pytest.raises(ModelError, match="depends_on"):
        _read(
            """
            from sqlmesh import model
            @model("s.m", columns={"a": "int"})
            def execute(context, start, end, execution_time, **kwargs):
                name = "s." + "x"
                return context.spark.table(context.resolve_table(name))
            """
        )
    models = _read(
        """
        from sqlmesh import model
        from sqlmesh.core.model.kind import ModelKindName
        @model("s.m", columns={"a": "int", "ds": "date"}, depends_on=["s.x"],
               kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds"))
        def execute(context, start, end, execution_time, **kwargs):
            return None
        """
    )
    (model,) = models
    assert model.depends_on == ("s.x",) and model.kind.time_column == "ds"  # type: ignore[attr-defined]


def test_python_macro_errors_name_the_file_and_line(project: Path) -> None:
    _edit(
        project,
        "macros/money.py",
        "    return exp.Div(",
        "    raise ValueError('no money')\n    return exp.Div(",
    )
    with pytest.raises(SluiceError) as exc:
        load_project(project, use_cache=False)
    text = str(exc.value)
    lines = (project / "macros" / "money.py").read_text().splitlines()
    raised = lines.index("    raise ValueError('no money')") + 1
    assert f"money.py:{raised}" in text and "no money" in text and "payments.sql" in text


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("open('/etc/passwd').read()", "may read only the project's files"),
        ("open('out.txt', 'w')", "may not write files"),
        ("__import__('subprocess').run(['true'])", "may not"),
        ("__import__('socket').create_connection(('127.0.0.1', 5432))", "may not"),
        ("__import__('ctypes')", "may not import ctypes"),
        # subprocess is imported before the guard (libraries import it): its one way to
        # start a process without an audit event is a refusal, also after a reload.
        ("__import__('subprocess')._fork_exec()", "may not do subprocess.Popen"),
        ("__import__('_posixsubprocess').fork_exec()", "may not do subprocess.Popen"),
        (
            "import importlib; importlib.reload(__import__('subprocess'))._fork_exec()",
            "may not do subprocess.Popen",
        ),
        (
            "import _imp, importlib.util; _imp.create_dynamic(importlib.util.find_spec('_posixsubprocess'))",
            "may not import _posixsubprocess",
        ),
        # A new interpreter would start without the guard (hooks are per interpreter).
        ("__import__('_xxsubinterpreters').create()", "may not import _xxsubinterpreters"),
    ],
)
def test_a_macro_finds_nothing_to_use(project: Path, body: str, refused: str) -> None:
    _edit(project, "macros/money.py", "    return exp.Div(", f"    {body}\n    return exp.Div(")
    with pytest.raises(SluiceError, match=refused):
        load_project(project, use_cache=False)
    assert not (project / "out.txt").exists()


def test_a_macro_sees_no_environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_GITHUB_TOKEN", "ghp_secret")
    _edit(
        project,
        "macros/money.py",
        "    return exp.Div(",
        # PWD: bubblewrap's, the sandbox's working directory (no secret)
        "    import os\n    assert set(os.environ) <= {'LC_CTYPE', 'PWD'}, dict(os.environ)\n    return exp.Div(",
    )
    assert load_project(project, use_cache=False).models["pyshop.payments"]


def test_a_caller_that_runs_no_python_refuses_with_its_reason(project: Path) -> None:
    from sluice.core.model.pycode import Refusal

    with pytest.raises(ModelError, match=r"Python \(models/customer_segments.py, macros/") as exc:
        load_project(project, use_cache=False, python=Refusal("ask the operator"))
    assert exc.value.hint == "ask the operator"
    # The files that decided it are named, and the error points at the first of them.
    refusal = Refusal("changed", ("macros/money.py",))
    with pytest.raises(ModelError, match=r"Python \(macros/money.py\) is not run") as exc:
        load_project(project, use_cache=False, python=refusal)
    assert str(exc.value.path).endswith("macros/money.py") and exc.value.line == 1


def test_a_python_model_s_unit_test_feeds_every_parent_and_refuses_ctes(project: Path) -> None:
    from sluice.core.spark import testing

    (step,) = testing.unit_test_steps(load_project(project, use_cache=False), None, 0)
    run = step["python"]
    assert [i["table"] for i in step["inputs"]] == ["pyshop.customers"]
    # The function's resolve_table answers the input view, and the query reads its rows.
    assert run["model"]["tables"] == [["pyshop.customers", step["inputs"][0]["view"]]]
    assert step["query"] == f"SELECT * FROM {run['view']}"
    assert (run["start"], run["end"]) == (0, 86_399_999)  # the day, end inclusive
    _edit(
        project,
        "tests/test_customer_segments.yaml",
        "  outputs:\n",
        "  outputs:\n    ctes:\n      x:\n        rows:\n          - a: 1\n",
    )
    with pytest.raises(ModelError, match="is a Python model: it has no CTEs to test") as err:
        testing.unit_test_steps(load_project(project, use_cache=False), None, 0)
    assert err.value.line == 3


def test_context_var_reads_config_variables_that_are_part_of_the_version(project: Path) -> None:
    from sluice.core.model.pycode.run import Context
    from sluice.core.spark.render import python_spec

    rel = "models/customer_segments.py"
    _edit(project, rel, ">= LOYAL_ORDERS", '>= context.var("loyal_orders", LOYAL_ORDERS)')
    _edit(project, rel, "def segment(customers: DataFrame)", "def segment(context, customers)")
    _edit(project, rel, "return segment(customers)", "return segment(context, customers)")
    config = project / "config.yaml"
    config.write_text(config.read_text() + "variables:\n  loyal_orders: 5\n  other: x\n")
    model = load_project(project, use_cache=False).models["pyshop.customer_segments"]
    assert model.python_variables == (("loyal_orders", 5),)  # only what the code reads
    spec = python_spec(model, str(project), {})
    assert Context(None, {}, spec["variables"]).var("LOYAL_ORDERS") == 5
    assert Context(None, {}, spec["variables"]).var("missing", 7) == 7
    before = _version(project)
    config.write_text(config.read_text().replace("other: x", "other: y"))
    assert _version(project) == before
    config.write_text(config.read_text().replace("loyal_orders: 5", "loyal_orders: 6"))
    assert _version(project) != before
    # A name that is not a literal could be any variable: the model depends on them all.
    _edit(project, rel, 'context.var("loyal_orders"', "context.var(NAME")
    _edit(project, rel, "LOYAL_ORDERS = 3", 'LOYAL_ORDERS = 3\nNAME = "loyal_orders"')
    model = load_project(project, use_cache=False).models["pyshop.customer_segments"]
    assert [n for n, _ in model.python_variables] == ["loyal_orders", "other"]
