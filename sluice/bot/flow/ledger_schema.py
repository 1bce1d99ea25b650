"""The ledger's tables and their numbered migrations (:data:`LEDGER`): one owner for the
bot's records' schema, kept apart from :class:`~sluice.bot.flow.ledger.Ledger`, which reads
and writes them.

A new table or column is a new migration here as well as a change to its table; the
migrate tests (tests/core/db/test_migrate.py) check each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    inspect,
    select,
)
from sqlalchemy.engine import Connection

from sluice.core.db.jsontext import JsonText
from sluice.core.db.migrate import Migration, Track, create_missing, create_tables

# The ledger's tables, as its migrations (LEDGER, below the tables) leave them: a new table
# or column is a new migration there as well as a change here.
metadata = MetaData()

pr_plans = Table(
    "sluice_pr_plans",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("fingerprint", String, nullable=False),
    Column("review", JsonText, nullable=False),
    Column("created_ts", BigInteger, nullable=False),
    # When this commit got the plan (fingerprint) it has: its first plan, or a plan made
    # again differently (a /sluice plan after prod or its settings moved). None: recorded
    # before this was kept.
    Column("plan_ts", BigInteger, nullable=True),
    # The same by the forge's clock (migration 15): what approvals the forge stamps are
    # compared with. None: recorded before this was kept (plan_ts then).
    Column("plan_forge_ts", BigInteger, nullable=True),
)

plan_clicks = Table(
    "sluice_plan_clicks",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("clicked_ts", BigInteger, nullable=False),
    # The fingerprint (a prefix of it) of the plan the click approved; None: a button
    # made before clicks named their plan.
    Column("plan", String, nullable=True),
    # Who clicked, by the forge's account id (sender.id), which a rename does not change;
    # None: recorded before migration 7, or a click whose forge did not say.
    Column("user_id", BigInteger, nullable=True),
)

# The head a GitLab approval hook named, per user: no longer written nor read (an approval
# is bound by GitLab's merge request versions: approval._bound). Kept for the states that
# have it, and for its migrations (1 makes it, 7 adds user_id).
review_heads = Table(
    "sluice_review_heads",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),  # case-folded
    Column("sha", String, nullable=False),
    Column("reviewed_ts", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=True),  # the approver's account id (migration 7)
)

approved = Table(
    "sluice_approved_models",
    metadata,
    Column("repo", String, primary_key=True),
    Column("model", String, primary_key=True),
    Column("content", String, primary_key=True),
    Column("number", Integer, nullable=False),
    Column("sha", String, nullable=False),
    Column("approvers", Text, nullable=False),
    Column("approved_ts", BigInteger, nullable=False),
    # The settings in force it was approved under (trust.Settings.generation): a gate
    # changed since (another PR's settings promoted) has not approved it. None: approved
    # before this was kept.
    Column("generation", String, nullable=True),
)

comments = Table(
    "sluice_pr_comments",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("body", Text, nullable=True),
    Column("sections", JsonText, nullable=False),
    # Migration 16. When the forge last said the comment came to read what Sluice wrote
    # (its clock; None: it says no time, or none was answered since this was kept) ...
    Column("written_forge_ts", BigInteger, nullable=True),
    # ... and a JSON document: {"written": the digest (SHA-256) of the text the comment
    # reads by then, "under_way": those of the texts posted whose post has not ended, at
    # most 8}: a comment read back reading another text was changed by someone else.
    Column("texts", JsonText, nullable=True),
    # Migration 18. The id of the comment Sluice's newest answered post wrote (None: the
    # forge has none, or none was answered since): it is read back and written by it,
    # so a rewrite that dropped the marker is still found as Sluice's (red team round 9).
    Column("comment_id", BigInteger, nullable=True),
)

merged_prs = Table(
    "sluice_merged_prs",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("changes", JsonText, nullable=False),  # the approved items, JSON
    Column("merged_ts", BigInteger, nullable=False),
)

# The forge's deployment record of a promotion while it runs: a promotion run again after a
# crash (the service or its Spark driver killed) reports on the same record, rather than
# opening another and leaving the first "in progress" for ever.
deployments = Table(
    "sluice_deployments",
    metadata,
    Column("repo", String, primary_key=True),
    Column("sha", String, primary_key=True),
    Column("environment", String, primary_key=True),
    Column("deployment_id", BigInteger, nullable=False),
    Column("started_ts", BigInteger, nullable=False),
)

# State-changing events handled, by their content key (events.py's table). Recorded when
# the job is done (flow/dispatch) or failed for good (worker), never when it starts: a job
# cut short runs again. Kept for good: a replay a year later is still a replay.
handled_events = Table(
    "sluice_handled_events",
    metadata,
    Column("repo", String, primary_key=True),
    Column("key", String, primary_key=True),
    Column("kind", String, nullable=False),
    Column("outcome", String, nullable=False),  # done, or failed (for good)
    Column("handled_ts", BigInteger, nullable=False),
)

# Each PR's head as its own events (opened, synchronize, reopened, ready) last reported it,
# fork PRs included: a PR's events and its comments share a queue key, so when a writer's
# `/sluice plan` runs, this is the head the PR had when they commented. ``at_ts`` is the
# forge's time of the event that reported it (None: the event did not say); an event older
# than the one recorded does not move it back (a late or replayed delivery).
pr_heads = Table(
    "sluice_pr_heads",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("sha", String, nullable=False),
    Column("at_ts", BigInteger, nullable=True),
    Column("recorded_ts", BigInteger, nullable=False),
)

# Who pushed a head of each pull request (opened, reopened, synchronize: the event's
# sender): their approvals do not count, as the author's do not (an approver pushing their
# own change onto another's PR and approving it: red team, approval round).
pr_pushers = Table(
    "sluice_pr_pushers",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("user", String, primary_key=True),  # case-folded
    # Whose row it is (migration 9): `#<user_id>`, or `@<user>` where no id is known. A
    # login is given up on a rename and taken by another account: the table keeps every
    # (login, id) pair, never one row per login (red team on identity).
    Column("account", String, primary_key=True),
    Column("pushed_ts", BigInteger, nullable=False),  # the first push seen
    # The pusher's account id (the event's sender.id / user.id): people are compared by it,
    # a login can be renamed and given up. None: recorded before migration 7, or a pusher
    # known by login only (a fork's owner, a commit's author).
    Column("user_id", BigInteger, nullable=True),
)

# Who pushed to each branch, and the head each push left (GitHub's and GitLab's push
# hooks: the authenticated pusher): a pull request's pushers include whoever pushed one of
# its commits, pushed before it was opened or superseded in the queue (red team round 2).
branch_pushers = Table(
    "sluice_branch_pushers",
    metadata,
    Column("repo", String, primary_key=True),
    Column("branch", String, primary_key=True),
    Column("sha", String, primary_key=True),  # lower-case
    Column("user", String, primary_key=True),  # as the forge spells it
    Column("account", String, primary_key=True),  # as pr_pushers' (migration 9)
    Column("pushed_ts", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=True),  # the pusher's account id (migration 7)
)

# The check runs Sluice made (GitHub's check run ids, unique across GitHub; GitLab's commit
# status ids, unique across its instance, each one project's; both integers): Sluice edits
# only these, never another app's run of the same name, and takes a click ("Approve this
# plan", "Plan the repair", ...) only on one of these, on the head it was made for. A name
# is no proof: a writer's workflow under the Action, or another App, can make a run of any
# name on any commit (red team, drift repair). One row per commit and check: the latest.
check_runs = Table(
    "sluice_check_runs",
    metadata,
    Column("repo", String, primary_key=True),
    Column("sha", String, primary_key=True),  # lower-case
    Column("name", String, primary_key=True),
    Column("run_id", BigInteger, nullable=False),
    Column("made_ts", BigInteger, nullable=False),
    Index("ix_sluice_check_runs_run", "repo", "run_id"),
)

repos = Table(
    "sluice_repos",
    metadata,
    Column("repo", String, primary_key=True),
    Column("installation_id", BigInteger, nullable=True),
    Column("last_sha", String, nullable=True),  # the last commit a job loaded the project at
    Column("seen_ts", BigInteger, nullable=False),
    # When the service first recorded the repository under this key (migration 13; rows
    # made before, the earliest record of it the ledger kept then): a name with records
    # that no delivery bound to an id yet is bound only to a repository the forge says is
    # older (flow/dispatch).
    Column("first_seen_ts", BigInteger, nullable=True),
)

# The prod branch's `sluice:` settings in force: pinned the first time they are read, and
# moved only by a promotion (whose settings change, if any, passed the gate).
prod_settings = Table(
    "sluice_prod_settings",
    metadata,
    Column("repo", String, primary_key=True),
    Column("sha", String, nullable=False),
    Column("digest", String, nullable=False),
    Column("config", Text, nullable=False),  # the text of the file they were read from
    Column("pinned_ts", BigInteger, nullable=False),
    # That file's path (sluice.yaml, or the project's config.yaml); NULL: a config.yaml's
    # text, pinned before Sluice read sluice.yaml (migration 2 added the column).
    Column("config_file", String, nullable=True),
    # Who the logins the settings name are (migration 10): JSON {case-folded login: account
    # id, or null where no account had it}, each resolved when it first came into force
    # and kept (a login keeps the account it first named). NULL: pinned before, or on a
    # forge without ids.
    Column("people", Text, nullable=True),
)

# The one repository (and project path) this database's engine state belongs to: one prod,
# one set of pr_<n> environments, one warehouse. A second repository is refused, never
# mixed in (see flow/dispatch.handle).
state_owner = Table(
    "sluice_state_owner",
    metadata,
    Column("slot", Integer, primary_key=True),  # always 1: one owner per database
    Column("repo", String, nullable=False),
    Column("bound_ts", BigInteger, nullable=False),
)

# Each repository's names, each bound to the forge's id of the repository the first time
# a delivery said it (migration 11; before, rows of handled_events, key "repository-id"). A
# name is bound for good: a repository of another id under it is refused (a successor, see
# flow/dispatch). A name first seen with an id another name is bound to is that repository
# renamed: it keeps the ``canonical`` name, the first one bound to the id, whose namespace
# (flow/tenancy) and records are the repository's under every later name.
repositories = Table(
    "sluice_repositories",
    metadata,
    Column("name", String, primary_key=True),  # forge:owner/name, case-folded
    Column("forge", String, nullable=False),  # github, gitlab: the ids' space
    Column("repo_id", BigInteger, nullable=False),  # the forge's id of the repository
    # The repository's first name, as first delivered: the key of its records and namespace.
    Column("canonical", String, nullable=False),
    Column("spelled", String, nullable=False),  # this name as the forge last spelled it
    Column("first_seen_ts", BigInteger, nullable=False),
    Column("last_seen_ts", BigInteger, nullable=False),  # its latest delivery (current name)
    Index("ix_sluice_repositories_id", "forge", "repo_id"),
)

# The forge's own records of pushes to a branch, asked once per head of it (migration 12;
# before, rows of handled_events, key "push-records:<head>:<branch>").
push_records_asked = Table(
    "sluice_push_records_asked",
    metadata,
    Column("repo", String, primary_key=True),
    Column("branch", String, primary_key=True),
    Column("head", String, primary_key=True),  # lower-case
    Column("asked_ts", BigInteger, nullable=False),
)

# Each publication of a pull request's plan or hold (migration 14): which head's was shown
# from when, so an approval counts only for the plan (or hold) shown when it was given.
plan_shown = Table(
    "sluice_plan_shown",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("shown_ts", BigInteger, primary_key=True),
    Column("sha", String, primary_key=True),  # lower-case
    # "plan", "hold" (over the backfill budget), "edited" (someone else's text: no head's),
    # or "unanswered" (a write of Sluice's the forge may have applied without answering)
    Column("kind", String, nullable=False),
    # When, by the forge's clock (migration 15; shown_ts is the service's): the time the
    # forge gave the comment's edit. None: recorded before this was kept (shown_ts then).
    Column("forge_ts", BigInteger, nullable=True),
)

# When the service first read each word of a pull request's reviews (migration 17): its
# id, state and time (gate_rules.word_key), so a person's reviews and clicks are taken in
# the order the service learnt of them, one clock for both (red team round 7).
review_words = Table(
    "sluice_review_words",
    metadata,
    Column("repo", String, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("word", String, primary_key=True),
    Column("learnt_ts", BigInteger, nullable=False),  # the service's clock
)

# The tables of migration 1: those create_all made before the runner.
_FIRST = (
    pr_plans,
    plan_clicks,
    review_heads,
    approved,
    comments,
    merged_prs,
    deployments,
    handled_events,
    pr_heads,
    repos,
    prod_settings,
    state_owner,
)


def _adopt(conn: Connection) -> int:
    # Before the runner every start ran create_all: do what it did (a table added since the
    # database was made is created), then the track is at migration 1.
    create_missing(conn, _FIRST)
    return 1


def _settings_file(conn: Connection) -> None:
    # Migration 1 makes the table as declared now (with the column): add it only to a table
    # an older Sluice made.
    if "config_file" not in {c["name"] for c in inspect(conn).get_columns(prod_settings.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {prod_settings.name} ADD COLUMN config_file VARCHAR")


def _approved_generation(conn: Connection) -> None:
    if "generation" not in {c["name"] for c in inspect(conn).get_columns(approved.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {approved.name} ADD COLUMN generation VARCHAR")


def _forge_times(conn: Connection) -> None:
    # Migrations 1 and 14 make the tables as declared now: add the columns where missing.
    for table, column in ((pr_plans, "plan_forge_ts"), (plan_shown, "forge_ts")):
        if column not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column} BIGINT")


def _comment_writes(conn: Connection) -> None:
    # Migration 1 makes the table as declared now: add the columns where missing.
    have = {c["name"] for c in inspect(conn).get_columns(comments.name)}
    for column, kind in (("written_forge_ts", "BIGINT"), ("texts", "TEXT")):
        if column not in have:
            conn.exec_driver_sql(f"ALTER TABLE {comments.name} ADD COLUMN {column} {kind}")


def _comment_id(conn: Connection) -> None:
    # Migration 1 makes the table as declared now: add the column where missing.
    if "comment_id" not in {c["name"] for c in inspect(conn).get_columns(comments.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {comments.name} ADD COLUMN comment_id BIGINT")


def _plan_bound(conn: Connection) -> None:
    # Migration 1 makes the tables as declared now: add the columns only where missing.
    for table, column, kind in (
        (pr_plans, "plan_ts", "BIGINT"),
        (plan_clicks, "plan", "VARCHAR"),
    ):
        if column not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column} {kind}")


def _account_ids(conn: Connection) -> None:
    # Migration 1 makes the tables as declared now: add the column only where missing.
    for table in (plan_clicks, review_heads, pr_pushers, branch_pushers):
        if "user_id" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN user_id BIGINT")


def _pushers_by_account(conn: Connection) -> None:
    # Migrations 4 and 6 make the tables as declared now: a table made before, keyed by
    # login, is made again, its rows moved over under the account each was recorded with
    # (the old key is part of the new one: no two rows meet).
    for table in (pr_pushers, branch_pushers):
        if "account" in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            continue
        kept = [c for c in table.columns if c.name != "account"]
        rows = [dict(row._mapping) for row in conn.execute(select(*kept))]
        table.drop(conn)
        table.create(conn)
        for row in rows:
            row["account"] = _account(row["user"], _id(row["user_id"]))
        for chunk in _chunks(rows, 500):
            conn.execute(table.insert(), chunk)


def _settings_people(conn: Connection) -> None:
    # Migration 1 makes the table as declared now (with the column): add it only where missing.
    if "people" not in {c["name"] for c in inspect(conn).get_columns(prod_settings.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {prod_settings.name} ADD COLUMN people TEXT")


REPOSITORY_ID = "repository-id"
"""The handled-event key a repository's binding to the forge's id of it had before ledger
migration 11 moved them to :data:`repositories`."""

ASKED_PREFIX = "push-records:"
"""The handled-event keys (``push-records:<head>:<branch>``) of the forge's push records
asked, before ledger migration 12 moved them to :data:`push_records_asked`."""


def _repositories_table(conn: Connection) -> None:
    # The bindings kept as handled events move to a table of their own. Each name's
    # canonical is itself (no rename was followed before), spelled as the repository's
    # record spells it where one folds to it (the ledger's records are keyed as spelled).
    repositories.create(conn, checkfirst=True)
    h = handled_events
    rows = list(
        conn.execute(select(h.c.repo, h.c.outcome, h.c.handled_ts).where(h.c.key == REPOSITORY_ID))
    )
    spelled: dict[str, str] = {}
    for (seen,) in conn.execute(select(repos.c.repo).order_by(repos.c.repo)):
        spelled.setdefault(str(seen).casefold(), str(seen))
    moved = []
    for row in rows:
        try:
            repo_id = int(row.outcome)
        except ValueError:
            continue  # never written so; dropped with the rest below
        name = str(row.repo).casefold()
        first = spelled.get(name, name)
        moved.append(
            {
                "name": name,
                "forge": name.partition(":")[0],
                "repo_id": repo_id,
                "canonical": first,
                "spelled": first,
                "first_seen_ts": int(row.handled_ts),
                "last_seen_ts": int(row.handled_ts),
            }
        )
    for chunk in _chunks(moved, 500):
        conn.execute(repositories.insert(), chunk)
    conn.execute(delete(h).where(h.c.key == REPOSITORY_ID))


def _push_records_table(conn: Connection) -> None:
    # The heads whose push records were asked, kept as handled events, move to their table.
    push_records_asked.create(conn, checkfirst=True)
    h = handled_events
    mine = func.substr(h.c.key, 1, len(ASKED_PREFIX)) == ASKED_PREFIX
    moved = []
    for row in conn.execute(select(h.c.repo, h.c.key, h.c.handled_ts).where(mine)):
        head, _, branch = str(row.key)[len(ASKED_PREFIX) :].partition(":")
        if head and branch:
            moved.append(
                {
                    "repo": row.repo,
                    "branch": branch,
                    "head": head.lower(),
                    "asked_ts": int(row.handled_ts),
                }
            )
    for chunk in _chunks(moved, 500):
        conn.execute(push_records_asked.insert(), chunk)
    conn.execute(delete(h).where(mine))


def _first_seen(conn: Connection) -> None:
    # Each repository's first record: the earliest time any of its rows kept says (its
    # seen time is its latest job's; the other tables keep their first writes).
    if "first_seen_ts" not in {c["name"] for c in inspect(conn).get_columns(repos.name)}:
        conn.exec_driver_sql(f"ALTER TABLE {repos.name} ADD COLUMN first_seen_ts BIGINT")
    earliest: dict[str, int] = {}
    for table, column in (
        (pr_plans, "created_ts"),
        (approved, "approved_ts"),
        (merged_prs, "merged_ts"),
        (deployments, "started_ts"),
        (handled_events, "handled_ts"),
        (pr_heads, "recorded_ts"),
        (pr_pushers, "pushed_ts"),
        (branch_pushers, "pushed_ts"),
        (check_runs, "made_ts"),
        (prod_settings, "pinned_ts"),
        (repos, "seen_ts"),
    ):
        first = func.min(table.c[column])
        for repo, ts in conn.execute(select(table.c.repo, first).group_by(table.c.repo)):
            if ts is not None:
                key = str(repo).casefold()
                earliest[key] = min(int(ts), earliest.get(key, int(ts)))
    for (repo,) in conn.execute(select(repos.c.repo).where(repos.c.first_seen_ts.is_(None))):
        conn.execute(
            repos.update()
            .where(repos.c.repo == repo)
            .values(first_seen_ts=earliest[str(repo).casefold()])
        )


LEDGER = Track(
    name="ledger",
    tables=metadata,
    migrations=(
        Migration(1, "the bot's records", create_tables(*_FIRST)),
        Migration(2, "the file the settings in force were read from", _settings_file),
        Migration(3, "approvals bound to the plan a commit had when given", _plan_bound),
        Migration(4, "who pushed to each pull request", create_tables(pr_pushers)),
        Migration(5, "the settings each approval was given under", _approved_generation),
        Migration(6, "who pushed to each branch", create_tables(branch_pushers)),
        Migration(7, "people by their forge account id, not their login", _account_ids),
        Migration(8, "the check runs Sluice made", create_tables(check_runs)),
        Migration(9, "pushers by account: every login each had", _pushers_by_account),
        Migration(10, "the accounts the settings in force name", _settings_people),
        Migration(11, "each repository's names bound to its forge id", _repositories_table),
        Migration(12, "the heads whose push records were asked", _push_records_table),
        Migration(13, "when each repository was first recorded", _first_seen),
        Migration(14, "each publication of a pull request's plan", create_tables(plan_shown)),
        Migration(15, "when each plan was shown, by the forge's clock", _forge_times),
        Migration(16, "when Sluice's comment last read what Sluice wrote", _comment_writes),
        Migration(17, "when each review's word was first read", create_tables(review_words)),
        Migration(18, "the id of Sluice's comment on each pull request", _comment_id),
    ),
    adopt=_adopt,
)
"""The ledger's track of migrations (after the state's)."""


def _id(value: Any) -> int | None:
    """An account id as a row holds it (None: recorded without one)."""
    return None if value is None else int(value)


def _account(user: str, user_id: int | None) -> str:
    """The pushers tables' ``account`` key: the account id, else the case-folded login."""
    return f"#{user_id}" if user_id is not None else f"@{user.casefold()}"


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
