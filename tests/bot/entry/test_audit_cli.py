"""`sluice audit` on a real state (SQLite): JSON lines that round-trip, filters, a table
that shows stored text as text, and the default state found as `sluice jobs` finds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.bot.flow.audit import Entry
from sluice.bot.flow.ledger import Ledger
from sluice.cli import cli

DAY = 86_400_000
T0 = 1_795_910_400_000  # 2026-11-29T00:00:00Z


def _state(tmp_path: Path) -> tuple[str, list[Entry]]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    ledger = Ledger(url)
    try:
        ledger.append(Entry(T0 - DAY, "github:o/r", "approval", "sluice", "passed", "#7", "f" * 32))
        ledger.append(Entry(T0, "github:o/r", "refusal", "eve", "not a writer", "#7",
                            detail="none permission: /sluice deploy [bold]x[/bold] é"))  # fmt: skip
        ledger.append(Entry(T0 + 1, "gitlab:g/p", "rollback", "bob", "rolled back", "#2", "p1"))
        rows = ledger.entries()
    finally:
        ledger.close()
    return url, rows


def test_json_lines_round_trip_oldest_first(tmp_path: Path) -> None:
    url, rows = _state(tmp_path)
    done = CliRunner().invoke(cli, ["audit", "--json", "--database-url", url])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert [Entry.from_json(json.loads(line)) for line in lines] == rows
    assert json.loads(lines[1])["detail"].endswith("[bold]x[/bold] é")


def test_repo_and_since_filter(tmp_path: Path) -> None:
    url, _ = _state(tmp_path)
    args = ["audit", "--json", "--database-url", url, "--repo", "github:o/r"]
    done = CliRunner().invoke(cli, [*args, "--since", "2026-11-29"])
    assert done.exit_code == 0, done.output
    assert [json.loads(line)["kind"] for line in done.output.splitlines()] == ["refusal"]
    bad = CliRunner().invoke(cli, [*args, "--since", "yesterday"])
    assert bad.exit_code == 2 and "not an ISO 8601 date" in bad.output


def test_the_table_shows_stored_text_as_text(tmp_path: Path) -> None:
    url, _ = _state(tmp_path)
    done = CliRunner().invoke(cli, ["audit", "--database-url", url], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    assert "[bold]x[/bold]" in done.output  # not taken for Rich markup
    assert "3 rows" in done.output


def test_the_default_state_is_the_services_and_a_missing_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)
    monkeypatch.setenv("SLUICE_WORKDIR", str(tmp_path / "nowhere"))
    refused = CliRunner().invoke(cli, ["audit"])
    assert refused.exit_code == 1 and "no Sluice state at" in refused.output
    assert not (tmp_path / "nowhere").exists()  # not made
    monkeypatch.setenv("SLUICE_WORKDIR", str(tmp_path))
    _url, rows = _state(tmp_path)
    done = CliRunner().invoke(cli, ["audit", "--json"])
    assert done.exit_code == 0, done.output
    assert len(done.output.splitlines()) == len(rows) == 3


def test_a_renamed_repository_s_rows_are_found_under_its_name_now(tmp_path: Path) -> None:
    url, _ = _state(tmp_path)
    ledger = Ledger(url)
    try:  # github:o/r bound to its id, then renamed o/new (the forge said so)
        ledger.bind_repository("github:o/r", 5, T0)
        ledger.add_name("github:O/New", 5, "github:o/r", T0 + 2)
    finally:
        ledger.close()
    args = ["audit", "--json", "--database-url", url, "--repo", "github:o/new"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert [json.loads(line)["kind"] for line in done.output.splitlines()] == [
        "approval",
        "refusal",
    ]
