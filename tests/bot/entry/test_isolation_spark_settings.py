"""A service keeping repositories apart gives each a Spark root of its own; where the
Spark settings make every job share one catalog or storage anyway (a remote Connect
endpoint, a metastore of the operator's, a cluster master, a folder or service every
driver reaches), a root keeps nothing apart: the service refuses to start, saying why,
unless the operator accepts it (``SLUICE_ISOLATE_ACCEPT_SHARED_SPARK``)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.core.errors import ConfigError

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
