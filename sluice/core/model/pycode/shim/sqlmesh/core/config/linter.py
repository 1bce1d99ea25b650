"""``sqlmesh.core.config.linter``."""

from __future__ import annotations

from .recorded import Recorded


class LinterConfig(Recorded):
    """``linter``: SQLMesh's own linter (Sluice reads past it)."""
