"""A misspelled name gets the closest right one in the hint: config keys at any depth,
model kinds, model names; a name close to nothing gets the list or the ways to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.core.errors import SluiceError
from tests.core.helpers import BASIC, load


def _error(tmp_path: Path, **files: str) -> SluiceError:
    with pytest.raises(SluiceError) as caught:
        load(tmp_path, {**BASIC, **files})
    return caught.value


@pytest.mark.parametrize(
    ("config", "line", "wrong", "right"),
    [
        ("model_defaults:\n  dialect: spark\n  cronn: '@daily'\n", 3, "model_defaults.cronn",
         "cron"),
        ("model_defaults:\n  dialect: spark\nsluice:\n  pr:\n    backfil_days: 3\n", 5,
         "sluice.pr.backfil_days", "backfill_days"),
        ("model_defaults:\n  dialect: spark\nsluice:\n  sparkk:\n    master: local\n", 4,
         "sluice.sparkk", "spark"),
        ("model_default:\n  dialect: spark\n", 1, "model_default", "model_defaults"),
    ],
)  # fmt: skip
def test_a_misspelled_config_key_at_any_depth(
    tmp_path: Path, config: str, line: int, wrong: str, right: str
) -> None:
    error = _error(tmp_path, **{"config.yaml": config})
    assert error.line == line and wrong in str(error)
    assert error.hint == f"did you mean '{right}'?"


def test_a_config_key_close_to_nothing_says_where_the_settings_are(tmp_path: Path) -> None:
    error = _error(tmp_path, **{"config.yaml": "model_defaults:\n  dialect: spark\n  zzz: 1\n"})
    assert error.hint is not None and "did you mean" not in error.hint
    assert "configuration table" in error.hint


def test_a_misspelled_kind(tmp_path: Path) -> None:
    model = "MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANG (time_column ds));\nSELECT 1 AS ds\n"
    error = _error(tmp_path, **{"models/a.sql": model})
    assert (error.line, error.col) == (1, 23)
    assert error.hint is not None
    assert error.hint.startswith("did you mean 'INCREMENTAL_BY_TIME_RANGE' or ")
    error = _error(
        tmp_path / "2", **{"models/a.sql": "MODEL (name s.a, kind QQQ);\nSELECT 1 AS x\n"}
    )
    assert error.hint is not None and error.hint.startswith("use one of FULL")


def test_a_misspelled_model_name(tmp_path: Path) -> None:
    error = _error(
        tmp_path, **{"models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT id FROM s.bb\n"}
    )
    assert error.line == 2 and "'s.bb'" in str(error)
    assert error.hint is not None and error.hint.startswith("did you mean 's.b'? Otherwise add")
    error = _error(
        # (in the models' own schema: elsewhere an unknown table is read as an external one)
        tmp_path / "2",
        **{"models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT 1 FROM s.qqqqqqq\n"},
    )
    assert error.hint is not None and error.hint.startswith("check the name, add a model")
