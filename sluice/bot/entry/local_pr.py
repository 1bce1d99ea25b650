"""``sluice pr``: the pull-request flow on a git repository on disk, without GitHub.

Each command changes the local forge (:class:`~sluice.bot.forge.local.LocalForge`) the
way a person would change GitHub (open a PR, approve it, comment, merge), then runs the
same flow as the service on the event GitHub would have sent, in this process, and
prints what Sluice said: the PR comment, replies, and the checks.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from sluice.bot.events.neutral import CommentEvent, Event, PullRequestEvent, ReviewEvent
from sluice.bot.flow import dispatch
from sluice.bot.flow.approval import APPROVAL
from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.forge.base import ForgeError, PullRequest, writer
from sluice.bot.forge.local import METHODS, LocalForge
from sluice.bot.present import terminal
from sluice.core.cli.common import fails_cleanly, progress
from sluice.core.errors import SluiceError
from sluice.core.model.definition import Project
from sluice.core.spark import events
from sluice.core.spark.connect import make_runner
from sluice.core.spark.session import SPARK_DIR_ENV, SparkPaths
from sluice.core.spark.submit import OnEvent, Runner
from sluice.core.workflow import STATE_URL_ENV

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
RunnerFor = Callable[[Project, Path, OnEvent], Runner]
_ICONS = {"success": "✓", "failure": "✗", "neutral": "-", "skipped": "-", "cancelled": "✗"}


@dataclass
class _Session:
    """One command's forge and flow."""

    forge: LocalForge
    user: str
    deps: Deps
    quiet: bool
    raw: bool | None = None  # how comments print (terminal.show)
    seen_comments: list[str] = field(default_factory=list)
    seen_replies: int = 0

    def run(self, event: Event) -> None:
        """Handle ``event``; a failure is reported on the PR (as the service's worker does
        after its last attempt), then raised."""
        try:
            dispatch.handle(self.deps, event)
        except SluiceError as exc:
            try:
                dispatch.give_up(self.deps, event, str(exc))
            except SluiceError as also:
                log.warning("could not report the failure on the PR: %s", also)
            raise
        finally:
            self.deps.close()

    def mark(self, number: int) -> None:
        """Remember what the PR shows now, to print only what the command changed."""
        self.seen_comments = self.forge.comments(number)
        self.seen_replies = len(self.forge.replies(number))

    def report(self, number: int) -> None:
        if self.quiet:
            return
        forge = self.forge
        pr = forge.pull_request(number)
        for body in forge.replies(number)[self.seen_replies :]:
            click.echo(f"--- Sluice replied on #{number} ---")
            terminal.show(body, raw=self.raw)
            click.echo()
        comments = forge.comments(number)
        if comments != self.seen_comments:
            for body in comments:
                click.echo(f"--- the PR comment of #{number} ---")
                terminal.show(body, raw=self.raw)
                click.echo()
        elif comments:
            click.echo(f"(the PR comment of #{number} is unchanged: `sluice pr status {number}`)")
        click.echo(_headline(forge, pr))
        for check in _checks(forge, pr):
            click.echo(_check_line(check))


def _options(func: F) -> F:
    """The options every ``sluice pr`` command takes."""
    options = [
        click.option(
            "--repo",
            "repo",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("."),
            show_default=True,
            help="The git repository.",
        ),
        click.option(
            "--user", "user", default=None, help="Who acts (default: git's user.name, else $USER)."
        ),
        click.option(
            "--state",
            "state",
            default=None,
            help="State database URL (default: $SLUICE_DATABASE_URL, else "
            "<repo>/<project path>/.sluice/state.db, the one `sluice apply` uses).",
        ),
        click.option(
            "--workdir",
            "workdir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Trees, Spark warehouse and logs (default: "
            "<repo>/<project path>/.sluice, as `sluice apply`).",
        ),
        click.option(
            "--project-path",
            "project_path",
            default=".",
            show_default=True,
            help="The Sluice project's folder inside the repository.",
        ),
        click.option(
            "--quiet",
            "-q",
            is_flag=True,
            help="Print nothing but the PR number (open) or the JSON (status --json).",
        ),
        click.option(
            "--spark",
            "spark_mode",
            type=click.Choice(["submit", "connect"]),
            default=lambda: os.environ.get("SLUICE_SPARK_MODE", "submit"),
            show_default="$SLUICE_SPARK_MODE, else submit",
            help="How jobs reach Spark, as the service's SLUICE_SPARK_MODE: submit, one "
            "spark-submit per job; connect, a Spark Connect server this command starts "
            "once and stops at its end.",
        ),
        click.option(
            "--format",
            "comment_format",
            type=click.Choice(["auto", "rendered", "raw"]),
            default="auto",
            show_default=True,
            help="How the PR comment and replies print: rendered for the terminal, or "
            "their Markdown as the forge gets it (auto: rendered on a terminal, raw when "
            "piped).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _session(
    repo: Path,
    user: str | None,
    state: str | None,
    workdir: Path | None,
    project_path: str,
    quiet: bool,
    comment_format: str = "auto",
    spark_mode: str = "submit",
) -> _Session:
    forge = LocalForge(repo)
    project_dir = (forge.root / project_path).resolve()
    work = (workdir or project_dir / ".sluice").resolve()
    url = (
        state
        or os.environ.get(STATE_URL_ENV)
        or f"sqlite:///{project_dir / '.sluice' / 'state.db'}"
    )
    forge.ignore(work)
    forge.ignore(forge.store)
    work.mkdir(parents=True, exist_ok=True)
    obj = click.get_current_context().obj
    injected = obj.get("runner_for") if isinstance(obj, dict) else None
    deps = make_deps(
        forge_for=lambda _event: forge,
        workdir=work,
        state_url=url,
        project_path=project_path,
        runner_for=injected or _runner_for(work, quiet, spark_mode),
        project_python="on",  # the user's own repository, on the user's own machine
    )
    return _Session(forge, user or _default_user(forge), deps, quiet, _raw(comment_format))


def _raw(comment_format: str) -> bool | None:
    """``--format`` as :func:`terminal.show` takes it (None: by the output)."""
    return {"raw": True, "rendered": False}.get(comment_format)


def _runner_for(work: Path, quiet: bool, mode: str = "submit") -> RunnerFor:
    """The runner ``mode`` names (the user's choice, as the service's setting would be:
    never the repository's), with the warehouse where ``sluice apply`` keeps it
    ($SLUICE_SPARK_DIR or the workdir), printing the driver's progress on stderr."""
    override = os.environ.get(SPARK_DIR_ENV)
    paths = SparkPaths(
        root=Path(override).resolve() if override else work / "spark", logs=work / "logs"
    )

    def make(project: Project, _tree: Path, on_event: OnEvent) -> Runner:
        def both(event: events.Event) -> None:
            on_event(event)
            if not quiet:
                progress(event)

        settings = project.config.sluice.spark.model_copy(update={"mode": mode})
        return make_runner(settings, paths, on_event=both)

    return make


def _default_user(forge: LocalForge) -> str:
    done = forge._run("config", "user.name", what="reading git's user.name")
    name = done.stdout.decode("utf-8", "replace").strip() if done.returncode == 0 else ""
    if name:
        return name
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _pr_event(
    forge: LocalForge, pr: PullRequest, action: str, merge_sha: str | None = None
) -> PullRequestEvent:
    return PullRequestEvent(
        forge="local",
        repo=forge.repo,
        installation_id=None,
        action=action,
        number=pr.number,
        head_sha=pr.head_sha,
        head_ref=pr.head_ref,
        base_ref=pr.base_ref,
        base_sha=pr.base_sha,
        author=pr.author,
        draft=pr.draft,
        fork=False,
        merged=merge_sha is not None,
        merge_sha=merge_sha,
        title=pr.title,
    )


def _building(session: _Session, pr: PullRequest) -> None:
    if not session.quiet:
        click.echo(
            f"Building pr_{pr.number} at {pr.head_sha[:7]} (runs Spark; this takes a minute) ...",
            err=True,
        )


def _checks(forge: LocalForge, pr: PullRequest) -> list[dict[str, Any]]:
    """The checks on the PR's head, then (merged) on its merge commit."""
    shas = [pr.head_sha]
    merge_sha = forge.record(pr.number).get("merge_sha")
    if merge_sha and merge_sha != pr.head_sha:
        shas.append(merge_sha)
    found = []
    for sha in shas:
        for name, check in sorted(forge.checks(sha).items()):
            found.append(
                {
                    "name": name,
                    "sha": sha,
                    "status": check["status"],
                    "conclusion": check["conclusion"],
                    "title": check["title"],
                    "summary": check["summary"],
                }
            )
    return found


def _check_line(check: dict[str, Any]) -> str:
    state = check["conclusion"] or check["status"].replace("_", " ")
    icon = _ICONS.get(state, "…")
    return f"  {icon} {check['name']:<22} {state:<12} {check['title']}"


def _headline(forge: LocalForge, pr: PullRequest) -> str:
    record = forge.record(pr.number)
    state = record["state"]
    if state == "merged":
        state += f" as {record['merge_sha'][:7]}"
    return (
        f"#{pr.number} {pr.title!r}: {pr.head_ref} -> {pr.base_ref} by {pr.author}, "
        f"{state}; head {pr.head_sha[:7]}"
    )


def register(cli: click.Group) -> None:
    """Add ``sluice pr`` to the ``sluice`` command."""
    cli.add_command(pr)


@click.group()
def pr() -> None:
    """The pull-request flow on a git repository on disk (no GitHub).

    A pull request is a pair of branches; what Sluice posts is kept under
    .sluice/forge/ in the repository and printed.
    """


@pr.command("open")
@click.option("--base", required=True, help="The branch to merge into.")
@click.option("--head", required=True, help="The branch with the change.")
@click.option("--title", default="", help="The PR's title (default: the head branch).")
@_options
@fails_cleanly
def open_(base: str, head: str, title: str, **common: Any) -> None:
    """Open a pull request (prints its number), and build its environment."""
    session = _session(**common)
    pull = session.forge.open_pull(base, head, session.user, title)
    click.echo(pull.number)
    session.mark(pull.number)
    _building(session, pull)
    session.run(_pr_event(session.forge, pull, "opened"))
    session.report(pull.number)


@pr.command()
@click.argument("number", type=int)
@_options
@fails_cleanly
def sync(number: int, **common: Any) -> None:
    """The head branch got new commits: plan and build the PR again."""
    session = _session(**common)
    pull = session.forge.synchronize(number)
    session.mark(number)
    _building(session, pull)
    session.run(_pr_event(session.forge, pull, "synchronize"))
    session.report(number)


@pr.command()
@click.argument("number", type=int)
@click.option("--request-changes", is_flag=True, help="Request changes instead of approving.")
@_options
@fails_cleanly
def approve(number: int, request_changes: bool, **common: Any) -> None:
    """Approve the PR's current head as --user (the gate decides whether it counts)."""
    session = _session(**common)
    forge = session.forge
    pull = forge.pull_request(number)
    state = "CHANGES_REQUESTED" if request_changes else "APPROVED"
    forge.add_review(number, session.user, state, pull.head_sha)
    session.mark(number)
    session.run(
        ReviewEvent(
            forge="local",
            repo=forge.repo,
            installation_id=None,
            action="submitted",
            number=number,
            reviewer=session.user,
            state=state,
            commit_sha=pull.head_sha,
            head_sha=pull.head_sha,
        )
    )
    session.report(number)


@pr.command()
@click.argument("number", type=int)
@click.argument("body")
@_options
@fails_cleanly
def comment(number: int, body: str, **common: Any) -> None:
    """Comment on the PR as --user (``/sluice plan|deploy|diff|help`` run commands)."""
    session = _session(**common)
    forge = session.forge
    was_open = forge.pull_request(number).open
    session.mark(number)
    comment_id = forge.add_comment(number, session.user, body)
    session.run(
        CommentEvent(
            forge="local",
            repo=forge.repo,
            installation_id=None,
            action="created",
            number=number,
            comment_id=comment_id,
            author=session.user,
            body=body,
        )
    )
    record = forge.record(number)
    if was_open and record["state"] == "merged":  # `/sluice deploy` merged it: as a forge,
        # announce the merge (promoting again finds prod in place; the environment goes)
        merged = forge.pull_request(number)
        session.run(_pr_event(forge, merged, "closed", merge_sha=record["merge_sha"]))
    if not session.quiet:
        [mine] = [c for c in forge.user_comments(number) if c["id"] == comment_id]
        if mine["reactions"]:
            click.echo(f"Sluice reacted to your comment: {', '.join(mine['reactions'])}")
    session.report(number)


@pr.command()
@click.argument("number", type=int)
@click.option("--method", type=click.Choice(METHODS), default="merge", show_default=True)
@click.option(
    "--admin",
    is_flag=True,
    help="Merge even though sluice/approval has not passed (admins only); the "
    "promotion still refuses unapproved model changes.",
)
@_options
@fails_cleanly
def merge(number: int, method: str, admin: bool, **common: Any) -> None:
    """Merge the PR once sluice/approval passed on its head (as branch protection would),
    then promote it."""
    session = _session(**common)
    forge = session.forge
    pull = forge.pull_request(number)
    if not pull.open:
        raise ForgeError(f"local: pull request #{number} is {forge.record(number)['state']}")
    permission = forge.permission(session.user)
    if not writer(permission):
        raise ForgeError(f"local: {session.user} may not merge (permission: {permission})")
    gate = forge.checks(pull.head_sha).get(APPROVAL)
    passed = gate is not None and gate["status"] == "completed" and gate["conclusion"] == "success"
    if admin and permission != "admin":
        raise ForgeError(f"local: --admin needs admin permission ({session.user} has {permission})")
    if not passed and not admin:
        said = (
            "has not run"
            if gate is None
            else f"is {gate['conclusion'] or gate['status']}: {gate['title']}"
        )
        raise ForgeError(
            f"local: pull request #{number} cannot be merged: {APPROVAL} on "
            f"{pull.head_sha[:7]} {said}",
            hint=f"see `sluice pr status {number}`",
        )
    session.mark(number)
    merged = forge.merge(number, method, pull.head_sha)
    if not session.quiet:
        click.echo(f"Merged #{number} into {pull.base_ref} as {merged[:7]} ({method}).")
    session.run(_pr_event(forge, pull, "closed", merge_sha=merged))
    session.report(number)


@pr.command()
@click.argument("number", type=int)
@_options
@fails_cleanly
def close(number: int, **common: Any) -> None:
    """Close the PR without merging (its environment is removed)."""
    session = _session(**common)
    session.mark(number)
    pull = session.forge.close(number)
    session.run(_pr_event(session.forge, pull, "closed"))
    session.report(number)


@pr.command()
@click.argument("number", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_options
@fails_cleanly
def status(number: int, as_json: bool, **common: Any) -> None:
    """The PR, its checks and the comment."""
    forge = LocalForge(common["repo"])
    pull = forge.pull_request(number)
    record = forge.record(number)
    checks = _checks(forge, pull)
    comments = forge.comments(number)
    if as_json:
        reviews = [
            {"user": r.user, "state": r.state, "commit_sha": r.commit_sha}
            for r in forge.reviews(number)
        ]
        click.echo(
            json.dumps(
                {
                    "number": number,
                    "title": pull.title,
                    "state": record["state"],
                    "base": pull.base_ref,
                    "head": pull.head_ref,
                    "author": pull.author,
                    "head_sha": pull.head_sha,
                    "base_sha": pull.base_sha,
                    "merge_sha": record.get("merge_sha"),
                    "checks": checks,
                    "comment": comments[0] if comments else None,
                    "comments": comments,
                    "replies": forge.replies(number),
                    "reviews": reviews,
                },
                indent=2,
            )
        )
        return
    click.echo(_headline(forge, pull))
    for check in checks:
        click.echo(_check_line(check))
    for body in comments:
        click.echo()
        terminal.show(body, raw=_raw(common["comment_format"]))


@pr.command("list")
@_options
@fails_cleanly
def list_(**common: Any) -> None:
    """Every pull request of the repository."""
    forge = LocalForge(common["repo"])
    for number in forge.pull_numbers():
        record = forge.record(number)
        click.echo(
            f"#{number} {record['state']:<6} {record['head']} -> {record['base']}  "
            f"{record.get('title') or ''}"
        )
    if not forge.pull_numbers():
        click.echo("no pull requests", err=True)


__all__ = ["pr", "register"]
