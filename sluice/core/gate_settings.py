"""``sluice.gate`` and ``sluice.deploy``: the settings that decide who approves a pull
request's plan and what a merge or a tag promotes (the backfill budget and promotion tiers
among them), as frozen pydantic models: the ``gate`` and ``deploy`` fields of
:class:`~sluice.core.config.SluiceSettings`, so a config.yaml is parsed once and its errors
(``file:line``) translated by one function (:mod:`sluice.core.config`). Which commit's
config.yaml governs a repository is :mod:`sluice.bot.flow.trust`'s call; what the gate
makes of the reviews, :mod:`sluice.bot.flow.gate_rules`.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sluice.core.errors import SluiceError
from sluice.core.snapshot.naming import PROD, check_environment_name
from sluice.core.words import parse_size, size

_LOGIN = r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?(?:\[bot\])?$"
# GitHub: org/team-slug; GitLab: a group path with at least one subgroup level.
_TEAM = r"^[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)+$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _strip_at(value: Any) -> Any:
    """``@alice`` and ``alice`` are the same person (people write mentions in YAML)."""
    if isinstance(value, list | tuple):
        return [v.removeprefix("@").strip() if isinstance(v, str) else v for v in value]
    return value


class RequiredApprovers(_Frozen):
    """``sluice.gate.required_approvers``: who may approve, and how many must."""

    users: tuple[str, ...] = ()
    """GitHub logins or GitLab usernames (compared case-insensitively); a leading ``@`` is
    dropped."""
    teams: tuple[str, ...] = ()
    """Teams as ``org/team`` (GitLab: the group's full path, ``group/subgroup``); any
    member may approve."""
    count: int = Field(default=0, ge=0, strict=True)
    """Approvals needed; default 1 when users or teams are listed, else 0."""

    _users = field_validator("users", mode="before")(_strip_at)
    _teams = field_validator("teams", mode="before")(_strip_at)

    @field_validator("users")
    @classmethod
    def _check_users(cls, users: tuple[str, ...]) -> tuple[str, ...]:
        for user in users:
            if not re.match(_LOGIN, user):
                hint = " (teams go under 'teams')" if "/" in user else ""
                raise ValueError(f"'{user}' is not a user login{hint}")
        return users

    @field_validator("teams")
    @classmethod
    def _check_teams(cls, teams: tuple[str, ...]) -> tuple[str, ...]:
        for team in teams:
            if not re.match(_TEAM, team):
                raise ValueError(
                    f"'{team}' is not a team: write it as org/team-slug (GitLab: the "
                    "group's full path, group/subgroup)"
                )
        return teams

    @model_validator(mode="before")
    @classmethod
    def _default_count(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("count") is None:
            data = {k: v for k, v in data.items() if k != "count"}
            data["count"] = 1 if data.get("users") or data.get("teams") else 0
        return data

    @field_validator("count")
    @classmethod
    def _satisfiable(cls, count: int, info: ValidationInfo) -> int:
        users = info.data.get("users", ())
        teams = info.data.get("teams", ())
        if count and not users and not teams:
            raise ValueError(f"{count} approval(s) required but no users or teams are listed")
        if count > len({u.casefold() for u in users}) and not teams:
            raise ValueError(f"{count} approval(s) required but only {len(users)} user(s) listed")
        return count


def _login_or_team(value: Any) -> Any:
    """A login or an ``org/team``, a leading ``@`` dropped (anything but text is left to
    the field's type check)."""
    if not isinstance(value, str):
        return value
    value = value.strip().removeprefix("@")
    if not (re.match(_LOGIN, value) or re.match(_TEAM, value)):
        raise ValueError(f"'{value}' is not a user login or an org/team")
    return value


class BackfillBudget(_Frozen):
    """``sluice.gate.backfill``: a merge that would backfill more than ``max_intervals``
    intervals in prod, or read more than ``max_bytes`` (the plan's estimate; a number of
    bytes or a size such as ``50 GB``), needs ``approver``'s approval too (a login or
    ``org/team``). At least one of the two limits is set."""

    max_intervals: int | None = Field(default=None, ge=0, strict=True)
    max_bytes: int | None = None
    approver: str

    @field_validator("max_bytes", mode="before")
    @classmethod
    def _check_bytes(cls, value: Any) -> Any:
        return None if value is None else parse_size(value)

    @field_validator("approver", mode="before")
    @classmethod
    def _check_approver(cls, value: Any) -> Any:
        return _login_or_team(value)

    @model_validator(mode="after")
    def _some_limit(self) -> BackfillBudget:
        if self.max_intervals is None and self.max_bytes is None:
            raise ValueError("set max_intervals, max_bytes or both: a budget needs a limit")
        return self

    def exceeded(self, intervals: int, scan_bytes: int | None) -> str | None:
        """What of a backfill is over this budget, in words (None: within it).

        ``scan_bytes`` None with intervals to compute: what they read was never estimated,
        which is over a ``max_bytes`` budget (the approver decides, not the missing number).

        >>> BackfillBudget(max_bytes=1024, approver="dana").exceeded(3, None)
        'backfill of 3 intervals whose reads were not estimated (budget 1.0 KB to read)'
        >>> BackfillBudget(max_bytes=1024, approver="dana").exceeded(0, None) is None
        True
        """
        over = []
        if self.max_intervals is not None and intervals > self.max_intervals:
            over.append(f"{intervals:,} intervals (budget {self.max_intervals:,})")
        if self.max_bytes is not None and scan_bytes is None and intervals > 0:
            over.append(
                f"{intervals:,} intervals whose reads were not estimated "
                f"(budget {size(self.max_bytes)} to read)"
            )
        elif self.max_bytes is not None and scan_bytes is not None and scan_bytes > self.max_bytes:
            over.append(f"about {size(scan_bytes)} to read (budget {size(self.max_bytes)})")
        return "backfill of " + " and ".join(over) if over else None


class GateSettings(_Frozen):
    """``sluice.gate``: the approvals a pull request needs before it may reach prod."""

    required_approvers: RequiredApprovers = Field(default_factory=RequiredApprovers)
    owners_must_approve: Literal["never", "direct", "breaking"] = "never"
    """``direct``: the owner of each directly modified model must approve; ``breaking``:
    also the owner of each model a breaking change reaches."""
    backfill: BackfillBudget | None = None

    def asks_approval(self) -> bool:
        """Whether a pull request needs anybody's approval under this gate.

        >>> GateSettings().asks_approval()
        False
        >>> GateSettings(required_approvers=RequiredApprovers(users=("bob",))).asks_approval()
        True
        """
        required = self.required_approvers
        return bool(required.users or required.teams or required.count) or (
            self.owners_must_approve != "never"
        )


def _on_key(data: Any) -> Any:
    # YAML 1.1 reads a bare `on:` key as the boolean true; that key can only mean `on`.
    if isinstance(data, dict) and True in data:
        return {("on" if k is True else k): v for k, v in data.items()}
    return data


class Tier(_Frozen):
    """One environment of ``sluice.deploy.environments``, in promotion order: a merge
    into the prod branch (``on: merge``) or a tag matching ``tag_pattern`` on it
    (``on: tag``) promotes the commit into environment ``name``."""

    name: str
    on: Literal["merge", "tag"]
    tag_pattern: str = Field(default="v*", min_length=1)
    released_by: tuple[str, ...] = ()
    """``on: tag`` only: the logins or ``org/team`` members whose tag (or release)
    promotes; anyone else's is refused (empty: anyone who may push the tag)."""

    @model_validator(mode="before")
    @classmethod
    def _bare_on(cls, data: Any) -> Any:
        return _on_key(data)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        try:
            return check_environment_name(value)
        except SluiceError as exc:
            raise ValueError(exc.message) from None

    @field_validator("released_by", mode="before")
    @classmethod
    def _check_released_by(cls, value: Any) -> Any:
        values = [value] if isinstance(value, str) else value
        return [_login_or_team(v) for v in values] if isinstance(values, list | tuple) else values

    @model_validator(mode="after")
    def _released_by_tags(self) -> Tier:
        if self.released_by and self.on != "tag":
            raise ValueError("released_by applies to a tier promoted by a tag (on: tag)")
        return self

    def tag_matches(self, tag: str) -> bool:
        """Whether a tag name (without ``refs/tags/``) matches :attr:`tag_pattern`."""
        return fnmatch.fnmatchcase(tag.removeprefix("refs/tags/"), self.tag_pattern)


class DeploySettings(_Frozen):
    """``sluice.deploy``: when and how an approved change is promoted to prod."""

    @model_validator(mode="before")
    @classmethod
    def _bare_on(cls, data: Any) -> Any:
        return _on_key(data)

    prod_branch: str = Field(default="main", min_length=1)
    on: Literal["merge", "tag"] = "merge"
    """``merge``: promote when a PR is merged into ``prod_branch``; ``tag``: when a tag
    matching ``tag_pattern`` is pushed (or a release published) on it."""
    tag_pattern: str = Field(default="v*", min_length=1)
    """An fnmatch glob (``*``, ``?``, ``[...]``), matched case-sensitively against the
    tag name: ``v*`` matches ``v1.2.0``, ``release-[0-9]*`` matches ``release-42``."""
    merge_method: Literal["merge", "squash", "rebase"] | None = None
    """How ``/sluice deploy`` merges the PR after promoting; None: it does not merge."""
    environments: tuple[Tier, ...] = ()
    """Promotion tiers in order (e.g. ``staging`` on merge, then ``prod`` on a tag),
    instead of ``on`` and ``tag_pattern``; one of them is ``prod``."""

    @model_validator(mode="after")
    def _tiers(self) -> DeploySettings:
        if not self.environments:
            return self
        if {"on", "tag_pattern"} & self.model_fields_set:
            raise ValueError(
                "set either on/tag_pattern or environments: with environments, each tier "
                "says what promotes it"
            )
        names = [t.name for t in self.environments]
        if len(set(names)) != len(names):
            raise ValueError(f"environments are listed twice: {', '.join(names)}")
        if PROD not in names:
            raise ValueError(f"one of the environments must be {PROD} (listed: {', '.join(names)})")
        return self

    def tiers(self) -> tuple[Tier, ...]:
        """The promotion tiers: :attr:`environments`, or prod alone by ``on``."""
        return self.environments or (Tier(name=PROD, on=self.on, tag_pattern=self.tag_pattern),)

    def merge_tiers(self) -> tuple[Tier, ...]:
        """The tiers a merge into the prod branch promotes, in order."""
        return tuple(t for t in self.tiers() if t.on == "merge")

    def tag_tiers(self, tag: str) -> tuple[Tier, ...]:
        """The tiers a tag named ``tag`` promotes, in order."""
        return tuple(t for t in self.tiers() if t.on == "tag" and t.tag_matches(tag))

    def prod_tier(self) -> Tier:
        return next(t for t in self.tiers() if t.name == PROD)

    def tag_matches(self, tag: str) -> bool:
        """Whether a tag name (without ``refs/tags/``) promotes any tier."""
        return bool(self.tag_tiers(tag))
