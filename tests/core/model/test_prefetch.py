"""A cold load parsing on two cores (``sluice.core.model.prefetch``): the same project,
notes and errors as one process gives, on real projects and a hostile one; a child that
dies changes nothing; no fork with threads running. The loads that fork run in a fresh
interpreter: a pytest worker has threads, and then nothing is forked (by design)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sluice.core.model import prefetch

ROOT = Path(__file__).parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "sqlmesh_projects"

# Loads ``root`` cold with and without the child (MIN_FILES lowered so small projects
# fork), and prints what each gave: models, notes, or the errors.
COMPARE = """
import json, shutil, sys
from pathlib import Path
from sluice.core.errors import SluiceError
from sluice.core.model import loader, prefetch

root = Path(sys.argv[1])
forked = []
start = prefetch.start
def counting(*args, **kwargs):
    child = start(*args, **kwargs)
    forked.append(child is not None)
    return child
prefetch.start = counting

def load(minimum):
    shutil.rmtree(root / ".sluice", ignore_errors=True)
    prefetch.MIN_FILES = minimum
    try:
        project = loader.load_project(root)
    except SluiceError as exc:
        return {"error": str(exc)}
    return {
        "models": [m.to_dict() for m in project.models.values()],
        "notes": list(project.notes),
        "audits": sorted(project.audits),
    }

serial, parallel = load(10**9), load(2)
shutil.rmtree(root / ".sluice", ignore_errors=True)
print(json.dumps({"same": serial == parallel, "forked": forked, "serial": serial}))
"""


def _compare(root: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", COMPARE, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def _two_cores() -> bool:
    return len(os.sched_getaffinity(0)) > 1


@pytest.mark.parametrize(
    "project",
    [
        FIXTURES / "macros_columns",  # @STAR across files: some wait for a later pass
        FIXTURES / "inline_audits",
        FIXTURES / "jinja",
        FIXTURES / "scd_type_2",
        FIXTURES / "model_properties",
        FIXTURES / "macros_operators",
    ],
    ids=lambda p: p.name,
)
def test_a_forked_cold_load_gives_the_same_project(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".sluice"))
    result = _compare(copy)
    assert result["same"], result
    assert "models" in result["serial"]  # type: ignore[operator]
    if _two_cores():
        assert result["forked"] == [False, True]


def test_a_broken_file_in_the_childs_half_is_reported_as_one_process_reports_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    for i in range(6):
        (root / "models" / f"m{i}.sql").write_text(
            f"MODEL (name s.m{i}, kind FULL);\nSELECT {i} AS x\n"
        )
    (root / "models" / "m5.sql").write_text("MODEL (name s.m5, kind FULL);\nSELECT FROM WHERE (\n")
    result = _compare(root)
    assert result["same"], result
    assert "m5.sql:2" in result["serial"]["error"]  # type: ignore[index]


def test_a_child_that_dies_hands_back_nothing(tmp_path: Path) -> None:
    script = (
        "import os\n"
        "from pathlib import Path\n"
        "from sluice.core.model import prefetch\n"
        "made = {}\n"
        "def parse(f):\n"
        "    made[str(f)] = {'key': 'x'}\n"
        "    os._exit(3)\n"
        "child = prefetch.start([Path('a'), Path('b'), Path('c'), Path('d')], parse, made, minimum=2)\n"
        "print(child is not None, child.join(made) if child else 0, made)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    forked = "True" if _two_cores() else "False"
    assert done.stdout.split() == [forked, "0", "{}"], done.stdout + done.stderr


def test_nothing_is_forked_with_threads_running_or_for_few_files() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert prefetch.start([Path("a")] * 400, lambda f: None, {}) is None
    finally:
        stop.set()
        worker.join()
    assert prefetch.start([Path("a")] * 10, lambda f: None, {}) is None
