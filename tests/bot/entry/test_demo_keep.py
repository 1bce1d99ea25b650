"""``sluice demo --keep`` / ``make demo KEEP=1`` (issue 43), without Spark: the demo's
steps are replaced by one that makes what they leave (the repository, the PR comment),
so what is tested is the command line and what the demo says and keeps at the end. The
demo itself, on Spark, is tests/bot/entry/test_demo.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.bot.entry import demo
from sluice.cli import cli

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The demo without Java, git checks or Spark: its steps make the repository and the
    comment the local forge would hold."""
    ran: list[Path] = []

    def run(root: Path, spark_mode: str) -> int:
        ran.append(root)
        (root / ".git").mkdir(parents=True)
        (root / ".git" / "sluice-demo").write_text("made by `sluice demo`\n")
        comment = root / ".sluice" / "forge" / "prs" / "1" / "comment.md"
        comment.parent.mkdir(parents=True)
        comment.write_text("### Sluice\n\n```mermaid\nflowchart LR\n```\n")
        return 1

    monkeypatch.setattr(demo, "check_java", lambda: "openjdk 17")
    monkeypatch.setattr(demo, "check_git", lambda: None)
    monkeypatch.setattr(demo, "stop_all", lambda: None)
    monkeypatch.setattr(demo, "_run", run)
    return ran


def test_keep_keeps_the_repository_and_says_where_the_comment_and_its_graph_are(
    tmp_path: Path, no_spark: list[Path]
) -> None:
    root = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root), "--keep"])
    assert result.exit_code == 0, result.output
    assert no_spark == [root]
    comment = root / ".sluice" / "forge" / "prs" / "1" / "comment.md"
    assert comment.is_file()  # kept
    text = result.stdout
    assert "Demo finished in 0 s." in text
    assert f"The repository is kept in {root}: try `sluice pr status 1 --repo {root}`." in text
    assert "impact graph included" in text and f": {comment}" in text
    assert f"scripts/comment_screenshot.py {comment} {comment.with_suffix('.png')}" in text
    assert "scripts/ensure-mermaid.sh" in text


def test_without_keep_the_repository_is_removed_and_it_says_how_to_keep_it(
    tmp_path: Path, no_spark: list[Path]
) -> None:
    root = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root)])
    assert result.exit_code == 0, result.output
    assert no_spark == [root] and not root.exists()
    text = " ".join(result.stdout.split())
    assert "`sluice demo --keep` (`make demo KEEP=1`) keeps it" in text
    assert ".sluice/forge/prs/1/comment.md" in text


def test_the_ending_without_a_comment_names_only_the_repository(tmp_path: Path) -> None:
    lines = demo.ending(tmp_path, Path("rel"), 2, kept=True)
    assert lines == [f"The repository is kept in {tmp_path}: try `sluice pr status 2 --repo rel`."]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([], ".venv/bin/sluice demo"),
        (["KEEP=1"], ".venv/bin/sluice demo --keep"),
        (["KEEP=yes"], ".venv/bin/sluice demo --keep"),
        (["KEEP=0"], ".venv/bin/sluice demo"),
    ],
)
def test_make_demo_keep_passes_keep(given: list[str], expected: str) -> None:
    """What `make demo` would run (make -n: printed, nothing run)."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo", *given],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines()[-1] == expected, done.stdout
