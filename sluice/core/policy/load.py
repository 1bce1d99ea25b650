"""``policies/*.yaml`` read into :class:`Policy` values, each error naming file and line.

One file holds one policy::

    name: finance-breaking            # unique among the files; letters, digits, - and _
    description: A breaking change to a finance model needs the finance team.
    level: soft                       # advisory | soft | hard
    override_by: [octo/finance]       # soft only: users or org/teams who may override it
    rule: >-
      !plan.models.exists(m, m.change == "breaking" && "finance" in m.tags)

>>> policy = parse_policy("policies/a.yaml", "name: a\\ndescription: d\\nlevel: hard\\nrule: 'true'\\n")
>>> policy.name, policy.level, policy.rule.line
('a', 'hard', 4)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sluice.core.errors import ConfigError, did_you_mean
from sluice.core.policy.cel import Rule, compile_rule
from sluice.core.yamlio import parse_yaml

Level = Literal["advisory", "soft", "hard"]
LEVELS: tuple[Level, ...] = ("advisory", "soft", "hard")
DIRECTORY = "policies"
"""Where the policies live, beside the project's config (on the prod branch as in force)."""
MAX_POLICIES = 200
MAX_FILE_CHARS = 64 * 1024
_KEYS = ("name", "description", "level", "override_by", "rule")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_WHO = re.compile(r"^@?[A-Za-z0-9][A-Za-z0-9_.-]{0,38}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?$")


@dataclass(frozen=True)
class Policy:
    """One policy, as its file says."""

    name: str
    description: str
    level: Level
    override_by: tuple[str, ...]
    rule: Rule
    path: str
    line: int


def is_policy_file(path: str) -> bool:
    """Whether ``path`` (relative to the project) is a policy file."""
    head, _, name = path.rpartition("/")
    return head == DIRECTORY and name.endswith((".yaml", ".yml")) and not name.startswith(".")


def read_policies(project_dir: Path) -> list[Policy]:
    """The policies of the project at ``project_dir`` (its ``policies/`` folder; none when
    it has none), for the CLI on a checkout of the user's own."""
    folder = project_dir / DIRECTORY
    if not folder.is_dir():
        return []
    files: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        relative = f"{DIRECTORY}/{path.name}"
        if not is_policy_file(relative):
            continue
        if path.is_symlink() or not path.is_file():
            raise ConfigError(
                "a policy file must be a regular file, not a link or a folder",
                path=relative,
                hint="copy the policy into policies/",
            )
        try:
            files[relative] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError("the policy file is not UTF-8 text", path=relative) from None
    return parse_policies(files)


def parse_policies(files: Mapping[str, str]) -> list[Policy]:
    """Every policy of ``files`` (path -> text; other paths are ignored), by name.

    Raises:
        ConfigError: a file that is not a policy, or two of the same name.
    """
    paths = sorted(p for p in files if is_policy_file(p))
    if len(paths) > MAX_POLICIES:
        raise ConfigError(
            f"{len(paths)} policy files, over the {MAX_POLICIES} allowed",
            path=DIRECTORY,
            hint="merge related rules into one policy",
        )
    policies: dict[str, Policy] = {}
    for path in paths:
        policy = parse_policy(path, files[path])
        other = policies.get(policy.name)
        if other is not None:
            raise ConfigError(
                f"policy {policy.name!r} is also defined in {other.path}:{other.line}",
                path=path,
                line=policy.line,
                hint="give each policy its own name",
            )
        policies[policy.name] = policy
    return sorted(policies.values(), key=lambda p: p.name)


def parse_policy(path: str, text: str) -> Policy:
    """The policy in ``text``, read from ``path``."""
    if len(text) > MAX_FILE_CHARS:
        raise ConfigError(
            f"the policy file is {len(text):,} characters, over the {MAX_FILE_CHARS:,} allowed",
            path=path,
        )
    doc = parse_yaml(text, path)
    data = doc.data
    if not isinstance(data, dict):
        raise ConfigError(
            "a policy file is a mapping of name, description, level and rule",
            path=path,
            line=doc.line_of(()) or 1,
            hint="see the README's Policies section for an example",
        )
    for key in data:
        if key not in _KEYS:
            near = did_you_mean(str(key), _KEYS)
            raise ConfigError(
                f"unknown key {str(key)!r} in a policy",
                path=path,
                line=doc.line_of((key,)),
                hint=near or f"a policy has {', '.join(_KEYS)}",
            )

    def text_of(key: str, *, required: bool = True) -> str:
        value = data.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f"a policy's {key!r} must be a non-empty string"
                if key in data
                else f"the policy has no {key!r}",
                path=path,
                line=doc.line_of((key,)) if key in data else doc.line_of(()) or 1,
            )
        return value.strip()

    name = text_of("name")
    if not _NAME.match(name):
        raise ConfigError(
            f"policy name {name[:80]!r} is not letters, digits, - and _ (at most 64)",
            path=path,
            line=doc.line_of(("name",)),
        )
    level = text_of("level")
    if level not in LEVELS:
        raise ConfigError(
            f"level {level[:40]!r} is not one of {', '.join(LEVELS)}",
            path=path,
            line=doc.line_of(("level",)),
            hint=did_you_mean(level, LEVELS)
            or "advisory: shown; soft: blocks until overridden; hard: blocks",
        )
    override = data.get("override_by", [])
    if isinstance(override, str):
        override = [override]
    if not isinstance(override, list) or not all(
        isinstance(w, str) and _WHO.match(w) for w in override
    ):
        raise ConfigError(
            "override_by is a list of users or org/teams",
            path=path,
            line=doc.line_of(("override_by",)),
            hint="e.g. override_by: [octo/finance, alice]",
        )
    if override and level != "soft":
        raise ConfigError(
            f"override_by is for soft policies; this one is {level}",
            path=path,
            line=doc.line_of(("override_by",)),
            hint="make it soft, or remove override_by",
        )
    if level == "soft" and not override:
        raise ConfigError(
            "a soft policy needs override_by: who may override it",
            path=path,
            line=doc.line_of(("level",)),
            hint="e.g. override_by: [octo/data-leads]; or make it hard",
        )
    rule_line = doc.line_of(("rule",))
    if isinstance(data.get("rule"), bool):  # `rule: true` is YAML's boolean: CEL's too
        data["rule"] = "true" if data["rule"] else "false"
    rule = compile_rule(text_of("rule"), path, rule_line)
    return Policy(
        name=name,
        description=text_of("description"),
        level=level,
        override_by=tuple(w.removeprefix("@") for w in override),
        rule=rule,
        path=path,
        line=doc.line_of(("name",)) or 1,
    )
