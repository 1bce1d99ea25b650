"""``sluice --help`` lists the commands by task, each with its whole one-line help, and
still imports none of the service's commands to do so (issue 43)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import click
from click.testing import CliRunner

from sluice.cli import LAZY_COMMANDS, cli
from sluice.core.cli.common import SECTIONS, one_line


def _sections(text: str) -> dict[str, dict[str, str]]:
    """The help's command sections: title -> {command: its help, lines joined}."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    name = ""
    for line in text.splitlines():
        if line and not line.startswith(" "):
            title = line.rstrip(":")
            current = (
                found.setdefault(title, {}) if title in (*SECTIONS, "Other commands") else None
            )
        elif current is not None and line.strip():
            match = re.match(r"  (\S+)\s+(.*)", line)
            if match and not line.startswith("   "):
                name = match.group(1)
                current[name] = match.group(2).strip()
            else:
                current[name] += " " + line.strip()
    return found


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    return command


def test_the_commands_are_listed_by_task_each_with_its_whole_help() -> None:
    result = CliRunner().invoke(cli, ["--help"], prog_name="sluice", terminal_width=80)
    assert result.exit_code == 0, result.output
    sections = _sections(result.output)
    assert list(sections) == list(SECTIONS), result.output  # in order, none left over
    assert "Commands:" not in result.output
    assert list(sections["Plan and review"]) == ["plan", "table-diff", "query", "test", "policy"]
    assert list(sections["Run and deploy"]) == ["apply", "run", "rollback"]
    assert list(sections["Environments"]) == ["environments", "drift", "invalidate", "janitor"]
    assert set(sections["Develop"]) == {"spark", "demo", "pr", "ui"}
    assert set(sections["Service"]) == {"serve", "jobs", "audit", "gitlab-webhook-token", "action"}
    listed = {name: text for rows in sections.values() for name, text in rows.items()}
    assert set(listed) == set(cli.list_commands(click.Context(cli)))
    for name, text in listed.items():
        assert text == one_line(_command(name)), name  # whole: not cut with "..."
        assert not text.endswith("...") and text.endswith((".", ")")), (name, text)
    # one column for the names in every section
    rows = [re.match(r"  (\S+) +", line) for line in result.output.splitlines()]
    starts = {row.end() for row in rows if row is not None and row.group(1) in listed}
    assert len(starts) == 1, starts


def test_a_lazy_commands_help_given_at_registration_is_its_own() -> None:
    for name, register, text, section in LAZY_COMMANDS:
        group = click.Group()
        register(group)
        assert one_line(group.commands[name]) == text, name
        assert section in SECTIONS


def test_one_line_is_the_short_help_or_the_whole_first_paragraph() -> None:
    @click.command()
    def long() -> None:
        """A first paragraph well over forty-five characters, which click would cut,
        on two lines.

        More."""

    @click.command(short_help="Short.")
    def short() -> None:
        """Long."""

    assert one_line(long) == (
        "A first paragraph well over forty-five characters, which click would cut, on two lines."
    )
    assert one_line(short) == "Short."


HELP = """
import json, sys
from sluice.cli import main
sys.argv = ["sluice", "--help"]
try:
    main()
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("sluice.bot", "pyspark")))))
"""


def test_help_imports_none_of_the_lazy_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(HELP)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    assert "Service:" in done.stdout and "  serve " in done.stdout
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == [], imported
