"""Every Spark job a PR causes runs under the service's time and memory limits, and the PR
is told them (docs/security.md: "Code from a pull request runs with no credential")."""

from __future__ import annotations

from pathlib import Path

from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.pr_build import footer
from sluice.core.config import SparkSettings
from sluice.core.model.loader import load_project
from sluice.core.spark.submit import SubmitRunner

REPO_ROOT = Path(__file__).resolve().parents[2]


def _deps(tmp_path: Path, **context: object) -> Deps:
    return make_deps(project_python="on", forge_for=lambda _e: None, workdir=tmp_path,  # type: ignore[arg-type,return-value]
                              state_url=f"sqlite:///{tmp_path / 's.db'}", **context)  # type: ignore[arg-type]  # fmt: skip


def test_the_runner_gets_the_services_time_limit(tmp_path: Path) -> None:
    deps = _deps(tmp_path, job_timeout=1800.0)
    project = load_project(REPO_ROOT / "examples" / "jaffle_shop", use_cache=False)
    runner = deps.spark_runner(project, tmp_path, lambda _event: None)
    assert isinstance(runner, SubmitRunner) and runner.timeout == 1800.0


def test_the_pr_comment_states_the_limits(tmp_path: Path) -> None:
    spark = SparkSettings(conf={"spark.driver.memory": "2g"})
    text = footer(_deps(tmp_path, job_timeout=1800.0, spark=spark), "a" * 40)
    assert text.endswith("limits: 30 min per Spark job, driver memory 2g")
    assert "per Spark job" not in footer(_deps(tmp_path, job_timeout=None), "a" * 40)
    assert "2 h per Spark job, driver memory 1g" in footer(_deps(tmp_path), "a" * 40)
