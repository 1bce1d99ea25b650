"""A service process for the restart test: the real app on uvicorn, GitHub faked at the wire.

Run as ``python -m tests.helpers.service_child PORT WORKDIR DATABASE_URL GITHUB_STATE TREES``.
The fake GitHub keeps its state in the GITHUB_STATE file, so what this process posted
survives ``kill -9``; TREES holds ``<sha>.tar.gz`` archives the fake serves.
"""

from __future__ import annotations

import sys
from pathlib import Path

import responses
import uvicorn

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from tests.helpers.github_wire import FakeGitHub

SECRET = "restart-test-secret"


def main(port: int, workdir: str, url: str, state: str, trees: str) -> None:
    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_restartTestToken", workdir=Path(workdir),
        database_url=url, job_lease_seconds=4, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    github = FakeGitHub(state_file=Path(state))
    github.trees = {
        p.name.removesuffix(".tar.gz"): p.read_bytes() for p in Path(trees).glob("*.tar.gz")
    }
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru("http://127.0.0.1")
        github.install(mock)
        uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), *sys.argv[2:6])
