"""``sluice ui --project DIR``: one local project's UI on 127.0.0.1, no sign-in. The real
command in a process of its own serves the project's state (prod built by the scripted
runner, no Spark) at the URL it prints; a project without state is refused, naming what
to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli import cli
from sluice.core import workflow
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.core.helpers import load

NOW = 1_800_000_000_000
CONFIG = "model_defaults:\n  dialect: spark\n"
ONE = "MODEL (name s.one, kind FULL, owner 'ana');\nSELECT 1 AS id\n"


def _open(url: str):  # type: ignore[no-untyped-def]
    """GET ``url`` directly (no proxy the environment names)."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=60)


def _project(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    project = root / "warehouse"
    loaded = load(project, {"config.yaml": CONFIG, "models/one.sql": ONE})
    store = open_state(f"sqlite:///{project / '.sluice' / 'state.db'}")
    try:
        plan = workflow.plan_environment(loaded, store, PROD, end=NOW, execution_time=NOW)
        workflow.apply_plan(loaded, store, plan, Warehouse().runner(), now=NOW)
    finally:
        store.close()
    return project


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    project = _project(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_DATABASE_URL"}
    child = subprocess.Popen(
        [sys.executable, "-m", "sluice", "ui", "--project", str(project), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("Sluice UI of "), (line, child.stderr and child.stderr.read())
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        child.terminate()
        child.wait(timeout=30)


def test_the_command_prints_the_url_it_serves_the_project_at(served: str) -> None:
    assert served.startswith("http://127.0.0.1:") and served.endswith("/ui/")
    origin = served.removesuffix("/ui/")
    with _open(f"{origin}/api/v1/repositories") as answer:
        [repo] = json.load(answer)
    assert repo["key"] == "local:repo"  # the key `sluice pr`'s events give the ledger
    with _open(f"{origin}/api/v1/models/s.one") as answer:
        model = json.load(answer)
    assert model["owner"] == "ana" and model["path"] == "models/one.sql"
    with _open(served) as answer:
        assert answer.url.endswith("/ui/environments?repo=local%3Arepo")
        assert "prod" in answer.read().decode()


def test_a_project_without_state_is_refused_naming_what_to_run(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "p").mkdir()
    result = CliRunner().invoke(
        cli, ["ui", "--project", str(tmp_path / "p")], env={"SLUICE_DATABASE_URL": ""}
    )
    assert result.exit_code != 0
    assert "has no state yet" in result.output and "sluice apply" in result.output


def test_a_folder_outside_git_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["ui", "--project", str(tmp_path)])
    assert result.exit_code != 0 and "is not in a git repository" in result.output
