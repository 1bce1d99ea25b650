"""An EMBEDDED model has no table: it is inlined where a model reads it
(:func:`sluice.core.spark.render.inline_embedded`), so one that reads itself, alone or
through other embedded models, has no query Spark can run (red team F4: it planned, then
build_steps raised RecursionError, which is no SluiceError). Refused at load with
file:line; and inlining keeps the models it is inside, so a cycle that reached it anyway
is an error naming them, not a RecursionError."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from sluice.core.errors import ModelError, SluiceError
from sluice.core.spark.render import build_steps, inline_embedded
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-03")
CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n"


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1 AS id FROM jaffle.emb",
        "SELECT id FROM jaffle.emb WHERE FALSE UNION ALL SELECT 1 AS id",
    ],
)
def test_an_embedded_model_reading_itself_is_refused_at_load(tmp_path: Path, query: str) -> None:
    files = {
        "config.yaml": CONFIG,
        "models/emb.sql": f"MODEL (name jaffle.emb, kind EMBEDDED);\n{query}\n",
        "models/t.sql": "MODEL (name jaffle.t, kind FULL);\nSELECT id FROM jaffle.emb\n",
    }
    with pytest.raises(ModelError) as exc:
        load(tmp_path, files)
    assert exc.value.path == str(tmp_path / "models" / "emb.sql") and exc.value.line == 2
    assert "embedded model cannot read itself" in exc.value.message


def test_an_embedded_model_reading_another_plans_and_inlines(tmp_path: Path) -> None:
    files = {
        "config.yaml": CONFIG,
        "models/a.sql": "MODEL (name s.a, kind EMBEDDED);\nSELECT 1 AS id\n",
        "models/b.sql": "MODEL (name s.b, kind EMBEDDED);\nSELECT id FROM s.a\n",
        "models/t.sql": "MODEL (name s.t, kind FULL);\nSELECT id FROM s.b\n",
    }
    project = load(tmp_path, files)
    steps = build_steps(plan_of(project, end=END), project.audits, str(tmp_path), "parquet")
    [build] = [s for s in steps if s["type"] == "build"]
    assert "SELECT 1 AS id" in str(build)


@pytest.mark.parametrize(
    "embedded",
    [
        {"s.a": "SELECT 1 AS id FROM s.a"},
        {"s.a": "SELECT id FROM s.b", "s.b": "SELECT id FROM s.c", "s.c": "SELECT id FROM s.a"},
    ],
)
def test_inlining_an_embedded_cycle_is_an_error_naming_it(embedded: dict[str, str]) -> None:
    query = sqlglot.parse_one("SELECT id FROM s.a", read="spark")
    with pytest.raises(SluiceError) as exc:
        inline_embedded(query, embedded)
    assert "s.a" in exc.value.message and "cycle" in exc.value.message


def test_an_embedded_model_reading_this_model_is_refused_at_load(tmp_path: Path) -> None:
    # Inlined into its reader, @this_model would be the reader's own table: a FULL model
    # reading itself through it, which parse refuses when written in the reader.
    files = {
        "config.yaml": CONFIG,
        "models/emb.sql": "MODEL (name s.emb, kind EMBEDDED);\nSELECT * FROM @this_model\n",
        "models/t.sql": "MODEL (name x.t, kind FULL);\nSELECT id FROM s.emb\n",
    }
    with pytest.raises(ModelError) as exc:
        load(tmp_path, files)
    assert exc.value.path == str(tmp_path / "models" / "emb.sql") and exc.value.line == 2
    assert "@this_model" in exc.value.message


def test_embedded_models_nested_too_deep_are_an_error_not_a_recursion_error() -> None:
    # 400 deep raised RecursionError in build_steps (no SluiceError: the bot retries).
    embedded = {f"s.e{i}": f"SELECT id FROM s.e{i - 1}" for i in range(1, 400)}
    embedded["s.e0"] = "SELECT 1 AS id"
    query = sqlglot.parse_one("SELECT id FROM s.e399", read="spark")
    with pytest.raises(ModelError, match=r"nest more than 64 deep \(s\.e399 -> "):
        inline_embedded(query, embedded)
    shallow = sqlglot.parse_one("SELECT id FROM s.e63", read="spark")
    assert "SELECT 1 AS id" in inline_embedded(shallow, embedded).sql("spark")
