"""Running the ``/sluice`` commands people write in PR comments.

Only newly created comments count (an edited comment never runs a command again). The
author must have write permission, asked of the forge each time; anyone else gets a reply
saying why. An accepted command is acknowledged with a reaction before any work starts;
a command whose comment was deleted before the bot got to it is withdrawn (not run).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sluice.bot import approval, promotion
from sluice.bot.commands import HELP, Command, CommandError, parse_command
from sluice.bot.events import CommentEvent
from sluice.bot.forge.base import Forge, PullRequest, writer
from sluice.core.errors import SluiceError
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.state import open_state
from sluice.core.tablediff import render as diff_render
from sluice.core.tablediff.result import DiffOptions
from sluice.core.workflow import table_diff

if TYPE_CHECKING:
    from sluice.bot.controller import Controller

log = logging.getLogger(__name__)

ACCEPTED = "+1"
REFUSED = "confused"


def on_comment(ctl: Controller, forge: Forge, event: CommentEvent) -> None:
    """Run the command in ``event``'s comment, if it holds one."""
    if event.action != "created":
        return
    try:
        command = parse_command(event.body)
    except CommandError as exc:
        if _still_there(forge, event, REFUSED):
            forge.reply(event.number, f"@{event.author} {exc.hint}. Usage: {exc.message}")
        return
    if command is None:
        return
    permission = forge.permission(event.author)
    if not writer(permission):
        needed = "the Developer role or above" if forge.name == "gitlab" else "write permission"
        forge.reply(event.number, (
            f"@{event.author} only users with {needed} on this repository may run "
            f"Sluice commands (your permission: {permission}). Ask a maintainer to run it."
        ))  # fmt: skip
        return
    if not _still_there(forge, event, ACCEPTED):
        return
    if command.name == "help":
        said = "" if command.unknown is None else _unknown(command.unknown)
        forge.reply(event.number, said + HELP)
        return
    pr = forge.pull_request(event.number)
    if not pr.open:
        forge.reply(event.number, f"@{event.author} this pull request is closed.")
        return
    if command.name == "plan":
        ctl.preview(forge, ctl.target(pr, admit=True))
        approval.refresh(ctl, forge, forge.pull_request(event.number))
    elif command.name == "diff":
        _diff(ctl, forge, pr, command, event.author)
    elif command.name == "deploy":
        _deploy(ctl, forge, pr, event.author)


def _still_there(forge: Forge, event: CommentEvent, reaction: str) -> bool:
    """React to the command's comment; False (and logged) when it was deleted meanwhile:
    deleting a command's comment before it runs withdraws the command."""
    if forge.react(event.number, event.comment_id, reaction):
        return True
    log.info("%s#%s: comment %s was deleted; its command is not run",
             forge.repo, event.number, event.comment_id)  # fmt: skip
    return False


def _unknown(sub: str) -> str:
    if not sub:
        return ""
    return f"`/sluice {sub}` is not a Sluice command.\n\n"


def _diff(ctl: Controller, forge: Forge, pr: PullRequest, command: Command, author: str) -> None:
    assert command.model is not None
    environment = pr_environment(pr.number)
    tree = ctl.tree(forge, pr.head_sha)
    try:
        project = load_project(tree / ctl.ctx.project_path)
        settings = project.config.sluice.pr
        options = DiffOptions(where=command.where, decimals=settings.decimals,
                              sample=settings.diff_sample)  # fmt: skip
        store = open_state(ctl.ctx.state_url)
        try:
            result = table_diff(store, ctl.runner(project, tree, lambda _event: None),
                                source=PROD, target=environment, model=command.model,
                                options=options, url=ctl.ctx.state_url, now=ctl.ctx.clock())  # fmt: skip
        finally:
            store.close()
    except SluiceError as exc:
        text = ctl.scrub(str(exc), tree)
        forge.reply(
            pr.number, f"@{author} `/sluice diff {command.model}` failed:\n\n```text\n{text}\n```"
        )
        return
    where = f" where `{command.where}`" if command.where else ""
    forge.reply(pr.number, (
        f"@{author} `{command.model}` in `{environment}` against prod{where}:\n\n"
        + diff_render.markdown([result])
    ))  # fmt: skip


def _deploy(ctl: Controller, forge: Forge, pr: PullRequest, author: str) -> None:
    verdict = approval.refresh(ctl, forge, pr)
    if verdict is None or not verdict.result.ok:
        why = verdict.result.summary if verdict is not None else "this commit has no plan yet"
        forge.reply(pr.number, f"@{author} not deployed: the `sluice/approval` gate has not "
                    f"passed. {why}")  # fmt: skip
        return
    settings = verdict.settings
    base_head = forge.commit_of(pr.base_ref)
    if base_head is not None and not forge.on_branch(base_head, pr.head_sha):
        forge.reply(pr.number, (
            f"@{author} not deployed: `{pr.base_ref}` has commits this pull request does not "
            f"have, and promoting it would undo them in prod. Merge `{pr.base_ref}` into the "
            "branch, let Sluice plan it again, and deploy that."
        ))  # fmt: skip
        return
    outcome = promotion.promote(ctl, forge, pr.head_sha, settings, label=f"#{pr.number}",
                                number=pr.number)  # fmt: skip
    if not outcome.ok:
        forge.reply(pr.number, f"@{author} deploy failed: {outcome.title}.")
        return
    method = settings.deploy.merge_method
    if method is None:
        forge.reply(pr.number, f"@{author} deployed to prod: {outcome.title}.")
        return
    try:
        merged = forge.merge(pr.number, method, pr.head_sha)
    except SluiceError as exc:
        forge.reply(pr.number, f"@{author} deployed to prod, but merging failed: {exc}")
        return
    forge.reply(
        pr.number, f"@{author} deployed to prod ({outcome.title}) and merged as `{merged[:7]}`."
    )
