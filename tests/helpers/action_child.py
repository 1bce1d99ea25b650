"""The Action's entry point in its own process, GitHub faked at the wire.

Run as ``python -m tests.helpers.action_child GITHUB_STATE`` with the GITHUB_* and INPUT_*
environment a workflow job would have. The fake GitHub reads its arrangement from, and
writes what the Action did to, the GITHUB_STATE JSON file; the exit code is the Action's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import responses

from sluice.bot.entry.action import main as action_main
from tests.helpers.github_wire import FakeGitHub


def main(state: str) -> int:
    github = FakeGitHub(state_file=Path(state))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        github.install(mock)
        return action_main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
