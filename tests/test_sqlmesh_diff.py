"""The plan oracle's edits and verdicts (``bench/sqlmesh_diff.py``, issue 42 point 6).

Fast: every kind of edit the generator makes, on a small project written here, gives a
project Sluice still loads and changes what the edit says; the verdicts of the
comparison, from facts given here. Slow (``slow``, skipped without SQLMesh's virtualenv):
the whole harness on one project of the repository finds no case where Sluice is less
safe than SQLMesh.
"""

from __future__ import annotations

import csv
import functools
import io
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bench import sqlmesh_diff
from bench.sqlmesh_diff import Edit, classify, compare_edit, generate_edits, write_pair
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from tests.core.helpers import write_project

FILES = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
    """,
    "seeds/items.csv": "id,name\n1,a\n2,b\n",
    "macros/double.py": """
        from sqlglot import exp
        from sqlmesh import macro


        @macro()
        def double(evaluator, x):
            \"\"\"Twice x.\"\"\"
            return exp.Mul(this=x, expression=exp.Literal.number(2))
    """,
    "models/items.sql": """
        MODEL (name s.items, kind SEED (path '../seeds/items.csv'), columns (id INT, name STRING));
    """,
    "models/orders.sql": """
        MODEL (name s.orders, kind FULL);
        SELECT 1 AS id, 10 AS amount, 1 AS item_id, 'x' AS note
    """,
    "models/enriched.sql": """
        MODEL (name s.enriched, kind FULL);
        WITH o AS (SELECT id, amount, item_id FROM s.orders)
        SELECT o.id, o.amount, i.name, @double(o.amount) AS twice
        FROM o LEFT JOIN s.items AS i ON o.item_id = i.id
        WHERE o.amount > 0
    """,
    "models/summary.sql": """
        MODEL (name s.summary, kind FULL);
        SELECT id, twice FROM s.enriched
    """,
}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Edit, Path, Path]]:
    root = tmp_path_factory.mktemp("oracle")
    source = write_project(root / "source", FILES)
    edits = generate_edits(source, seed=1, limit=50)
    found = {}
    for index, edit in enumerate(edits):
        before, after = write_pair(source, edit, root / f"edit{index}")
        found.setdefault(edit.kind, (edit, before, after))
    return found


@functools.cache
def _load(root: Path) -> Project:
    """Each copy loaded once (a load runs the macro's Python in a process of its own)."""
    return load_project(root, use_cache=False)


def _query(root: Path, name: str) -> exp.Expr:
    model = _load(root).models[name]
    assert model.query_sql is not None
    return sqlglot.parse_one(model.query_sql, read="spark")


def _columns(root: Path, name: str) -> list[str]:
    query = _query(root, name)
    assert isinstance(query, exp.Select)
    return [p.alias_or_name for p in query.expressions]


def test_every_kind_of_edit_is_made(pairs: dict[str, tuple[Edit, Path, Path]]) -> None:
    assert sorted(pairs) == sorted(sqlmesh_diff.KINDS)


@pytest.mark.parametrize("kind", sqlmesh_diff.KINDS)
def test_an_edit_leaves_a_project_sluice_loads(
    kind: str, pairs: dict[str, tuple[Edit, Path, Path]]
) -> None:
    edit, before, after = pairs[kind]
    old, new = _load(before), _load(after)
    assert edit.model in old.models and edit.model in new.models
    assert set(old.models) == set(new.models)  # an edit adds no model but in both copies


def test_column_edits_change_the_columns(pairs: dict[str, tuple[Edit, Path, Path]]) -> None:
    edit, before, after = pairs["add_column"]
    gained = set(_columns(after, edit.model)) - set(_columns(before, edit.model))
    assert len(gained) == 1 and gained.pop() in edit.what
    edit, before, after = pairs["drop_column"]
    lost = set(_columns(before, edit.model)) - set(_columns(after, edit.model))
    assert len(lost) == 1 and lost.pop() in edit.what
    edit, before, after = pairs["rename_column"]
    old, new = _columns(before, edit.model), _columns(after, edit.model)
    assert len(old) == len(new) and next(c for c in new if c not in old).endswith("_renamed")


def test_query_edits_change_what_they_say(pairs: dict[str, tuple[Edit, Path, Path]]) -> None:
    edit, before, after = pairs["change_expression"]
    assert _columns(before, edit.model) == _columns(after, edit.model)
    assert _query(after, edit.model).find(exp.Coalesce) is not None
    assert _query(before, edit.model).find(exp.Coalesce) is None
    edit, before, after = pairs["change_filter"]
    where = _query(after, edit.model).args["where"]
    assert where is not None and where.find(exp.Is) is not None
    edit, before, after = pairs["change_join"]
    sides = [
        (j.side or "").upper()
        for q in (before, after)
        for j in _query(q, edit.model).find_all(exp.Join)
    ]
    assert edit.model == "s.enriched" and sides == ["LEFT", ""]
    edit, before, after = pairs["cte_edit"]
    ctes = [next(iter(_query(q, edit.model).find_all(exp.CTE))).this for q in (before, after)]
    assert len(ctes[1].expressions) == len(ctes[0].expressions) + 1


def test_a_star_child_reads_a_parent_that_gains_a_column(
    pairs: dict[str, tuple[Edit, Path, Path]],
) -> None:
    edit, before, after = pairs["star_child"]
    child = f"{edit.model.split('.')[0]}.{sqlmesh_diff.STAR_CHILD}"
    for root in (before, after):
        assert _query(root, child).sql("spark") == f"SELECT * FROM {edit.model}"
    assert len(_columns(after, edit.model)) == len(_columns(before, edit.model)) + 1


def test_macro_seed_and_kind_edits(pairs: dict[str, tuple[Edit, Path, Path]]) -> None:
    edit, before, after = pairs["macro_edit"]
    assert edit.model == "s.enriched"
    assert "number(3)" in (after / "macros/double.py").read_text()
    assert "* 3" in _load(after).models[edit.model].query_sql  # type: ignore[operator]
    edit, before, after = pairs["seed_edit"]
    rows = [
        list(csv.reader(io.StringIO((r / "seeds/items.csv").read_text()))) for r in (before, after)
    ]
    assert rows[1] == [*rows[0], rows[0][-1]]
    edit, before, after = pairs["kind_change"]
    kinds = [str(_load(r).models[edit.model].kind.name) for r in (before, after)]
    assert kinds[0] != kinds[1] and kinds[1] in ("FULL", "VIEW")


def test_the_unedited_copy_differs_from_the_project_in_form_only(
    pairs: dict[str, tuple[Edit, Path, Path]], tmp_path: Path
) -> None:
    source = write_project(tmp_path / "source", FILES)
    edit, before, _ = pairs["add_column"]
    original = load_project(source, use_cache=False).models[edit.model]
    rewritten = _load(before).models[edit.model]
    assert original.query_sql == rewritten.query_sql


# --- the verdicts --------------------------------------------------------------------------


def _sm(category: str, rebuilt: bool, direct: bool = True, forward_only: bool = False) -> dict:
    return {
        "category": category,
        "rebuilt": rebuilt,
        "direct": direct,
        "forward_only": forward_only,
    }


def _sl(category: str, rebuilt: bool, direct: bool = True) -> dict:
    return {"category": category, "rebuilt": rebuilt, "direct": direct}


def test_keeping_a_table_sqlmesh_rebuilds_is_less_safe() -> None:
    found = classify("s.c", _sm("NON_BREAKING", True), _sl("non-breaking", False, False))
    assert found is not None and found.verdict == "less safe"
    found = classify(
        "s.c", _sm("INDIRECT_BREAKING", True, False), _sl("non-breaking", False, False)
    )
    assert found is not None and found.verdict == "less safe"
    found = classify("s.c", _sm("BREAKING", True), None)
    assert found is not None and found.verdict == "less safe"


def test_rebuilding_what_sqlmesh_keeps_is_stricter_and_a_label_is_no_difference() -> None:
    found = classify(
        "s.c", _sm("INDIRECT_NON_BREAKING", False, False), _sl("breaking", True, False)
    )
    assert found is not None and found.verdict == "stricter"
    found = classify(
        "s.v", _sm("INDIRECT_NON_BREAKING", False, False), _sl("non-breaking", True, False), "VIEW"
    )
    assert found is not None and found.verdict == "stricter" and "VIEW" in found.reason
    assert classify("s.c", _sm("BREAKING", True), _sl("breaking", True)) is None
    same = classify("s.c", _sm("BREAKING", True, False), _sl("breaking", True, True))
    assert same is not None and same.verdict == "same effect"
    kept = classify(
        "s.c", _sm("BREAKING", False, True, forward_only=True), _sl("forward-only", False)
    )
    assert kept is None


def test_a_plan_sqlmesh_refuses_must_be_refused_or_warned() -> None:
    edit = Edit("drop_column", "s.c", "drops column x")
    refused = {"models": {}, "refused": "destructive change", "error": None}
    planned = {"models": {}, "warnings": [], "refused": None, "error": None}
    warned = {**planned, "warnings": ["models/c.sql:1: destructive change to s.c"]}
    assert compare_edit("p", edit, refused, planned).verdict == "less safe"
    assert compare_edit("p", edit, refused, warned).verdict == "agree"
    assert (
        compare_edit("p", edit, planned, {**refused, "refused": "unknown column"}).verdict
        == "stricter"
    )


# --- the whole harness, with SQLMesh -------------------------------------------------------


@pytest.mark.slow
def test_sluice_is_never_less_safe_than_sqlmesh_on_a_project(tmp_path: Path) -> None:
    venv = sqlmesh_diff.sqlmesh_compat.CACHE / "sqlmesh-0.236.4"
    if not (venv / "bin" / "sqlmesh").exists():
        pytest.skip(f"no SQLMesh virtualenv at {venv} (bench/sqlmesh_spark.py side_venv makes it)")
    folder = sqlmesh_diff.ROOT / "tests/fixtures/sqlmesh_projects/catalog_names"
    outcomes = sqlmesh_diff.run_project(
        "catalog_names", folder, tmp_path, venv / "bin" / "python", seed=42, limit=12
    )
    assert len(outcomes) >= 5
    assert [o for o in outcomes if o.verdict == "error"] == []
    assert [(o.edit.id, o.differences) for o in outcomes if o.verdict == "less safe"] == []


@pytest.mark.slow
def test_a_project_reading_its_own_path_is_planned_alike(tmp_path: Path) -> None:
    # sqlmesh_ibis' constants.py: DB_PATH = os.path.join(os.path.dirname(__file__), ...).
    # Loaded from two folders, SQLMesh saw every edit change ibis_full_model_python's
    # Python and rebuilt it; both sides of a pair are loaded from one path now.
    venv = sqlmesh_diff.sqlmesh_compat.CACHE / "sqlmesh-0.236.4"
    if not (venv / "bin" / "sqlmesh").exists():
        pytest.skip(f"no SQLMesh virtualenv at {venv} (bench/sqlmesh_spark.py side_venv makes it)")
    folder = sqlmesh_diff.ROOT.parent / "shared" / "compat" / "sqlmesh_ibis"
    outcomes = sqlmesh_diff.run_project(
        "shared/sqlmesh_ibis", folder, tmp_path, venv / "bin" / "python", seed=42, limit=4
    )
    assert len(outcomes) >= 3
    assert [o.verdict for o in outcomes] == ["agree"] * len(outcomes), [
        (o.edit.id, o.differences) for o in outcomes
    ]


def test_a_macro_edit_that_changes_no_query_is_sqlmesh_being_stricter() -> None:
    theirs = {"models": {"s.c": _sm("NON_BREAKING", True)}, "refused": None, "error": None}
    ours = {"models": {}, "warnings": [], "refused": None, "error": None}
    same = Edit("macro_edit", "s.c", f"macro m: a statement ({sqlmesh_diff.SAME_OUTPUT})")
    outcome = compare_edit("p", same, theirs, ours)
    assert outcome.verdict == "agree"
    assert [d.verdict for d in outcome.differences] == ["SQLMesh stricter"]
    changed = Edit("macro_edit", "s.c", "macro m: a number in its body, 2 -> 3")
    assert compare_edit("p", changed, theirs, ours).verdict == "less safe"
