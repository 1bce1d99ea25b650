"""A column name Sluice writes into a job's SQL (a time column, a unique key, an SCD
column) is a plain name, from the MODEL header, a Python model's kind or the spec alike:
a quoted "name" holding SQL once closed ``PARTITIONED BY (`` or a join's ``ON`` and ran
statements of the PR's choosing (``java_method``) before any approval (red team, round 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import ModelError, ProjectErrors, SluiceError
from sluice.core.model.loader import load_project
from sluice.core.spark.steps import build

PAYLOAD = "ds) AS SELECT java_method('java.lang.System', 'exit', 0) --"


def _load(tmp_path: Path, model: str, name: str = "models/m.sql") -> SluiceError | None:
    (tmp_path / "models").mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"
    )
    (tmp_path / name).write_text(model)
    try:
        load_project(tmp_path, use_cache=False)
    except (ModelError, ProjectErrors) as exc:
        return exc
    return None


@pytest.mark.parametrize(
    "kind",
    [
        f'INCREMENTAL_BY_TIME_RANGE (time_column "{PAYLOAD}")',
        "INCREMENTAL_BY_TIME_RANGE (time_column `ds; DROP TABLE x`)",
        "INCREMENTAL_BY_UNIQUE_KEY (unique_key 'id <=> n.id AND java_method(1) IS NULL --')",
        'INCREMENTAL_BY_UNIQUE_KEY (unique_key ("id", "x) OR (1=1"))',
    ],
)
def test_a_header_column_holding_sql_is_refused_on_load(tmp_path: Path, kind: str) -> None:
    error = _load(tmp_path, f"MODEL (name s.m, kind {kind});\nSELECT 1 AS id, 1 AS ds\n")
    assert error is not None, "loaded"
    assert "column name" in str(error) or "unexpected" in str(error), error


def test_plain_names_still_load(tmp_path: Path) -> None:
    kind = 'INCREMENTAL_BY_TIME_RANGE (time_column "DS")'
    assert _load(tmp_path, f"MODEL (name s.m, kind {kind});\nSELECT 1 AS id, 1 AS ds\n") is None


def test_a_python_model_s_kind_holding_sql_is_refused(tmp_path: Path) -> None:
    code = (
        "from sqlmesh import model\n\n"
        "@model('s.p', columns={'id': 'int', 'ds': 'date'},\n"
        f"       kind=dict(name='INCREMENTAL_BY_TIME_RANGE', time_column={PAYLOAD!r}))\n"
        "def execute(context, **kwargs):\n    return None\n"
    )
    error = _load(tmp_path, code, "models/p.py")
    assert error is not None and "column name" in str(error), error


@pytest.mark.parametrize("name", [PAYLOAD, "a`b", "a b", "1a", ""])
def test_the_driver_quotes_only_plain_names_and_refuses_the_rest(name: str) -> None:
    assert build._column("ds") == "`ds`"
    with pytest.raises(ValueError, match="not a column name"):
        build._column(name)
