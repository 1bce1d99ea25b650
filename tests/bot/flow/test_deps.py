"""The flow's Spark runner follows the service's ``SLUICE_SPARK_MODE``: spark-submit per job,
or a child per job on a warm Spark Connect server. A repository cannot choose it. No Spark
is started here: the runner is only made."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow import trust
from sluice.bot.flow.deps import make_deps
from sluice.bot.flow.job import Job
from sluice.bot.forge.memory import MemoryForge, as_forge
from sluice.core.errors import ConfigError
from sluice.core.spark.connect import ConnectRunner
from sluice.core.spark.submit import Runner

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "jaffle_shop"


def _runner(tmp_path: Path, service: ServiceSettings, prod_config: str) -> Runner:
    forge = MemoryForge()
    forge.commit("b" * 40, {"config.yaml": prod_config}, branch="main")
    deps = make_deps(
        project_python="on",
        forge_for=lambda _event: as_forge(forge),
        workdir=tmp_path / "work",
        state_url=f"sqlite:///{tmp_path / 'state.db'}",
        spark=service.spark(),
    )
    try:
        job = Job.start(deps, as_forge(forge))
        project = trust.load_trusted(job, EXAMPLE, trust.for_repository(job))
        return deps.spark_runner(project, EXAMPLE, lambda _event: None)
    finally:
        deps.close()


def _service(tmp_path: Path, **settings: object) -> ServiceSettings:
    return ServiceSettings(webhook_secret="s", workdir=tmp_path, **settings)  # type: ignore[arg-type]


def test_a_warm_spark_is_the_default(tmp_path: Path) -> None:
    runner = _runner(tmp_path, _service(tmp_path), "sluice: {}\n")
    # The service's own server on 127.0.0.1 (not started here: only made on first use).
    assert isinstance(runner, ConnectRunner) and runner.settings.remote is None
    assert runner.settings.master == "local[*]"


def test_the_cluster_deploy_mode_defaults_to_spark_submit(tmp_path: Path) -> None:
    service = _service(tmp_path, spark_master="spark://h:7077", spark_deploy_mode="cluster")
    assert not isinstance(_runner(tmp_path, service, "sluice: {}\n"), ConnectRunner)
    # ... unless the cluster has a Spark Connect endpoint to use.
    remote = _service(tmp_path, spark_deploy_mode="cluster", spark_remote="sc://h:15002")
    assert remote.spark().mode == "connect"


def test_connect_with_the_cluster_deploy_mode_and_no_endpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        _service(tmp_path, spark_mode="connect", spark_deploy_mode="cluster")
    assert "SLUICE_SPARK_DEPLOY_MODE is cluster" in refused.value.message
    assert refused.value.hint is not None and "SLUICE_SPARK_MODE=submit" in refused.value.hint
    explicit = _service(tmp_path, spark_mode="submit", spark_deploy_mode="cluster")
    assert explicit.spark().mode == "submit"


def test_a_pull_request_s_own_python_never_runs_in_the_shared_server(tmp_path: Path) -> None:
    """SLUICE_PROJECT_PYTHON=on runs a PR's Python before any approval: each job gets a
    sandboxed driver of its own (submit), never the Connect server every job shares."""
    assert _service(tmp_path).spark().mode == "connect"  # the control: the default
    assert _service(tmp_path, project_python="on").spark().mode == "submit"
    with pytest.raises(ConfigError) as refused:
        _service(tmp_path, project_python="on", spark_mode="connect")
    assert "SLUICE_PROJECT_PYTHON is on" in refused.value.message
    assert refused.value.hint is not None and "SLUICE_SPARK_MODE=submit" in refused.value.hint
    assert _service(tmp_path, project_python="prod", spark_mode="connect").spark().mode == "connect"


def test_connect_mode_gives_a_connect_runner_on_the_service_endpoint(tmp_path: Path) -> None:
    service = _service(tmp_path, spark_mode="connect", spark_remote="sc://127.0.0.1:15002")
    runner = _runner(tmp_path, service, "sluice: {}\n")
    assert isinstance(runner, ConnectRunner)
    assert runner.endpoint() == "sc://127.0.0.1:15002"  # given: no local server is started


def test_the_prod_branch_cannot_switch_the_mode_or_endpoint(tmp_path: Path) -> None:
    config = "sluice:\n  spark:\n    mode: connect\n    remote: sc://attacker.example:15002\n"
    runner = _runner(tmp_path, _service(tmp_path), config)
    assert isinstance(runner, ConnectRunner) and runner.settings.remote is None
    submit = _service(tmp_path, spark_mode="submit")
    assert not isinstance(_runner(tmp_path, submit, config), ConnectRunner)
    service = _service(tmp_path, spark_mode="connect", spark_remote="sc://127.0.0.1:1")
    runner = _runner(tmp_path, service, config)
    assert isinstance(runner, ConnectRunner) and runner.endpoint() == "sc://127.0.0.1:1"


def test_the_environment_sets_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_SPARK_MODE", "connect")
    assert _service(tmp_path).spark().mode == "connect"
    monkeypatch.setenv("SLUICE_SPARK_MODE", "yarn")
    with pytest.raises(ValidationError, match="spark_mode"):
        _service(tmp_path)
