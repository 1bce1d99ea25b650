"""The words of policies as code in the service: the ``sluice/policy`` check, the PR
comment's section and the replies to ``/sluice override`` (issue 47).

Everything a policy file says (its name, description, rule, an error quoting it) and
everything a person wrote (an override's reason) is the prod branch's or a user's text: it
reaches Markdown only through :mod:`sluice.core.markdown`.

>>> check_of([], None).conclusion
'success'
>>> print(section_of([], "policies/x.yaml:3: the rule is not valid CEL")[1])
**Policies:** ❌ the policies in force could not be read, so every plan is blocked (fail closed): policies/x.yaml:3: the rule is not valid CEL
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bot.forge.base import Check
from sluice.core import markdown as md

CHECK = "sluice/policy"
SECTION = "policy"
ERROR_CHARS = 600
"""Characters of an evaluation error shown, at most (the check's text has room for it)."""
REASON_CHARS = 300
"""Characters of an override's reason kept and shown, at most (the audit row's detail)."""


@dataclass(frozen=True)
class Shown:
    """One policy's verdict as shown: its name, level, file:line, description, outcome
    (``pass``, ``fail``, ``error``), whether it blocks, the error, and who overrode it."""

    name: str
    level: str
    where: str
    description: str
    outcome: str
    blocks: bool
    error: str = ""
    overridden_by: str | None = None
    reason: str = ""

    @property
    def words(self) -> str:
        if self.outcome == "pass":
            return "passed"
        if self.outcome == "error":
            return "could not be evaluated (blocks)"
        if self.overridden_by is not None:
            return "failed, overridden"
        return {
            "advisory": "failed (advisory: does not block)",
            "soft": "failed (blocks until overridden)",
            "hard": "failed (blocks)",
        }.get(self.level, "failed")


def _icon(row: Shown) -> str:
    if row.blocks:
        return "❌"
    if row.outcome == "pass":
        return "✅"
    return "⚠️"


def _line(row: Shown) -> str:
    line = f"{_icon(row)} {md.code(row.name)} ({row.level}): {row.words}"
    if row.overridden_by is not None:
        line += f" by {md.mention(row.overridden_by)}"
        if row.reason:
            line += f": {md.text(row.reason, REASON_CHARS)}"
    return line


def _summary(rows: Sequence[Shown], error: str | None) -> tuple[str, str]:
    if error is not None:
        return "Policies could not be read", (
            "The policies in force could not be read, so every plan is blocked (fail "
            f"closed): {md.text(error, ERROR_CHARS)}"
        )
    blocking = [r for r in rows if r.blocks]
    if blocking:
        names = ", ".join(md.code(r.name) for r in blocking)
        return f"{len(blocking)} of {len(rows)} policies block", f"Blocked by {names}."
    failed = [r for r in rows if r.outcome != "pass"]
    if failed:
        return f"{len(rows)} policies: none blocks", (
            f"{len(failed)} failed without blocking (advisory, or overridden)."
        )
    return f"{len(rows)} policies passed", "Every policy in force passed."


def check_of(rows: Sequence[Shown], error: str | None) -> Check:
    """The ``sluice/policy`` check: failure while a policy blocks (or cannot be read)."""
    title, summary = _summary(rows, error)
    blocked = error is not None or any(r.blocks for r in rows)
    lines = []
    for row in sorted(rows, key=lambda r: (not r.blocks, r.outcome == "pass", r.name)):
        lines.append(f"### {_icon(row)} {md.text(row.name)} ({row.level})")
        lines.append("")
        lines.append(f"{md.text(row.description)} ({md.code(row.where)})")
        lines.append("")
        lines.append(f"**{row.words}**")
        if row.error:
            lines.append("")
            lines.append(md.fence(row.error[:ERROR_CHARS], "text"))
        if row.overridden_by is not None:
            reason = f": {md.text(row.reason, REASON_CHARS)}" if row.reason else ""
            lines.append("")
            lines.append(f"Overridden for this plan by {md.mention(row.overridden_by)}{reason}")
        lines.append("")
    if error is not None:
        lines.append(md.fence(error[: ERROR_CHARS * 2], "text"))
    lines.append(
        "Policies are the prod branch's as in force (`policies/*.yaml`); a pull request's "
        "own policies apply once it is approved and promoted. A soft policy is lifted for "
        "one plan by `/sluice override POLICY reason` from someone it names."
    )
    return Check(
        name=CHECK,
        status="completed",
        title=title,
        summary=summary,
        conclusion="failure" if blocked else "success",
        text="\n".join(lines),
    )


def section_of(rows: Sequence[Shown], error: str | None) -> tuple[str, str | None]:
    """The PR comment's policies section (None: no policies in force, nothing to say)."""
    if error is not None:
        return SECTION, (
            "**Policies:** ❌ the policies in force could not be read, so every plan is "
            f"blocked (fail closed): {md.text(error, ERROR_CHARS)}"
        )
    if not rows:
        return SECTION, None
    head = "❌" if any(r.blocks for r in rows) else "✅"
    lines = [f"**Policies:** {head} {md.text(_summary(rows, None)[0])}"]
    lines += [
        f"- {_line(r)}" for r in sorted(rows, key=lambda r: (not r.blocks, r.outcome, r.name))
    ]
    return SECTION, "\n".join(lines)


def blocked_words(names: Sequence[str], error: str | None, environment: str) -> tuple[str, str]:
    """A promotion (or a merge group) refused by policies: (title, summary)."""
    if error is not None:
        return (
            f"Not promoted to {environment}: the policies could not be read",
            f"The policies in force could not be read (fail closed): {md.text(error, ERROR_CHARS)}",
        )
    listed = ", ".join(md.code(n) for n in names)
    return (
        f"Not promoted to {environment}: blocked by policies",
        f"The plan fails {listed} (hard, or soft and not overridden for this plan). An "
        "approval does not lift a policy: a soft one is lifted by `/sluice override` on "
        "the pull request, from someone the policy names; a hard one by changing the plan.",
    )


# -- replies to /sluice override ---------------------------------------------------------


def overridden(author: str, name: str, fingerprint: str, blocking: Sequence[str]) -> str:
    rest = (
        f" Still blocking: {', '.join(md.code(n) for n in blocking)}."
        if blocking
        else " No policy blocks this plan now."
    )
    return (
        f"{md.mention(author)} overrode {md.code(name)} for this plan "
        f"(`{fingerprint[:12]}`) only: a push that changes the plan voids it.{rest}"
    )


def no_plan(author: str) -> str:
    return (
        f"{md.mention(author)} this pull request's head has no plan yet: wait for its "
        "build, then override."
    )


def no_such_policy(author: str, name: str, names: Sequence[str]) -> str:
    known = ", ".join(md.code(n) for n in names) or "none"
    return (
        f"{md.mention(author)} no policy in force is called {md.code(name, 80)} "
        f"(policies in force: {known})."
    )


def not_soft(author: str, name: str, level: str) -> str:
    why = "it does not block" if level == "advisory" else "only a change of the plan lifts it"
    return (
        f"{md.mention(author)} {md.code(name)} is {level}: only a soft policy can be "
        f"overridden ({why})."
    )


def not_allowed(author: str, name: str, who: Sequence[str], bot: str | None = None) -> str:
    """``bot``: why ``author``'s account counts as no person (a bot), though named."""
    named = ", ".join(md.mention(w, team="/" in w) for w in who)
    if bot:
        return (
            f"{md.mention(author)} you may not override {md.code(name)}: this is a bot "
            f"account ({md.text(bot)}), and its `override_by` names people ({named})."
        )
    return (
        f"{md.mention(author)} you may not override {md.code(name)}: its `override_by` "
        f"names {named}."
    )


def not_failing(author: str, name: str, outcome: str) -> str:
    if outcome == "error":
        return (
            f"{md.mention(author)} {md.code(name)} could not be evaluated on this plan: an "
            "error blocks until the policy is fixed on the prod branch (it cannot be "
            "overridden)."
        )
    return f"{md.mention(author)} {md.code(name)} passes on this plan: nothing to override."


def policies_unreadable(author: str, error: str) -> str:
    return (
        f"{md.mention(author)} the policies in force could not be read, so nothing can be "
        f"overridden until they are fixed: {md.code(error, ERROR_CHARS)}"
    )


def plan_stale(author: str) -> str:
    return (
        f"{md.mention(author)} the policies in force changed since this plan was made: "
        "comment `/sluice plan` for a new plan, then override."
    )
