"""A service keeping repositories apart gives each a Spark root of its own; where the
Spark settings make every job share one catalog or storage anyway (a remote Connect
endpoint, a metastore of the operator's, a cluster master, a folder or service every
driver reaches), a root keeps nothing apart: the service refuses to start, saying why,
unless the operator accepts it (``SLUICE_ISOLATE_ACCEPT_SHARED_SPARK``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow import tenancy
from sluice.bot.flow.checkout import OWN_SPARK, job_spark
from sluice.bot.flow.deps import make_deps
from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, SluiceError
from sluice.core.model.definition import Project

TWO = "acme/a acme/b"


def _settings(**more: Any) -> ServiceSettings:
    return ServiceSettings(webhook_secret="w", **more)


@pytest.mark.parametrize(
    ("more", "why"),
    [
        ({"spark_remote": "sc://spark.internal:15002"}, "SLUICE_SPARK_REMOTE"),
        (
            {"spark_conf": {"spark.hadoop.hive.metastore.uris": "thrift://hms:9083"}},
            "a metastore of your own",
        ),
        ({"spark_master": "spark://cluster:7077", "spark_mode": "submit"}, "is not local"),
        ({"spark_conf": {"spark.sql.warehouse.dir": "/srv/warehouse"}}, "spark.sql.warehouse.dir"),
        ({"spark_conf": {"spark.hadoop.fs.s3a.endpoint": "https://s3.x"}}, "past this machine"),
    ],
)
def test_shared_spark_with_isolation_is_refused_unless_accepted(
    more: dict[str, Any], why: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        _settings(repositories=TWO, **more)
    message = str(refused.value)
    assert why in message and "another's tables" in message
    assert "SLUICE_ISOLATE_ACCEPT_SHARED_SPARK" in (refused.value.hint or "")
    # Accepted in so many words, it starts; one repository (no isolation) always did.
    assert _settings(repositories=TWO, isolate_accept_shared_spark=True, **more).isolates()
    assert not _settings(repositories="acme/a", **more).isolates()
    with pytest.raises(ConfigError):  # isolation asked for outright: the same
        _settings(isolate_repositories=True, **more)


def test_the_service_s_own_local_spark_isolates_and_its_servers_are_bounded() -> None:
    made = _settings(repositories=TWO)
    assert made.isolates()
    assert (made.spark_connect_servers, made.spark_connect_idle_minutes) == (4, 60.0)
    assert "one per repository, at most 4 at once" in made.summary()
    with pytest.raises(ValueError, match="spark_connect_servers"):
        _settings(spark_connect_servers=0)
    with pytest.raises(ValueError, match="spark_connect_idle_minutes"):
        _settings(spark_connect_idle_minutes=-1)


@pytest.mark.parametrize("mode", ["off", "setpriv"])
def test_isolation_without_bubblewrap_is_refused_unless_accepted(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under setpriv (a driver keeps the service's uid, no read/write lists) or off, a Spark
    root per repository keeps nothing apart: refused at start, saying what, why and how,
    unless accepted; then the summary says their Spark data is not kept apart."""
    monkeypatch.setenv(sandbox.SETTING, mode)
    try:
        found = sandbox.isolation()
    except ConfigError:
        pytest.skip(f"{mode} cannot run here")
    with pytest.raises(ConfigError) as refused:
        _settings(repositories=TWO)
    how = "a uid drop with setpriv" if found == "setpriv" else "none"
    assert f"the sandbox in effect is {how}, not bubblewrap" in str(refused.value)
    assert "another's tables" in str(refused.value)
    hint = refused.value.hint or ""
    assert "install bubblewrap" in hint and "a service per repository" in hint
    assert "SLUICE_ISOLATE_ACCEPT_SHARED_SPARK=true" in hint
    accepted = _settings(repositories=TWO, isolate_accept_shared_spark=True)
    assert "Spark data is NOT kept apart: no bubblewrap sandbox" in accepted.summary()
    assert not _settings(repositories="acme/a").isolates()  # one repository: starts as before


def test_a_non_owner_root_s_job_is_refused_without_bubblewrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: the runner refuses a job of another repository's root when the
    sandbox in effect is not bubblewrap (unless accepted); the owner's root runs."""
    monkeypatch.setenv(sandbox.SETTING, "off")
    project = cast(Project, SimpleNamespace(config=SimpleNamespace(sluice=SimpleNamespace(
        spark=SparkSettings(mode="submit")))))  # fmt: skip
    url = f"sqlite:///{tmp_path}/state.db"
    for accept in (False, True):
        deps = make_deps(forge_for=lambda _e: None, workdir=tmp_path, state_url=url,  # type: ignore[arg-type,return-value]
                         isolate=True, accept_unconfined_roots=accept)  # fmt: skip
        try:
            with job_spark(tenancy.spark_root("github:acme/b")):
                if accept:
                    assert deps.spark_runner(project, tmp_path, lambda _e: None) is not None
                else:
                    with pytest.raises(SluiceError, match="not bubblewrap") as refused:
                        deps.spark_runner(project, tmp_path, lambda _e: None)
                    assert "SLUICE_ISOLATE_ACCEPT_SHARED_SPARK" in (refused.value.hint or "")
            with job_spark(OWN_SPARK):
                assert deps.spark_runner(project, tmp_path, lambda _e: None) is not None
        finally:
            deps.ledger.close()
