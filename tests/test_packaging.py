"""Packaging: one version, the license the metadata names, `python -m sluice`."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import sluice

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_installed_as_written() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("sluice") == sluice.__version__
    hits = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "sluice").rglob("*.py")
        if f'"{sluice.__version__}"' in p.read_text() and p.name != "__init__.py"
    ]
    assert hits == [], "write sluice.__version__, not the number"


def test_the_license_file_is_the_one_the_metadata_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    meta = importlib.metadata.metadata("sluice")
    assert "Apache-2.0" in {meta.get("License-Expression"), meta.get("License")}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_python_m_sluice_is_the_sluice_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sluice", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    for command in ("plan", "apply", "rollback", "run", "serve", "demo"):
        assert f"  {command} " in result.stdout, command


def _lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """requirements/<name>: package -> (exact version, hashes), markers dropped."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            spec = line.split(";")[0].split("\\")[0].strip()
            package, _, version = spec.partition("==")
            assert version, f"{name}: {line!r} is not pinned with =="
            current = canonicalize_name(package)
            entries[current] = (version, [])
        elif line.strip().startswith("--hash=sha256:"):
            entries[current][1].append(line.strip().split(":", 1)[1].rstrip(" \\"))
    return entries


def test_every_locked_package_is_exact_and_hashed() -> None:
    for name in ("dev.lock", "runtime.lock"):
        lock = _lock(name)
        assert len(lock) > 20
        unhashed = [p for p, (_, hashes) in lock.items() if not hashes]
        assert unhashed == [], f"{name}: no hash for {unhashed}"
        assert all(len(h) == 64 for _, hashes in lock.values() for h in hashes)


def test_the_locks_hold_every_range_of_pyproject_at_one_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dev, runtime = _lock("dev.lock"), _lock("runtime.lock")
    for wanted, lock in ((project["dependencies"], runtime),
                         (project["dependencies"] + project["optional-dependencies"]["dev"], dev)):  # fmt: skip
        for text in wanted:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in lock, f"{name} is in pyproject.toml but not locked"
            assert requirement.specifier.contains(lock[name][0]), (text, lock[name][0])
            assert requirement.specifier, f"{text}: give a range (the lock holds the exact version)"
            assert not any(s.operator == "==" for s in requirement.specifier), text
    # the image's set is the tested set: same versions, nothing the tests did not have
    assert {p: v for p, (v, _) in runtime.items()} == {p: dev[p][0] for p in runtime}
    for package in ("setuptools", "wheel"):  # the build backend, for --no-build-isolation
        assert package in runtime and package in dev


def test_make_installs_the_dev_lock_with_hashes_then_sluice_alone() -> None:
    text = (ROOT / "Makefile").read_text()
    # pip installs uv alone, from the lock's own entry for it (hashes and all); uv the rest.
    assert "$(BIN)/pip install --quiet --require-hashes -r $(VENV)/uv.txt" in text
    uv = "$(BIN)/uv pip install --quiet --python $(BIN)/python"
    assert f"{uv} --require-hashes -r requirements/dev.lock" in text
    assert f"{uv} --no-deps --no-build-isolation -e ." in text
    [awk] = [line.strip() for line in text.splitlines() if "> $(VENV)/uv.txt" in line]
    program = awk.split("'")[1].replace("$$", "$")
    entry = subprocess.run(
        ["awk", program, str(ROOT / "requirements" / "dev.lock")],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert entry[0].startswith("uv==") and len(entry) > 1
    assert all(line.strip().startswith("--hash=sha256:") for line in entry[1:])
    assert not entry[-1].endswith("\\"), "the entry is cut short"
    assert "constraints" not in text and not (ROOT / "constraints.txt").exists()
