"""The bot's replies to ``/sluice`` commands: every word of them, in one place.

Each function returns the Markdown of one reply. Anything a user wrote reaches a reply
only as a mention (:func:`sluice.core.markdown.mention`) or a code span
(:func:`sluice.core.markdown.code`, cut to :data:`QUOTE_LIMIT` characters).

>>> not_a_writer("eve", "read", "github")
'@eve only users with write permission on this repository may run Sluice commands (your permission: read). Ask a maintainer to run it.'
>>> short_sha("not a sha")
'(not a commit id)'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sluice.bot.events.commands import HELP, QUOTE_LIMIT
from sluice.core import markdown as md
from sluice.core.words import plural


def short_sha(sha: str) -> str:
    """A commit id for a reply: its first 7 hex digits (nothing else from a payload)."""
    return sha[:7] if re.fullmatch(r"[0-9a-fA-F]{7,64}", sha) else "(not a commit id)"


def not_a_writer(author: str, permission: str, forge: str) -> str:
    needed = "the Developer role or above" if forge == "gitlab" else "write permission"
    return (
        f"{md.mention(author)} only users with {needed} on this repository may run "
        f"Sluice commands (your permission: {permission}). Ask a maintainer to run it."
    )


def usage_error(author: str, hint: str | None, line: str, usage: str) -> str:
    return f"{md.mention(author)} {hint} (you wrote {md.code(line, QUOTE_LIMIT)}). Usage: {usage}"


def help_text(unknown: str | None) -> str:
    """The command table, after a word on the subcommand that was not one, if any."""
    if not unknown:
        return HELP
    return f"{md.code(f'/sluice {unknown}', QUOTE_LIMIT)} is not a Sluice command.\n\n{HELP}"


def pr_closed(author: str) -> str:
    return f"{md.mention(author)} this pull request is closed."


def fork_built(author: str, built: str, head: str) -> str:
    said = f"{md.mention(author)} built `{short_sha(built)}`, "
    if built == head:
        return said + "this pull request's head when you commented."
    return said + (
        f"the head when {md.mention(author)} commented; the pull request has since "
        f"moved to `{short_sha(head)}`: comment `/sluice plan` again to build it."
    )


def fork_head_unknown(author: str, head: str) -> str:
    return (
        f"{md.mention(author)} not built: Sluice has no record of this fork pull request's "
        "head when you commented (the pull request is older than that record), and its "
        "head now may hold commits pushed after your review. Its head is now "
        f"`{short_sha(head)}`: review that commit, then comment `/sluice plan` again "
        "to build it."
    )


def fork_head_moved(author: str, head: str) -> str:
    return (
        f"{md.mention(author)} not built: the pull request's head changed after your command "
        f"(to `{short_sha(head)}`), so what you reviewed is not what would run. Review the new "
        "head and comment `/sluice plan` again."
    )


def diff_failed(author: str, model: str, error: str) -> str:
    return (
        f"{md.mention(author)} {md.code(f'/sluice diff {model}')} failed:\n\n"
        f"{md.fence(error, 'text')}"
    )


def diff_result(author: str, model: str, environment: str, where: str | None, body: str) -> str:
    """``body``: the table diff's own Markdown (:mod:`sluice.core.tablediff.render`)."""
    condition = f" where {md.code(where)}" if where else ""
    return (
        f"{md.mention(author)} {md.code(model)} in `{environment}` against prod{condition}:\n\n"
        + body
    )


def not_deployed_gate(author: str, why: str) -> str:
    return f"{md.mention(author)} not deployed: the `sluice/approval` gate has not passed. {why}"


def not_deployed_base(author: str, base: str, prod_branch: str, source: str) -> str:
    return (
        f"{md.mention(author)} not deployed: this pull request goes into {md.code(base)}, and "
        f"only pull requests into the prod branch {md.code(prod_branch)} deploy to prod (the "
        f"prod branch is set by the service's SLUICE_PROD_BRANCH and `sluice.deploy` of "
        f"{source}). Open the pull request against {md.code(prod_branch)}."
    )


def not_deployed_tag(
    author: str,
    tag_tiers: Sequence[tuple[str, str, Sequence[str]]],
    prod_branch: str,
    source: str,
    *,
    tiers: bool,
) -> str:
    """``/sluice deploy`` where a merge promotes no environment: every tier is promoted by
    a tag. ``tag_tiers``: (environment, tag pattern, released_by) of each; ``tiers``:
    whether they come from ``sluice.deploy.environments`` (else ``sluice.deploy.on``)."""
    parts = []
    for name, pattern, released_by in tag_tiers:
        by = ", ".join(md.mention(r, team="/" in r) for r in released_by)
        who = f", pushed by {by}" if by else ""
        parts.append(f"{md.code(name)} by a tag matching {md.code(pattern)}{who}")
    setting = "`sluice.deploy.environments`" if tiers else "`sluice.deploy.on: tag`"
    return (
        f"{md.mention(author)} not deployed: `/sluice deploy` promotes only what a merge "
        f"into the prod branch {md.code(prod_branch)} promotes, and here a merge promotes "
        f"no environment: {'; '.join(parts)} on {md.code(prod_branch)} ({setting} of "
        f"{source}). A comment never stands in for the tag and its `released_by`. Merge "
        "this pull request, then push (or publish a release of) a matching tag on "
        f"{md.code(prod_branch)}."
    )


def not_deployed_behind(author: str, base: str) -> str:
    return (
        f"{md.mention(author)} not deployed: {md.code(base)} has commits this pull request "
        f"does not have, and promoting it would undo them in prod. Merge {md.code(base)} into "
        "the branch, let Sluice plan it again, and deploy that."
    )


def deploy_failed(author: str, outcome: str) -> str:
    return f"{md.mention(author)} deploy failed: {outcome}."


def deployed(author: str, outcome: str, environment: str = "prod") -> str:
    return f"{md.mention(author)} deployed to {environment}: {outcome}."


def deployed_merge_failed(author: str, error: str, environment: str = "prod") -> str:
    """``error``: the forge's, which may name the PR's own files (a merge conflict): fenced."""
    return (
        f"{md.mention(author)} deployed to {environment}, but merging failed:\n\n"
        f"{md.fence(error, 'text')}"
    )


def deployed_and_merged(
    author: str, outcome: str, merge_sha: str, environment: str = "prod"
) -> str:
    return (
        f"{md.mention(author)} deployed to {environment} ({outcome}) and merged as "
        f"`{merge_sha[:7]}`."
    )


def command_gave_up(author: str, error: str) -> str:
    return (
        f"{md.mention(author)} Sluice could not run your command: it failed on every "
        f"attempt.\n\n{md.fence(error, 'text')}"
    )


def scheduled_run_failed(error: str) -> str:
    """The comment on ``SLUICE_RUN_REPORT_TO`` when a scheduled run of prod failed."""
    return (
        "### ❌ Sluice's scheduled run of prod failed\n\nIt failed on every attempt; prod's views "
        "were not changed, and the intervals that were written are kept. The next scheduled "
        "run processes every interval still due, or run it now from a checkout of the prod "
        f"branch with `sluice run prod`.\n\n{md.fence(error, 'text')}"
    )


def rollback_not_merged(author: str) -> str:
    return (
        f"{md.mention(author)} not rolled back: `/sluice rollback` works on a merged pull "
        "request (the change whose promotion it undoes); comment on that one."
    )


def rollback_not_approver(
    author: str,
    users: tuple[str, ...],
    teams: tuple[str, ...],
    *,
    owners: Sequence[tuple[str, str | None]] = (),
    rule: str | None = None,
    bot: str | None = None,
) -> str:
    """``owners``: under an owners' gate (``rule``), each model the rollback changes whose
    owner the gate asks for, with that owner (None: none, so a required approver).
    ``bot``: why ``author``'s account counts as no person (a bot account), if it does not."""
    bot_said = f" This is a bot account ({md.text(bot)})." if bot else ""
    who = [md.code(user) for user in users] + [md.code(team) for team in teams]
    approvers = (
        f"a required approver of the gate ({', '.join(who)}, from the prod branch's "
        "`sluice.gate.required_approvers`)"
        if who
        else None
    )
    if rule is None:
        return (
            f"{md.mention(author)} not rolled back: a rollback changes prod, so only "
            f"{approvers} may run it.{bot_said} Ask one of them."
        )
    listed = ", ".join(
        f"{md.code(model)} ({md.code(owner) if owner else 'no owner'})" for model, owner in owners
    )
    owned = (
        f"the owner of every model it changes ({listed}; `sluice.gate.owners_must_approve: "
        f"{rule}` on the prod branch)"
    )
    may = f"{approvers} or {owned}" if approvers else owned
    return (
        f"{md.mention(author)} not rolled back: a rollback changes prod without a review of "
        f"its own, so only {may} may run it.{bot_said} Ask one of them."
    )


def rollback_failed(author: str, error: str) -> str:
    """``error``: what stopped it (may name models and plan ids): fenced."""
    return f"{md.mention(author)} not rolled back; prod is unchanged:\n\n{md.fence(error, 'text')}"


def rolled_back(
    author: str, plan_id: str, changed: tuple[tuple[str, str | None, str | None], ...], views: int
) -> str:
    """``changed``: (model, version before, version after); model names are the project's."""
    rows = "\n".join(
        f"| {md.code(name, table=True)} | {md.code(before or '(absent)', table=True)} | "
        f"{md.code(after or '(removed)', table=True)} |"
        for name, before, after in changed
    )
    return (
        f"{md.mention(author)} rolled prod back to plan `{short_sha(plan_id)}` by virtual "
        f"update: {plural(views, 'view')} re-pointed, no data computed. `/sluice rollback` again "
        "goes back one more plan; a merge of a fix, or `/sluice deploy`, moves prod forward."
        f"\n\n| model | version before | version now |\n|---|---|---|\n{rows}"
    )
