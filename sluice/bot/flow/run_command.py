"""Running the ``/sluice`` commands people write in PR comments.

Only newly created comments count (an edited comment never runs a command again). The
author must have write permission, asked of the forge each time; anyone else gets a reply
saying why. An accepted command is acknowledged with a reaction before any work starts;
a command whose comment was deleted before the bot got to it is withdrawn (not run).
"""

from __future__ import annotations

import dataclasses
import logging
import re

from sluice.bot.events.command_line import command_line
from sluice.bot.events.commands import HELP, QUOTE_LIMIT, Command, CommandError, parse_line
from sluice.bot.events.neutral import CommentEvent
from sluice.bot.flow import approval, pr_build, promotion, trust
from sluice.bot.flow.deps import Deps
from sluice.bot.forge.base import Forge, PullRequest, repo_key, writer
from sluice.core import markdown as md
from sluice.core.errors import SluiceError
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.state import open_state
from sluice.core.tablediff import render as diff_render
from sluice.core.tablediff.result import DiffOptions
from sluice.core.workflow import table_diff

log = logging.getLogger(__name__)

ACCEPTED = "+1"
REFUSED = "confused"


def on_comment(deps: Deps, forge: Forge, event: CommentEvent) -> None:
    """Run the command in ``event``'s comment, if it holds one.

    Permission first: only the command line is looked for before the author's permission
    is asked. Someone without write permission gets one fixed reply holding nothing of
    theirs but their login (a mention only when it is a well-formed login); only a
    writer's arguments are read, and a writer's usage error quotes what they wrote as a
    code span (cut to ``QUOTE_LIMIT`` characters).
    """
    if event.action != "created":
        return
    line = command_line(event.body)
    if line is None:
        return
    who = md.mention(event.author)
    permission = forge.permission(event.author)
    if not writer(permission):
        needed = "the Developer role or above" if forge.name == "gitlab" else "write permission"
        forge.reply(
            event.number,
            (
                f"{who} only users with {needed} on this repository may run "
                f"Sluice commands (your permission: {permission}). Ask a maintainer to run it."
            ),
        )
        return
    try:
        command = parse_line(line)
    except CommandError as exc:
        if _still_there(forge, event, REFUSED):
            forge.reply(
                event.number,
                (
                    f"{who} {exc.hint} (you wrote {md.code(line, QUOTE_LIMIT)}). "
                    f"Usage: {exc.message}"
                ),
            )
        return
    if not _still_there(forge, event, ACCEPTED):
        return
    if command.name == "help":
        said = "" if command.unknown is None else _unknown(command.unknown)
        forge.reply(event.number, said + HELP)
        return
    pr = forge.pull_request(event.number)
    if not pr.open:
        forge.reply(event.number, f"{md.mention(event.author)} this pull request is closed.")
        return
    if command.name == "plan":
        # A fork's author may push between the writer's review and the build: a fork PR
        # is built at the head it had when the writer commented, not at the head it has
        # when the job runs.
        seen = _head_when_commented(deps, forge, pr, event) if pr.fork else pr
        if seen is None:
            return
        pr_build.preview(deps, forge, dataclasses.replace(seen, fork=False))
        if pr.fork:
            said = f"{md.mention(event.author)} built `{_short(seen.head_sha)}`, "
            if seen.head_sha == pr.head_sha:
                said += "this pull request's head when you commented."
            else:
                said += (
                    f"the head when {md.mention(event.author)} commented; the pull request has since "
                    f"moved to `{_short(pr.head_sha)}`: comment `/sluice plan` again to "
                    "build it."
                )
            forge.reply(event.number, said)
        approval.refresh(deps, forge, forge.pull_request(event.number))
    elif command.name == "diff":
        _diff(deps, forge, pr, command, event.author)
    elif command.name == "deploy":
        _deploy(deps, forge, pr, event.author)


def _head_when_commented(
    deps: Deps, forge: Forge, pr: PullRequest, event: CommentEvent
) -> PullRequest | None:
    """``pr`` (a fork PR) at the head it had when ``event``'s writer commented; None, with
    a reply saying why, when that head is not known for sure.

    The head is the one the PR's own events last recorded (opened, synchronize, ...: the
    flow records it as each is handled). Those events and this comment share the
    PR's queue key and run in the order they arrived, fork PR events superseding none
    (``events.supersedes``), so the record is the head as of the comment. Refused:

    - a head recorded from an event the forge stamped at or after the comment's time (a
      push made after the command, delivered before it);
    - no head recorded at all (a PR opened before Sluice kept them, or whose events it did
      not receive). Building the forge's head then would be unsafe: its commit date is
      whatever its author wrote, so "not newer than the comment" cannot be checked. The
      head is recorded now instead and named in the reply: the writer reviews that commit
      and comments again, and that comment builds it (unless the PR moves meanwhile).
    """
    repo = repo_key(forge)
    recorded = deps.ledger.pr_head(repo, pr.number)
    if recorded is None:
        deps.ledger.record_pr_head(repo, pr.number, pr.head_sha, event.created_ms, deps.clock())
        forge.reply(
            pr.number,
            (
                f"{md.mention(event.author)} not built: Sluice has no record of this fork pull request's "
                "head when you commented (the pull request is older than that record), and its "
                "head now may hold commits pushed after your review. Its head is now "
                f"`{_short(pr.head_sha)}`: review that commit, then comment `/sluice plan` again "
                "to build it."
            ),
        )
        return None
    sha, at = recorded
    if at is not None and event.created_ms is not None and at >= event.created_ms:
        forge.reply(
            pr.number,
            (
                f"{md.mention(event.author)} not built: the pull request's head changed after your command "
                f"(to `{_short(sha)}`), so what you reviewed is not what would run. Review the new "
                "head and comment `/sluice plan` again."
            ),
        )
        return None
    return dataclasses.replace(pr, head_sha=sha)


def _short(sha: str) -> str:
    """A commit id for a reply: its first 7 hex digits (nothing else from the payload)."""
    return sha[:7] if re.fullmatch(r"[0-9a-fA-F]{7,64}", sha) else "(not a commit id)"


def _still_there(forge: Forge, event: CommentEvent, reaction: str) -> bool:
    """React to the command's comment; False (and logged) when it was deleted meanwhile:
    deleting a command's comment before it runs withdraws the command."""
    if forge.react(event.number, event.comment_id, reaction):
        return True
    log.info(
        "%s#%s: comment %s was deleted; its command is not run",
        forge.repo,
        event.number,
        event.comment_id,
    )
    return False


def _unknown(sub: str) -> str:
    if not sub:
        return ""
    return f"{md.code(f'/sluice {sub}', QUOTE_LIMIT)} is not a Sluice command.\n\n"


def _diff(deps: Deps, forge: Forge, pr: PullRequest, command: Command, author: str) -> None:
    assert command.model is not None
    environment = pr_environment(pr.number)
    tree = deps.checkout.tree(forge, pr.head_sha)
    try:
        project = trust.load_trusted(deps, tree, trust.for_repository(deps, forge))
        settings = project.config.sluice.pr
        options = DiffOptions(
            where=command.where, decimals=settings.decimals, sample=settings.diff_sample
        )
        store = open_state(deps.state_url)
        try:
            result = table_diff(
                store,
                deps.spark_runner(project, tree, lambda _event: None),
                source=PROD,
                target=environment,
                model=command.model,
                options=options,
                url=deps.state_url,
                now=deps.clock(),
            )
        finally:
            store.close()
    except SluiceError as exc:
        text = deps.scrub(str(exc), tree)
        forge.reply(
            pr.number,
            f"{md.mention(author)} {md.code(f'/sluice diff {command.model}')} failed:\n\n{md.fence(text, 'text')}",
        )
        return
    where = f" where {md.code(command.where)}" if command.where else ""
    forge.reply(
        pr.number,
        (
            f"{md.mention(author)} {md.code(command.model)} in `{environment}` against prod{where}:\n\n"
            + diff_render.markdown([result])
        ),
    )


def _deploy(deps: Deps, forge: Forge, pr: PullRequest, author: str) -> None:
    verdict = approval.refresh(deps, forge, pr)
    if verdict is None or not verdict.result.ok:
        why = verdict.result.summary if verdict is not None else "this commit has no plan yet"
        forge.reply(
            pr.number,
            f"{md.mention(author)} not deployed: the `sluice/approval` gate has not passed. {why}",
        )
        return
    settings = verdict.settings
    if pr.base_ref != settings.branch:
        forge.reply(
            pr.number,
            (
                f"{md.mention(author)} not deployed: this pull request goes into {md.code(pr.base_ref)}, and only "
                f"pull requests into the prod branch {md.code(settings.branch)} deploy to prod (the prod "
                f"branch is set by the service's SLUICE_PROD_BRANCH and `sluice.deploy` of "
                f"{settings.source}). Open the pull request against {md.code(settings.branch)}."
            ),
        )
        return
    base_head = forge.commit_of(pr.base_ref)
    if base_head is not None and not forge.on_branch(base_head, pr.head_sha):
        forge.reply(
            pr.number,
            (
                f"{md.mention(author)} not deployed: {md.code(pr.base_ref)} has commits this pull request does not "
                f"have, and promoting it would undo them in prod. Merge {md.code(pr.base_ref)} into the "
                "branch, let Sluice plan it again, and deploy that."
            ),
        )
        return
    outcome = promotion.promote(
        deps, forge, pr.head_sha, settings, label=f"#{pr.number}", number=pr.number
    )
    if not outcome.ok:
        forge.reply(pr.number, f"{md.mention(author)} deploy failed: {outcome.title}.")
        return
    method = settings.deploy.merge_method
    if method is None:
        forge.reply(pr.number, f"{md.mention(author)} deployed to prod: {outcome.title}.")
        return
    try:
        merged = forge.merge(pr.number, method, pr.head_sha)
    except SluiceError as exc:
        forge.reply(pr.number, f"{md.mention(author)} deployed to prod, but merging failed: {exc}")
        return
    forge.reply(
        pr.number,
        f"{md.mention(author)} deployed to prod ({outcome.title}) and merged as `{merged[:7]}`.",
    )
