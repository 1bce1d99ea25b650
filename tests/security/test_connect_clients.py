"""The service's own Connect clients (the health check, a session's interrupt) hold the
server's token and run unsandboxed: nothing a sandbox can write may reach them. A job's
home and the Spark root are written by sandboxed processes; a package planted there or in
the service's working folder is never imported by such a client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.core.spark import connect


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``pyspark`` package that records its import, in the working folder."""
    marker = tmp_path / "imported"
    package = tmp_path / "pyspark"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)
    yield marker


# A parameter without a value: the installed pyspark refuses it at once (no connection
# retried until the timeout), and its error shows it was the real package that ran.
_REFUSED_URL = "sc://localhost:1/;user_id"


def test_a_health_check_imports_nothing_from_a_folder_a_sandbox_writes(planted: Path) -> None:
    problem = connect.health_check(_REFUSED_URL, timeout=30)
    assert problem is not None and "INVALID_CONNECT_URL" in problem, problem
    assert not planted.exists(), "the client imported the planted package"


def test_an_interrupt_imports_nothing_from_a_folder_a_sandbox_writes(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(planted.parent))  # not the child's either
    connect.interrupt_session(_REFUSED_URL, "00000000-0000-0000-0000-000000000000", 30)
    assert not planted.exists(), "the client imported the planted package"


def test_the_control_a_plain_child_would_have_imported_it(planted: Path) -> None:
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", "import pyspark"], cwd=os.getcwd(), check=False)
    assert planted.exists()
