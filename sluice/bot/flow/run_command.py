"""Running the ``/sluice`` commands people write in PR comments.

Only newly created comments count (an edited comment never runs a command again). The
author must have write permission, asked of the forge each time; anyone else gets a reply
saying why. An accepted command is acknowledged with a reaction before any work starts;
a command whose comment was deleted before the bot got to it is withdrawn (not run).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from sluice.bot.events.command_line import command_line
from sluice.bot.events.commands import Command, CommandError, parse_line
from sluice.bot.events.neutral import WEB, CommentEvent
from sluice.bot.flow import (
    approval,
    audit,
    comment_edits,
    policies,
    pr_build,
    promotion,
    trust,
)
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import own_key, prod_owners
from sluice.bot.forge.base import Forge, PullRequest, writer
from sluice.bot.present import notify_text, replies
from sluice.core import rollback
from sluice.core.errors import SluiceError
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.state import StateStore, open_state
from sluice.core.tablediff import render as diff_render
from sluice.core.tablediff.result import DiffOptions
from sluice.core.workflow import apply_plan, read_environment, table_diff

log = logging.getLogger(__name__)

ACCEPTED = "+1"
REFUSED = "confused"
NOT_OWNER = "not the owner of every model it changes"


def on_comment(job: Job, event: CommentEvent) -> None:
    """Run the command in ``event``'s comment, if it holds one.

    Permission first: only the command line is looked for before the author's permission
    is asked. Someone without write permission gets one fixed reply holding nothing of
    theirs but their login (a mention only when it is a well-formed login); only a
    writer's arguments are read, and a writer's usage error quotes what they wrote as a
    code span (cut to ``QUOTE_LIMIT`` characters).

    A command from the web UI (``origin`` WEB: its signed-in user the author) runs the
    same way; it has no comment to react to, and its audit rows say where it came from.
    """
    if event.action == "edited" and event.origin != WEB:
        comment_edits.on_edit(job, event)  # Sluice's comment rewritten?
        return
    if event.action != "created":
        return
    line = command_line(event.body)
    if line is None:
        return
    if event.origin != WEB and not _as_written(job.forge, event):
        return
    permission = job.forge.permission(event.author)
    if not writer(permission):
        job.forge.reply(
            event.number, replies.not_a_writer(event.author, permission, job.forge.name)
        )
        audit.record(
            job,
            audit.REFUSAL,
            "not a writer",
            actor=event.author,
            ref=f"#{event.number}",
            detail=f"{permission or 'no'} permission: {line}{_via(event)}",
        )
        return
    try:
        command = parse_line(line)
    except CommandError as exc:
        if _still_there(job.forge, event, REFUSED):
            job.forge.reply(
                event.number, replies.usage_error(event.author, exc.hint, line, exc.message)
            )
        return
    if not _still_there(job.forge, event, ACCEPTED):
        return
    if command.name == "help":
        job.forge.reply(event.number, replies.help_text(command.unknown))
        return
    pr = job.forge.pull_request(event.number)
    if command.name == "rollback":
        _rollback(job, pr, command, event.author, event.author_id, via=_via(event))
        return
    if not pr.open:
        job.forge.reply(event.number, replies.pr_closed(event.author))
        return
    if command.name == "plan":
        # A fork's author may push between the writer's review and the build: a fork PR
        # is built at the head it had when the writer commented, not at the head it has
        # when the job runs.
        seen = _head_when_commented(job, pr, event) if pr.fork else pr
        if seen is None:
            return
        pr_build.preview(job, dataclasses.replace(seen, fork=False))
        if pr.fork:
            job.forge.reply(
                event.number, replies.fork_built(event.author, seen.head_sha, pr.head_sha)
            )
        approval.refresh(job, job.forge.pull_request(event.number))
    elif command.name == "diff":
        _diff(job, pr, command, event.author)
    elif command.name == "deploy":
        _deploy(job, pr, event.author, via=_via(event))
    elif command.name == "override":
        _override(job, pr, command, event.author, event.author_id)


def _override(
    job: Job, pr: PullRequest, command: Command, author: str, author_id: int | None
) -> None:
    """``/sluice override POLICY reason`` (:func:`sluice.bot.flow.policies.override`)."""
    assert command.policy is not None and command.reason is not None
    reply = policies.override(job, pr, command.policy, command.reason, author, author_id)
    job.forge.reply(pr.number, reply)


def _via(event: CommentEvent) -> str:
    """What an audit row's detail adds for a command from the web UI."""
    return " (from the web UI)" if event.origin == WEB else ""


def _head_when_commented(job: Job, pr: PullRequest, event: CommentEvent) -> PullRequest | None:
    """``pr`` (a fork PR) at the head it had when ``event``'s writer commented; None, with
    a reply saying why, when that head is not known for sure.

    The head is the one the PR's own events last recorded (opened, synchronize, ...: the
    flow records it as each is handled). Those events and this comment share the
    PR's queue key and run in the order they arrived, fork PR events superseding none
    (``events.supersedes``), so the record is the head as of the comment. Refused:

    - a head recorded from an event the job.forge stamped at or after the comment's time (a
      push made after the command, delivered before it);
    - no head recorded at all (a PR opened before Sluice kept them, or whose events it did
      not receive). Building the job.forge's head then would be unsafe: its commit date is
      whatever its author wrote, so "not newer than the comment" cannot be checked. The
      head is recorded now instead and named in the reply: the writer reviews that commit
      and comments again, and that comment builds it (unless the PR moves meanwhile).
    """
    repo = job.repo
    recorded = job.ledger.pr_head(repo, pr.number)
    if recorded is None:
        job.ledger.record_pr_head(repo, pr.number, pr.head_sha, event.created_ms, job.now)
        job.forge.reply(pr.number, replies.fork_head_unknown(event.author, pr.head_sha))
        return None
    sha, at = recorded
    if at is not None and event.created_ms is not None and at >= event.created_ms:
        job.forge.reply(pr.number, replies.fork_head_moved(event.author, sha))
        return None
    return dataclasses.replace(pr, head_sha=sha)


def _as_written(forge: Forge, event: CommentEvent) -> bool:
    """Whether the forge holds the comment ``event`` names, on its pull request, by the
    author it says, with its command line: a command runs as the forge says it was
    written, never on a webhook's word alone (a webhook secret typed into several
    repositories' hooks is known to each one's maintainers, who could sign a delivery
    naming another's comment, author and command). Deleted meanwhile: withdrawn (logged).
    Otherwise refused with an ERROR; nothing is posted."""
    found = forge.comment(event.number, event.comment_id)
    if found is None:
        log.info(
            "%s#%s: comment %s was deleted (or is not on this pull request); its command is "
            "not run",
            forge.repo,
            event.number,
            event.comment_id,
        )
        return False
    if found.author_id is not None and event.author_id is not None:
        same = found.author_id == event.author_id
    else:
        same = found.author.casefold() == event.author.casefold()
    if same and command_line(found.body) == command_line(event.body):
        return True
    log.error(
        "%s#%s: command refused: the delivery says comment %s is %r's and says %r, but %s "
        "holds it as %r's, saying %r: a command runs only as the forge holds it (a forged "
        "or altered delivery)",
        forge.repo,
        event.number,
        event.comment_id,
        event.author,
        command_line(event.body),
        forge.name,
        found.author,
        command_line(found.body),
    )
    return False


def _still_there(forge: Forge, event: CommentEvent, reaction: str) -> bool:
    """React to the command's comment; False (and logged) when it was deleted meanwhile:
    deleting a command's comment before it runs withdraws the command. A command from the
    web UI has no comment: nothing to react to, nothing to withdraw."""
    if event.origin == WEB:
        return True
    if forge.react(event.number, event.comment_id, reaction):
        return True
    log.info(
        "%s#%s: comment %s was deleted; its command is not run",
        forge.repo,
        event.number,
        event.comment_id,
    )
    return False


def _diff(job: Job, pr: PullRequest, command: Command, author: str) -> None:
    assert command.model is not None
    environment = pr_environment(pr.number)
    tree = job.tree(pr.head_sha)
    try:
        project = trust.load_trusted(job, tree, trust.for_repository(job))
        settings = project.config.sluice.pr
        options = DiffOptions(
            where=command.where, decimals=settings.decimals, sample=settings.diff_sample
        )
        store = open_state(job.state_url)
        try:
            result = table_diff(
                store,
                job.deps.spark_runner(project, tree, lambda _event: None),
                source=PROD,
                target=environment,
                model=command.model,
                options=options,
                url=job.state_url,
                now=job.now,
            )
        finally:
            store.close()
    except SluiceError as exc:
        text = job.scrub(str(exc), tree)
        job.forge.reply(pr.number, replies.diff_failed(author, command.model, text))
        return
    body = diff_render.markdown([result])
    job.forge.reply(
        pr.number, replies.diff_result(author, command.model, environment, command.where, body)
    )


def _deploy(job: Job, pr: PullRequest, author: str, *, via: str = "") -> None:
    """``/sluice deploy``: promote the PR's approved head into the first tier a merge into
    the prod branch would promote, then merge when ``merge_method`` is set.

    A writer's comment reaches exactly what a merge reaches, never more: a tier promoted
    by a tag (``deploy.on: tag``, or ``on: tag`` in ``deploy.environments``) has its own
    gate (a tag on the prod branch, by someone in its ``released_by``), which a comment
    cannot stand in for. When a merge promotes no tier at all, the command is refused,
    naming the setting.
    """
    audit.record(
        job,
        audit.DEPLOY,
        "asked",
        actor=author,
        ref=f"#{pr.number}",
        detail=f"at {pr.head_sha[:12]}{via}",
    )
    verdict = approval.refresh(job, pr)
    if verdict is not None and not verdict.settings.deploy.merge_tiers():
        settings = verdict.settings
        tag_tiers = [
            (t.name, t.tag_pattern, t.released_by) for t in settings.deploy.tiers() if t.on == "tag"
        ]
        reply = replies.not_deployed_tag(
            author,
            tag_tiers,
            settings.branch,
            settings.source,
            tiers=bool(settings.deploy.environments),
        )
        job.forge.reply(pr.number, reply)
        return
    if verdict is None or not verdict.result.ok:
        why = verdict.result.summary if verdict is not None else "this commit has no plan yet"
        job.forge.reply(pr.number, replies.not_deployed_gate(author, why))
        return
    settings = verdict.settings
    if pr.base_ref != settings.branch:
        reply = replies.not_deployed_base(author, pr.base_ref, settings.branch, settings.source)
        job.forge.reply(pr.number, reply)
        return
    base_head = job.forge.commit_of(pr.base_ref)
    if base_head is not None and not job.forge.on_branch(base_head, pr.head_sha):
        job.forge.reply(pr.number, replies.not_deployed_behind(author, pr.base_ref))
        return
    # The first tier a merge promotes (e.g. staging): later tiers follow through their own
    # merge or tag. Never a tag's tier: that would skip its tag and `released_by`.
    environment = settings.deploy.merge_tiers()[0].name
    outcome = promotion.promote(
        job,
        pr.head_sha,
        settings,
        label=f"#{pr.number}",
        number=pr.number,
        environment=environment,
        actor=author,
    )
    if not outcome.ok:
        job.forge.reply(pr.number, replies.deploy_failed(author, outcome.title))
        return
    method = settings.deploy.merge_method
    if method is None:
        job.forge.reply(pr.number, replies.deployed(author, outcome.title, environment))
        return
    try:
        merged = job.forge.merge(pr.number, method, pr.head_sha)
    except SluiceError as exc:
        job.forge.reply(pr.number, replies.deployed_merge_failed(author, str(exc), environment))
        return
    job.forge.reply(
        pr.number, replies.deployed_and_merged(author, outcome.title, merged, environment)
    )


def _rollback(
    job: Job,
    pr: PullRequest,
    command: Command,
    author: str,
    author_id: int | None = None,
    *,
    via: str = "",
) -> None:
    """``/sluice rollback [plan]``: prod's views back at an earlier plan's tables.

    On a merged pull request only, by a writer the gate would accept for the change the
    rollback makes (it changes prod without a review of its own): one of the gate's
    required approvers; under an owners' gate (``owners_must_approve``), also the owner of
    every model the rollback changes (a model without an owner then needs a required
    approver, as in a pull request); any writer only when the gate requires nobody at all.
    ``author`` (account ``author_id``) is judged as the gate judges an approver: a login
    the settings name by the account it had when they came into force, a bot account as
    no person (:func:`~sluice.bot.flow.trust.names_person`).
    With the prod branch's project and the service's Spark; nothing is computed
    (:func:`sluice.core.rollback.plan_rollback` refuses what would be).
    """
    if not pr.merged:
        job.forge.reply(pr.number, replies.rollback_not_merged(author))
        return
    found = trust.prod_project(job, "rollback")
    if found is None:
        job.forge.reply(
            pr.number, replies.rollback_failed(author, "prod has no plan to go back to")
        )
        return
    settings, tree, project = found
    gate = settings.gate
    approvers = gate.required_approvers
    listed = [*approvers.users, *approvers.teams]
    approver = not approvers.count or trust.names_person(
        job.forge, settings.people, listed, author, author_id
    )
    owners_gate = gate.owners_must_approve != "never"
    if not approver and not owners_gate:
        bot = trust.not_a_person(job.forge, author, author_id)
        reply = replies.rollback_not_approver(author, approvers.users, approvers.teams, bot=bot)
        job.forge.reply(pr.number, reply)
        audit.record(
            job,
            audit.REFUSAL,
            "rollback refused",
            actor=author,
            ref=f"#{pr.number}",
            detail=(f"a bot account: {bot}" if bot else "not a required approver") + via,
        )
        return
    store = open_state(job.state_url)
    try:
        now = job.now
        back = rollback.plan_rollback(store, PROD, to=command.plan, now=now)
        if owners_gate and not (approvers.count and approver):
            owners = _rollback_owners(store, back, gate.owners_must_approve)
            people = settings.people
            if not _owns_all(job.forge, people, owners, author, author_id, approvers.count):
                bot = trust.not_a_person(job.forge, author, author_id)
                reply = replies.rollback_not_approver(
                    author,
                    approvers.users,
                    approvers.teams,
                    owners=sorted(owners.items()),
                    rule=gate.owners_must_approve,
                    bot=bot,
                )
                job.forge.reply(pr.number, reply)
                audit.record(
                    job,
                    audit.REFUSAL,
                    "rollback refused",
                    actor=author,
                    ref=f"#{pr.number}",
                    plan_id=back.target.plan_id,
                    detail=(f"a bot account: {bot}" if bot else NOT_OWNER) + via,
                )
                return
        runner = job.deps.spark_runner(project, tree, lambda _event: None)
        # Prod's models are the target's again, and so is the commit they came from (the
        # one prod's scheduled runs and drift repairs load, when its promotion recorded it).
        commit = back.target.project_commit
        result = apply_plan(
            project, store, back.plan, runner, url=job.state_url, now=now, commit=commit
        )
    except SluiceError as exc:
        job.forge.reply(pr.number, replies.rollback_failed(author, job.scrub(str(exc), tree)))
        return
    finally:
        store.close()
    log.info("%s: prod rolled back to plan %s by %s", job.forge.repo, back.target.plan_id, author)
    reply = replies.rolled_back(author, back.target.plan_id, back.changed, result.views_swapped)
    job.forge.reply(pr.number, reply)
    audit.record(
        job,
        audit.ROLLBACK,
        "rolled back",
        actor=author,
        ref=f"#{pr.number}",
        plan_id=back.target.plan_id,
        detail=f"prod back at plan {back.target.plan_id}: {len(back.changed)} "
        f"models changed, {result.views_swapped} views swapped{via}",
        notify=notify_text.ROLLBACK,
    )


def _rollback_owners(
    store: StateStore, back: rollback.Rollback, rule: str
) -> dict[str, str | None]:
    """Model -> owner (None: none) of the models whose owner the gate would ask for, were
    the rollback a pull request: ``direct``, those whose own content it changes (added,
    removed, or another query or properties); ``breaking``, every model whose table it
    changes. The owner is prod's as it is now (a model prod lacks: the target's)."""
    now = read_environment(store, PROD).snapshots
    after = {s.name: s for s in back.plan.snapshots}
    current = prod_owners(store)
    needed: dict[str, str | None] = {}
    for name, _, _ in back.changed:
        before, target = now.get(name), after.get(name)
        direct = before is None or target is None or own_key(before) != own_key(target)
        if rule == "breaking" or direct:
            owner = current.get(name) if name in current else None
            if owner is None and name not in current and target is not None:
                owner = target.model.owner
            owner = (owner or "").strip().removeprefix("@")
            needed[name] = owner or None
    return needed


def _owns_all(
    forge: Forge,
    people: Mapping[str, int | None] | None,
    owners: dict[str, str | None],
    login: str,
    uid: int | None,
    required: int,
) -> bool:
    """Whether ``login`` (account ``uid``) owns (as the user, by the account the settings'
    ``people`` pin, or a member of the team; never a bot:
    :func:`~sluice.bot.flow.trust.names_person`) every model of ``owners``; a model without
    an owner is anyone's only when the gate requires no approvers (``required`` is 0), and
    so is a rollback that changes no such model."""
    if not owners:
        return not required
    for owner in owners.values():
        if owner is None:
            if required:
                return False
        elif not trust.names_person(forge, people, [owner], login, uid):
            return False
    return True
