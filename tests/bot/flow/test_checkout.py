"""The workdir's checkouts and job logs: fetched once, touched on use, pruned by age; the
Spark logs long-lived processes append to, rotated by size."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.checkout import Checkout
from sluice.bot.flow.deps import make_deps
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
    own, others = checkout.spark.logs, checkout.spark_at("spark-repositories/octo_other").logs
    for folder in (own, others):
        folder.mkdir(parents=True)
        (folder / "apply-prod-1.log").write_text("old job")
        (folder / "apply-prod-2.log").write_text("today's job")
        _age(folder / "apply-prod-1.log", 8)
    (checkout.logs / "apply-prod-0.log").write_text("an older service's, beside the folders")
    _age(checkout.logs / "apply-prod-0.log", 8)
    for folder in (own, others):
        _age(folder, 10)  # a root's folder is never pruned whole, whatever its age

    assert checkout.prune("octo/warehouse", keep_days=7) == (1, 2)
    assert not old.exists() and used.is_dir() and fresh.is_dir()
    assert other.is_dir()  # pruned by its own repository's janitor
    assert [p.name for p in own.iterdir()] == ["apply-prod-2.log"]
    assert sorted(p.name for p in others.iterdir()) == ["apply-prod-1.log", "apply-prod-2.log"]
    assert sorted(p.name for p in checkout.logs.iterdir()) == ["octo_other", "spark"]
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


def test_the_janitor_rotates_the_spark_logs_a_process_appends_to(tmp_path: Path) -> None:
    checkout = Checkout(tmp_path)
    server_log = checkout.spark.connect / "server.log"
    derby_log = checkout.spark.root / "derby.log"
    server_log.parent.mkdir(parents=True)
    derby_log.parent.mkdir(parents=True)
    derby_log.write_bytes(b"d" * 100)  # under the limit: left alone
    forge = MemoryForge("octo/warehouse", name="github")  # no prod yet: nothing else to do
    deps = make_deps(
        forge_for=lambda _event: forge,
        workdir=tmp_path,
        state_url=f"sqlite:///{tmp_path / 'state.db'}",
        log_max_bytes=1000,
        log_backups=2,
    )
    # Held open for appending from before to after the rotations, as the Connect server's
    # JVM holds its log.
    with open(server_log, "ab", buffering=0) as server:
        try:
            for n in range(4):
                server.write(str(n).encode() * 1500)
                dispatch.handle(deps, JanitorEvent(forge="github", repo="octo/warehouse",
                                                   installation_id=None))  # fmt: skip
            server.write(b"after")
        finally:
            deps.close()
    # Each run rotated the log past 1000 bytes; two copies kept, the newest first; the
    # process went on writing at the start of the emptied file, leaving no hole.
    assert server_log.read_bytes() == b"after"
    assert (server_log.parent / "server.log.1").read_bytes() == b"3" * 1500
    assert (server_log.parent / "server.log.2").read_bytes() == b"2" * 1500
    assert not (server_log.parent / "server.log.3").exists()
    assert derby_log.read_bytes() == b"d" * 100 and not Path(f"{derby_log}.1").exists()


def test_the_log_bounds_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ServiceSettings(webhook_secret="s")  # type: ignore[call-arg]
    assert (settings.log_max_bytes, settings.log_backups) == (16 * 1024 * 1024, 4)
    monkeypatch.setenv("SLUICE_LOG_MAX_BYTES", "1048576")
    monkeypatch.setenv("SLUICE_LOG_BACKUPS", "0")
    settings = ServiceSettings(webhook_secret="s")  # type: ignore[call-arg]
    assert (settings.log_max_bytes, settings.log_backups) == (1048576, 0)
    for name, value in (("SLUICE_LOG_MAX_BYTES", "100"), ("SLUICE_LOG_BACKUPS", "-1"),
                        ("SLUICE_LOG_BACKUPS", "101")):  # fmt: skip
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name.removeprefix("SLUICE_").lower()):
            ServiceSettings(webhook_secret="s")  # type: ignore[call-arg]
        monkeypatch.delenv(name)
