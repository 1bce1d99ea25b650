"""Each repository's Spark root (issue 46): with repositories kept apart, each but the
state owner gets a metastore, warehouse and Connect server of its own, named by
:mod:`sluice.bot.flow.tenancy`, and every Spark job of its jobs (builds, janitor) runs
there. The flows run on the in-memory forge and the scripted warehouse; what is checked is
the root each job's runner is made for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import checkout, deps, dispatch, tenancy
from sluice.bot.flow.checkout import Checkout, job_spark
from sluice.bot.forge.memory import MemoryForge
from sluice.core.errors import SluiceError
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.session import SparkPaths
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, opened

OTHER = "mallory/other"
OTHER_KEY = f"github:{OTHER}"
HEAD_A, HEAD_B = "a1" * 20, "b2" * 20
CONFIG = GATED + "  pr:\n    backfill_days: null\n"


def test_each_repository_but_the_owner_has_a_root_of_its_own() -> None:
    url = "sqlite:////srv/state.db"
    a, b = tenancy.isolated(KEY, url), tenancy.isolated(OTHER_KEY, url)
    assert a.spark == f"spark-repositories/{tenancy.repository_name(KEY)}"
    assert a.spark != b.spark and "/" not in a.spark.removeprefix("spark-repositories/")
    # Case-folded as the forges fold names: one repository, one root.
    assert tenancy.isolated("github:Octo/Warehouse", url).spark == a.spark
    assert tenancy.own(KEY, url).spark == "spark"  # the owner's, as it always was
    work = Checkout(Path("/srv/work"))
    owner_root = work.spark.root
    for namespace in (a, b):
        root = work.spark_at(namespace.spark).root
        # Never inside the owner's root (its driver writes all of it), nor another's.
        assert owner_root not in root.parents and root != owner_root
    assert work.spark_at(b.spark).root not in work.spark_at(a.spark).root.parents
    for bad in ("", "/etc", "spark/../state", "spark-repositories/../x", "./spark"):
        with pytest.raises(SluiceError, match="not a Spark root"):
            work.spark_at(bad)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Bot, MemoryForge, list[tuple[str, str | None]]]]:
    """An isolating service whose state's owner is A (OWNER, as a state made before
    isolation is); B (OTHER) is served too. Each runner made records (repo, root)."""
    warehouse = Warehouse()
    made: list[tuple[str, str | None]] = []

    def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
        made.append((tree.name, checkout.current_spark()))
        return warehouse.runner(project, tree, on_event)

    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github, runner_for=runner_for, isolate=True)
    bot.ledger.belongs_to(f"{KEY}#.", NOW)
    bot.prod(C, CONFIG)
    other = bot.repository(OTHER)
    other.repositories[424242] = OTHER  # its id (the deliveries below), as the forge says it
    bot.commit(C, CONFIG, forge=other)
    other.refs["main"] = C
    for forge, number, head in ((github, 7, HEAD_A), (other, 9, HEAD_B)):
        forge.roles.update({"alice": "write"})
        src = bot.commit(head, CONFIG, parents=(C,), forge=forge)
        orders = src / "models" / "orders.sql"
        orders.write_text(orders.read_text() + "\n-- changed\n")
        forge.commit_folder(head, src, parents=(C,))
        forge.open_pull(number, head_sha=head, base="main", author="alice")
    yield bot, other, made
    bot.close()


def _elsewhere(payload: dict[str, Any]) -> dict[str, Any]:
    repository = {**payload["repository"], "full_name": OTHER, "id": 424242}
    pull = dict(payload["pull_request"])
    pull["head"] = {**pull["head"], "repo": {**pull["head"]["repo"], "full_name": OTHER}}
    return {**payload, "repository": repository, "pull_request": pull}


def test_each_repository_s_jobs_run_on_its_own_root(
    two: tuple[Bot, MemoryForge, list[tuple[str, str | None]]],
) -> None:
    bot, other, made = two
    bot.deliver("pull_request", opened(7, HEAD_A))
    bot.deliver("pull_request", _elsewhere(opened(9, HEAD_B)))
    assert bot.checks_on(HEAD_A)["sluice/pr-environment"].conclusion == "success"
    assert other.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
    for repo in (OWNER, OTHER):  # the janitor: it reads and drops on Spark too
        dispatch.handle(bot.deps, JanitorEvent(forge="github", repo=repo, installation_id=None))
    b_root = tenancy.spark_root(OTHER_KEY)
    roots: dict[str, set[str | None]] = {}
    for sha, root in made:
        roots.setdefault(sha, set()).add(root)
    # A (the state owner) on the root it always had; B on its own, never A's.
    assert roots[HEAD_A] == {"spark"} and roots[HEAD_B] == {b_root}, roots
    assert roots[C] == {"spark", b_root}  # each janitor on its repository's root
    assert set(roots) == {HEAD_A, HEAD_B, C}
    assert checkout.current_spark() is None  # nothing left set after the jobs


def test_the_service_s_runner_is_made_on_the_job_s_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[SparkPaths] = []
    monkeypatch.setattr(deps, "make_runner", lambda _s, paths, **_kw: given.append(paths))
    made = deps.make_deps(forge_for=lambda _e: None,  # type: ignore[arg-type,return-value]
                          workdir=tmp_path / "work", state_url=f"sqlite:///{tmp_path / 's.db'}",
                          isolate=True)  # fmt: skip
    project: Any = type("P", (), {"config": type("C", (), {"sluice": type("S", (), {
        "spark": None})})})()  # fmt: skip
    try:
        with job_spark(tenancy.spark_root(OTHER_KEY)):
            made.spark_runner(project, tmp_path, lambda _e: None)
        with job_spark("spark"):
            made.spark_runner(project, tmp_path, lambda _e: None)
        # Outside a job's root, an isolating service makes no runner (never a default's).
        with pytest.raises(SluiceError, match="no repository's Spark root"):
            made.spark_runner(project, tmp_path, lambda _e: None)
    finally:
        made.close()
    work = (tmp_path / "work").resolve()
    assert [p.root for p in given] == [work / tenancy.spark_root(OTHER_KEY), work / "spark"]
    # Each root's jobs write their logs (and specs, homes) in a folder of its own.
    named = tenancy.repository_name(OTHER_KEY)
    assert [p.logs for p in given] == [work / "logs" / named, work / "logs" / "spark"]
    # Its Connect server's folder is beside its root, never in the owner's.
    assert given[0].connect.parent == work / "spark-repositories" / (
        tenancy.repository_name(OTHER_KEY) + ".sluice"
    )


def test_the_janitor_rotates_the_logs_of_every_root(tmp_path: Path) -> None:
    work = Checkout(tmp_path)
    b = work.spark_at(tenancy.spark_root(OTHER_KEY))
    for paths in (work.spark, b):
        paths.connect.mkdir(parents=True)
        (paths.connect / "server.log").write_bytes(b"x" * 70_000)
    rotated = work.rotate_logs(65_536, 2)
    assert sorted(rotated) == sorted([work.spark.connect / "server.log", b.connect / "server.log"])
