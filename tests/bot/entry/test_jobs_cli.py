"""`sluice jobs list|show` on a real queue (SQLite): what operators see of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.bot.entry.settings import ServiceSettings, StateSettings
from sluice.bot.queue.store import JobQueue, NewJob
from sluice.cli import cli


def _queue(tmp_path: Path, name: str = "service.db", jobs: int = 3) -> str:
    url = f"sqlite:///{tmp_path / name}"
    queue = JobQueue(url, max_attempts=3)
    if jobs < 3:
        job = NewJob(key="github:o/r#9", kind="pull_request", payload={"number": 9})
        assert queue.accept("d9", "github", "pull_request", job, 100.0)
        queue.close()
        return url
    for number in (1, 2, 3):
        job = NewJob(key=f"github:o/r#{number}", kind="pull_request",
                     payload={"number": number, "token": "x"}, head_sha=f"{number}" * 40)  # fmt: skip
        assert queue.accept(f"d{number}", "github", "pull_request", job, 100.0 + number)
    first = queue.claim("w1", 200.0)
    assert first is not None and first.id == 1
    queue.retry(first.id, "w1", "GitHub unreachable", 201.0)
    again = queue.claim("w1", 202.0)  # a retried job keeps its place
    assert again is not None and again.id == 1
    queue.finish(again.id, "w1", now=203.0)
    second = queue.claim("w1", 204.0)
    assert second is not None and second.id == 2
    queue.retry(second.id, "w1", "Spark job failed: a | pipe\nand a second line", 205.0)
    queue.close()
    return url


def test_list_shows_status_attempts_and_the_last_error(tmp_path: Path) -> None:
    url = _queue(tmp_path)
    listed = CliRunner().invoke(cli, ["jobs", "list", "--json", "--database-url", url])
    assert listed.exit_code == 0, listed.output
    jobs = {j["id"]: j for j in json.loads(listed.output)}
    assert sorted(jobs) == [1, 2, 3]
    assert (jobs[2]["status"], jobs[2]["attempts"]) == ("queued", 1)
    assert jobs[2]["error"].startswith("Spark job failed")
    assert (jobs[1]["status"], jobs[1]["attempts"]) == ("done", 2)
    assert jobs[1]["finished"].endswith("UTC")
    queued = CliRunner().invoke(
        cli, ["jobs", "list", "--status", "queued", "--json", "--database-url", url]
    )
    assert [j["id"] for j in json.loads(queued.output)] == [3, 2]  # newest first
    table = CliRunner().invoke(cli, ["jobs", "list"], env={"SLUICE_DATABASE_URL": url})
    assert table.exit_code == 0, table.output
    assert "Spark job" in table.output and "second line" not in table.output  # its first line
    assert "2 queued" in table.output and "1 done" in table.output


def test_show_prints_one_job_and_refuses_an_unknown_id(tmp_path: Path) -> None:
    url = _queue(tmp_path)
    shown = CliRunner().invoke(cli, ["jobs", "show", "2", "--database-url", url])
    assert shown.exit_code == 0, shown.output
    assert "status: queued" in shown.output and "a | pipe\nand a second line" in shown.output
    as_json = CliRunner().invoke(cli, ["jobs", "show", "2", "--json", "--database-url", url])
    assert json.loads(as_json.output)["payload"]["number"] == 2
    missing = CliRunner().invoke(cli, ["jobs", "show", "99", "--database-url", url])
    assert missing.exit_code == 1 and "there is no job 99" in missing.output


def _no_state_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)
    monkeypatch.delenv("SLUICE_WORKDIR", raising=False)


def test_without_a_url_it_reads_the_state_sluice_serve_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_state_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    # `sluice serve`'s default: state.db in the default workdir, in the current folder.
    default = ServiceSettings(webhook_secret="s")  # type: ignore[arg-type]
    assert default.state_url() == StateSettings().state_url()
    (tmp_path / ".sluice-service").mkdir()
    _queue(tmp_path / ".sluice-service", "state.db")
    listed = CliRunner().invoke(cli, ["jobs", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert sorted(j["id"] for j in json.loads(listed.output)) == [1, 2, 3]
    shown = CliRunner().invoke(cli, ["jobs", "show", "2"])
    assert shown.exit_code == 0 and "status: queued" in shown.output, shown.output
    # SLUICE_WORKDIR moves it, as it moves the service's.
    elsewhere = tmp_path / "srv"
    elsewhere.mkdir()
    _queue(elsewhere, "state.db", jobs=1)
    monkeypatch.setenv("SLUICE_WORKDIR", str(elsewhere))
    moved = CliRunner().invoke(cli, ["jobs", "list", "--json"])
    assert [j["id"] for j in json.loads(moved.output)] == [1], moved.output
    # SLUICE_DATABASE_URL wins over both; an empty one is unset (as for the service).
    monkeypatch.setenv(
        "SLUICE_DATABASE_URL", f"sqlite:///{tmp_path / '.sluice-service' / 'state.db'}"
    )
    chosen = CliRunner().invoke(cli, ["jobs", "list", "--json"])
    assert len(json.loads(chosen.output)) == 3, chosen.output
    monkeypatch.setenv("SLUICE_DATABASE_URL", "")
    empty = CliRunner().invoke(cli, ["jobs", "list", "--json"])
    assert len(json.loads(empty.output)) == 1, empty.output


def test_no_state_where_it_looks_is_refused_and_none_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_state_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    missing = CliRunner().invoke(cli, ["jobs", "list"])
    assert missing.exit_code == 1, missing.output
    state = tmp_path / ".sluice-service" / "state.db"
    assert f"no Sluice state at {state}" in missing.output
    assert "SLUICE_WORKDIR" in missing.output and "--database-url" in missing.output
    assert "Traceback" not in missing.output
    given = CliRunner().invoke(cli, ["jobs", "show", "1", "--database-url",
                                     f"sqlite:///{tmp_path / 'typo.db'}"])  # fmt: skip
    assert given.exit_code == 1 and "(--database-url)" in given.output, given.output
    assert not state.exists() and not (tmp_path / "typo.db").exists()
