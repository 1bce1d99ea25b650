"""`sluice jobs list|show` on a real queue (SQLite): what operators see of it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sluice.bot.queue.store import JobQueue, NewJob
from sluice.cli import cli


def _queue(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'service.db'}"
    queue = JobQueue(url, max_attempts=3)
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
    unset = CliRunner().invoke(cli, ["jobs", "list"], env={"SLUICE_DATABASE_URL": ""})
    assert unset.exit_code == 2 and "--database-url" in unset.output
