"""The markers keep ``make test-fast`` honest: a test that starts Spark unmarked fails."""

from __future__ import annotations

import subprocess

import pytest


def test_starting_spark_unmarked_fails_with_the_fix(request: pytest.FixtureRequest) -> None:
    # This test is not marked spark: the guard (tests/conftest.py) refuses spark-submit
    # before anything is started, and says what to do.
    with pytest.raises(pytest.fail.Exception, match=r"starts Spark \(.*spark-submit.*\) but is "
                       r"not marked spark: add @pytest.mark.spark"):  # fmt: skip
        subprocess.Popen(["/opt/spark/bin/spark-submit", "--version"])
    assert request.node.get_closest_marker("spark") is None


def test_other_programs_start_as_usual() -> None:
    done = subprocess.run(["true"], check=False)
    assert done.returncode == 0


@pytest.mark.spark
def test_a_marked_test_is_not_guarded() -> None:
    # No Spark here: the guard's Popen is not in place, a missing program fails as usual.
    with pytest.raises(FileNotFoundError):
        subprocess.Popen(["/nonexistent/spark-submit", "--version"])


def test_every_collected_test_using_a_spark_fixture_is_marked(
    request: pytest.FixtureRequest,
) -> None:
    from tests.conftest import SPARK_FIXTURES

    using = [
        item for item in request.session.items
        if SPARK_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]  # fmt: skip
    assert all(item.get_closest_marker("spark") is not None for item in using)
