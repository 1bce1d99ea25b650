"""The GitHub Action's entry point run as a workflow job would run it: a subprocess
(``tests/helpers/action_child.py``) with the job's environment, its event file, a
workspace, and GitHub's API faked at the wire (:class:`~tests.helpers.github_wire.FakeGitHub`,
kept in ``github.json``). Shared by ``tests/bot/entry/test_action.py`` and
``test_action_modes.py``.

:func:`refused_here` calls the same entry point in the test's own process, for the jobs
refused before any work: a process of their own would only add a second of start-up."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import responses

from sluice.bot.entry.action import main as action_main
from tests.helpers.cases import load_case
from tests.helpers.github_wire import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]  # the repository
REPO = "octo/warehouse"
HEAD = "a1" * 20
BASE = "b2" * 20
TOKEN = "ghs_actionTestToken123"


def make_project(root: Path, config: str = "sluice:\n  project: demo\n") -> Path:
    """A project at ``root``: its ``config.yaml`` and an empty ``models``."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(config)
    return root


def job_env(tmp_path: Path, event: str, payload: dict[str, Any] | None,
            **extra: str) -> dict[str, str]:  # fmt: skip
    """The environment of a workflow job for ``event`` (its payload written to
    ``tmp_path/event.json`` unless None), the Action's inputs set, and ``extra``."""
    event_path = tmp_path / "event.json"
    if payload is not None:
        event_path.write_text(json.dumps(payload))
    # The suite's JVM settings (tests/conftest.py) stay: the operator's, not the job's.
    keep = ("SLUICE_JVM_CACHE", "SLUICE_DRIVER_JAVA_OPTIONS")
    env = {k: v for k, v in os.environ.items()
           if k in keep or not k.startswith(("GITHUB_", "INPUT_", "SLUICE_"))}  # fmt: skip
    env.update(
        GITHUB_ACTIONS="true", GITHUB_EVENT_NAME=event, GITHUB_EVENT_PATH=str(event_path),
        GITHUB_REPOSITORY=REPO, GITHUB_WORKSPACE=str(tmp_path / "workspace"),
        GITHUB_API_URL="https://api.github.com", GITHUB_SHA="c3" * 20,
        GITHUB_OUTPUT=str(tmp_path / "output.txt"), INPUT_TOKEN=TOKEN,
        INPUT_PROJECT_PATH=".", INPUT_SPARK_MASTER="local[1]", INPUT_SPARK_CONF="",
        INPUT_DATABASE_URL="", INPUT_CONFIG_OVERRIDE="",
        SLUICE_GITHUB_WRITE_INTERVAL="0", SPARK_LOCAL_IP="127.0.0.1",
    )  # fmt: skip
    env.update(extra)
    return env


def run_action(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The entry point run in a child process with ``env``, against the fake GitHub in
    ``tmp_path/github.json``."""
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.action_child", str(tmp_path / "github.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def refused_here(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """:func:`run_action`'s result, the entry point called in this process with ``env``
    (its printed output and log captured; the root logger, which it sets up, restored)."""
    github = FakeGitHub(state_file=tmp_path / "github.json")
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            responses.RequestsMock(assert_all_requests_are_fired=False) as mock,
        ):
            github.install(mock)
            code = action_main(env)
    finally:
        root.handlers[:], root.level = handlers, level
    return subprocess.CompletedProcess(["sluice", "action"], code, out.getvalue(), err.getvalue())


def pr_payload() -> dict[str, Any]:
    """A real ``pull_request`` opened payload, of ``REPO``, from ``BASE`` to ``HEAD``."""
    payload = load_case("github/pull_request/opened.payload.json")
    payload["repository"]["full_name"] = REPO
    payload["pull_request"]["head"]["sha"] = HEAD
    payload["pull_request"]["base"]["sha"] = BASE
    return payload


def fake_github(tmp_path: Path, number: int, **files: str) -> FakeGitHub:
    """The fake GitHub (saved to ``tmp_path/github.json``) with PR ``number`` at ``HEAD``
    and ``files`` (path -> text) on ``master``."""
    github = FakeGitHub(repo=REPO, state_file=tmp_path / "github.json")
    github.add_pull(number, HEAD, author="Codertocat", base="master", head_ref="changes")
    github.files.update({("master", path): text for path, text in files.items()})
    github.save()
    return github
