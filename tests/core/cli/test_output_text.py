"""What the CLI prints of users' text is that text: a location such as ``file:100:`` is
not turned into an emoji, and a name or message holding ``[...]`` is not read as a
style (Rich's emoji codes and markup are off for it)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from sluice.core.cli import cli
from sluice.core.cli.common import notes, progress


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (tmp_path / "models" / "m.sql").write_text(body)
    return tmp_path


def test_an_error_at_line_100_is_printed_as_a_location(tmp_path: Path) -> None:
    lines = ["MODEL (name s.m, kind FULL);", *["--"] * 98, "SELECT FROM WHERE ((("]
    project = _project(tmp_path, "\n".join(lines) + "\n")
    done = CliRunner().invoke(cli, ["plan", "--project", str(project)])
    assert done.exit_code == 1
    assert "m.sql:100:" in done.output, done.output
    assert "\N{HUNDRED POINTS SYMBOL}" not in done.output


def test_names_and_messages_are_not_read_as_markup(capsys: object) -> None:
    label = "build s.[red]m[/red] :100:"
    progress({"event": "job_start", "steps": 1})
    progress({"event": "step_start", "index": 0, "label": label})
    progress({"event": "step_done", "index": 0, "label": label, "seconds": 1.0})
    progress({"event": "log", "message": "[bold]x[/bold] at file:100:"})
    notes(("models/[red]x[/red].sql:100: a note",))
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "[1/1] build s.[red]m[/red] :100:: done in 1.0 s" in err
    assert "[bold]x[/bold] at file:100:" in err
    assert "models/[red]x[/red].sql:100: a note" in err
