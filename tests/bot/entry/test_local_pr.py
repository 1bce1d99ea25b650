"""``sluice pr --spark``: the user's choice of how jobs reach Spark, as the service's
SLUICE_SPARK_MODE would be, never the repository's."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from sluice.bot.entry import local_pr
from sluice.core.spark.connect import ConnectRunner
from sluice.core.spark.submit import SubmitRunner
from tests.core.helpers import load

CONFIG = "model_defaults:\n  dialect: spark\nsluice:\n  spark:\n    mode: connect\n"
ONE = "MODEL (name s.one, kind FULL);\nSELECT 1 AS id\n"


def test_the_option_not_the_repository_chooses_the_runner(tmp_path: Path) -> None:
    # the repository asks for connect; the flow's runner follows the option
    project = load(tmp_path / "p", {"config.yaml": CONFIG, "models/one.sql": ONE})
    submit = local_pr._runner_for(tmp_path / "work", True, "submit")(project, tmp_path, print)
    assert type(submit) is SubmitRunner and submit.settings.mode == "submit"
    connect = local_pr._runner_for(tmp_path / "work", True, "connect")(project, tmp_path, print)
    assert isinstance(connect, ConnectRunner)
    assert connect.paths.root == (tmp_path / "work" / "spark").resolve()


@pytest.mark.parametrize(("env", "expected"), [(None, "submit"), ("connect", "connect")])
def test_the_default_is_the_service_variable(
    env: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv("SLUICE_SPARK_MODE", raising=False)
    else:
        monkeypatch.setenv("SLUICE_SPARK_MODE", env)
    for command in (local_pr.open_, local_pr.merge, local_pr.sync):
        option = next(p for p in command.params if p.name == "spark_mode")
        with click.Context(command) as ctx:
            assert option.get_default(ctx) == expected
