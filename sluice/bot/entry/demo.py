"""``sluice demo``: the whole flow on the example project, locally, in a few minutes.

It copies ``examples/jaffle_shop`` into a fresh git repository (default ``.sluice-demo/``),
builds prod on local Spark (SQL models, a Python macro and a PySpark model), commits a
change on a branch (one breaking edit, one non-breaking), and runs the pull-request flow
through the local forge with the very commands ``sluice pr`` runs: open (the plan and the
table diff are posted), the gate waits for an approval, approve, merge, promotion by
virtual update. It ends by querying prod, the PySpark model's table too.
No credentials, no network: Spark runs locally, the forge is the repository on disk.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import click
from rich.markup import escape
from rich.table import Table

from sluice.bot.entry import local_pr
from sluice.bot.forge.local import LocalForge
from sluice.bot.present import terminal
from sluice.core import workflow
from sluice.core.cli.common import err, fails_cleanly, now_ms, out, progress
from sluice.core.cli.plan import print_plan
from sluice.core.config import SETTINGS_FILES
from sluice.core.errors import SluiceError
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.connect import stop_all
from sluice.core.spark.session import java_problem
from sluice.core.state import open_state
from sluice.core.timeutil import DAY_MS, to_ms
from sluice.core.words import plural
from sluice.core.yamlio import dump_yaml, read_yaml

CHECKOUT = Path(__file__).resolve().parents[3]  # the Sluice checkout the demo runs from
EXAMPLE = CHECKOUT / "examples" / "jaffle_shop"
SCREENSHOT = CHECKOUT / "scripts" / "comment_screenshot.py"  # Markdown + Mermaid -> PNG
PROD_END = "2018-04-30"  # the example's data ends that day
BRANCH = "demo-change"
AUTHOR = "author"
REVIEWER = "reviewer"
STEPS = 6
_MARKER = "sluice-demo"  # in .git/: this folder was made by `sluice demo` (safe to recreate)
INSTALL_HINT = (
    "install a Java 17 runtime, e.g. `sudo apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu), or run `bash scripts/ensure-java.sh` as root from the Sluice checkout; "
    "then run `sluice demo` again"
)
RETURNED_SQL = "SELECT COUNT(*) AS returned_orders FROM jaffle.orders WHERE status = 'returned'"
SAMPLE_SQL = (
    "SELECT customer_id, first_name, last_name, last_name_upper, number_of_orders "
    "FROM jaffle.customers ORDER BY customer_id"
)
SEGMENTS_SQL = (  # the PySpark model (models/customer_segments.py), rebuilt by the change
    "SELECT segment, COUNT(*) AS customers FROM jaffle.customer_segments "
    "GROUP BY segment ORDER BY segment"
)


class DemoError(SluiceError):
    """The demo cannot run (no Java, no git, the folder is not the demo's)."""


def register(cli: click.Group) -> None:
    """Add ``sluice demo`` to the ``sluice`` command."""
    cli.add_command(demo)


@click.command(
    short_help="Run the whole flow on the example project, locally, on Spark: build prod, then "
    "a pull request's build, gate, merge and promotion."
)
@click.option(
    "--dir",
    "work_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".sluice-demo"),
    show_default=True,
    help="Where the demo's git repository is made (recreated on each run).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo's repository afterwards, to look around (`sluice pr status "
    "1 --repo DIR`, the PR comment with its impact graph under DIR/.sluice/forge/); by "
    "default it is removed when the demo succeeds (`make demo KEEP=1` passes --keep).",
)
@click.option(
    "--spark",
    "spark_mode",
    type=click.Choice(["connect", "submit"]),
    default="connect",
    show_default=True,
    help="How the demo's jobs reach Spark: connect, one warm Spark Connect server for the "
    "whole demo (started once, stopped at the end); submit, one spark-submit per job.",
)
@fails_cleanly
def demo(work_dir: Path, keep: bool, spark_mode: Literal["connect", "submit"]) -> None:
    """Run the whole flow on the example project, locally: build prod, open a pull request
    with a breaking and a non-breaking change, approve, merge, promote, query prod.

    Needs Java 17 and git; no credentials and no network.
    """
    started = time.monotonic()
    version = check_java()
    check_git()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = work_dir.resolve()
    out.print(f"[bold]Sluice demo[/] in {escape(str(root))} ({escape(version)})")
    finished = False
    pull_number = None
    try:
        pull_number = _run(root, spark_mode)
        finished = True
    finally:
        stop_all()  # the demo's Spark Connect server, if it started one
        took = _took(time.monotonic() - started)
        if not finished:
            err.print(
                f"[red]The demo stopped after {took}[/]; its repository is kept in "
                f"{escape(str(root))}"
            )
        else:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
            out.print(f"\n[bold green]Demo finished in {took}.[/]")
            for line in ending(root, work_dir, pull_number, kept=keep):
                # whole lines (paths and commands to copy), the terminal wraps them
                out.print(line, highlight=False, markup=False, soft_wrap=True)


def ending(root: Path, work_dir: Path, number: int | None, *, kept: bool) -> list[str]:
    """What the demo says last: where its repository is and where the PR comment with its
    impact graph (a Mermaid block, which a terminal cannot draw) is to be seen; or, when
    the repository was removed, how to keep it."""
    comment = root / ".sluice" / "forge" / "prs" / str(number or 1) / "comment.md"
    if not kept:
        return [
            "Its repository was removed: `sluice demo --keep` (`make demo KEEP=1`) keeps it, "
            f"and the PR comment with its impact graph ({comment.relative_to(root)})."
        ]
    lines = [
        f"The repository is kept in {root}: try `sluice pr status {number or 1} --repo {work_dir}`."
    ]
    if comment.is_file():
        lines.append(
            f"The PR comment as Sluice posted it, impact graph included (Markdown with a "
            f"Mermaid block, drawn by GitHub or any Markdown preview with Mermaid): {comment}"
        )
        if SCREENSHOT.is_file():
            lines.append(
                "To see it as GitHub shows it, as a PNG (Mermaid's CLI and Chromium: "
                f"`bash {SCREENSHOT.parent / 'ensure-mermaid.sh'}`): "
                + shlex.join(
                    [
                        sys.executable,
                        str(SCREENSHOT),
                        str(comment),
                        str(comment.with_suffix(".png")),
                    ]
                )
            )
    return lines


def check_java() -> str:
    """The first line of ``java -version``; DemoError with how to install Java when there
    is none (Spark needs it)."""
    problem = java_problem()
    if problem is not None:
        raise DemoError(f"{problem}; the demo runs Spark locally", hint=INSTALL_HINT)
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DemoError(
            f"Java does not run (`{java} -version`: {exc})", hint=INSTALL_HINT
        ) from None
    text = (done.stderr or done.stdout).strip()
    if done.returncode != 0:
        raise DemoError(f"`{java} -version` failed: {text[-300:]}", hint=INSTALL_HINT)
    return text.splitlines()[0] if text else "java"


def check_git() -> None:
    if shutil.which("git") is None:
        raise DemoError(
            "git is not installed: the demo's forge is a git repository",
            hint="install git 2.38 or later (e.g. `apt-get install git`)",
        )


def _run(root: Path, spark_mode: Literal["connect", "submit"]) -> int:
    """The demo's six steps in ``root``; the pull request's number."""
    state = f"sqlite:///{root / '.sluice' / 'state.db'}"  # where `sluice pr` looks by default
    common = {
        "repo": root,
        "state": state,
        "workdir": None,
        "project_path": ".",
        "spark_mode": spark_mode,
    }

    _step(1, "Making a git repository holding the example project (jaffle_shop)")
    _make_repo(root)
    _say(f"{root}: branch main, gate: one approval by {REVIEWER!r} (gate in sluice.yaml)")

    _step(2, f"Building prod on local Spark (the data ends {PROD_END})")
    _say(f"$ sluice apply --project {root} --end {PROD_END}")
    _build_prod(root, state, spark_mode)

    _step(3, f"Committing a change on branch {BRANCH!r}")
    _make_change(root)
    _say(_git(root, "diff", "--stat", f"main..{BRANCH}").rstrip())

    _step(4, f"Opening the pull request as {AUTHOR!r}: Sluice builds pr_1, plans, diffs")
    _say(f"$ sluice pr open --base main --head {BRANCH} --user {AUTHOR}")
    ctx = click.get_current_context()
    ctx.invoke(
        local_pr.open_,
        base="main",
        head=BRANCH,
        title="Orders: drop returned orders; customers: last_name_upper",
        user=AUTHOR,
        quiet=False,
        **common,
    )
    forge = LocalForge(root)
    [pull_number] = forge.pull_numbers()
    approval = _check(forge, pull_number, "sluice/approval")
    _say(
        f"The gate holds the merge: sluice/approval is "
        f"{approval.get('conclusion') or approval.get('status')} ({approval.get('title')}); "
        f"`sluice pr merge` refuses until {REVIEWER!r} approves."
    )

    _step(5, f"Approving as {REVIEWER!r}, merging as {AUTHOR!r}: prod is promoted")
    _say(f"$ sluice pr approve {pull_number} --user {REVIEWER}")
    ctx.invoke(
        local_pr.approve,
        number=pull_number,
        request_changes=False,
        user=REVIEWER,
        quiet=True,
        **common,
    )
    _show(forge, pull_number)
    _say(f"$ sluice pr merge {pull_number} --user {AUTHOR}")
    _say("Merging, then promoting: prod's plan is the PR's, so Spark only swaps views ...")
    ctx.invoke(
        local_pr.merge,
        number=pull_number,
        method="merge",
        admin=False,
        user=AUTHOR,
        quiet=True,
        **common,
    )
    _show(forge, pull_number)
    deploy = _check(forge, pull_number, "sluice/deploy")
    out.print(
        f"[bold]sluice/deploy: {deploy.get('conclusion') or deploy.get('status')}: "
        f"{deploy.get('title')}[/]"
    )
    if deploy.get("summary"):
        _say(str(deploy["summary"]).rstrip())

    _step(6, "Querying prod: the change is live")
    _query(root, state, RETURNED_SQL, limit=1, spark_mode=spark_mode)
    _query(root, state, SAMPLE_SQL, limit=5, spark_mode=spark_mode)
    _query(root, state, SEGMENTS_SQL, limit=5, spark_mode=spark_mode)
    return pull_number


# -- the steps ---------------------------------------------------------------------------


def _make_repo(root: Path) -> None:
    if not EXAMPLE.is_dir():
        raise DemoError(
            f"the example project is not at {EXAMPLE}",
            hint="run `sluice demo` from a checkout of Sluice (pip install -e .)",
        )
    _clear(root)
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".sluice", "__pycache__"))
    settings_path = root / SETTINGS_FILES[0]  # Sluice's settings, beside config.yaml
    sluice = read_yaml(settings_path).data or {}
    # The PR builds and diffs the whole history (it is small), not the last 30 days only.
    sluice.setdefault("pr", {})["backfill_days"] = None
    sluice["gate"] = {"required_approvers": {"users": [REVIEWER]}}
    header = "# The jaffle_shop example's settings, as `sluice demo` set them up.\n"
    settings_path.write_text(header + dump_yaml(sluice), encoding="utf-8")
    (root / ".gitignore").write_text(".sluice/\n", encoding="utf-8")
    _git(root, "init", "-q", "-b", "main")
    (root / ".git" / _MARKER).write_text("made by `sluice demo`; recreated on each run\n")
    for key, value in (
        ("user.name", AUTHOR),
        ("user.email", f"{AUTHOR}@example.com"),
        ("commit.gpgsign", "false"),
    ):
        _git(root, "config", key, value)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "jaffle_shop: the example project")


def _clear(root: Path) -> None:
    """Remove a previous demo's folder; refuse to delete anything else."""
    if not root.exists():
        return
    if root.is_dir() and (not any(root.iterdir()) or (root / ".git" / _MARKER).is_file()):
        shutil.rmtree(root)
        return
    raise DemoError(
        f"{root} exists and was not made by `sluice demo`; not deleting it",
        hint="pass another folder with --dir PATH",
    )


def _build_prod(root: Path, state: str, spark_mode: Literal["connect", "submit"]) -> None:
    project = workflow.load_project(root)
    now = now_ms()
    store = open_state(state)
    try:
        plan = workflow.plan_environment(
            project, store, PROD, end=to_ms(PROD_END) + DAY_MS, execution_time=now
        )
        print_plan(plan, out)
        runner = workflow.make_runner(project, mode=spark_mode, on_event=progress)
        applied = workflow.apply_plan(project, store, plan, runner, url=state, now=now)
    finally:
        store.close()
    seconds = applied.job.seconds if applied.job else 0.0
    made = f", {plural(applied.model_views, 'model view')} made" if applied.model_views else ""
    out.print(
        f"[green]Applied to prod:[/] {plural(applied.tables_built, 'table')} built{made}, "
        f"{plural(applied.views_swapped, 'view')} pointed at them ({seconds:.1f} s)."
    )


def _make_change(root: Path) -> None:
    _git(root, "checkout", "-q", "-b", BRANCH)
    _edit(
        root / "models" / "orders.sql",
        r"(\n\s*ON o\.order_id = p\.order_id)\n?",
        "\\1\nWHERE o.status <> 'returned'\n",
    )
    _edit(
        root / "models" / "customers.sql",
        r"(\n(\s*)c\.last_name,\n)",
        "\\1\\2UPPER(c.last_name) AS last_name_upper,\n",
    )
    _git(root, "add", "models/orders.sql", "models/customers.sql")
    _git(
        root,
        "commit",
        "-q",
        "-m",
        "orders: drop returned orders (breaking); customers: last_name_upper (non-breaking)",
    )
    _git(root, "checkout", "-q", "main")
    _say(_git(root, "diff", f"main..{BRANCH}", "--", "models").rstrip())


def _edit(path: Path, pattern: str, replacement: str) -> None:
    text = path.read_text(encoding="utf-8")
    changed, count = re.subn(pattern, replacement, text, count=1)
    if count != 1:
        raise DemoError(f"{path}: the demo's edit does not apply (the example changed?)")
    path.write_text(changed, encoding="utf-8")


def _query(
    root: Path, state: str, sql: str, *, limit: int, spark_mode: Literal["connect", "submit"]
) -> None:
    _say(f'$ sluice query prod "{sql}" --limit {limit}')
    project = workflow.load_project(root)
    store = open_state(state)
    try:
        runner = workflow.make_runner(project, mode=spark_mode, on_event=progress)
        result = workflow.query_environment(project, store, PROD, sql, runner, limit=limit)
    finally:
        store.close()
    table = Table(*result["columns"])
    for row in result["rows"]:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    out.print(table)


# -- helpers -----------------------------------------------------------------------------


def _show(forge: LocalForge, number: int) -> None:
    """The top of the PR comment (its status lines, not the plan printed before), the
    PR's state and its checks: what `sluice pr status` shows, shortened."""
    comments = forge.comments(number)
    if comments:
        head = comments[0].split("\n#### ", 1)[0].split("\n**Query this PR", 1)[0]
        lines = [line for line in head.splitlines() if line and not line.startswith("<!--")]
        _say("--- the PR comment, top ---")
        terminal.show("\n".join(lines))  # rendered on a terminal, Markdown when piped
    record = forge.record(number)
    pull = forge.pull_request(number)
    state = record["state"]
    if state == "merged":
        state += f" into {pull.base_ref} as {str(record.get('merge_sha'))[:7]}"
    _say(f"#{number}: {pull.head_ref} -> {pull.base_ref}, {state}")
    shas = [pull.head_sha]
    if record.get("merge_sha") and record["merge_sha"] != pull.head_sha:
        shas.append(record["merge_sha"])
    for sha in shas:
        for name, check in sorted(forge.checks(sha).items()):
            conclusion = check["conclusion"] or str(check["status"]).replace("_", " ")
            icon = {"success": "✓", "failure": "✗"}.get(conclusion, "-")
            _say(f"  {icon} {name:<22} {conclusion:<12} {check['title']}")


def _check(forge: LocalForge, number: int, name: str) -> dict[str, Any]:
    pull = forge.pull_request(number)
    merge_sha = forge.record(number).get("merge_sha")
    for sha in (merge_sha, pull.head_sha):
        if sha and name in forge.checks(sha):
            found: dict[str, Any] = forge.checks(sha)[name]
            return found
    raise DemoError(
        f"pull request #{number} has no {name} check",
        hint=f"see `sluice pr status {number} --repo {forge.root}`",
    )


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    if done.returncode != 0:
        raise DemoError(f"git {' '.join(args)} failed in {root}: {done.stderr.strip()}")
    return done.stdout


def _step(number: int, title: str) -> None:
    out.print(f"\n[bold cyan]{number}/{STEPS} {title} ...[/]")


def _say(text: str) -> None:
    if text:
        out.print(text, highlight=False, markup=False)


def _took(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


__all__ = ["demo", "register"]
