"""scripts/release-tags.sh: the immutable vX.Y.Z tag and the moving vX tag the Action is used by."""

from __future__ import annotations

import subprocess
from pathlib import Path

import sluice

ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def _repo(tmp_path: Path) -> Path:
    """A repository with the script and the version file, two commits deep."""
    repo = tmp_path / "sluice"
    (repo / "scripts").mkdir(parents=True)
    (repo / "sluice").mkdir()
    (repo / "scripts" / "release-tags.sh").write_bytes(
        (ROOT / "scripts/release-tags.sh").read_bytes()
    )
    (repo / "sluice" / "__init__.py").write_text(f'__version__ = "{sluice.__version__}"\n')
    _git(repo, "init", "-q")
    for key, value in (("user.name", "Rel"), ("user.email", "rel@example.com")):
        _git(repo, "config", key, value)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def _release(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/release-tags.sh"], cwd=repo, capture_output=True,
                          text=True, check=False)  # fmt: skip


def test_tags_the_version_and_moves_the_major_tag(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    major = "v" + sluice.__version__.split(".")[0]
    first = _release(repo)
    assert first.returncode == 0, first.stderr
    head = _git(repo, "rev-parse", "HEAD")
    assert _git(repo, "rev-parse", f"v{sluice.__version__}^{{commit}}") == head
    assert _git(repo, "rev-parse", f"{major}^{{commit}}") == head
    # the next release: a new version moves the major tag, the old release tag stays put
    (repo / "sluice" / "__init__.py").write_text('__version__ = "0.99.1"\n')
    _git(repo, "commit", "-q", "-am", "two")
    second = _release(repo)
    assert second.returncode == 0, second.stderr
    assert _git(repo, "rev-parse", "v0.99.1^{commit}") == _git(repo, "rev-parse", "HEAD")
    assert _git(repo, "rev-parse", "v0^{commit}") == _git(repo, "rev-parse", "HEAD")
    assert _git(repo, "rev-parse", f"v{sluice.__version__}^{{commit}}") == head


def test_refuses_a_taken_version_a_dirty_tree_and_a_malformed_version(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _release(repo).returncode == 0
    again = _release(repo)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert "raise __version__" in again.stderr
    (repo / "sluice" / "__init__.py").write_text('__version__ = "1.0.0rc1"\n')
    dirty = _release(repo)
    assert dirty.returncode == 2 and "is not X.Y.Z" in dirty.stderr
    (repo / "sluice" / "__init__.py").write_text('__version__ = "1.0.0"\n')
    dirty = _release(repo)
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    assert "v1" not in _git(repo, "tag").split()
