"""The Action's job page: the step summary and the ``::error`` annotations of failed
checks (GitHub's workflow commands, the project's text escaped as GitHub documents).

>>> # ::error file=wh/models/broken.sql,line=3,col=26,title=Sluice::table 'nowhere' ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from sluice.bot.forge.base import Check
from sluice.bot.present import checks
from sluice.core import markdown as md

OWN_CHECKS = (*checks.PR_CHECKS, checks.DEPLOY)
"""The checks whose failure fails the job: the approval gate waits for people, so a
pending or refused gate is reported on the PR, not as a failed job."""

_WHERE = re.compile(
    r"(?m)(?:^|[\s`(])((?:[\w.-]+/)*[\w.-]+\.(?:sql|py|ya?ml|csv)):(\d+)(?::(\d+))?:? ([^\n`]+)"
)


def failed_checks(checks: Mapping[str, Check]) -> list[str]:
    """The checks Sluice owns that concluded failure."""
    return [n for n in OWN_CHECKS if n in checks and checks[n].conclusion == "failure"]


def error_annotations(checks: Mapping[str, Check], workspace: Path, project_path: str) -> list[str]:
    """``::error file=...,line=...`` for each ``file:line[:col]: message`` of a failed
    check that names a file of the repository (given from the repository's root or the
    project's), with the path from the repository's root as GitHub wants it."""
    found: dict[tuple[str, int, int | None], str] = {}
    base = workspace.resolve()
    for name in failed_checks(checks):
        check = checks[name]
        for match in _WHERE.finditer(f"{check.summary}\n{check.text or ''}"):
            rel, line, col, message = match.group(1), match.group(2), match.group(3), match.group(4)
            where = _repository_path(base, project_path, rel)
            if where is not None:
                found.setdefault((where, int(line), int(col) if col else None), message.strip())
    out = []
    for (where, line, col), message in found.items():
        position = f"file={_escape_property(where)},line={line}" + (f",col={col}" if col else "")
        out.append(f"::error {position},title=Sluice::{_escape_data(message)}")
    return out


def _repository_path(base: Path, project_path: str, rel: str) -> str | None:
    for candidate in (base / rel, base / project_path / rel):
        path = candidate.resolve()
        if path.is_relative_to(base) and path.is_file():
            return path.relative_to(base).as_posix()
    return None


def _escape_data(text: str) -> str:
    """A workflow command's message: GitHub's escapes for %, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: the message's escapes, and ``:`` and ``,``."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def step_summary(environment: str | None, checks: Mapping[str, Check]) -> str:
    """The job page's summary: each check's outcome, then the environment check's body
    (the verdict and plan the PR comment opens with; Sluice's Markdown, user text escaped)."""
    lines = [f"## Sluice{f': `{environment}`' if environment else ''}", ""]
    lines += ["| check | outcome | |", "| --- | --- | --- |"]
    for name, check in checks.items():
        outcome = check.conclusion or check.status
        lines.append(f"| `{name}` | {outcome} | {md.text(check.title, 200)} |")
    body = next(
        (checks[n].summary for n in ("sluice/pr-environment", "sluice/deploy") if n in checks),
        "",
    )
    return "\n".join([*lines, "", body.strip(), ""]) + "\n"
