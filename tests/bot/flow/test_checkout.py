"""The workdir's checkouts and job logs: fetched once, touched on use, pruned by age."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow.checkout import Checkout
from sluice.bot.forge.memory import MemoryForge

DAY = 86_400


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_old_checkouts_and_logs_go_recent_and_used_ones_stay(tmp_path: Path) -> None:
    forge = MemoryForge("octo/warehouse", name="github")
    forge.commit("a" * 40, {"config.yaml": "x: 1\n"})
    forge.commit("b" * 40, {"config.yaml": "x: 2\n"})
    forge.commit("c" * 40, {"config.yaml": "x: 3\n"})
    checkout = Checkout(tmp_path)
    old, used, fresh = (checkout.tree(forge, sha * 40) for sha in "abc")
    other = tmp_path / "trees" / "octo_other" / ("d" * 40)  # another repository's tree
    other.mkdir(parents=True)
    for tree in (old, used, other):
        _age(tree, 10)
    assert checkout.tree(forge, "b" * 40) == used  # used again today: kept
    checkout.logs.mkdir(parents=True)
    (checkout.logs / "apply-prod-1.log").write_text("old job")
    (checkout.logs / "apply-prod-2.log").write_text("today's job")
    _age(checkout.logs / "apply-prod-1.log", 8)

    assert checkout.prune("octo/warehouse", keep_days=7) == (1, 1)
    assert not old.exists() and used.is_dir() and fresh.is_dir()
    assert other.is_dir()  # pruned by its own repository's janitor
    assert [p.name for p in checkout.logs.iterdir()] == ["apply-prod-2.log"]
    # A pruned tree is fetched again when it is needed again.
    assert (checkout.tree(forge, "a" * 40) / "config.yaml").read_text() == "x: 1\n"


def test_keep_days_zero_keeps_everything_and_a_missing_workdir_is_fine(tmp_path: Path) -> None:
    checkout = Checkout(tmp_path / "never-used")
    assert checkout.prune("octo/warehouse", keep_days=7) == (0, 0)
    forge = MemoryForge("octo/warehouse", name="github")
    forge.commit("a" * 40, {"config.yaml": "x: 1\n"})
    tree = checkout.tree(forge, "a" * 40)
    _age(tree, 400)
    assert checkout.prune("octo/warehouse", keep_days=0) == (0, 0)
    assert tree.is_dir()


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServiceSettings(webhook_secret="s").workdir_keep_days == 7  # type: ignore[call-arg]
    monkeypatch.setenv("SLUICE_WORKDIR_KEEP_DAYS", "2.5")
    assert ServiceSettings(webhook_secret="s").workdir_keep_days == 2.5  # type: ignore[call-arg]
    monkeypatch.setenv("SLUICE_WORKDIR_KEEP_DAYS", "-1")
    with pytest.raises(ValueError, match="workdir_keep_days"):
        ServiceSettings(webhook_secret="s")  # type: ignore[call-arg]
