"""The Action's recommended modes (issue 40 §6): each works as the README and
docs/security.md say, or refuses with exit 1 and a message saying what to do.

- ``pull_request_target`` is the docs' mode for PR authors not trusted with CI: it is
  handled as ``pull_request`` (a same-repository PR is built and reported), and a fork's PR
  is not built on its own event (a writer's ``/sluice plan`` builds it).
- ``pull_request`` and ``pull_request_review`` of a fork's PR on a public repository get
  a read-only token from GitHub ("Sluice cannot report on them"): refused before any API
  call, naming ``pull_request_target``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.entry import action
from tests.helpers.action_run import (
    HEAD,
    ROOT,
    fake_github,
    job_env,
    make_project,
    pr_payload,
    refused_here,
    run_action,
)
from tests.helpers.cases import load_case
from tests.helpers.github_wire import FakeGitHub


def _forked(payload: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(payload)
    head_repo = out["pull_request"]["head"]["repo"]
    head_repo["id"] = head_repo["id"] + 1
    head_repo["full_name"] = "someone-else/" + head_repo["full_name"].split("/")[1]
    return out


def test_pull_request_target_builds_and_reports_a_pull_request(tmp_path: Path) -> None:
    payload = pr_payload()
    number = payload["pull_request"]["number"]
    fake_github(tmp_path, number, **{"config.yaml": "sluice:\n  project: demo\n"})
    make_project(tmp_path / "workspace")
    done = run_action(tmp_path, job_env(tmp_path, "pull_request_target", payload))
    assert done.returncode == 0, done.stderr
    assert "nothing to do" not in done.stdout
    github = FakeGitHub(state_file=tmp_path / "github.json")
    checks = github.checks_on(HEAD)
    assert checks["sluice/pr-environment"]["conclusion"] == "success", checks
    assert len(github.comments_on(number)) == 1


def test_pull_request_target_of_a_fork_does_not_build_it(tmp_path: Path) -> None:
    payload = _forked(pr_payload())
    number = payload["pull_request"]["number"]
    github = fake_github(tmp_path, number, **{"config.yaml": "sluice:\n  project: demo\n"})
    github.pulls[number]["fork"] = True
    github.save()
    make_project(tmp_path / "workspace")
    done = run_action(tmp_path, job_env(tmp_path, "pull_request_target", payload))
    assert done.returncode == 0, done.stderr
    github = FakeGitHub(state_file=tmp_path / "github.json")
    assert "sluice/pr-environment" not in github.checks_on(HEAD) or (
        github.checks_on(HEAD)["sluice/pr-environment"]["conclusion"] != "success"
    )
    [comment] = github.comments_on(number)
    assert "/sluice plan" in comment["body"] and "fork" in comment["body"]


@pytest.mark.parametrize("event", ["pull_request", "pull_request_review"])
def test_a_read_only_fork_job_is_refused_naming_pull_request_target(
    tmp_path: Path, event: str
) -> None:
    if event == "pull_request":
        payload = _forked(pr_payload())
    else:
        payload = _forked(load_case("github/pull_request_review/submitted.payload.json"))
    fake_github(tmp_path, payload["pull_request"]["number"])
    make_project(tmp_path / "workspace")
    done = refused_here(tmp_path, job_env(tmp_path, event, payload))
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("::error title=Sluice::sluice action: pull request #")
    assert "comes from a fork" in last and "read-only token" in last
    assert "pull_request_target" in last
    assert FakeGitHub(state_file=tmp_path / "github.json").requests == []


def test_the_refusal_is_for_forks_of_public_repositories_only() -> None:
    same = pr_payload()
    action.refuse_read_only_fork("pull_request", same)  # the same repository: fine
    fork = _forked(same)
    action.refuse_read_only_fork("pull_request_target", fork)  # a token that can write
    action.refuse_read_only_fork("issue_comment", fork)  # runs in the base's context
    private = copy.deepcopy(fork)
    private["repository"]["private"] = True  # may send write tokens to fork PRs
    action.refuse_read_only_fork("pull_request", private)
    with pytest.raises(action.ActionError, match="pull_request_target"):
        action.refuse_read_only_fork("pull_request", fork)


def test_the_docs_recommend_only_modes_the_action_handles() -> None:
    """Every workflow trigger the README's Action section and docs/security.md name is
    one the Action acts on (an event it would answer "nothing to do" for is no mode)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### GitHub Action", 1)[1].split("\n### ", 1)[0]
    security = (ROOT / "docs" / "security.md").read_text()
    named = set(re.findall(r"`(pull_request\w*|issue_comment|check_run|release)`", section))
    named |= set(re.findall(r"`(pull_request\w*)`", security))
    assert "pull_request_target" in named, "the untrusted-author mode is documented"
    from sluice.bot.events import github

    handled = set(github._PARSERS) | set(action.EVENT_ALIASES)
    assert named <= handled, named - handled
