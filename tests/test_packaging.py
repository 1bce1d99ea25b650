"""Packaging: one version, the license the metadata names, `python -m sluice`."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

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
    assert project["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_python_m_sluice_is_the_sluice_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sluice", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    for command in ("plan", "apply", "rollback", "run", "serve", "demo"):
        assert f"  {command} " in result.stdout, command
