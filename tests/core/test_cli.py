import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.core.cli import cli
from tests.core.helpers import BASIC, write_project

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    copy = tmp_path / "jaffle"
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", copy, ignore=shutil.ignore_patterns(".sluice")
    )
    return copy


def test_plan_json_through_the_installed_command(example: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_DATABASE_URL"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sluice"), "plan", "--project", str(example), "--json", "--end", "2018-04-30"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["environment"] == "prod"
    assert set(data) >= {
        "added",
        "removed",
        "directly_modified",
        "indirectly_modified",
        "metadata_only",
        "backfill",
    }
    assert "jaffle.orders" in data["added"]
    revenue = next(b for b in data["backfill"] if b["model"] == "jaffle.daily_revenue")
    assert (revenue["start"], revenue["end"], revenue["intervals"], revenue["batches"]) == (
        "2018-01-01",
        "2018-05-01",
        120,
        4,
    )


def test_plan_tree_output(example: Path) -> None:
    result = CliRunner().invoke(
        cli, ["plan", "pr_1", "--project", str(example), "--end", "2018-05-01"]
    )
    assert result.exit_code == 0, result.output
    assert "Plan for environment pr_1" in result.output
    assert "Added (10)" in result.output and "jaffle.daily_revenue" in result.output
    assert "jaffle.customer_segments" in result.output  # the Python model


def test_modified_model_shows_category_and_diff(tmp_path: Path) -> None:
    root = write_project(tmp_path, BASIC)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    # Record prod through the library, then change a model and plan a PR environment.
    from sluice.core import workflow
    from sluice.core.model.loader import load_project
    from sluice.core.state import open_state

    store = open_state(state)
    project = load_project(root)
    workflow.commit_plan(
        store,
        workflow.plan_environment(project, store, "prod", end=10**12 + 7, execution_time=0),
        now=0,
    )
    store.close()
    (root / "models" / "a.sql").write_text(
        "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'x' AS name, TRUE AS flag"
    )
    result = CliRunner().invoke(cli, ["plan", "pr_9", "--project", str(root), "--state", state])
    assert result.exit_code == 0, result.output
    assert "Directly modified (1)" in result.output and "non-breaking" in result.output
    assert "+  TRUE AS flag" in result.output
    as_json = CliRunner().invoke(
        cli, ["plan", "pr_9", "--project", str(root), "--state", state, "--json"]
    )
    data = json.loads(as_json.output)
    assert data["directly_modified"][0]["category"] == "non-breaking"
    assert data["directly_modified"][0]["columns"]["added"] == ["flag"]
    # The children read none of the new column: narrowed out of "indirectly modified".
    assert data["indirectly_modified"] == [] and data["unaffected"] == ["s.b", "s.c"]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"models/x.sql": "MODEL (name s.x, kind FULL\nSELECT 1"}, "x.sql:1", id="bad header"
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.x, kind WHATEVER);\nSELECT 1"},
            "x.sql:1",
            id="unknown kind",
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.x, colour red);\nSELECT 1"},
            "x.sql:1",
            id="unknown property",
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.x, dialect nope);\nSELECT 1"},
            "x.sql:1",
            id="bad dialect",
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.x);\nSELECT (1"}, "x.sql:2", id="unparseable SQL"
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.x, kind SEED (path 'no.csv'));"},
            "x.sql:1",
            id="missing seed",
        ),
        pytest.param(
            {"models/x.sql": "MODEL (name s.a);\nSELECT 1"}, "defined twice", id="duplicate model"
        ),
        pytest.param(
            {"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT * FROM s.nope"},
            "b.sql:2",
            id="unknown table",
        ),
        pytest.param({"models/a.sql": "MODEL (name s.a);\nSELECT * FROM s.c"}, "cycle", id="cycle"),
        pytest.param(
            {"config.yaml": "model_defaults:\n  dialect: [\n"}, "config.yaml:", id="bad YAML"
        ),
    ],
)
def test_errors_exit_non_zero_and_write_no_state(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    root = write_project(tmp_path, {**BASIC, **files})
    result = CliRunner().invoke(cli, ["plan", "--project", str(root)])
    assert result.exit_code == 1
    assert "error:" in result.output and expected in result.output
    assert "Traceback" not in result.output
    assert not (root / ".sluice" / "state.db").exists()


def test_bad_environment_name_and_bad_date(tmp_path: Path) -> None:
    root = write_project(tmp_path, BASIC)
    bad_env = CliRunner().invoke(cli, ["plan", "Prod!", "--project", str(root)])
    assert bad_env.exit_code == 1 and "not a valid environment name" in bad_env.output
    assert not (root / ".sluice" / "state.db").exists()
    bad_date = CliRunner().invoke(cli, ["plan", "--project", str(root), "--start", "soon"])
    assert bad_date.exit_code == 2 and "is not a date" in bad_date.output


def test_the_sqlmesh_init_project_plans_unmodified(tmp_path: Path) -> None:
    copy = tmp_path / "sqlmesh_project"
    shutil.copytree(
        REPO / "tests" / "fixtures" / "sqlmesh_init_duckdb",
        copy,
        ignore=shutil.ignore_patterns(".sluice"),
    )
    result = CliRunner().invoke(
        cli, ["plan", "--project", str(copy), "--json", "--end", "2026-11-21"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["added"] == [
        "sqlmesh_example.seed_model",
        "sqlmesh_example.incremental_model",
        "sqlmesh_example.full_model",
    ]
    incremental = next(
        b for b in data["backfill"] if b["model"] == "sqlmesh_example.incremental_model"
    )
    assert incremental["start"] == "2020-01-01" and incremental["end"] == "2026-11-22"
    assert "ignored gateways" in result.stderr
