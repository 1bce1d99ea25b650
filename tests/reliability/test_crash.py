"""Crash faults, one trial per scenario: kill -9 the Spark driver during a PR environment
build and during a promotion's views swap, and the service process during a PR build and
during the janitor; after the worker's retry (or the restart) nothing is lost, nothing is
done twice, the state store and the Spark catalog agree, prod reads the promoted versions,
and no incremental table holds a row twice. The trials are ``bench/chaos.py``'s, which runs every
scenario with both faults many times (docs/reliability.md). Four trials keep CI short.

Real everything: the service on uvicorn in its own process (``tests/helpers/service_child``,
GitHub faked at the wire with its state in a file), Spark through spark-submit. One world
(prod built once) serves the module; each test still runs alone, building the PR it needs.
In the module's order the promotion merges the PR the service-kill trial built (no build of
its own), and the janitor then drops that promoted PR's environment and the other PR's.
The faults land early in the job (the trial's moment is drawn over a short expected
duration) so that they land at all; a trial whose job finished first is drawn again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.chaos import Trial, World, run_trial, trial_seed

pytestmark = pytest.mark.spark

SEED = 11
EXPECTED = {"pr": 30.0, "promote": 20.0, "janitor": 10.0}  # seconds: early moments
NUMBERS = range(10, 30)  # the PRs the module may open (their commits exist at the start)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    world = World(tmp_path_factory.mktemp("chaos"))
    world.build_prod()
    for number in NUMBERS:
        world.prepare(number)
    world.start()
    try:
        yield world
    finally:
        world.close()


_numbers = iter(NUMBERS)


def _trial(world: World, scenario: str, fault: str, at_step: str | None = None) -> dict[str, Any]:
    """One trial whose fault landed (up to three draws; with ``at_step``, in a step of that
    type); its record, asserted clean."""
    record: dict[str, Any] = {}
    for index in range(3):
        trial = Trial(scenario, fault, index, trial_seed(SEED, scenario, fault, index),
                      next(_numbers), at_step)  # fmt: skip
        record = run_trial(world, trial, dict(EXPECTED))
        if record["injected"] and at_step in (None, record["fault_detail"]["step_type"]):
            break
    assert record["injected"], f"the fault did not land: {record['fault_detail']}"
    assert at_step in (None, record["fault_detail"]["step_type"]), record["fault_detail"]
    assert record["problems"] == [], record
    counts = {k: record[k] for k in ("lost", "double", "mismatches", "duplicates", "orphans")}
    assert counts == dict.fromkeys(counts, 0), record
    assert record["recovered"] and record["status"] == "done", record
    assert record["attempts"] == 2, record  # the attempt cut short, and the one that finished
    return record


def test_a_pr_build_survives_its_driver_killed(world: World) -> None:
    record = _trial(world, "pr", "driver")
    assert record["fault_detail"]["target"] in ("jvm", "python")


def test_a_pr_build_survives_its_service_killed(world: World) -> None:
    # The service dies while the build's spark-submit runs: the restarted service runs the
    # job again, once; one sticky comment and one check run of each name (the trial counts
    # them), and the environment holds the PR's tables.
    _trial(world, "pr", "service")


def test_a_promotion_survives_its_driver_killed_while_swapping_views(world: World) -> None:
    # Prod's views are half re-pointed when the driver dies: the retry finishes the swap,
    # and prod reads the promoted versions only (checked by the trial).
    record = _trial(world, "promote", "driver", at_step="views")
    assert record["swap_s"], "the promotion's views step was not found"


def test_the_janitor_survives_its_service_killed(world: World) -> None:
    # It drops the environment the promotion above invalidated (prod shares its tables)
    # and the first PR's, closed by the trial (tables of its own).
    _trial(world, "janitor", "service")
