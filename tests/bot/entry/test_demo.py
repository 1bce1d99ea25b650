"""``sluice demo``: the whole flow on the example project, once, on real Spark.

The end-to-end test runs the command as a user would (no runner injected: spark-submit),
in a temporary folder, then reads what the local forge recorded. The fast tests cover
what happens before Spark: no Java, and a folder the demo did not make.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sluice.cli import cli

pytestmark = pytest.mark.spark


def status(root: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["pr", "status", "1", "--json", "--repo", str(root)])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_demo_builds_prod_opens_approves_merges_promotes_and_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)
    root = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root), "--keep"])
    output = result.output
    assert result.exit_code == 0, output

    # the steps, in order, and the total time
    positions = [output.index(f"{n}/6 ") for n in range(1, 7)]
    assert positions == sorted(positions), output
    assert re.search(r"Demo finished in (\d+ min )?\d+ s", output), output
    assert "Applied to prod: 7 tables built" in output and "3 model views made" in output

    # the PR comment: the plan and the table diff
    assert "| `jaffle.orders` | **breaking** |" in output
    assert "| `jaffle.customers` | non-breaking |" in output
    assert "| `jaffle.customer_segments` | breaking, downstream |" in output  # the PySpark model
    assert "`jaffle.orders`: prod → pr_1: 4 rows only in prod" in output
    assert "added last_name_upper" in output

    # the gate: failing until the reviewer approves, then passing; then the deploy
    failed = re.search(r"sluice/approval\s+failure\s+1 more approval needed", output)
    passed = re.search(r"sluice/approval\s+success\s+Approved", output)
    deployed = re.search(r"sluice/deploy\s+success\s+Promoted by virtual update", output)
    assert failed and passed and deployed, output
    assert failed.start() < passed.start() < deployed.start()
    assert "sluice/deploy: success: Promoted by virtual update" in output

    # prod, queried at the end: no returned orders, and the new column
    assert re.search(r"returned_orders\s*┃\n┡━+┩\n│ 0\s+│", output), output
    assert re.search(r"│ 1\s+│ Michael\s+│ P\.\s+│ P\.\s+│", output), output
    # the PySpark model, rebuilt without the returned orders: 60 customers who ordered
    assert re.search(
        r"│ big spender\s+│ 3\s+│\n│ loyal\s+│ 6\s+│\n│ occasional\s+│ 51\s+│", output
    ), output

    # what the forge recorded agrees
    data = status(root)
    assert data["state"] == "merged"
    assert data["author"] == "author"
    assert [r["user"] for r in data["reviews"]] == ["reviewer"]
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["sluice/approval"]["conclusion"] == "success"
    assert checks["sluice/deploy"]["conclusion"] == "success"
    assert checks["sluice/deploy"]["title"] == "Promoted by virtual update"
    main = subprocess.run(["git", "rev-parse", "main"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert main == data["merge_sha"]


def test_without_java_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    root = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root)])
    assert result.exit_code == 1, result.output
    assert "Java not found" in result.output
    assert "apt-get install openjdk-17-jre-headless" in result.output
    assert "scripts/ensure-java.sh" in result.output
    assert not root.exists()


def test_a_broken_java_home_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 1, result.output
    assert "JAVA_HOME" in result.output and "openjdk-17-jre-headless" in result.output


def test_a_folder_it_did_not_make_is_not_deleted(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(mine)])
    assert result.exit_code == 1, result.output
    assert "was not made by `sluice demo`" in result.output
    assert (mine / "notes.txt").read_text() == "keep me\n"
