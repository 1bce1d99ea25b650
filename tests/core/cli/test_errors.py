"""How the CLI says what is wrong (issue 43): a parse error shows its source line with a
caret under the column, user text is never read as rich markup, and with ``--json`` every
error is one JSON object on stdout (error, file, line, col, hint) and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from sluice.cli import cli
from sluice.core.errors import ModelError, ProjectErrors, excerpt, to_json
from tests.core.helpers import BASIC, write_project

BROKEN_SQL = "MODEL (name s.d, kind FULL);\nSELECT id,\tname FROM (SELECT 1 AS [red]x\n"


def _broken(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "project", BASIC)
    (root / "models" / "d.sql").write_text(BROKEN_SQL, encoding="utf-8")
    (root / "models" / "e.sql").write_text("MODEL (name s.e, kind FULLL);\nSELECT 1 AS x\n")
    return root


def test_a_parse_error_shows_its_line_with_a_caret_under_the_column(tmp_path: Path) -> None:
    root = _broken(tmp_path)
    result = CliRunner().invoke(cli, ["plan", "--project", str(root)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert result.stdout == ""
    # the first problem: where, the line (its tab as spaces, its markup as text), the caret
    where = lines.index(next(line for line in lines if "d.sql:2:" in line))
    assert lines[where].startswith("error: ") and "cannot parse the query of s.d" in lines[where]
    col = int(lines[where].split("d.sql:2:")[1].split(":")[0])
    shown, caret = lines[where + 1], lines[where + 2]
    assert shown == "   2 | SELECT id,  name FROM (SELECT 1 AS [red]x"
    assert caret.rstrip().endswith("^") and set(caret[7:-1]) <= {" "}
    source = BROKEN_SQL.splitlines()[1]
    # the caret is under the character the column names, the tab expanded as shown
    assert shown[caret.index("^")] == source[col - 1], (shown, caret, col)
    assert lines[where + 3].startswith("  hint: ")
    # the second problem, so too
    kind = lines.index(next(line for line in lines if "e.sql:1:23: unknown model kind" in line))
    assert lines[kind + 1] == "   1 | MODEL (name s.e, kind FULLL);"
    assert lines[kind + 2] == "     |                       ^"
    assert lines[kind + 3].startswith("  hint: did you mean 'FULL'?")


def test_user_text_in_an_error_is_not_markup(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", BASIC)
    (root / "models" / "a.sql").write_text(
        "MODEL (name s.a, kind FULL);\nSELECT 1 AS id FROM [bold]nowhere[/bold]\n"
    )
    result = CliRunner().invoke(cli, ["plan", "--project", str(root)])
    assert result.exit_code == 1
    assert "[bold]nowhere[/bold]" in result.stderr, result.stderr


def test_a_relative_path_is_read_from_the_project_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("SELECT 1\nSELECT oops\n")
    error = ModelError("bad", path="models/a.sql", line=2, col=8)
    monkeypatch.chdir(tmp_path.parent)
    assert excerpt(error) == []
    assert excerpt(error, base=tmp_path) == ["   2 | SELECT oops", "     |        ^"]


@pytest.mark.parametrize(
    ("line", "col", "expected"),
    [
        pytest.param("a\tb", 3, ["   1 | a   b", "     |     ^"], id="tab"),
        pytest.param("名前 = x", 4, ["   1 | 名前 = x", "     |      ^"], id="wide characters"),
        pytest.param("a\x1b[31mb", 7, ["   1 | a?[31mb", "     |       ^"], id="terminal codes"),
        pytest.param("ab", None, ["   1 | ab"], id="no column"),
        pytest.param("ab", 40, ["   1 | ab"], id="a column past the line"),
        pytest.param(
            "x" * 50 + "!" + "y" * 200,
            51,
            ["   1 | …" + "x" * 15 + "!" + "y" * 14 + "…", "     | " + " " * 16 + "^"],
            id="a long line, cut around the column",
        ),
    ],
)
def test_excerpt(tmp_path: Path, line: str, col: int | None, expected: list[str]) -> None:
    path = tmp_path / "m.sql"
    path.write_text(line + "\n", encoding="utf-8")
    assert excerpt(ModelError("x", path=path, line=1, col=col), width=30) == expected


def test_no_excerpt_without_a_readable_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("a: [\n")
    assert excerpt(ModelError("x", path=path, line=3, col=1)) == []  # YAML's end of file
    assert excerpt(ModelError("x", path=tmp_path / "gone.sql", line=1)) == []
    assert excerpt(ModelError("x", path=tmp_path, line=1)) == []  # a folder
    assert excerpt(ModelError("x", line=1)) == []


# -- --json ------------------------------------------------------------------------------


def test_a_plan_error_with_json_is_a_json_object_on_stdout(tmp_path: Path) -> None:
    root = _broken(tmp_path)
    result = CliRunner().invoke(cli, ["plan", "--project", str(root), "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert set(document) == {"error", "file", "line", "col", "hint", "errors"}
    assert document["error"] == "2 problems in the project"
    first, second = document["errors"]
    assert set(first) == {"error", "file", "line", "col", "hint"}
    assert first["file"].endswith("d.sql") and first["line"] == 2 and first["col"] >= 1
    assert first["error"].startswith("cannot parse the query of s.d")
    assert second == {
        "error": "unknown model kind 'FULLL'",
        "file": str(root / "models" / "e.sql"),
        "line": 1,
        "col": 23,
        "hint": second["hint"],
    }
    assert second["hint"].startswith("did you mean 'FULL'?")
    assert "error:" not in result.stderr


def test_to_json_of_one_error() -> None:
    assert to_json(ModelError("no", hint="h")) == {
        "error": "no",
        "file": None,
        "line": None,
        "col": None,
        "hint": "h",
    }
    both = to_json(ProjectErrors([ModelError("a", path="x", line=1), ModelError("b")]))
    assert [e["error"] for e in both["errors"]] == ["a", "b"]


def _json_commands() -> list[list[str]]:
    """Every command path taking --json, the service's lazy commands registered."""
    found = []

    def walk(group: click.Group, path: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                walk(command, [*path, name])
            elif any("--json" in p.opts for p in command.params if isinstance(p, click.Option)):
                found.append([*path, name])

    walk(cli, [])
    return found


def test_the_commands_taking_json_are_all_covered_below() -> None:
    assert sorted(" ".join(c) for c in _json_commands()) == sorted(
        [*SLUICE_ERRORS, "audit", "jobs list", "jobs show", "pr status"]
    )


# A Sluice error for each core command taking --json: its project does not load.
SLUICE_ERRORS: dict[str, list[str]] = {
    "plan": ["plan"],
    "apply": ["apply"],
    "query": ["query", "prod", "SELECT 1"],
    "table-diff": ["table-diff", "prod:dev", "s.a"],
    "environments": ["environments"],
    "drift": ["drift"],
    "run": ["run"],
    "spark status": ["spark", "status"],
}


@pytest.mark.parametrize("args", SLUICE_ERRORS.values(), ids=SLUICE_ERRORS.keys())
def test_every_core_json_command_prints_its_error_as_json(tmp_path: Path, args: list[str]) -> None:
    root = write_project(tmp_path / "project", {**BASIC, "config.yaml": "model_defaults: [\n"})
    result = CliRunner().invoke(cli, [*args, "--project", str(root), "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["file"] == str(root / "config.yaml") and document["line"], document
    assert document["error"].startswith("invalid YAML") and document["hint"], document


@pytest.mark.parametrize(
    "args",
    [
        ["pr", "status", "1", "--repo", "{tmp}/nowhere"],
        ["jobs", "show", "1", "--database-url", "sqlite:///{tmp}/nowhere/state.db"],
        ["jobs", "list", "--database-url", "sqlite:///{tmp}/nowhere/state.db"],
        ["audit", "--database-url", "sqlite:///{tmp}/nowhere/state.db"],
    ],
    ids=["pr status", "jobs show", "jobs list", "audit"],
)
def test_the_service_json_commands_print_their_errors_as_json(
    tmp_path: Path, args: list[str]
) -> None:
    given = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(cli, [*given, "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"error", "file", "line", "col", "hint"}
    assert "nowhere" in document["error"], document


@pytest.mark.parametrize("path", _json_commands(), ids=" ".join)
def test_a_usage_error_with_json_is_json_too(path: list[str]) -> None:
    result = CliRunner().invoke(cli, [*path, "--json", "--no-such-option"], prog_name="sluice")
    assert result.exit_code == 2, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["error"] == "No such option '--no-such-option'.", document
    assert document["hint"] == f"see `sluice {' '.join(path)} --help`"
    assert (document["file"], document["line"], document["col"]) == (None, None, None)


def test_without_json_a_usage_error_is_clicks_as_before() -> None:
    result = CliRunner().invoke(cli, ["plan", "--start", "soon"])
    assert result.exit_code == 2
    assert result.stdout == "" and "Invalid value for '--start'" in result.stderr
    bad = CliRunner().invoke(cli, ["plan", "--start", "soon", "--json"])
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"].startswith("Invalid value")


def test_terminal_codes_from_a_project_never_reach_the_terminal(tmp_path: Path) -> None:
    """A column's or a file's name, or a driver's log line, is the project's text: its ESC
    sequences (a hidden rest of line, a new window title, a link) and bidirectional
    overrides are printed as ``?`` (red team)."""
    from io import StringIO

    from rich.console import Console

    from sluice.core.cli.common import print_error
    from sluice.core.cli.progress import JobProgress
    from sluice.core.errors import ConfigError

    out = StringIO()
    hostile = "x\x1b[8m\x1b]0;pwned\x07\x1b]8;;http://evil/\x1b\\\u202e"
    error = ConfigError(f"unknown column {hostile}", path=f"models/{hostile}.sql", line=1,
                        hint=f"did you mean {hostile}?")  # fmt: skip
    print_error(error, console=Console(file=out, force_terminal=False, width=200))
    shown = out.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "x?[8m" in shown and "pwned" in shown  # said, as text
    lines = StringIO()
    progress = JobProgress(Console(file=lines, force_terminal=False, width=200), live=False)
    progress({"event": "log", "message": f"model says {hostile}"})
    assert "\x1b" not in lines.getvalue()
