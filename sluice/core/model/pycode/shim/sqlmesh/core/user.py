"""``sqlmesh.core.user``: the users SQLMesh's bot knows (Sluice reads past ``users``: who
approves is the trusted ``sluice.gate``)."""

from __future__ import annotations

from enum import StrEnum

from .config.recorded import Recorded


class UserRole(StrEnum):
    REQUIRED_APPROVER = "required_approver"


class User(Recorded):
    """A user: ``username``, ``roles``, ``github_username``, ``notification_targets``..."""
