"""Which catalogs a model name may carry (docs/security.md, "Who decides"): those the
service's Spark settings configure, never one a pull request's or the prod branch's
``sluice.spark.conf`` adds (``spark.sql.catalog.*`` can load a class: it is not tuning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.bot.flow import trust
from sluice.core.config import SparkSettings
from sluice.core.errors import ModelError
from sluice.core.model.loader import load_project
from tests.core.helpers import write_project

OWN_CATALOG = """
sluice:
  spark:
    conf:
      spark.sql.catalog.lake: com.evil.Catalog
      spark.sql.catalog.lake.uri: http://attacker.example
      spark.sql.shuffle.partitions: '8'
"""


def test_only_the_service_s_catalogs_may_be_named(tmp_path: Path) -> None:
    parsed = trust.parse(
        trust.Source.of_config(OWN_CATALOG, "config.yaml")
    )  # the prod branch adds a catalog, too
    settings = trust.Settings(
        branch="main",
        sha=None,
        sluice=parsed.sluice,
        gate=parsed.gate,
        deploy=parsed.deploy,
        digest=parsed.digest,
        source="`main`",
    )
    service = SparkSettings(conf={"spark.sql.catalog.wh": "org.example.Warehouse"})
    trusted = settings.for_project(service)
    assert "spark.sql.catalog.lake" in settings.ignored_spark()
    files = {
        "config.yaml": OWN_CATALOG,  # the PR's own config.yaml names it as well
        "models/a.sql": "MODEL (name wh.s.a, kind FULL); SELECT 1 AS id",
    }
    project = load_project(write_project(tmp_path / "ok", files), sluice=trusted)
    assert "wh.s.a" in project.models
    files["models/b.sql"] = "MODEL (name s.b, kind FULL);\nSELECT id FROM lake.s.a"
    with pytest.raises(ModelError) as info:
        load_project(write_project(tmp_path / "pr", files), sluice=trusted)
    assert info.value.message == "'lake.s.a' names the catalog 'lake', which Sluice does not know"
    assert (info.value.line, info.value.col) == (2, 16)
    assert info.value.hint and "wh (spark.sql.catalog.wh)" in info.value.hint
