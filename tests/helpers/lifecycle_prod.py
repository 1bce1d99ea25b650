"""Prod of the lifecycle tests on a :class:`~tests.helpers.world.World`: the example project
copied as main under the lifecycle gate (:func:`main_tree`), built into the world's state
and committed as main at ``sha_of(1)`` (:func:`build_main`); and :class:`GitLabWorld`, a
world whose commits a fake GitLab project serves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.state import open_state
from tests.helpers.fold_settings import fold_settings
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.world import GATE, World, sha_of

REPO = Path(__file__).resolve().parents[2]


def main_tree(root: Path, approver: str = "bob") -> Path:
    """The example project copied to ``root/main``, its settings in config.yaml and its
    ``pr:`` section and after replaced by ``GATE`` (``approver`` the required one)."""
    main = root / "main"
    shutil.copytree(REPO / "examples" / "jaffle_shop", main,
                    ignore=shutil.ignore_patterns(".sluice"))  # fmt: skip
    fold_settings(main)  # the example's sluice.yaml into config.yaml
    head, _, _ = (main / "config.yaml").read_text().partition("  pr:\n")
    (main / "config.yaml").write_text(head + GATE.lstrip("\n").replace("[bob]", f"[{approver}]"))
    return main


def build_main(env: World, main: Path, now: int) -> None:
    """Prod planned and applied from ``main`` up to ``now`` by the world's runner, then
    ``main`` committed as the prod branch at ``sha_of(1)``."""
    project = load_project(main, use_cache=False)
    store = open_state(env.url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=now, execution_time=now)
        workflow.apply_plan(project, store, plan, env.runner(project), url=env.url, now=now)
    finally:
        store.close()
    env.commit(sha_of(1), main, branch="main")


class GitLabWorld(World):
    """``World``'s warehouse and state, its commits served by a fake GitLab project."""

    gitlab: FakeGitLab

    def commit(self, sha: str, src: Path, *, branch: str | None = None) -> None:
        self.trees[sha] = src
        self.gitlab.add_tree(sha, src)
        # config.yaml and the project's Python, which runs only as the prod branch has it.
        for path in [src / "config.yaml", *sorted(src.rglob("*.py"))]:
            rel = path.relative_to(src).as_posix()
            self.gitlab.files[(sha, rel)] = path.read_text()
            if branch is not None:
                self.gitlab.files[(branch, rel)] = path.read_text()
        if branch is not None:
            self.gitlab.branches[branch] = sha
            self.gitlab.branch_commits.setdefault(branch, set()).add(sha)
