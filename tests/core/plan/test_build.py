import dataclasses
from pathlib import Path

import pytest

from sluice.core.model.definition import Project
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.snapshot import Category
from sluice.core.timeutil import DAY_MS, to_ms
from tests.core.helpers import BASIC, load, plan_of

END = to_ms("2024-01-11")


def plan(project: Project, base: Plan | None = None, env: str = "prod", **kwargs: object) -> Plan:
    return plan_of(project, base, env, end=END, **kwargs)


def test_first_plan_adds_everything_and_backfills_it(tmp_path: Path) -> None:
    first = plan(load(tmp_path, BASIC))
    assert first.added == ("s.a", "s.b", "s.c")
    assert first.new_environment and first.has_changes
    assert [b.name for b in first.backfill] == ["s.a", "s.b", "s.c"]
    again = plan(load(tmp_path, BASIC), base=first)
    assert not again.has_changes
    assert again.plan_id != first.plan_id and again.content_hash == first.content_hash


def test_a_snapshot_is_found_by_name_and_a_missing_one_stops_iteration(tmp_path: Path) -> None:
    first = plan(load(tmp_path, BASIC))
    for snapshot in first.snapshots:
        assert first.snapshot(snapshot.name) is snapshot
    with pytest.raises(StopIteration):  # what callers of Plan.snapshot catch
        first.snapshot("s.nowhere")
    assert first == dataclasses.replace(first)  # the index is no field: equality is unchanged


def test_breaking_change_rebuilds_children(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    changed = load(
        tmp_path / "2",
        {**BASIC, "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'x' AS name"},
    )
    result = plan(changed, base=prod, env="pr_1")
    assert [(c.name, c.category) for c in result.directly_modified] == [("s.a", Category.BREAKING)]
    assert " SELECT\n-  1 AS id,\n+  2 AS id," in result.directly_modified[0].diff
    assert [(c.name, c.category, c.rebuilds) for c in result.indirectly_modified] == [
        ("s.b", Category.BREAKING, True),
        ("s.c", Category.BREAKING, True),
    ]
    assert [b.name for b in result.backfill] == ["s.a", "s.b", "s.c"]
    assert result.new_environment  # pr_1 starts from prod


def test_non_breaking_change_keeps_childrens_tables(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    changed = load(
        tmp_path / "2",
        {
            **BASIC,
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'x' AS name, 3 AS extra",
        },
    )
    result = plan(changed, base=prod, env="pr_2")
    assert [(c.name, c.category) for c in result.directly_modified] == [
        ("s.a", Category.NON_BREAKING)
    ]
    # The children read none of the new column: not indirectly modified (narrowed).
    assert result.indirectly_modified == () and result.unaffected == ("s.b", "s.c")
    # Only the changed model is built; the children keep prod's tables.
    assert [b.name for b in result.backfill] == ["s.a"]
    assert result.snapshot("s.b").table == prod.snapshot("s.b").table


def test_indirect_category_is_the_most_conservative_over_all_ancestors(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    # a: breaking; b: non-breaking (adds a column). c reads only b, but a is its ancestor.
    files = {
        **BASIC,
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'y' AS name",
        "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, name, 1 AS more FROM s.a",
    }
    result = plan(load(tmp_path / "2", files), base=prod, env="dev")
    assert {c.name: c.category for c in result.directly_modified} == {
        "s.a": Category.BREAKING,
        "s.b": Category.NON_BREAKING,
    }
    assert [(c.name, c.category) for c in result.indirectly_modified] == [
        ("s.c", Category.BREAKING)
    ]


def test_metadata_only_change_keeps_the_version(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    files = {
        **BASIC,
        "models/b.sql": "MODEL (name s.b, kind FULL, owner bob);\nSELECT id, name FROM s.a",
    }
    result = plan(load(tmp_path / "2", files), base=prod)
    assert result.metadata_only == ("s.b",)
    assert result.snapshot("s.b").version == prod.snapshot("s.b").version
    assert not result.directly_modified and not result.indirectly_modified


def test_forward_only_reuses_tables(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    changed = load(
        tmp_path / "2",
        {**BASIC, "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'x' AS name"},
    )
    result = plan(changed, base=prod, forward_only=True)
    assert [(c.name, c.category, c.rebuilds) for c in result.directly_modified] == [
        ("s.a", Category.FORWARD_ONLY, False)
    ]
    assert all(not c.rebuilds for c in result.indirectly_modified)
    per_model = load(
        tmp_path / "3",
        {
            **BASIC,
            "models/a.sql": "MODEL (name s.a, kind FULL, forward_only true);\nSELECT 2 AS id, 'x' AS name",
        },
    )
    result = plan(per_model, base=prod)
    assert result.directly_modified[0].category == Category.FORWARD_ONLY


def test_removed_models(tmp_path: Path) -> None:
    prod = plan(load(tmp_path / "1", BASIC))
    files = {k: v for k, v in BASIC.items() if k != "models/c.sql"}
    assert plan(load(tmp_path / "2", files), base=prod).removed == ("s.c",)


INCREMENTAL = {
    **BASIC,
    "models/i.sql": """
        MODEL (
          name s.i,
          kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 4),
          start '2024-01-01',
        );
        SELECT id, CAST('2024-01-01' AS DATE) AS ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
    """,
}


def test_missing_intervals_honour_batch_size_and_done_work(tmp_path: Path) -> None:
    project = load(tmp_path, INCREMENTAL)
    first = plan(project)
    inc = next(b for b in first.backfill if b.name == "s.i")
    assert len(inc.intervals) == 10
    assert inc.batches == (
        (to_ms("2024-01-01"), to_ms("2024-01-05")),
        (to_ms("2024-01-05"), to_ms("2024-01-09")),
        (to_ms("2024-01-09"), END),
    )
    version = first.snapshot("s.i").version
    done = {("s.i", version): [(to_ms("2024-01-01"), to_ms("2024-01-08"))]}
    later = plan(project, base=first, intervals=done)
    inc = next(b for b in later.backfill if b.name == "s.i")
    assert inc.intervals == (
        (to_ms("2024-01-08"), to_ms("2024-01-09")),
        (to_ms("2024-01-09"), to_ms("2024-01-10")),
        (to_ms("2024-01-10"), END),
    )
    # A plan start narrows the range.
    narrowed = plan(project, start=to_ms("2024-01-09"))
    inc = next(b for b in narrowed.backfill if b.name == "s.i")
    assert inc.start == to_ms("2024-01-09") and len(inc.intervals) == 2
    assert narrowed.to_json()["backfill"][-1] == {
        "model": "s.i", "version": inc.version, "start": "2024-01-09", "end": "2024-01-11",
        "table": inc.table, "intervals": 2, "batches": 1,
        "scan_bytes": None, "unmeasured": [], "write_rows": None, "write_bytes": None,  # a pure plan: no sizes, no estimate
    }  # fmt: skip


def test_dev_plans_never_fill_prods_tables(tmp_path: Path) -> None:
    project = load(tmp_path, INCREMENTAL)
    prod = plan(project)
    # A day later prod has a new interval to fill, but a PR environment must not write it.
    dev = plan(project, base=prod, env="pr_7")
    assert dev.backfill == ()
    assert not dev.directly_modified and dev.new_environment


def test_plan_json_has_the_documented_keys(tmp_path: Path) -> None:
    data = plan(load(tmp_path, BASIC)).to_json()
    assert {
        "environment",
        "added",
        "removed",
        "directly_modified",
        "indirectly_modified",
        "metadata_only",
        "backfill",
    } <= set(data)
    assert data["backfill"][0]["end"] == "2024-01-11"
    assert DAY_MS > 0


VIEWS = {
    **BASIC,
    "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id FROM s.a",
}


def test_a_view_version_is_created_once(tmp_path: Path) -> None:
    from sluice.core.plan.plan import VIEW_MARKER

    project = load(tmp_path / "1", VIEWS)
    first = plan(project)
    assert first.create_views == ("s.v",)
    # A PR changes the view's parent: the view gets a new version, created by the PR...
    changed = load(
        tmp_path / "2",
        {**VIEWS, "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id, 'x' AS name"},
    )
    pr = plan(changed, base=first, env="pr_1")
    assert pr.create_views == ("s.v",)
    # ...and prod, taking the PR's versions, neither builds nor creates anything.
    built = {(s.name, s.version): [VIEW_MARKER] for s in pr.snapshots if s.name == "s.v"}
    built |= {(b.name, b.version): list(b.intervals) for b in pr.backfill}
    promote = plan(changed, base=first, intervals=built)
    assert promote.create_views == () and promote.backfill == ()
