"""``sluice ui --project DIR``: one local project's UI on 127.0.0.1, no sign-in. The real
command in a process of its own serves the project's state (prod built by the scripted
runner, no Spark) at the URL it prints; a project without state is refused, naming what
to run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from sluice.bot.entry.ui import site_of
from sluice.bot.web.standalone import ui_app
from sluice.cli import cli
from sluice.core import workflow
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state
from tests.core.helpers import load

NOW = 1_800_000_000_000
REPO = Path(__file__).resolve().parents[3]
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


def _git(root: Path, *args: str) -> None:
    identity = ["-c", "user.name=Ana", "-c", "user.email=ana@example.com"]
    subprocess.run(["git", *identity, *args], cwd=root, check=True, capture_output=True)


def test_the_site_shows_a_local_pull_request_that_sluice_pr_built(tmp_path: Path) -> None:
    """``sluice pr open`` (the scripted runner, no Spark) then ``sluice ui``'s site on the
    same repository: the PR's title and checks from the local forge, its plan and build
    from the state and ledger under the key ``sluice pr`` gave them."""
    root = tmp_path / "shop"
    shutil.copytree(
        REPO / "examples" / "jaffle_shop", root, ignore=shutil.ignore_patterns(".sluice")
    )
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "shop")
    _git(root, "checkout", "-q", "-b", "change")
    orders = root / "models" / "orders.sql"
    orders.write_text(orders.read_text() + "\n-- <script>x</script> a comment\nLIMIT 1000\n")
    _git(root, "commit", "-q", "-am", "orders: at most 1000")
    _git(root, "checkout", "-q", "main")
    warehouse = Warehouse()
    opened = CliRunner().invoke(
        cli,
        [
            "pr",
            "open",
            "--repo",
            str(root),
            "--base",
            "main",
            "--head",
            "change",
            "--title",
            "<i>Cap</i> orders",
            "--user",
            "ana",
            "-q",
        ],
        obj={"runner_for": warehouse.runner},
    )
    assert opened.exit_code == 0, opened.output
    site, repo = site_of(root)
    assert repo == "local:shop"
    with TestClient(ui_app(site)) as client:
        [listed] = client.get("/api/v1/pulls").json()["items"]
        pr = client.get("/api/v1/pulls/1").json()
    assert (listed["number"], listed["title"]) == (1, "<i>Cap</i> orders")
    assert pr["plan"] and pr["builds"]
    assert "jaffle.orders" in pr["plan"]["added"]  # no prod yet: every model is new
    assert {c["name"] for c in pr["checks"]} >= {"sluice/pr-environment", "sluice/approval"}
