"""Two repositories kept apart, on real Spark (issue 46): each has its own Spark root
(:func:`sluice.bot.flow.tenancy.spark_root`: metastore, warehouse, Connect server), so
repository A's approved Python model, whose code names B's prod table outright (Spark has
no authorization between schemas), finds no such table; the same code in B's own job
reads it. Jobs run as the service runs them by default: Spark Connect clients of a warm
server per root. Both roots' servers run at once (B's is still up while A's job runs, as in
the service, whose pool keeps several), so B's second job runs on its warm server: two
server starts, not three."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.bot.flow import tenancy
from sluice.bot.flow.checkout import Checkout
from sluice.core import workflow
from sluice.core.errors import ExecutionError
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import schema_prefix, view_name
from sluice.core.spark import connect
from sluice.core.spark.connect import make_runner
from sluice.core.spark.session import SparkPaths
from sluice.core.state import open_state
from sluice.core.timeutil import to_ms

pytestmark = pytest.mark.spark

A, B = "github:acme/a", "github:mallory/b"
NOW = to_ms("2024-02-01")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
SECRET = "MODEL (name b_data.secret, kind FULL);\n\nSELECT 42 AS answer\n"
READER = """from sqlmesh import ExecutionContext, model


@model("{name}", kind="FULL", columns={{"answer": "int"}})
def execute(context: ExecutionContext, start, end, execution_time, **kwargs):
    return context.spark.table("{table}")
"""


def _project(folder: Path, models: dict[str, str]) -> Path:
    (folder / "models").mkdir(parents=True)
    (folder / "config.yaml").write_text(CONFIG)
    for name, text in models.items():
        (folder / "models" / name).write_text(text)
    return folder


def _apply(project_dir: Path, url: str, paths: SparkPaths, repo: str) -> None:
    project = load_project(project_dir, use_cache=False)
    settings = project.config.sluice.spark.model_copy(update={"mode": "connect"})
    store = open_state(url)
    try:
        with schema_prefix(tenancy.schema_prefix(repo)):
            plan = workflow.plan_environment(project, store, "prod", end=NOW, execution_time=NOW)
            runner = make_runner(settings, paths)
            workflow.apply_plan(project, store, plan, runner, url=url, now=NOW)
    finally:
        store.close()


def test_a_s_python_model_finds_no_table_of_b_s_while_b_s_own_job_reads_it(
    tmp_path: Path,
) -> None:
    work = Checkout(tmp_path / "work")
    roots = {repo: work.spark_at(tenancy.spark_root(repo)) for repo in (A, B)}
    urls = {repo: f"sqlite:///{tmp_path / (tenancy.repository_name(repo) + '.db')}" for repo in (A, B)}  # fmt: skip
    with schema_prefix(tenancy.schema_prefix(B)):
        target = view_name("b_data.secret", "prod")  # B's prod table, as B's views name it
    assert target.startswith(tenancy.schema_prefix(B))
    connect.configure_pool(2, 0)  # both roots' servers stay up: A's job runs beside B's
    try:
        _apply(_project(tmp_path / "b", {"secret.sql": SECRET}), urls[B], roots[B], B)

        # A's approved model: its code names B's table; A's root has no such table.
        steal = READER.format(name="a_data.steal", table=target)
        a = _project(tmp_path / "a", {"steal.py": steal})
        with pytest.raises(ExecutionError) as failed:
            _apply(a, urls[A], roots[A], A)
        said = str(failed.value)
        assert "TABLE_OR_VIEW_NOT_FOUND" in said or "not found" in said.lower(), said
        assert target.split(".")[-1] in said
        # B's schemas are in B's root; nothing of A's was written there, nor B's in A's.
        assert any(
            p.name.startswith(tenancy.schema_prefix(B)) for p in roots[B].warehouse.iterdir()
        )
        assert not any(
            p.name.startswith(tenancy.schema_prefix(A)) for p in roots[B].warehouse.iterdir()
        )
        assert not any(
            p.name.startswith(tenancy.schema_prefix(B)) for p in roots[A].warehouse.iterdir()
        )

        # The same code in B's own job, on B's root: it reads B's table.
        echo = READER.format(name="b_data.echo", table=target)
        b2 = _project(tmp_path / "b2", {"secret.sql": SECRET, "echo.py": echo})
        _apply(b2, urls[B], roots[B], B)
        # Each root's jobs ran on its own server, started once (Spark's cost is JVM starts).
        servers = {repo: connect._SERVERS[roots[repo].root.resolve()] for repo in (A, B)}
        assert servers[A] is not servers[B]
        assert [servers[repo].starts for repo in (A, B)] == [1, 1]
    finally:
        connect.stop_all()
        connect.configure_pool(None, 0)
