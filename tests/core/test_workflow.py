import json
from pathlib import Path
from typing import Any

import pytest

from sluice.core import workflow
from sluice.core.errors import ConflictError, ExecutionError
from sluice.core.snapshot.naming import view_name
from sluice.core.spark.render import view_steps
from sluice.core.spark.submit import JobResult
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms
from tests.core.helpers import BASIC, load

END = to_ms("2024-01-11")


def test_plan_commit_replan_and_stale_plans(tmp_path: Path, state_url: str) -> None:
    project = load(tmp_path / "p", BASIC)
    store = open_state(state_url)
    try:
        first = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert first.added == ("s.a", "s.b", "s.c")
        workflow.commit_plan(store, first, now=END)
        again = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert not again.has_changes and again.base_plan_id == first.plan_id

        # A PR environment starts as a copy of prod.
        changed = load(
            tmp_path / "q",
            {
                **BASIC,
                "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'x' AS name, 2 AS more",
            },
        )
        dev = workflow.plan_environment(changed, store, "pr_3", end=END, execution_time=END)
        assert (
            dev.new_environment
            and dev.added == ()
            and [c.name for c in dev.directly_modified] == ["s.a"]
        )

        # Two plans computed against the same prod: the first to commit wins.
        change_1 = workflow.plan_environment(changed, store, "prod", end=END, execution_time=END)
        change_2 = workflow.plan_environment(
            load(
                tmp_path / "r",
                {
                    **BASIC,
                    "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT id, 1 AS x FROM s.b",
                },
            ),
            store,
            "prod",
            end=END,
            execution_time=END,
        )
        workflow.commit_plan(store, change_1, now=END + 1)
        with pytest.raises(ConflictError) as info:
            workflow.commit_plan(store, change_2, now=END + 2)
        assert "prod" in str(info.value) and "re-run" in str(info.value)
        record = store.get_environment("prod")
        assert record is not None and record.plan_id == change_1.plan_id
        after = workflow.plan_environment(changed, store, "prod", end=END, execution_time=END)
        assert not after.has_changes
    finally:
        store.close()


def test_state_url_defaults_to_sqlite_under_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(workflow.STATE_URL_ENV, raising=False)
    project = load(tmp_path, BASIC)
    assert (
        workflow.state_url(project) == f"sqlite:///{(tmp_path / '.sluice' / 'state.db').resolve()}"
    )
    monkeypatch.setenv(workflow.STATE_URL_ENV, "sqlite:////x.db")
    assert workflow.state_url(project) == "sqlite:////x.db"
    assert workflow.state_url(project, "postgresql+psycopg://h/db") == "postgresql+psycopg://h/db"
    configured = load(
        tmp_path / "c", {**BASIC, "config.yaml": "sluice:\n  state:\n    url: sqlite:////y.db\n"}
    )
    monkeypatch.delenv(workflow.STATE_URL_ENV)
    assert workflow.state_url(configured) == "sqlite:////y.db"


def test_a_pr_environment_planned_against_prod_keeps_saying_what_the_pr_changes(
    tmp_path: Path, state_url: str
) -> None:
    store = open_state(state_url)
    try:
        prod = workflow.plan_environment(load(tmp_path / "p", BASIC), store, "prod",
                                         end=END, execution_time=END)  # fmt: skip
        workflow.commit_plan(store, prod, now=END)
        # The PR's first commit changes s.a and adds s.d; its environment is built.
        first_files = {
            **BASIC,
            "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'y' AS name",
            "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT id FROM s.a",
        }
        first = workflow.plan_environment(load(tmp_path / "q", first_files), store, "pr_4",
                                          end=END, execution_time=END, against="prod")  # fmt: skip
        assert first.added == ("s.d",) and [c.name for c in first.directly_modified] == ["s.a"]
        for backfill in first.backfill:  # what building it records
            store.add_intervals(backfill.name, backfill.version, backfill.intervals)
        workflow.commit_plan(store, first, now=END)

        # Built again at the same commit (a re-run, a push of other files): against its
        # own record nothing changed, against prod the same changes as before.
        project = load(tmp_path / "q", first_files)
        own = workflow.plan_environment(project, store, "pr_4", end=END, execution_time=END)
        assert not own.changes_models
        again = workflow.plan_environment(project, store, "pr_4", end=END, execution_time=END,
                                          against="prod")  # fmt: skip
        assert again.added == ("s.d",) and [c.name for c in again.directly_modified] == ["s.a"]
        assert [(s.name, s.version) for s in again.snapshots] == [
            (s.name, s.version) for s in first.snapshots
        ]
        assert again.backfill == ()  # everything it needs was built the first time
        assert again.base_plan_id == first.plan_id  # it applies on top of the record
        workflow.commit_plan(store, again, now=END + 1)

        # The next commit drops s.d again: not a removal against prod, but its view in
        # the PR's schema goes.
        without_d = {k: v for k, v in first_files.items() if k != "models/d.sql"}
        second = workflow.plan_environment(load(tmp_path / "r", without_d), store, "pr_4",
                                           end=END, execution_time=END, against="prod")  # fmt: skip
        assert second.removed == () and second.added == ()
        record = store.get_environment("pr_4")
        assert record is not None
        previous = {ref.name: ref.version for ref in record.snapshots}
        assert view_steps(second, previous)["drop"] == [view_name("s.d", "pr_4")]
    finally:
        store.close()


class _NoSpark:
    """A runner for plans that must not need Spark: any job is a failure."""

    def run(self, spec: dict[str, object]) -> None:
        raise AssertionError(f"Spark was started for {spec['job_id']}")


def test_a_project_without_models_is_promoted_without_spark(tmp_path: Path, state_url: str) -> None:
    project = load(tmp_path / "p", {"config.yaml": BASIC["config.yaml"]})
    assert project.models == {}
    store = open_state(state_url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert plan.new_environment and plan.backfill == ()
        result = workflow.apply_plan(project, store, plan, _NoSpark(), url=state_url, now=END)  # type: ignore[arg-type]
        assert (result.tables_built, result.views_swapped, result.job) == (0, 0, None)
        record = store.get_environment("prod")
        assert record is not None and record.plan_id == plan.plan_id and record.snapshots == ()
        # Applied again: nothing to do.
        again = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert not again.has_changes
    finally:
        store.close()


class _Recorder:
    """A runner standing in for Spark: records the specs it gets; fails when told to."""

    def __init__(self, error: Exception | None = None) -> None:
        self.specs: list[dict[str, Any]] = []
        self.error = error

    def run(self, spec: dict[str, Any]) -> JobResult:
        self.specs.append(spec)
        if self.error is not None:
            raise self.error
        return JobResult(spec["job_id"], {}, 0.1, None)


def test_apply_commits_the_record_itself_once_the_job_succeeded(
    tmp_path: Path, state_url: str
) -> None:
    project = load(tmp_path / "p", BASIC)
    store = open_state(state_url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        runner = _Recorder()
        result = workflow.apply_plan(project, store, plan, runner, url=state_url, now=END)
        assert result.tables_built + result.model_views == 3
        [spec] = runner.specs
        # The driver gets no state URL and no environment record to commit.
        assert "state_url" not in spec
        assert state_url not in json.dumps(spec)
        assert [s["type"] for s in spec["steps"]].count("views") == 1
        assert not {"commit"} & {s["type"] for s in spec["steps"]}
        record = store.get_environment("prod")
        assert record is not None and record.plan_id == plan.plan_id
        assert [r.name for r in record.snapshots] == ["s.a", "s.b", "s.c"]
    finally:
        store.close()


def test_the_apply_counts_what_the_plan_counts(tmp_path: Path, state_url: str) -> None:
    """A VIEW model is made as a view, not built as a table: the apply's tables are the
    plan's backfill, its model views the plan's views to make (issue 42, point 5)."""
    files = {**BASIC, "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id FROM s.c\n"}
    project = load(tmp_path / "p", files)
    store = open_state(state_url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        assert len(plan.backfill) == 3 and plan.create_views == ("s.v",)
        result = workflow.apply_plan(project, store, plan, _Recorder(), url=state_url, now=END)
        assert (result.tables_built, result.model_views) == (3, 1)
        assert result.views_swapped == 4
    finally:
        store.close()


def test_a_failed_job_commits_no_record(tmp_path: Path, state_url: str) -> None:
    project = load(tmp_path / "p", BASIC)
    store = open_state(state_url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        runner = _Recorder(ExecutionError("Spark job failed at step 'build s.b': boom"))
        with pytest.raises(ExecutionError, match="boom"):
            workflow.apply_plan(project, store, plan, runner, url=state_url, now=END)
        assert store.get_environment("prod") is None
    finally:
        store.close()


def test_a_stale_plan_is_refused_before_its_job_starts(tmp_path: Path, state_url: str) -> None:
    project = load(tmp_path / "p", BASIC)
    store = open_state(state_url)
    try:
        stale = workflow.plan_environment(project, store, "pr_5", end=END, execution_time=END)
        # Meanwhile another apply moved pr_5 on.
        other = load(
            tmp_path / "q",
            {**BASIC, "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT 2 AS id"},
        )
        moved = workflow.plan_environment(other, store, "pr_5", end=END, execution_time=END)
        workflow.commit_plan(store, moved, now=END)
        runner = _Recorder()
        with pytest.raises(ConflictError) as caught:
            workflow.apply_plan(project, store, stale, runner, url=state_url, now=END + 1)
        assert runner.specs == []  # no view was re-pointed
        assert caught.value.message == (
            f"environment 'pr_5' changed since this plan was made: it is now at plan "
            f"'{moved.plan_id}', the plan expected 'None'"
        )
        assert caught.value.hint == "re-run `sluice plan pr_5` and apply the new plan"
        record = store.get_environment("pr_5")
        assert record is not None and record.plan_id == moved.plan_id
    finally:
        store.close()


def test_the_commit_still_guards_the_record_against_a_change_during_the_job(
    tmp_path: Path, state_url: str
) -> None:
    project = load(tmp_path / "p", BASIC)
    other = load(
        tmp_path / "q", {**BASIC, "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT 2 AS id"}
    )
    store = open_state(state_url)
    try:
        plan = workflow.plan_environment(project, store, "pr_6", end=END, execution_time=END)
        moved = workflow.plan_environment(other, store, "pr_6", end=END, execution_time=END)

        class Racing(_Recorder):
            def run(self, spec: dict[str, Any]) -> JobResult:
                workflow.commit_plan(store, moved, now=END)  # another apply, while this runs
                return super().run(spec)

        with pytest.raises(ConflictError, match="pr_6"):
            workflow.apply_plan(project, store, plan, Racing(), url=state_url, now=END + 1)
        record = store.get_environment("pr_6")
        assert record is not None and record.plan_id == moved.plan_id
    finally:
        store.close()
