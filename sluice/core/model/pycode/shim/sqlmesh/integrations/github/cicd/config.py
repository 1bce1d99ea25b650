"""``sqlmesh.integrations.github.cicd.config``: SQLMesh's GitHub bot, as config.py's
``cicd_bot`` names it (Sluice reads past ``cicd_bot``: its own gate is ``sluice.gate``)."""

from __future__ import annotations

from enum import StrEnum

from ....core.config.recorded import Recorded


class MergeMethod(StrEnum):
    MERGE = "merge"
    SQUASH = "squash"
    REBASE = "rebase"


class GithubCICDBotConfig(Recorded):
    """``cicd_bot``: the bot's settings, recorded."""

    type_name = "github"
