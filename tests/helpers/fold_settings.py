"""The examples keep Sluice's settings in sluice.yaml; tests that edit those settings in
config.yaml's ``sluice:`` section (the layout Sluice also reads) fold them back first."""

from __future__ import annotations

from pathlib import Path

from sluice.core.config import SETTINGS_FILES


def fold_settings(project: Path) -> Path:
    """Move ``project``'s sluice.yaml into its config.yaml as a ``sluice:`` section (the
    same settings, indented under it, comments kept); ``project``, for chaining."""
    for name in SETTINGS_FILES:
        settings = project / name
        if settings.is_file():
            lines = settings.read_text(encoding="utf-8").splitlines()
            section = "".join(f"  {line}\n" if line.strip() else "\n" for line in lines)
            config = project / "config.yaml"
            text = config.read_text(encoding="utf-8") if config.is_file() else ""
            config.write_text(text.rstrip("\n") + "\n\nsluice:\n" + section, encoding="utf-8")
            settings.unlink()
    return project
