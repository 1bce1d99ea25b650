"""Shared fixtures, and the markers that keep ``make test-fast`` fast.

Markers (pyproject.toml): ``spark`` for a test that starts Spark, ``postgres`` for one
that needs PostgreSQL, ``slow`` for one that takes long without either. ``make test-fast``
runs the rest. A test using a Spark fixture is marked for you; one that starts Spark some
other way (``spark-submit``, a local session, a JVM) without the marker fails, saying so, so the
fast loop cannot silently grow slow.

PostgreSQL: ``postgres_url`` is a real server for the whole session, either the one named
by ``SLUICE_TEST_POSTGRES_URL`` or a throwaway cluster started here from the local
PostgreSQL binaries (install them with ``scripts/ensure-postgres.sh``). Without binaries
the PostgreSQL tests are skipped, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import gc
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.pgcluster import ClusterError, normalise, pg_bindir, throwaway_postgres

if TYPE_CHECKING:
    from sluice.core.spark.connect import ConnectServer

_PG_ENV = "SLUICE_TEST_POSTGRES_URL"
# The bytecode cache is written, as under make (the Makefile's unexport
# PYTHONDONTWRITEBYTECODE), also when pytest is run directly in an environment that turns
# it off: otherwise each test worker compiles again every Sluice module and rewrites the
# asserts of every test module changed since the cache was last written (seconds of CPU
# per worker), and every sandboxed child, which cannot write it, compiles the modules it
# imports each time it starts.
sys.dont_write_bytecode = False
# Services started by tests retry a failed job at once (the queue's own tests and
# test_retry_backoff_setting check the waits): a test should not sleep through a backoff.
os.environ.setdefault("SLUICE_RETRY_SECONDS", "0")
# Spark drivers started by tests (and by the services they start) map one class archive
# (sluice.core.spark.jvm), written by the first of them, and compile with C1 only: test
# jobs are short and their data small, and the suite runs two at a time on two cores.
# C1 only also shrinks the JVM's default code cache to 48 MB, which a warm Connect server
# serving a whole lifecycle's jobs filled ("Out of space in CodeCache", the server died):
# the code cache is kept at the default of a JVM with both compilers.
os.environ.setdefault("SLUICE_JVM_CACHE", str(Path(__file__).parent.parent / ".cache" / "jvm"))
os.environ.setdefault(
    "SLUICE_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
)
# Fixtures that start Spark (tests/core/spark/conftest.py): a test using one is ``spark``.
SPARK_FIXTURES = frozenset(
    {"spark_dirs", "inprocess_paths", "local_spark", "spark_cluster", "connect_server"}
)


# The Spark stage (``make test``: ``-n 2 --dist loadfile``) hands whole modules to its two
# workers in collection order, so the longest modules are collected first and the short
# ones fill the end: both workers then finish together. (xdist's own order, most tests
# first, left the long flow modules of one to five tests to the end, one worker running
# them while the other had nothing left.) Longest first, as measured with --durations in CI
# (2026-11-29; five more, of 40-130 s, from the CI run of 2026-11-30); a module
# not listed comes after these, in its usual order. Add a new Spark module here when it
# takes more than about 40 s: a long one left to the end keeps one worker busy alone.
LONGEST_FIRST = (
    "tests/reliability/test_crash.py",
    "tests/bot/flow/test_lifecycle.py",
    "tests/core/spark/test_lifecycle_submit.py",
    "tests/core/spark/test_submit.py",
    "tests/core/spark/test_scd_type_2.py",
    "tests/bot/entry/test_demo.py",
    "tests/core/spark/test_shared_catalog.py",
    "tests/core/spark/test_connect.py",
    "tests/core/spark/test_connect_lost.py",
    "tests/core/spark/test_apply.py",
    "tests/core/spark/test_table_diff.py",
    "tests/core/spark/test_driver_writes.py",
    "tests/bot/flow/test_spark_roots_spark.py",
    "tests/bot/flow/test_python_pr_flow.py",
    "tests/bot/flow/test_merge_train_spark.py",
    "tests/core/spark/test_dev_server.py",
    "tests/core/spark/test_table_diff_exact.py",
    "tests/core/spark/test_repository_prefix_spark.py",
    "tests/security/test_connect_token.py",
    "tests/core/spark/test_standalone_connect.py",
    "tests/core/spark/test_connect_cancel.py",
    "tests/core/spark/test_concurrent_builds.py",
)


# Tests leave the source tree as they found it: a `.sluice/` folder a test wrote into a
# fixture project once made a later test's copy of that fixture fail (CI, 2026-11-27).
# The run fails if a test session leaves a new one under tests/ or examples/.
_TREE = Path(__file__).resolve().parent.parent
_WATCHED = ("tests", "examples")
_FOLDERS_BEFORE = pytest.StashKey[set[Path]]()


def _state_folders() -> set[Path]:
    return {p for top in _WATCHED for p in (_TREE / top).rglob(".sluice*") if p.is_dir()}


def _controller(config: pytest.Config) -> bool:
    """Whether this is the run's own process, not one of xdist's workers."""
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller(session.config):
        session.config.stash[_FOLDERS_BEFORE] = _state_folders()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _controller(session.config) or _FOLDERS_BEFORE not in session.config.stash:
        return
    left = sorted(_state_folders() - session.config.stash[_FOLDERS_BEFORE])
    if left:
        names = "\n".join(f"  {p.relative_to(_TREE)}" for p in left)
        print(
            "\nA test wrote state into the source tree (copy the project to tmp_path, or "
            f"load it with use_cache=False), and left:\n{names}",
            file=sys.stderr,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    # Keep the collection order above: by default xdist reorders --dist loadfile's modules
    # by their number of tests (its --loadscope-reorder).
    if getattr(config.option, "dist", "no") == "loadfile":
        config.option.loadscopereorder = False


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection built (every module, test item and fixture definition) lives as
    # long as the session: frozen out of the cyclic garbage collector's scans, once. A
    # full collection walks it all otherwise, and a service started by a test keeps a
    # heap frozen before it as it is (it does not collect it all again on every start;
    # sluice.bot.entry.app's lifespan).
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    # A stable sort: a module's tests keep their order, unlisted modules theirs.
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(autouse=True)
def _no_answers_replayed_across_tests() -> None:
    """Each test starts with no project load's answers kept (the macro process's replays,
    sluice.core.model.pycode.macros.REPLAYS): a test's loads never reuse another's."""
    macros = sys.modules.get("sluice.core.model.pycode.macros")
    if macros is not None:
        macros.REPLAYS.clear()


@pytest.fixture(autouse=True)
def _spark_only_when_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail a test that starts Spark without the ``spark`` marker (see the module's doc)."""
    if request.node.get_closest_marker("spark") is not None:
        return
    import subprocess

    def refuse(what: str) -> None:
        pytest.fail(
            f"{request.node.nodeid} starts Spark ({what}) but is not marked spark: add "
            "@pytest.mark.spark (or pytestmark in its module), so that make test-fast leaves "
            "it out",
            pytrace=False,
        )

    popen = subprocess.Popen.__init__

    def guarded_popen(self: subprocess.Popen[bytes], args: object, *rest: object,
                      **kwargs: object) -> None:  # fmt: skip
        words = [str(a) for a in args] if isinstance(args, list | tuple) else [str(args)]
        if any(w.endswith(("spark-submit", "spark-class", "/java")) for w in words):
            refuse(" ".join(words[:2]))
        popen(self, args, *rest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A warm Spark: one Spark Connect server (local[2], an embedded metastore of its own)
    for the whole test session, stopped at its end. Run jobs on it with
    ``ConnectRunner(connect_server.settings, paths, server=connect_server)`` (``paths``
    with ``root=connect_server.paths.root``)."""
    from sluice.core.config import SparkSettings
    from sluice.core.spark.connect import ConnectServer
    from sluice.core.spark.session import SparkPaths

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = tmp_path_factory.mktemp("spark-connect-root")
    server = ConnectServer(
        SparkSettings(master="local[2]", mode="connect"), SparkPaths(root, root / "logs")
    )
    try:
        server.endpoint()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a real PostgreSQL server (superuser, database ``postgres``)."""
    external = os.environ.get(_PG_ENV)
    if external:
        yield normalise(external)
        return
    if pg_bindir() is None:
        reason = (
            f"no PostgreSQL server binaries (initdb, pg_ctl) found and {_PG_ENV} is not set; "
            "run scripts/ensure-postgres.sh"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres())
        except ClusterError as exc:
            pytest.fail(str(exc))
        yield url


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """URL of a new, empty database on the session's server, dropped afterwards."""
    name = f"sluice_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            # FORCE: a test that failed midway may have left connections open.
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
