"""Output columns drive categories (issue 42, point 1): a model whose query takes a
parent's columns through a star is reshaped when they change, planned as directly
modified (as SQLMesh 0.236.4 plans it) and rebuilt; a model reading columns by name keeps
its table and is narrowed out. The rule is ``sluice/core/plan/narrowing.py``'s.

SQLMesh's answers, where a test compares with them, were read from SQLMesh 0.236.4 on the
same projects (DuckDB gateway): every star child below is "directly modified,
NON_BREAKING, rebuilt" when the parent gains a column and "directly modified, BREAKING"
when it loses one; ``STRUCT(*)`` and ``HASH(*)`` children are "indirect non-breaking,
kept" there, whose values are then stale: Sluice is stricter (breaking, rebuilt).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import ModelError, PlanError
from sluice.core.model.definition import Project
from sluice.core.plan.plan import ModelChange, Plan
from sluice.core.snapshot.snapshot import Category
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-11")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
PARENT = "MODEL (name s.p, kind FULL);\nSELECT 1 AS id, 'x' AS name"
WIDER = "MODEL (name s.p, kind FULL);\nSELECT 1 AS id, 'x' AS name, 2 AS extra"
NARROWER = "MODEL (name s.p, kind FULL);\nSELECT 1 AS id"


def plan(project: Project, base: Plan | None = None, env: str = "prod", **kw: object) -> Plan:
    return plan_of(project, base, env, end=END, **kw)


def changes(result: Plan) -> dict[str, ModelChange]:
    return {c.name: c for c in (*result.directly_modified, *result.indirectly_modified)}


def _replan(
    tmp_path: Path, files: dict[str, str], edits: dict[str, str], **kw: object
) -> tuple[Plan, Plan]:
    prod = plan(load(tmp_path / "before", files))
    return prod, plan(load(tmp_path / "after", {**files, **edits}), prod, "pr_1", **kw)


def _child(query: str, kind: str = "FULL") -> dict[str, str]:
    return {
        "config.yaml": CONFIG,
        "models/p.sql": PARENT,
        "models/c.sql": f"MODEL (name s.c, kind {kind});\n{query}",
    }


STAR_CHILDREN = [
    "SELECT * FROM s.p",
    "SELECT t.* FROM s.p AS t",
    "SELECT * EXCEPT (name) FROM s.p",
    "SELECT * REPLACE (UPPER(name) AS name) FROM s.p",
    "WITH c AS (SELECT * FROM s.p) SELECT * FROM c",
    "WITH c AS (SELECT * FROM s.p) SELECT c.* FROM c",
    "SELECT * FROM (SELECT * FROM s.p) AS q",
    "SELECT q.*, 1 AS one FROM (SELECT * FROM s.p WHERE id > 0) AS q",
]


@pytest.mark.parametrize("query", STAR_CHILDREN)
def test_a_star_child_of_a_parent_that_gains_a_column_is_rebuilt_with_it(
    tmp_path: Path, query: str
) -> None:
    prod, result = _replan(tmp_path, _child(query), {"models/p.sql": WIDER})
    child = changes(result)["s.c"]
    # As SQLMesh: directly modified (its query renders to one more column), non-breaking,
    # a new version built in the PR's environment (and taken by prod on promotion).
    assert child in result.directly_modified
    assert (child.category, child.reshaped_by) == (Category.NON_BREAKING, ("s.p",))
    assert child.rebuilds and result.snapshot("s.c").version != prod.snapshot("s.c").version
    assert "s.c" in [b.name for b in result.backfill]
    assert child.columns is not None and child.columns.added == ("extra",), child.columns
    assert "-- columns of s.p: id, name\n+-- columns of s.p: id, name, extra" in child.diff
    assert result.to_json()["directly_modified"][1]["reshaped_by"] == ["s.p"]


@pytest.mark.parametrize("query", STAR_CHILDREN)
def test_a_star_child_of_a_parent_that_loses_a_column_is_breaking(
    tmp_path: Path, query: str
) -> None:
    # `name` is renamed `nick` (EXCEPT and REPLACE name `id` here, which stays).
    query = query.replace("EXCEPT (name)", "EXCEPT (id)").replace(
        "UPPER(name) AS name", "-id AS id"
    )
    renamed = "MODEL (name s.p, kind FULL);\nSELECT 1 AS id, 'x' AS nick"
    _, result = _replan(tmp_path, _child(query), {"models/p.sql": renamed})
    child = changes(result)["s.c"]
    assert child in result.directly_modified and child.category == Category.BREAKING
    assert child.columns is not None and "name" in child.columns.removed


def test_a_cte_star_read_by_name_is_rebuilt_as_sqlmesh_does(tmp_path: Path) -> None:
    # Its output is the same, but its CTE's rendered query takes the new column:
    # SQLMesh plans it directly modified, non-breaking, rebuilt; so does Sluice.
    files = _child("WITH c AS (SELECT * FROM s.p) SELECT id FROM c")
    _, result = _replan(tmp_path, files, {"models/p.sql": WIDER})
    child = changes(result)["s.c"]
    assert (child.category, child.reshaped_by, child.rebuilds) == (
        Category.NON_BREAKING,
        ("s.p",),
        True,
    )
    assert child.columns is not None and child.columns.added == () and not child.columns.unknown


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, STRUCT(*) AS h FROM s.p",
        "SELECT id, HASH(*) AS h FROM s.p",
        "SELECT t.id, MD5(TO_JSON(STRUCT(t.*))) AS h FROM s.p AS t",
        "WITH c AS (SELECT * FROM s.p) SELECT id, HASH(*) AS h FROM c",
    ],
)
def test_a_struct_or_hash_of_every_column_is_breaking_stricter_than_sqlmesh(
    tmp_path: Path, query: str
) -> None:
    # `h` holds every column of s.p: its value changes in every row. SQLMesh keeps this
    # model's table (indirect non-breaking), stale; Sluice rebuilds it and its children.
    files = {**_child(query), "models/g.sql": "MODEL (name s.g, kind FULL);\nSELECT id FROM s.c"}
    _, result = _replan(tmp_path, files, {"models/p.sql": WIDER})
    found = changes(result)
    assert (found["s.c"].category, found["s.c"].reshaped_by) == (Category.BREAKING, ("s.p",))
    assert found["s.c"].columns is not None and found["s.c"].columns.changed == ("h",)
    assert found["s.g"].category == Category.BREAKING and found["s.g"].rebuilds
    assert result.unaffected == ()


def test_distinct_star_is_breaking(tmp_path: Path) -> None:
    # A new column takes part in the de-duplication: the rows may change. (SQLMesh calls
    # it non-breaking, so its children keep tables built from the old rows: stricter.)
    _, result = _replan(tmp_path, _child("SELECT DISTINCT * FROM s.p"), {"models/p.sql": WIDER})
    child = changes(result)["s.c"]
    assert child.category == Category.BREAKING and child.rebuilds
    assert child.columns is not None and child.columns.rows_changed


def test_a_child_reading_only_unchanged_columns_by_name_keeps_its_table(tmp_path: Path) -> None:
    files = {
        **_child("SELECT id, UPPER(name) AS name FROM s.p WHERE id > 0"),
        "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT p.id, p.name FROM s.p AS p",
        "models/e.sql": "MODEL (name s.e, kind FULL);\nSELECT COUNT(*) AS n FROM s.p",
    }
    prod, result = _replan(tmp_path, files, {"models/p.sql": WIDER})
    assert [c.name for c in result.directly_modified] == ["s.p"]
    assert result.indirectly_modified == ()
    assert set(result.unaffected) == {"s.c", "s.d", "s.e"}
    for name in ("s.c", "s.d", "s.e"):
        assert result.snapshot(name).version == prod.snapshot(name).version
    assert [b.name for b in result.backfill] == ["s.p"]


def test_a_chain_of_star_children_is_rebuilt_and_a_named_reader_below_is_not(
    tmp_path: Path,
) -> None:
    files = {
        **_child("SELECT * FROM s.p"),
        "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT *, 1 AS one FROM s.c",
        "models/e.sql": "MODEL (name s.e, kind FULL);\nSELECT id, one FROM s.d",
        "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT * FROM s.d",
    }
    prod, result = _replan(tmp_path, files, {"models/p.sql": WIDER})
    found = changes(result)
    assert found["s.c"].reshaped_by == ("s.p",) and found["s.d"].reshaped_by == ("s.c",)
    assert found["s.v"].reshaped_by == ("s.d",) and found["s.v"].rebuilds
    assert {found[n].category for n in ("s.c", "s.d", "s.v")} == {Category.NON_BREAKING}
    assert result.unaffected == ("s.e",)
    assert result.snapshot("s.e").version == prod.snapshot("s.e").version
    assert "s.v" in result.create_views


def test_a_python_parent_s_declared_columns_reach_its_star_child(tmp_path: Path) -> None:
    code = """
from sqlmesh import ExecutionContext, model


@model("s.py", kind="FULL", columns={COLUMNS})
def execute(context: ExecutionContext, start, end, execution_time, **kwargs):
    return context.spark.sql("SELECT 1 AS id, 'x' AS name")
"""
    files = {
        "config.yaml": CONFIG,
        "models/py.py": code.replace("{COLUMNS}", '{"id": "int", "name": "string"}'),
        "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT * FROM s.py",
        "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT id FROM s.py",
    }
    wider = code.replace("{COLUMNS}", '{"id": "int", "name": "string", "extra": "int"}')
    _, result = _replan(tmp_path, files, {"models/py.py": wider})
    found = changes(result)
    assert found["s.py"].category == Category.NON_BREAKING
    assert (found["s.c"].category, found["s.c"].reshaped_by) == (Category.NON_BREAKING, ("s.py",))
    assert found["s.c"].rebuilds
    assert found["s.d"].category == Category.NON_BREAKING and not found["s.d"].rebuilds


def test_star_macro_children_change_their_own_query(tmp_path: Path) -> None:
    # @STAR is expanded when loaded: the new column is in the child's own query.
    files = _child("SELECT @STAR(s.p) FROM s.p")
    files["models/p.sql"] = "MODEL (name s.p, kind FULL, columns (id INT, name STRING));\nSELECT 1 AS id, 'x' AS name"  # fmt: skip
    wider = "MODEL (name s.p, kind FULL, columns (id INT, name STRING, extra INT));\nSELECT 1 AS id, 'x' AS name, 2 AS extra"  # fmt: skip
    _, result = _replan(tmp_path, files, {"models/p.sql": wider})
    child = changes(result)["s.c"]
    assert child.category == Category.NON_BREAKING and child.rebuilds
    assert child.reshaped_by == () and "+  CAST(extra AS INT) AS extra" in child.diff


def test_a_name_a_new_column_may_capture_is_a_reshape(tmp_path: Path) -> None:
    # `x` was s.b's; once s.a has an `x` too, Spark resolves it differently (or refuses).
    files = {
        "config.yaml": CONFIG,
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id",
        "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT 1 AS id, 2 AS x",
        "models/c.sql": "MODEL (name s.c, kind FULL);\n"
        "SELECT a.id, x FROM s.a AS a JOIN s.b AS b ON a.id = b.id",
        "models/d.sql": "MODEL (name s.d, kind FULL);\n"
        "SELECT b.id FROM s.b AS b WHERE EXISTS (SELECT 1 FROM s.a AS a WHERE a.id = b.id AND x > 0)",
        "models/e.sql": "MODEL (name s.e, kind FULL);\n"
        "SELECT a.id, b.x FROM s.a AS a JOIN s.b AS b ON a.id = b.id",
    }
    edit = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 3 AS x"}
    # In s.c, `x` is now both tables' column: Spark refuses it (AMBIGUOUS_REFERENCE), and
    # so does the load (sluice/core/model/column_check.py), naming s.c's file and line.
    with pytest.raises(ModelError, match=r"s\.c reads column 'x', which is ambiguous"):
        _replan(tmp_path / "ambiguous", files, edit)
    files["models/c.sql"] = files["models/c.sql"].replace("SELECT a.id, x", "SELECT a.id, b.x")
    _, result = _replan(tmp_path, files, edit)
    found = changes(result)
    # SQLMesh: directly modified, breaking (its rendered query changed).
    assert found["s.d"].reshaped_by == ("s.a",) and found["s.d"].rebuilds
    assert found["s.d"].category == Category.BREAKING
    assert {"s.c", "s.e"} <= set(result.unaffected)  # every name they read says whose it is


def test_a_forward_only_star_child_keeps_its_table_and_its_view_is_made_again(
    tmp_path: Path,
) -> None:
    files = _child(
        "SELECT * FROM s.p", kind="INCREMENTAL_BY_UNIQUE_KEY (unique_key id, forward_only true)"
    )
    prod, result = _replan(tmp_path, files, {"models/p.sql": WIDER})
    child = changes(result)["s.c"]
    assert (child.category, child.reshaped_by) == (Category.FORWARD_ONLY, ("s.p",))
    assert not child.rebuilds and child.columns is not None and child.columns.added == ("extra",)
    from sluice.core.spark.render import view_steps

    views = {v["view"] for v in view_steps(result, {"s.p": "x", "s.c": child.version})["views"]}
    assert any(v.endswith(".c") for v in views)  # a view keeps the columns it was made with
    # Losing a column is a destructive change of the kept table, refused by default.
    with pytest.raises(PlanError, match=r"forward-only change to s\.c drops column name"):
        plan(load(tmp_path / "narrow", {**files, "models/p.sql": NARROWER}), prod, "pr_2")


FACTS = """
MODEL (
  name s.f,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, forward_only true){more}
);
{query}
"""
SOURCE = "MODEL (name s.src, kind FULL);\nSELECT 1 AS id, CAST('2024-01-01' AS DATE) AS ds, 1.0 AS amount, 0.1 AS discount"  # fmt: skip
CTE = "WITH c AS (SELECT id, ds, amount, discount FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds) SELECT * FROM c"  # fmt: skip
SUBQUERY = "SELECT * FROM (SELECT id, ds, amount, discount FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds) AS q"  # fmt: skip


@pytest.mark.parametrize("query", [CTE, SUBQUERY])
def test_a_forward_only_star_over_a_cte_that_drops_a_column_is_destructive(
    tmp_path: Path, query: str
) -> None:
    def files(more: str, text: str) -> dict[str, str]:
        return {
            "config.yaml": CONFIG,
            "models/src.sql": SOURCE,
            "models/f.sql": FACTS.replace("{more}", more).replace("{query}", text),
            "models/fc.sql": "MODEL (name s.fc, kind FULL);\nSELECT id, discount FROM s.f",
        }

    prod = plan(load(tmp_path / "1", files("", query)))
    dropped = query.replace(", discount FROM", " FROM")
    # As SQLMesh: refused, naming the column (and the model that reads it).
    with pytest.raises(PlanError, match=r"drops column discount of its table \(s\.fc reads it\)"):
        plan(load(tmp_path / "2", files("", dropped)), prod, "pr_1")
    warned = plan(load(tmp_path / "3", files(",\n  on_destructive_change warn", dropped)), prod, "pr_1")  # fmt: skip
    assert len(warned.warnings) == 1 and "drops column discount" in warned.warnings[0]
    change = changes(warned)["s.f"]
    assert change.columns is not None and change.columns.removed == ("discount",)


def test_a_forward_only_star_over_a_cte_of_a_star_sees_the_parent_drop_a_column(
    tmp_path: Path,
) -> None:
    query = "WITH c AS (SELECT * FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds) SELECT * FROM c"
    files = {
        "config.yaml": CONFIG,
        "models/src.sql": SOURCE,
        "models/f.sql": FACTS.replace("{more}", "").replace("{query}", query),
    }
    prod = plan(load(tmp_path / "1", files))
    edit = {"models/src.sql": SOURCE.replace(", 0.1 AS discount", "")}
    with pytest.raises(PlanError, match=r"forward-only change to s\.f drops column discount"):
        plan(load(tmp_path / "2", {**files, **edit}), prod, "pr_1")


def test_a_plan_of_an_unchanged_project_changes_nothing(tmp_path: Path) -> None:
    # Versions are what they were: resolving columns adds nothing to a fingerprint.
    files = {**_child("SELECT * FROM s.p"), "models/h.sql": "MODEL (name s.h, kind FULL);\nSELECT HASH(*) AS h FROM s.c"}  # fmt: skip
    prod = plan(load(tmp_path / "1", files))
    again = plan(load(tmp_path / "2", files), prod, "prod")
    assert not again.changes_models
    assert {s.identifier for s in again.snapshots} == {s.identifier for s in prod.snapshots}


def test_a_star_child_only_forward_only_changes_reshape_keeps_its_table(tmp_path: Path) -> None:
    # SQLMesh rebuilds s.c (from a preview of s.p in development, again when deployed);
    # Sluice has no previews: a table built in the PR's environment from prod's s.p,
    # which a forward-only change keeps (without the column until it is written), would
    # lack the column and be promoted as it is. s.c keeps its table as s.p does.
    forward = (
        "MODEL (name s.p, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, forward_only true));\n"
    )
    files = {**_child("SELECT * FROM s.p"), "models/p.sql": forward + "SELECT 1 AS id, 'x' AS name"}
    edit = {"models/p.sql": forward + "SELECT 1 AS id, 'x' AS name, 2 AS extra"}
    _, result = _replan(tmp_path, files, edit)
    found = changes(result)
    assert found["s.p"].category == Category.FORWARD_ONLY
    child = found["s.c"]
    assert (child.category, child.reshaped_by, child.rebuilds) == (
        Category.FORWARD_ONLY,
        ("s.p",),
        False,
    )
    assert child.columns is not None and child.columns.added == ("extra",)
