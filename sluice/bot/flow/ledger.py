"""What the bot remembers between events, in the state database next to the job queue.

- the plan review computed on each head commit of a pull request (approvals are bound to
  its fingerprint), and when the commit got the plan it has (an approval given on that
  commit before then approved another plan, or none);
- clicks on the check run's "Approve this plan" with the plan each approved, and the head
  each approval was given on where the forge's approvals do not say (GitLab);
- the events already handled, by their content (a signed delivery replayed under a new
  delivery id does not run again: see :mod:`sluice.bot.events.neutral`), and each pull
  request's head as its own events last reported it (what a writer's ``/sluice plan``
  on a fork PR builds);
- the model contents approved through a passing gate, which a promotion must find;
- the sticky comment's last body and its extra sections (approval, promotion);
- the forge's deployment record of each promotion still running (so a promotion run again
  after a crash goes on with it);
- pull requests merged and waiting for a release tag, and the repositories the service
  has seen (the janitor's schedule visits each);
- the trusted settings prod is governed by (its sluice.yaml, or the ``sluice:`` section of
  its config.yaml, as prod was last promoted with, or as first read from the prod branch): see :mod:`sluice.bot.flow.trust`.

Repositories are keyed ``forge:owner/name``. Times are epoch milliseconds. The tables and
their numbered migrations (:data:`~sluice.bot.flow.ledger_schema.LEDGER`) are
:mod:`sluice.bot.flow.ledger_schema`'s.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from sqlalchemy import Table, and_, delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from sluice.bot.flow.audit import AUDIT, AuditLog
from sluice.bot.flow.ledger_schema import (
    LEDGER,
    _account,
    _chunks,
    _id,
    approved,
    branch_pushers,
    check_runs,
    comments,
    deployments,
    handled_events,
    merged_prs,
    metadata,
    plan_clicks,
    plan_shown,
    pr_heads,
    pr_plans,
    pr_pushers,
    prod_settings,
    push_records_asked,
    repos,
    repositories,
    review_words,
    state_owner,
)
from sluice.bot.flow.reviewed_plan import Item, PlanReview
from sluice.core.db.documents import dump_json, load_json
from sluice.core.db.engine import create_state_engine
from sluice.core.db.migrate import migrate
from sluice.core.state.migrations import STATE


class Click(NamedTuple):
    """A click on "Approve this plan" (the check's button or the web UI's)."""

    user: str
    sha: str  # the commit it was given on
    plan: str | None  # the approved plan's fingerprint (a prefix); None: the button did not say
    ts: int  # when Sluice handled it
    user_id: int | None = None  # who clicked, by account id; None: not known


class Push(NamedTuple):
    """A recorded push of one commit: its sha, the pusher's login and account id (None:
    recorded before ids were, or not known)."""

    sha: str
    user: str
    user_id: int | None = None


class Binding(NamedTuple):
    """What a repository's name is bound to (:meth:`Ledger.bind_repository`)."""

    canonical: str
    """The key of the repository's records and namespace: its first name, as first
    spelled."""
    repo_id: int
    """The forge's id the name is bound to (another than the delivery's: a successor)."""
    rename: bool = False
    """The name is bound to nothing yet and the id to ``canonical``: the repository
    renamed, if the forge says so (nothing written)."""
    others: bool = False
    """The name is bound to the delivery's id, and so is another name (its repository was
    renamed): this name may be another repository's now, so the caller confirms it with
    the forge before :meth:`Ledger.touch_name` (the name's last delivery not moved)."""
    since: int | None = None
    """The name is bound to nothing yet, nor the id, but the service has records of the
    name since this time (epoch ms; ``canonical`` is their key): a repository served
    before names were bound, or a repository created under its name since it was
    renamed away. Nothing written: the caller asks the forge which (:meth:`claim_name`)."""


class PinnedSettings(NamedTuple):
    """The settings prod is governed by (:mod:`sluice.bot.flow.trust`), as pinned."""

    sha: str  # the commit they were read at
    digest: str
    text: str  # the text of the file they were read from
    file: str | None  # its path; None: a config.yaml pinned before the column was kept
    pinned_ts: int  # when these settings were first pinned (a promotion of the same keeps it)
    # Who the logins they name are: case-folded login -> account id (None: no account had
    # it); None: not resolved (pinned before ledger migration 10, or no ids on the forge).
    people: dict[str, int | None] | None = None


UNDER_WAY_KEPT = 8
"""How many texts posted but not answered :meth:`Ledger.save_comment` keeps per comment."""

FIRST_READ = "*"
"""The word of :meth:`Ledger.learn_words` that says a PR's words were read once."""

FAILED = "!"
"""Marks a text under way whose post failed (:func:`_ended`)."""

GONE = "gone"
""":attr:`CommentWrites.last` of a comment found deleted (and kept so)."""


class CommentWrites(NamedTuple):
    """What a PR's comment reads by Sluice's writes (:meth:`Ledger.comment_writes`)."""

    written: int | None
    """When the forge last said the comment came to read what Sluice posted (its clock);
    None: no answer with a time kept (a forge that says none, or before migration 16)."""
    last: str | None
    """The digest of the text the comment reads by the newest answer (or as last found,
    someone else's change kept: :meth:`Ledger.comment_seen`; :data:`GONE`: deleted); None
    before migration 16 kept it."""
    under_way: frozenset[str]
    """The digests of the texts posted whose post has not ended (yet), and of those whose
    post failed until a post saved after it is answered (:func:`_ended`)."""
    comment_id: int | None = None
    """The forge's id of the comment the newest answered post wrote (None: not known)."""

    def reads(self, text: str) -> bool:
        """Whether a comment reading ``text`` reads what Sluice wrote: the text of its
        newest answer, or one posted whose post has not ended (another job's write)."""
        return _digest(text) == self.last or _digest(text) in self.under_way

    def is_under_way(self, text: str) -> bool:
        """Whether ``text`` is one Sluice posted whose post has not ended."""
        return _digest(text) in self.under_way


def _ended(under_way: list[str], digest: str, failed: bool) -> list[str]:
    """The texts under way once the post of ``digest`` ended. A post that failed may have
    been applied all the same (its answer lost), so its text stays, marked, until a post
    saved after it is answered; an answered post's text leaves with every one saved
    before it (the comment reads a newer text since: a post whose job died before its
    answer was kept, or whose answer never came, is over; red team round 10)."""
    if digest not in under_way:
        return under_way
    at = under_way.index(digest)
    if failed:
        return [*under_way[:at], FAILED + digest, *under_way[at + 1 :]]
    return under_way[at + 1 :]


def same_text(one: str, other: str) -> bool:
    """Whether two comment texts are one, as the forge may give a text back (line ends,
    trailing blanks)."""
    return _digest(one) == _digest(other)


def _digest(text: str) -> str:
    """A comment's text as the forge may give it back (line ends, trailing blanks) hashed."""
    plain = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    return hashlib.sha256(plain.strip().encode()).hexdigest()


class Ledger(AuditLog):
    """The bot's records on the state database at ``url`` (SQLite or PostgreSQL), and the
    audit log (:mod:`sluice.bot.flow.audit`, whose rows join the ledger's transactions).

    Migrates the state's, the ledger's (:data:`LEDGER`) and the audit log's tables first."""

    def __init__(self, url: str) -> None:
        self.bind(create_state_engine(url))
        try:
            with self._errors("migrate the bot's tables"):
                migrate(self._engine, [STATE, LEDGER, AUDIT])
        except BaseException:
            self._engine.dispose()
            raise

    def close(self) -> None:
        self._engine.dispose()

    # -- plans and approvals ----------------------------------------------------------

    def record_plan(
        self,
        repo: str,
        number: int,
        sha: str,
        review: PlanReview,
        now: int,
        forge_at: int | None = None,
    ) -> None:
        """Remember the plan review computed on head commit ``sha`` (replacing an older one),
        and that it is the one shown from ``now`` (:meth:`plans_shown`).

        ``now`` is when the plan was published, by the service's clock, and ``forge_at`` by
        the forge's (the time it gave the comment's edit; None: it gave none, ``now``
        stands for it): a commit's first plan, or one made again with another fingerprint
        (prod, or the settings in force, moved since), is the commit's from then on, and an
        approval given on it before then approved another plan (or none) and counts no
        more; a plan made again the same keeps its times. Each approval is compared with
        the time of its own clock: a review with the forge's, a click with the service's
        (red team, approvals round 5: two clocks never compare)."""
        sha = sha.lower()
        forge_at = now if forge_at is None else forge_at
        key = (pr_plans.c.repo == repo, pr_plans.c.number == number, pr_plans.c.sha == sha)
        with self._writing("record a plan") as conn:
            before = conn.execute(
                select(pr_plans.c.fingerprint, pr_plans.c.plan_ts, pr_plans.c.plan_forge_ts)
                .where(*key)
            ).first()  # fmt: skip
            same = before is not None and before.fingerprint == review.fingerprint
            since, forge_since = (
                (before.plan_ts, before.plan_forge_ts)
                if same and before is not None
                else (now, forge_at)
            )  # fmt: skip
            row = {
                "repo": repo,
                "number": number,
                "sha": sha,
                "fingerprint": review.fingerprint,
                "review": dump_json(review.to_json()),
                "created_ts": now,
                "plan_ts": since,
                "plan_forge_ts": forge_since,
            }
            _upsert(conn, pr_plans, row, ("repo", "number", "sha"))
            self._shown(conn, repo, number, sha, (now, forge_at), "plan")

    def record_shown(
        self,
        repo: str,
        number: int,
        sha: str,
        now: int,
        forge_at: int | None = None,
        *,
        kind: str = "hold",
    ) -> None:
        """Remember that head ``sha``'s hold (its plan over the backfill budget, waiting
        for the budget's approver) is the one shown from ``now`` (the service's clock) and
        ``forge_at`` (the forge's; None: as ``now``): :meth:`plans_shown`. ``kind``
        ``edited``: from then on the comment showed what someone else wrote into it, no
        head's plan (``sha`` empty)."""
        at = (now, now if forge_at is None else forge_at)
        with self._writing(f"record a publication ({kind})") as conn:
            self._shown(conn, repo, number, sha.lower(), at, kind)

    def record_unshown(
        self, repo: str, number: int, now: int, *, kind: str, fallback: int | None = None
    ) -> None:
        """Remember that PR ``number``'s comment showed no head's plan from just after its
        last publication (by the forge's clock: when it changed since is not known, only
        that it came after): someone else rewrote it (``edited``), or a write of Sluice's
        whose answer never came may have changed it (``unanswered``): by both clocks, a
        millisecond after the last publication (a click handled before the change was
        found is not taken for one before it: red team round 10). With no publication yet,
        from ``fallback`` by the forge's clock and ``now`` by the service's (None: nothing
        is kept, as no plan was ever shown). The last publication already one of no plan,
        nothing more is kept."""
        by_forge = self.plans_shown(repo, number, forge=True)
        here = self.plans_shown(repo, number)
        if here and here[-1][1].startswith(":"):
            return  # the last already shows no plan: from then on it counts for none
        if by_forge and here:
            self.record_shown(repo, number, "", here[-1][0] + 1, by_forge[-1][0] + 1, kind=kind)
        elif fallback is not None:
            self.record_shown(repo, number, "", now, fallback, kind=kind)

    @staticmethod
    def _shown(
        conn: Connection, repo: str, number: int, sha: str, at: tuple[int, int], kind: str
    ) -> None:
        shown = {
            "repo": repo, "number": number, "shown_ts": at[0], "forge_ts": at[1], "sha": sha,
            "kind": kind,
        }  # fmt: skip
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(dialect.insert(plan_shown).values(shown).on_conflict_do_nothing())

    def plans(self, repo: str, number: int) -> dict[str, str]:
        """Head sha -> plan fingerprint, for every commit of the PR that was planned."""
        query = select(pr_plans.c.sha, pr_plans.c.fingerprint).where(
            pr_plans.c.repo == repo, pr_plans.c.number == number
        )
        with self._reading("read plans") as conn:
            return {row.sha: row.fingerprint for row in conn.execute(query)}

    def plan_times(self, repo: str, number: int, *, forge: bool = False) -> dict[str, int]:
        """Head sha -> when it got the plan it has (approvals on it before then are stale),
        by the service's clock, or the forge's (``forge``), for the commits of the PR whose
        time was recorded."""
        t = pr_plans.c
        at = func.coalesce(t.plan_forge_ts, t.plan_ts) if forge else t.plan_ts
        query = select(t.sha, at.label("at")).where(
            t.repo == repo, t.number == number, t.plan_ts.is_not(None)
        )
        with self._reading("read plans") as conn:
            return {row.sha: int(row.at) for row in conn.execute(query)}

    def plans_shown(
        self, repo: str, number: int, *, holds: bool = False, forge: bool = False
    ) -> list[tuple[int, str]]:
        """(when, head sha) of each publication of the PR's plan or hold, in the order made: the
        head whose plan was shown from then on (:attr:`~sluice.bot.flow.gate_rules.GateInput.
        shown`), by the service's clock or the forge's (``forge``); empty for a PR planned
        before ledger migration 14 kept them. ``holds``: a plan's publication is given as
        ``<sha>:plan``, so that only a hold is its head's (what the backfill budget's
        approver approves: ``approval.budget_approved``). A comment someone else edited
        (``edited``), or one a write of Sluice's may have changed unanswered (``unanswered``),
        is no head's plan: ``:edited``, ``:unanswered``."""
        t = plan_shown.c
        at = func.coalesce(t.forge_ts, t.shown_ts) if forge else t.shown_ts
        kinds = {"hold"} if holds else {"plan", "hold"}
        query = (
            select(at.label("at"), t.sha, t.kind)
            .where(t.repo == repo, t.number == number)
            # In the order made (the service's clock: one PR's jobs run one at a time),
            # whatever the times: a row from before the forge's were kept (its service
            # time for both) never sorts after a newer one (red team round 7).
            .order_by(t.shown_ts, t.sha)
        )
        with self._reading("read plans") as conn:
            return [
                (int(row.at), str(row.sha) if row.kind in kinds else f"{row.sha}:{row.kind}")
                for row in conn.execute(query)
            ]

    def learn_words(
        self, repo: str, number: int, words: Mapping[str, int | None], now: int
    ) -> dict[str, int]:
        """When the service first read each of PR ``number``'s review ``words``
        (``gate_rules.word_key`` -> the word's own time, the forge's): those read before
        keep their time, the others are learnt ``now`` (the service's clock). The first
        read of a PR's words (its first evaluation; every open PR's after ledger migration
        17) takes each at its own time (or now, if the forge's clock says later): words
        given before the service kept when it learnt them keep the order they had (red
        team round 10)."""
        t = review_words.c
        query = select(t.word, t.learnt_ts).where(t.repo == repo, t.number == number)
        with self._writing("record when reviews were first read") as conn:
            known = {str(row.word): int(row.learnt_ts) for row in conn.execute(query)}
            first = not known
            new = [
                {
                    "repo": repo,
                    "number": number,
                    "word": word,
                    # never after it was read: a forge clock ahead is no later word
                    "learnt_ts": min(words[word] or now, now) if first else now,
                }
                for word in sorted(words.keys() - known.keys())
            ]
            if first:  # the PR's words are learnt from now on
                new.append({"repo": repo, "number": number, "word": FIRST_READ, "learnt_ts": now})
            if new:
                dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
                conn.execute(dialect.insert(review_words).values(new).on_conflict_do_nothing())
                known = {str(row.word): int(row.learnt_ts) for row in conn.execute(query)}
        return {word: known[word] for word in words if word in known}

    def review(self, repo: str, number: int, sha: str) -> PlanReview | None:
        """The plan review recorded on ``sha``; None when that commit was not planned."""
        query = select(pr_plans.c.review).where(
            pr_plans.c.repo == repo, pr_plans.c.number == number, pr_plans.c.sha == sha.lower()
        )
        with self._reading("read a plan") as conn:
            text = conn.execute(query).scalar_one_or_none()
        if text is None:
            return None
        return PlanReview.from_json(load_json(text, dict, f"plan of {repo}#{number}", self._where))

    def builds(self, repo: str) -> dict[int, list[tuple[str, str, int]]]:
        """Every planned pull request of ``repo``: number -> (head sha, plan fingerprint,
        when planned) of each head planned, oldest first (the web UI's build history)."""
        query = (
            select(pr_plans.c.number, pr_plans.c.sha, pr_plans.c.fingerprint, pr_plans.c.created_ts)
            .where(pr_plans.c.repo == repo)
            .order_by(pr_plans.c.number, pr_plans.c.created_ts)
        )
        found: dict[int, list[tuple[str, str, int]]] = {}
        with self._reading("read plans") as conn:
            for row in conn.execute(query):
                found.setdefault(row.number, []).append((row.sha, row.fingerprint, row.created_ts))
        return found

    def click(
        self,
        repo: str,
        number: int,
        user: str,
        sha: str,
        plan: str | None,
        now: int,
        user_id: int | None = None,
    ) -> None:
        """Record a click on "Approve this plan" by ``user`` (account ``user_id``) on
        ``sha``, approving the plan whose fingerprint starts with ``plan`` (None: a button
        that did not say)."""
        row = {
            "repo": repo,
            "number": number,
            "user": user,
            "sha": sha.lower(),
            "clicked_ts": now,
            "plan": plan,
            "user_id": user_id,
        }
        with self._writing("record an approval") as conn:
            _upsert(conn, plan_clicks, row, ("repo", "number", "user", "sha"))

    def clicks(self, repo: str, number: int) -> list[Click]:
        """Every "Approve this plan" click on the PR, oldest first."""
        query = (
            select(
                plan_clicks.c.user,
                plan_clicks.c.sha,
                plan_clicks.c.plan,
                plan_clicks.c.clicked_ts,
                plan_clicks.c.user_id,
            )
            .where(plan_clicks.c.repo == repo, plan_clicks.c.number == number)
            .order_by(plan_clicks.c.clicked_ts)
        )
        with self._reading("read approvals") as conn:
            return [
                Click(r.user, r.sha, r.plan, int(r.clicked_ts), _id(r.user_id))
                for r in conn.execute(query)
            ]

    def record_pusher(
        self, repo: str, number: int, user: str, now: int, user_id: int | None = None
    ) -> None:
        """Record that ``user`` (account ``user_id``; None: known by login only) pushed a
        head of the PR (kept: a push is never taken back). One row per (login, account): a
        login another account had is no reason to drop this one's."""
        row = {
            "repo": repo,
            "number": number,
            "user": user.casefold(),
            "account": _account(user, user_id),
            "pushed_ts": now,
            "user_id": user_id,
        }
        with self._writing("record who pushed") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            conn.execute(dialect.insert(pr_pushers).values(row).on_conflict_do_nothing())

    def pushers(self, repo: str, number: int) -> frozenset[str]:
        """Everyone (case-folded) who pushed a head of the PR."""
        query = select(pr_pushers.c.user).where(
            pr_pushers.c.repo == repo, pr_pushers.c.number == number
        )
        with self._reading("read who pushed") as conn:
            return frozenset(row.user for row in conn.execute(query))

    def pusher_accounts(self, repo: str, number: int) -> frozenset[tuple[str, int | None]]:
        """Everyone who pushed a head of the PR: (case-folded login, account id or None)."""
        query = select(pr_pushers.c.user, pr_pushers.c.user_id).where(
            pr_pushers.c.repo == repo, pr_pushers.c.number == number
        )
        with self._reading("read who pushed") as conn:
            return frozenset((row.user, _id(row.user_id)) for row in conn.execute(query))

    def record_branch_push(
        self,
        repo: str,
        branch: str,
        shas: Iterable[str],
        user: str,
        now: int,
        user_id: int | None = None,
    ) -> None:
        """Record that ``user`` (account ``user_id``) pushed the commits ``shas`` (the head
        and those the push brought) to ``branch`` (kept: a push is never taken back; a pull
        request counts the pushes of any of its commits, to whichever branch)."""
        rows = [
            {
                "repo": repo,
                "branch": branch,
                "sha": sha,
                "user": user,
                "account": _account(user, user_id),
                "pushed_ts": now,
                "user_id": user_id,
            }
            for sha in sorted({sha.lower() for sha in shas})
        ]
        with self._writing("record a push to a branch") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            for row in rows:
                conn.execute(dialect.insert(branch_pushers).values(row).on_conflict_do_nothing())

    def pushes_of(self, repo: str, shas: Collection[str]) -> list[Push]:
        """Each push (sha, user, account id) recorded of one of the commits ``shas``, to any
        branch of the repository."""
        wanted = sorted({sha.lower() for sha in shas})
        found: list[Push] = []
        t = branch_pushers
        with self._reading("read who pushed some commits") as conn:
            for start in range(0, len(wanted), 500):  # bound each statement's parameters
                query = select(t.c.sha, t.c.user, t.c.user_id).where(
                    t.c.repo == repo, t.c.sha.in_(wanted[start : start + 500])
                )
                found += [Push(row.sha, row.user, _id(row.user_id)) for row in conn.execute(query)]
        return found

    def branch_pushes(self, repo: str, branch: str) -> list[Push]:
        """Each push (head sha, user, account id) to ``branch``, oldest first."""
        t = branch_pushers
        query = (
            select(t.c.sha, t.c.user, t.c.user_id)
            .where(t.c.repo == repo, t.c.branch == branch)
            .order_by(t.c.pushed_ts, t.c.sha, t.c.user)
        )
        with self._reading("read who pushed to a branch") as conn:
            return [Push(row.sha, row.user, _id(row.user_id)) for row in conn.execute(query)]

    def approve(
        self,
        repo: str,
        number: int,
        sha: str,
        items: Iterable[Item],
        approvers: Iterable[str],
        now: int,
        generation: str | None = None,
    ) -> None:
        """Record that the model contents ``items`` passed the gate on ``repo``'s PR, under
        the settings in force whose generation is ``generation``."""
        rows = [
            {
                "repo": repo,
                "model": name,
                "content": content,
                "number": number,
                "sha": sha.lower(),
                "approvers": ",".join(approvers),
                "approved_ts": now,
                "generation": generation,
            }
            for name, content in items
        ]
        if not rows:
            return
        with self._writing("record approved models") as conn:
            for row in rows:  # two PRs may approve the same content at once
                _upsert(conn, approved, row, ("repo", "model", "content"))

    def withdraw(self, repo: str, number: int) -> int:
        """Forget the model contents ``repo``'s PR ``number`` had approved (its gate no
        longer passes: an approval dismissed, changes requested, a push); how many.
        Content another PR approved as well is withdrawn too (one row holds one PR): that
        PR's next gate evaluation records it again."""
        with self._writing("withdraw approved models") as conn:
            done = conn.execute(
                delete(approved).where(approved.c.repo == repo, approved.c.number == number)
            )
        return int(done.rowcount or 0)

    def approved_by_pr(self, repo: str, number: int) -> int:
        """How many model contents ``repo``'s PR ``number`` has approved now."""
        query = select(func.count()).where(approved.c.repo == repo, approved.c.number == number)
        with self._reading("count approved models") as conn:
            return int(conn.execute(query).scalar_one())

    def unapproved(
        self, repo: str, items: Iterable[Item], generation: str | None = None
    ) -> list[Item]:
        """The items no gate has approved in ``repo``, sorted; with ``generation``, no gate
        of the settings in force (that generation; rows kept before generations were,
        None, still count)."""
        wanted = sorted(set(items))
        if not wanted:
            return []
        found: set[Item] = set()
        with self._reading("read approved models") as conn:
            for chunk in _chunks(wanted, 200):
                query = select(approved.c.model, approved.c.content).where(
                    approved.c.repo == repo,
                    or_(*(and_(approved.c.model == n, approved.c.content == c) for n, c in chunk)),
                )
                if generation is not None:
                    query = query.where(
                        or_(approved.c.generation.is_(None), approved.c.generation == generation)
                    )
                found |= {(row.model, row.content) for row in conn.execute(query)}
        return [item for item in wanted if item not in found]

    def approvals(self, repo: str, items: Iterable[Item]) -> dict[Item, tuple[int, list[str]]]:
        """Of ``items``, those a gate approved in ``repo``: the PR that approved each and
        who approved it (the web UI's prod history says where a promotion came from)."""
        wanted = sorted(set(items))
        found: dict[Item, tuple[int, list[str]]] = {}
        with self._reading("read approved models") as conn:
            for chunk in _chunks(wanted, 200):
                query = select(
                    approved.c.model, approved.c.content, approved.c.number, approved.c.approvers
                ).where(
                    approved.c.repo == repo,
                    or_(*(and_(approved.c.model == n, approved.c.content == c) for n, c in chunk)),
                )
                for row in conn.execute(query):
                    users = [u for u in str(row.approvers).split(",") if u]
                    found[(row.model, row.content)] = (int(row.number), users)
        return found

    # -- the sticky comment -----------------------------------------------------------

    def comment(self, repo: str, number: int) -> tuple[str | None, dict[str, str]]:
        """The comment's last main body and its extra sections (name -> Markdown)."""
        query = select(comments.c.body, comments.c.sections).where(
            comments.c.repo == repo, comments.c.number == number
        )
        with self._reading("read a comment") as conn:
            row = conn.execute(query).one_or_none()
        if row is None:
            return None, {}
        return row.body, load_json(row.sections, dict, f"comment of {repo}#{number}", self._where)

    def save_comment(
        self,
        repo: str,
        number: int,
        body: str | None,
        sections: dict[str, str],
        *,
        posting: str | None = None,
    ) -> None:
        """Keep the comment's main body and sections; ``posting``: the whole text about to
        be posted, under way until :meth:`comment_written_later` says how its post ended
        (:meth:`comment_writes`)."""
        row: dict[str, Any] = {"repo": repo, "number": number, "body": body}
        row["sections"] = dump_json(sections)
        with self._writing("save a comment") as conn:
            texts = self._texts(conn, repo, number)
            if posting is not None:
                texts["under_way"] = [*texts["under_way"], _digest(posting)][-UNDER_WAY_KEPT:]
            row["texts"] = dump_json(texts)
            _upsert(conn, comments, row, ("repo", "number"))

    def comment_written_later(
        self,
        repo: str,
        number: int,
        forge_at: int | None,
        posted: str,
        *,
        failed: bool = False,
        comment_id: int | None = None,
    ) -> None:
        """The post of ``posted`` (saved by :meth:`save_comment`) ended: answered at
        ``forge_at`` (the forge's clock; None: it says no time) by comment ``comment_id``
        (None: the forge has no ids), the text the comment reads from then on unless a
        later post's answer says otherwise; or ``failed`` (the
        comment may or may not read it: under way, marked, until a later post is answered,
        :func:`_ended`). Written with this thread's next
        write of the ledger, as :meth:`record_check_run_later`'s (a PR build pays no
        transaction for it)."""
        digest = _digest(posted)

        def confirm(conn: Connection) -> None:
            where = (comments.c.repo == repo, comments.c.number == number)
            query = select(comments.c.written_forge_ts).where(*where).with_for_update()
            row = conn.execute(query).first()
            if row is None:
                return
            texts = self._texts(conn, repo, number)
            texts["under_way"] = _ended(texts["under_way"], digest, failed)
            written = None if row.written_forge_ts is None else int(row.written_forge_ts)
            values: dict[str, Any] = {}
            if not failed and (forge_at is None or written is None or forge_at >= written):
                texts["written"] = digest  # the newest answer: what the comment reads
                written = written if forge_at is None else forge_at
                values["comment_id"] = comment_id
            values |= {"written_forge_ts": written, "texts": dump_json(texts)}
            conn.execute(comments.update().where(*where).values(values))

        self._deferred_calls().append(confirm)

    def comment_seen(self, repo: str, number: int, text: str | None, forge_at: int | None) -> None:
        """The comment was found reading ``text`` (None: gone) at ``forge_at`` (the
        forge's clock), someone else's change already kept as such: that change is known
        from now on (:meth:`comment_writes`), so it is kept once."""
        with self._writing("record a comment's change") as conn:
            where = (comments.c.repo == repo, comments.c.number == number)
            row = conn.execute(select(comments.c.written_forge_ts).where(*where)).first()
            if row is None:
                return
            texts = self._texts(conn, repo, number)
            texts["written"] = GONE if text is None else _digest(text)
            written = None if row.written_forge_ts is None else int(row.written_forge_ts)
            if forge_at is not None:
                written = forge_at if written is None else max(written, forge_at)
            values = {"written_forge_ts": written, "texts": dump_json(texts)}
            conn.execute(comments.update().where(*where).values(values))

    def comment_writes(self, repo: str, number: int) -> CommentWrites:
        """What the comment reads by Sluice's writes (:class:`CommentWrites`)."""
        where = (comments.c.repo == repo, comments.c.number == number)
        query = select(comments.c.written_forge_ts, comments.c.comment_id).where(*where)
        with self._reading("read the comment's writes") as conn:
            row = conn.execute(query).first()
            texts = self._texts(conn, repo, number)
        written, comment_id = (None, None) if row is None else (row[0], row[1])
        return CommentWrites(
            None if written is None else int(written),
            texts["written"],
            frozenset(d.removeprefix(FAILED) for d in texts["under_way"]),
            None if comment_id is None else int(comment_id),
        )

    def _texts(self, conn: Connection, repo: str, number: int) -> dict[str, Any]:
        query = select(comments.c.texts).where(comments.c.repo == repo, comments.c.number == number)
        text = conn.execute(query).scalar_one_or_none()
        found = (
            {}
            if text is None
            else load_json(text, dict, f"comment of {repo}#{number}", self._where)
        )
        return {
            "written": found.get("written"),
            "under_way": [str(d) for d in found.get("under_way") or []],
        }

    # -- deployment records of promotions in progress ----------------------------------

    def deployment(self, repo: str, sha: str, environment: str) -> int | None:
        """The deployment record of a promotion of ``sha`` that started and has not
        reported its outcome (its job was cut short); None when there is none."""
        query = select(deployments.c.deployment_id).where(
            deployments.c.repo == repo,
            deployments.c.sha == sha.lower(),
            deployments.c.environment == environment,
        )
        with self._reading("read a deployment") as conn:
            found = conn.execute(query).scalar_one_or_none()
        return None if found is None else int(found)

    def deploying(
        self, repo: str, sha: str, environment: str, deployment_id: int, now: int
    ) -> None:
        """Remember the deployment record of a promotion that started."""
        row = {
            "repo": repo,
            "sha": sha.lower(),
            "environment": environment,
            "deployment_id": deployment_id,
            "started_ts": now,
        }
        with self._writing("record a deployment") as conn:
            _upsert(conn, deployments, row, ("repo", "sha", "environment"))

    def deployed(self, repo: str, sha: str, environment: str) -> None:
        """The promotion of ``sha`` reported its outcome: forget its record."""
        with self._writing("finish a deployment") as conn:
            conn.execute(
                delete(deployments).where(
                    deployments.c.repo == repo,
                    deployments.c.sha == sha.lower(),
                    deployments.c.environment == environment,
                )
            )

    # -- the repository this state belongs to ---------------------------------------------

    def belongs_to(self, repo: str, now: int) -> str:
        """Bind this database's engine state to ``repo`` unless it belongs to one already;
        the repository it belongs to."""
        row = {"slot": 1, "repo": repo, "bound_ts": now}
        with self._writing("bind the state to a repository") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            conn.execute(dialect.insert(state_owner).values(row).on_conflict_do_nothing())
            owner = conn.execute(select(state_owner.c.repo)).scalar_one()
        return str(owner)

    def owner(self) -> tuple[str, str] | None:
        """(repository, project path) this database's engine state belongs to (as
        :meth:`belongs_to` bound it: ``repo#path``); None before the first job."""
        with self._reading("read the state's repository") as conn:
            bound = conn.execute(select(state_owner.c.repo)).scalar_one_or_none()
        if bound is None:
            return None
        repo, _, path = str(bound).rpartition("#")
        return repo, path

    # -- the settings in force ------------------------------------------------------------

    def settings_in_force(self, repo: str) -> PinnedSettings | None:
        """The settings prod is governed by; None before the first read."""
        c = prod_settings.c
        query = select(c.sha, c.digest, c.config, c.config_file, c.pinned_ts, c.people)
        with self._reading("read the settings in force") as conn:
            row = conn.execute(query.where(c.repo == repo)).one_or_none()
        if row is None:
            return None
        people = None
        if row.people is not None:
            people = _people(load_json(row.people, dict, f"people of {repo}", self._where))
        return PinnedSettings(
            row.sha, row.digest, row.config, row.config_file, row.pinned_ts, people
        )

    def pin_settings(
        self,
        repo: str,
        sha: str,
        digest: str,
        text: str,
        file: str,
        now: int,
        *,
        replace: bool,
        people: dict[str, int | None] | None = None,
    ) -> bool:
        """Record the settings in force (``text``: of the file ``file`` they were read from;
        ``people``: who the logins they name are, :attr:`PinnedSettings.people`);
        ``replace=False`` keeps a record already there (the first read pins them; only a
        promotion moves them). Whether they were recorded (False: another was there)."""
        row = {
            "repo": repo,
            "sha": sha,
            "digest": digest,
            "config": text,
            "config_file": file,
            "pinned_ts": now,
            "people": None if people is None else dump_json(people),
        }
        with self._writing("record the settings in force") as conn:
            if replace:
                kept = conn.execute(
                    select(prod_settings.c.digest, prod_settings.c.pinned_ts).where(
                        prod_settings.c.repo == repo
                    )
                ).one_or_none()
                if kept is not None and kept.digest == digest:
                    row["pinned_ts"] = kept.pinned_ts  # the same settings: the same pin
                _upsert(conn, prod_settings, row, ("repo",))
                return True
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            done = conn.execute(dialect.insert(prod_settings).values(row).on_conflict_do_nothing())
            return bool(done.rowcount)

    def record_people(
        self, repo: str, digest: str, people: Mapping[str, int | None]
    ) -> dict[str, int | None] | None:
        """Add who the logins of the settings in force name (:attr:`PinnedSettings.people`)
        while those settings (``digest``) are still in force: only the logins the pin does
        not know yet, read and written in one transaction, so two jobs resolving logins at
        once lose neither's and a login pinned keeps its account (red team on identity,
        round 2). What the pin holds now; None when those settings are no longer in force."""
        c = prod_settings.c
        where = (c.repo == repo, c.digest == digest)
        with self._writing("record who the settings in force name") as conn:
            row = conn.execute(select(c.people).where(*where).with_for_update()).one_or_none()
            if row is None:
                return None
            stored = row.people
            what = f"people of {repo}"
            known = {} if stored is None else _people(load_json(stored, dict, what, self._where))
            added = {login: uid for login, uid in people.items() if login not in known}
            if added or stored is None:
                known |= added
                conn.execute(prod_settings.update().where(*where).values(people=dump_json(known)))
        return known

    # -- merged pull requests and repositories -----------------------------------------

    def merged(self, repo: str, number: int, items: Iterable[Item], now: int) -> None:
        """Remember a PR merged but not yet promoted (promotion waits for a tag)."""
        row = {
            "repo": repo,
            "number": number,
            "changes": dump_json([list(i) for i in items]),
            "merged_ts": now,
        }
        with self._writing("record a merge") as conn:
            _upsert(conn, merged_prs, row, ("repo", "number"))

    def waiting(self, repo: str) -> dict[int, list[Item]]:
        """Merged PRs waiting for a promotion: number -> their approved items."""
        query = select(merged_prs.c.number, merged_prs.c.changes).where(merged_prs.c.repo == repo)
        with self._reading("read merged pull requests") as conn:
            rows = list(conn.execute(query))
        return {
            row.number: [(n, c) for n, c in load_json(row.changes, list, "merged PR", self._where)]
            for row in rows
        }

    def promoted(self, repo: str, numbers: Iterable[int]) -> None:
        """Forget merged PRs once their changes are in prod."""
        chosen = list(numbers)
        if chosen:
            with self._writing("record a promotion") as conn:
                conn.execute(
                    delete(merged_prs).where(
                        merged_prs.c.repo == repo, merged_prs.c.number.in_(chosen)
                    )
                )

    def seen(
        self, repo: str, installation_id: int | None, now: int, sha: str | None = None
    ) -> None:
        """Remember a repository the service works for (the janitor visits each), and the
        last commit its project was loaded at."""
        self.seen_later(repo, installation_id, now, sha)
        self.write_deferred()

    def seen_later(
        self, repo: str, installation_id: int | None, now: int, sha: str | None = None
    ) -> None:
        """:meth:`seen`, written with this thread's next write, as
        :meth:`record_check_run_later`'s (a PR build pays no transaction for it)."""
        row = {
            "repo": repo,
            "installation_id": installation_id,
            "seen_ts": now,
            "last_sha": sha,
            "first_seen_ts": now,
        }

        def record(conn: Connection) -> None:
            # One upsert, as every job of every PR of the repository records it, at once in
            # several workers; what a call does not know (None) is kept, and the first
            # record's time is kept for good.
            _upsert(
                conn,
                repos,
                row,
                ("repo",),
                keep_when_null=("installation_id", "last_sha"),
                keep=("first_seen_ts",),
            )

        self._deferred_calls().append(record)

    def bind_repository(self, repo: str, repo_id: int, now: int) -> Binding:
        """Bind ``repo`` (``forge:owner/name``) to the forge's id ``repo_id`` of the
        repository the first time a delivery says it (kept for good, case-folded,
        :data:`repositories`), unless another name is bound to that id (then nothing is
        written: :attr:`Binding.rename`, which the caller confirms with the forge before
        :meth:`add_name`). What the name is bound to (:class:`Binding`): another id than
        ``repo_id`` is a successor under the name, which a caller refuses.
        docs/architecture.md says how an operator rebinds a name."""
        r = repositories.c
        name = repo.casefold()
        forge = name.partition(":")[0]
        with self._writing("bind a repository's name to its id") as conn:
            found = conn.execute(select(r.repo_id, r.canonical).where(r.name == name)).first()
            if found is not None and int(found.repo_id) == repo_id:
                others = conn.execute(
                    select(r.name)
                    .where(r.forge == forge, r.repo_id == repo_id, r.name != name)
                    .limit(1)
                ).first()
                if others is not None:
                    return Binding(str(found.canonical), repo_id, others=True)
                self._touch(conn, repo, now)
            if found is not None:
                return Binding(str(found.canonical), int(found.repo_id))
            first = conn.execute(
                select(r.canonical)
                .where(r.forge == forge, r.repo_id == repo_id)
                .order_by(r.first_seen_ts, r.name)
                .limit(1)
            ).scalar_one_or_none()
            if first is not None:
                return Binding(str(first), repo_id, rename=True)
            # Its first name: a namespace of its own, unless a renamed repository (another
            # id) keeps the namespace of this name (an operator rebound the name to a
            # successor: docs/architecture.md); then one keyed by the id as well.
            kept = conn.execute(
                select(r.canonical).where(
                    r.forge == forge, r.repo_id != repo_id, func.lower(r.canonical) == name.lower()
                )
            ).first()
            history = None if kept is not None else self._history(conn, name)
            if history is not None:
                return Binding(history[0], repo_id, since=history[1])
            self._name(conn, repo, repo_id, repo if kept is None else f"{repo}~{repo_id}", now)
            bound = conn.execute(select(r.repo_id, r.canonical).where(r.name == name)).one()
        return Binding(str(bound.canonical), int(bound.repo_id))

    def history(self, repo: str) -> tuple[str, int] | None:
        """(the key its records are kept under, when the first was made) of the name
        ``repo`` (any case) when it is bound to no id and the service has records of it
        (:attr:`Binding.since`); else None."""
        with self._reading("read a repository's first record") as conn:
            return self._history(conn, repo.casefold())

    @staticmethod
    def _history(conn: Connection, name: str) -> tuple[str, int] | None:
        r = repositories.c
        if conn.execute(select(r.repo_id).where(r.name == name)).first() is not None:
            return None
        found = conn.execute(
            select(repos.c.repo, func.coalesce(repos.c.first_seen_ts, repos.c.seen_ts))
            .where(func.lower(repos.c.repo) == name.lower())
            .order_by(repos.c.repo)
        ).all()
        rows = [row for row in found if str(row[0]).casefold() == name]
        if not rows:
            return None
        first = min(rows, key=lambda row: int(row[1]))
        return str(first[0]), int(first[1])

    def claim_name(self, repo: str, repo_id: int, canonical: str, now: int) -> Binding | None:
        """Bind ``repo``, a name with records (:meth:`history`), to ``repo_id`` with the
        namespace ``canonical`` (the records' key: the forge says the repository is older
        than they are; else one of its own), unless a delivery bound it meanwhile; what it
        is bound to. None, writing nothing, when another name is bound to ``repo_id`` (a
        repository renamed into this name: its next delivery is a rename)."""
        r = repositories.c
        forge = repo.casefold().partition(":")[0]
        with self._writing("bind a repository's name to its id") as conn:
            other = conn.execute(
                select(r.name).where(
                    r.forge == forge, r.repo_id == repo_id, r.name != repo.casefold()
                )
            ).first()
            if other is not None:
                return None
            self._name(conn, repo, repo_id, canonical, now)
            bound = conn.execute(select(r.repo_id, r.canonical).where(r.name == repo.casefold()))
            row = bound.one()
        return Binding(str(row.canonical), int(row.repo_id))

    def take_name(self, repo: str, repo_id: int, held_by: int, now: int) -> Binding | None:
        """Bind ``repo``, a name bound to ``held_by``, to ``repo_id`` instead: the forge
        says ``repo_id``'s repository has the name now (so ``held_by``'s has it no more:
        renamed, transferred or deleted). ``repo_id``'s namespace is its first name's
        when a name is bound to it (a repository renamed into this one), else one of its
        own, ``<repo>~<repo_id>``: it inherits nothing of ``held_by``'s. ``held_by`` keeps
        its namespace (its row goes under ``<name>~<held_by>``, a name no delivery carries:
        forges allow no ``~`` in a name), so its next delivery under a new name is a
        rename. None, writing nothing, when the name is bound to another id than
        ``held_by`` by now (the caller admits the delivery again)."""
        r = repositories.c
        name = repo.casefold()
        forge = name.partition(":")[0]
        with self._writing("bind a repository's name to its new holder") as conn:
            found = conn.execute(select(r.repo_id).where(r.name == name)).first()
            if found is None or int(found.repo_id) != held_by:
                return None
            left = f"{name}~{held_by}"
            conn.execute(repositories.delete().where(r.name == left))
            conn.execute(repositories.update().where(r.name == name).values(name=left))
            first = conn.execute(
                select(r.canonical)
                .where(r.forge == forge, r.repo_id == repo_id)
                .order_by(r.first_seen_ts, r.name)
                .limit(1)
            ).scalar_one_or_none()
            canonical = f"{repo}~{repo_id}" if first is None else str(first)
            self._name(conn, repo, repo_id, canonical, now)
        return Binding(canonical, repo_id, rename=first is not None)

    def touch_name(self, repo: str, now: int) -> None:
        """Record a delivery under ``repo``, a name the forge confirmed its repository has
        now (:attr:`Binding.others`): its last delivery and spelling."""
        with self._writing("record a repository name's delivery") as conn:
            self._touch(conn, repo, now)

    @staticmethod
    def _touch(conn: Connection, repo: str, now: int) -> None:
        r = repositories.c
        conn.execute(
            repositories.update()
            .where(r.name == repo.casefold(), r.last_seen_ts < now)
            .values(last_seen_ts=now, spelled=repo)
        )

    def add_name(self, repo: str, repo_id: int, canonical: str, now: int) -> None:
        """Bind ``repo``, a new name of the repository whose first name is ``canonical``
        (its id ``repo_id``: a rename the forge confirmed), for good."""
        with self._writing("bind a repository's new name") as conn:
            self._name(conn, repo, repo_id, canonical, now)

    @staticmethod
    def _name(conn: Connection, repo: str, repo_id: int, canonical: str, now: int) -> None:
        row = {
            "name": repo.casefold(),
            "forge": repo.casefold().partition(":")[0],
            "repo_id": repo_id,
            "canonical": canonical,
            "spelled": repo,
            "first_seen_ts": now,
            "last_seen_ts": now,
        }
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(dialect.insert(repositories).values(row).on_conflict_do_nothing())

    def name_binding(self, repo: str) -> tuple[str, int] | None:
        """(the key of its repository's records and namespace, the forge id it is bound
        to) of the name ``repo`` (any case); None when no delivery bound it. Nothing is
        written: the web UI, the CLI and deliveries that say no id read it."""
        r = repositories.c
        query = select(r.repo_id, r.canonical).where(r.name == repo.casefold())
        with self._reading("read a repository's name") as conn:
            found = conn.execute(query).first()
        return None if found is None else (str(found.canonical), int(found.repo_id))

    def canonical(self, repo: str) -> str:
        """The key of the records and namespace of the repository named ``repo`` now: its
        first name when ``repo`` is a later one (a rename), else ``repo``."""
        found = self.name_binding(repo)
        return repo if found is None else found[0]

    def queue_keys(
        self, named: Collection[tuple[str, int | None]]
    ) -> dict[tuple[str, int | None], str]:
        """The key the queue runs each (``forge:owner/name``, the forge's id it says, None:
        none) pair's jobs under, one at a time per key (:mod:`sluice.bot.queue.store`): its
        repository's namespace key, so jobs under a renamed repository's old and new names
        never run at once. A name bound to the id said (or a job saying none): its
        repository's first name (:meth:`canonical`); saying an id bound to another name (a
        rename the forge has yet to confirm): that id's first name; bound to another id (a
        new holder of the name) and the id to none: ``name~id``, a key of its own no page
        of the bound repository lists; neither bound: the name. One read, nothing written (:class:`QueueKeys` keeps what
        it read of bound names a while)."""
        return _queue_keys(named, *self._bindings_of(named))

    def _bindings_of(
        self, named: Collection[tuple[str, int | None]]
    ) -> tuple[dict[str, tuple[str, int]], dict[tuple[str, int], str]]:
        """(case-folded name -> (its first name, its id) of the names of ``named`` that are
        bound; (forge, id) -> the first name bound to it, of their ids that are)."""
        r = repositories.c
        folded = {name.casefold() for name, _ in named}
        ids = {rid for _, rid in named if rid is not None}
        if not folded:
            return {}, {}
        query = (
            select(r.name, r.forge, r.repo_id, r.canonical)
            .where(or_(r.name.in_(folded), r.repo_id.in_(ids)))
            .order_by(r.first_seen_ts, r.name)
        )
        with self._reading("read the repositories' namespace keys") as conn:
            rows = conn.execute(query).all()
        by_name = {
            str(row.name): (str(row.canonical), int(row.repo_id))
            for row in rows
            if str(row.name) in folded
        }
        by_id: dict[tuple[str, int], str] = {}
        for row in rows:
            by_id.setdefault((str(row.forge), int(row.repo_id)), str(row.canonical))
        return by_name, by_id

    def names(self, key: str) -> list[str]:
        """Every name of the repository whose records are keyed ``key`` (its first name),
        as the forge last spelled each, oldest first; empty when none is bound."""
        r = repositories.c
        query = select(r.canonical, r.spelled).order_by(r.first_seen_ts, r.name)
        with self._reading("read a repository's names") as conn:
            rows = conn.execute(query.where(func.lower(r.canonical) == key.lower())).all()
        return [str(row.spelled) for row in rows if str(row.canonical).casefold() == key.casefold()]

    def current_names(self) -> dict[str, str]:
        """The key of each bound repository's records (case-folded) -> its name now, as
        the forge spells it: the name of its latest delivery (a rename's new one)."""
        r = repositories.c
        query = select(r.canonical, r.spelled, r.last_seen_ts).order_by(r.last_seen_ts, r.name)
        latest: dict[str, str] = {}
        with self._reading("read the repositories' names") as conn:
            for row in conn.execute(query):
                latest[str(row.canonical).casefold()] = str(row.spelled)
        return latest

    def last_sha(self, repo: str) -> str | None:
        """The last commit a job loaded ``repo``'s project at; None if none yet."""
        query = select(repos.c.last_sha).where(repos.c.repo == repo)
        with self._reading("read a repository") as conn:
            return conn.execute(query).scalar_one_or_none()

    def repositories(self) -> list[tuple[str, int | None]]:
        """Every repository seen: (``forge:owner/name``, installation id), a renamed one
        under its latest name (the forge's), once."""
        with self._reading("list repositories") as conn:
            rows = list(
                conn.execute(select(repos.c.repo, repos.c.installation_id).order_by(repos.c.repo))
            )
        now = self.current_names()
        listed: dict[str, tuple[str, int | None]] = {}
        for row in rows:
            name = now.get(str(row.repo).casefold(), str(row.repo))
            listed.setdefault(name.casefold(), (name, row.installation_id))
        return sorted(listed.values())

    # -- the check runs Sluice made --------------------------------------------------------

    def check_run(self, repo: str, sha: str, name: str) -> int | None:
        """The id of the check run ``name`` Sluice made on ``sha``; None when it made none
        (or before these were kept)."""
        self.write_deferred()
        query = select(check_runs.c.run_id).where(
            check_runs.c.repo == repo,
            check_runs.c.sha == sha.lower(),
            check_runs.c.name == name,
        )
        with self._reading("read a check run's id") as conn:
            found = conn.execute(query).scalar_one_or_none()
        return None if found is None else int(found)

    def check_runs_on(self, repo: str, sha: str) -> dict[str, int]:
        """The ids of the check runs Sluice made on ``sha``, by check name."""
        self.write_deferred()  # this thread's own, first
        query = select(check_runs.c.name, check_runs.c.run_id).where(
            check_runs.c.repo == repo, check_runs.c.sha == sha.lower()
        )
        with self._reading("read the check runs of a commit") as conn:
            return {str(row.name): int(row.run_id) for row in conn.execute(query)}

    def newest_check_runs(self, repo: str, limit: int = 3) -> list[tuple[str, int]]:
        """(sha, run id) of the newest ``limit`` check runs Sluice made for the repository
        whose records are keyed ``repo``, newest first."""
        c = check_runs.c
        query = select(c.sha, c.run_id).where(c.repo == repo)
        query = query.order_by(c.made_ts.desc(), c.run_id.desc()).limit(limit)
        with self._reading("read a repository's newest check runs") as conn:
            return [(str(row.sha), int(row.run_id)) for row in conn.execute(query)]

    def record_check_run(self, repo: str, sha: str, name: str, run_id: int, now: int) -> None:
        """Remember that Sluice's check run ``name`` on ``sha`` is run ``run_id`` (a run
        made again in its place replaces it)."""
        self.record_check_run_later(repo, sha, name, run_id, now)
        self.write_deferred()

    def record_check_run_later(self, repo: str, sha: str, name: str, run_id: int, now: int) -> None:
        """:meth:`record_check_run`, written with this thread's next write of the ledger (or
        by :meth:`write_deferred`, which a job calls as it ends:
        :meth:`sluice.bot.flow.job.Job.close`): a PR build makes its runs beside the
        comment's publications and pays no transaction of its own for them. A click on a
        run is handled by a later job of the same queue key, so it finds the id written. A
        process killed between making a run and its next write loses the id: the job's
        retry makes the run again, and a click on the lost one is refused, saying so
        (:func:`sluice.bot.flow.own_checks.refusal`)."""
        row = {"repo": repo, "sha": sha.lower(), "name": name, "run_id": run_id, "made_ts": now}
        self._deferred().append(row)

    def pushes_asked(self, repo: str, branch: str, head: str) -> bool:
        """Whether the forge's own records of pushes to ``branch`` were asked at ``head``
        (:meth:`record_pushes_asked_later`)."""
        t = push_records_asked.c
        query = select(t.asked_ts).where(t.repo == repo, t.branch == branch, t.head == head.lower())
        with self._reading("read whether push records were asked") as conn:
            return conn.execute(query).first() is not None

    def record_pushes_asked_later(
        self, repo: str, branch: str, head: str, pushes: Iterable[Push], now: int
    ) -> None:
        """Record whom the forge's own records of pushes name as pushing each of
        ``pushes`` to ``branch`` (as :meth:`record_branch_push` does), and that they were
        asked at ``head`` (:data:`push_records_asked`: asked once per head), written with
        this thread's next write, as :meth:`record_check_run_later`'s."""
        rows = self._deferred_inserts()
        for push in pushes:
            uid = push.user_id
            row: dict[str, Any] = {"repo": repo, "branch": branch, "sha": push.sha.lower()}
            row |= {"user": push.user}
            row |= {"account": _account(push.user, uid), "pushed_ts": now, "user_id": uid}
            rows.append((branch_pushers, row))
        asked = {"repo": repo, "branch": branch, "head": head.lower(), "asked_ts": now}
        rows.append((push_records_asked, asked))

    def write_deferred(self) -> None:
        """Write what :meth:`record_check_run` kept for this thread's next write, now."""
        if self._deferred() or self._deferred_inserts() or self._deferred_calls():
            with self._writing("record what was kept for the next write"):
                pass

    def _deferred_calls(self) -> list[Callable[[Connection], None]]:
        calls: list[Callable[[Connection], None]] | None = getattr(self._shared, "calls", None)
        if calls is None:
            calls = self._shared.calls = []
        return calls

    def _deferred_inserts(self) -> list[tuple[Table, dict[str, Any]]]:
        rows: list[tuple[Table, dict[str, Any]]] | None = getattr(self._shared, "inserts", None)
        if rows is None:
            rows = self._shared.inserts = []
        return rows

    def _deferred(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] | None = getattr(self._shared, "deferred", None)
        if rows is None:
            rows = self._shared.deferred = []
        return rows

    @contextmanager
    def _writing_deferred(self, conn: Connection) -> Iterator[None]:
        """Inside a write transaction on ``conn``: the check runs' ids kept for it written
        first; kept again when the transaction fails."""
        rows, inserts, calls = self._deferred(), self._deferred_inserts(), self._deferred_calls()
        taken, inserted, called = list(rows), list(inserts), list(calls)
        rows.clear()
        inserts.clear()
        calls.clear()
        try:
            for row in taken:
                _upsert(conn, check_runs, row, ("repo", "sha", "name"))
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            for table, values in inserted:
                conn.execute(dialect.insert(table).values(values).on_conflict_do_nothing())
            for call in called:
                call(conn)
            yield
        except BaseException:
            rows[:0] = taken
            inserts[:0] = inserted
            calls[:0] = called
            raise

    @contextmanager
    def together(self, action: str) -> Iterator[None]:
        with super().together(action), self._writing(action):
            yield

    @contextmanager
    def _writing(self, action: str) -> Iterator[Connection]:
        with super()._writing(action) as conn, self._writing_deferred(conn):
            yield conn

    def own_check_run(self, repo: str, run_id: int) -> tuple[str, str] | None:
        """(head sha, name) of check run ``run_id`` when Sluice made it in ``repo`` and it
        is still that check's run; None for any other run."""
        self.write_deferred()
        query = select(check_runs.c.sha, check_runs.c.name).where(
            check_runs.c.repo == repo, check_runs.c.run_id == run_id
        )
        with self._reading("read a check run") as conn:
            row = conn.execute(query).first()
        return None if row is None else (str(row.sha), str(row.name))

    # -- events handled, and the heads PR events reported ---------------------------------

    def handled(self, repo: str, key: str) -> tuple[str, int] | None:
        """(outcome, epoch ms) of the event with content key ``key`` handled in ``repo``;
        None when no such event was handled."""
        query = select(handled_events.c.outcome, handled_events.c.handled_ts).where(
            handled_events.c.repo == repo, handled_events.c.key == key
        )
        with self._reading("read a handled event") as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else (row.outcome, int(row.handled_ts))

    def record_handled(self, repo: str, key: str, kind: str, outcome: str, now: int) -> None:
        """Record that the event with content key ``key`` was handled (``outcome``: done,
        or failed for good); the first record of a key is kept."""
        row = {"repo": repo, "key": key, "kind": kind, "outcome": outcome, "handled_ts": now}
        with self._writing("record a handled event") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            conn.execute(dialect.insert(handled_events).values(row).on_conflict_do_nothing())

    def pr_head(self, repo: str, number: int) -> tuple[str, int | None] | None:
        """(sha, the forge's time of the event that reported it) of the PR's recorded head;
        None when none of its events was recorded."""
        query = select(pr_heads.c.sha, pr_heads.c.at_ts).where(
            pr_heads.c.repo == repo, pr_heads.c.number == number
        )
        with self._reading("read the head of a pull request") as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else (row.sha, None if row.at_ts is None else int(row.at_ts))

    def record_pr_head(self, repo: str, number: int, sha: str, at: int | None, now: int) -> bool:
        """Record ``sha`` as the PR's head, reported by an event of forge time ``at``, unless
        the head recorded came with a later time (both known).

        Returns:
            False, changing nothing, when the recorded head is newer than this event's.
        """
        row = {"repo": repo, "number": number, "sha": sha.lower(), "at_ts": at, "recorded_ts": now}
        with self._writing("record the head of a pull request") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(pr_heads).values(row)
            new = statement.excluded
            # A row comes back when it was inserted or updated, none when the WHERE kept it.
            moved = conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[pr_heads.c.repo, pr_heads.c.number],
                    set_={"sha": new.sha, "at_ts": new.at_ts, "recorded_ts": new.recorded_ts},
                    where=or_(
                        pr_heads.c.at_ts.is_(None),
                        new.at_ts.is_(None),
                        new.at_ts >= pr_heads.c.at_ts,
                    ),
                ).returning(pr_heads.c.sha)
            ).first()
        return moved is not None

    def count(self, table: str) -> int:
        """Rows in one of the ledger's tables (for tests and metrics)."""
        with self._reading("count rows") as conn:
            return int(
                conn.execute(select(func.count()).select_from(metadata.tables[table])).scalar_one()
            )

    def job_names(self, key: str) -> list[str]:
        """What the jobs of the namespace keyed ``key`` are listed by (the web UI's jobs
        page): ``key``, then each name bound to it now (as the forge last spelled it) that
        no other namespace ever had: none's key (the first name of a repository that left
        it, or the key of records no delivery bound), none's name before (a name taken,
        :meth:`take_name`: its ``<name>~<id>`` row is the old holder's). Such a name keys
        the other's jobs, or jobs queued under it before this one held it. Read only."""
        r = repositories.c
        same = func.lower(r.canonical) == key.lower()
        with self._reading("read the names a repository's jobs are listed by") as conn:
            rows = conn.execute(
                select(r.name, r.canonical, r.spelled).where(same).order_by(r.first_seen_ts, r.name)
            ).all()
            bound = [
                str(row.spelled)
                for row in rows
                if str(row.canonical).casefold() == key.casefold()
                and str(row.name) == str(row.spelled).casefold()  # not a name left (take_name)
            ]
            lowered = {name.lower() for name in bound}
            if not lowered:
                return [key]
            keyed = select(r.canonical).where(func.lower(r.canonical).in_(lowered))
            recorded = select(repos.c.repo).where(func.lower(repos.c.repo).in_(lowered))
            held = select(r.canonical, r.name).where(  # rows of names left: <name>~<id>
                or_(*(func.substr(r.name, 1, len(name) + 1) == f"{name}~" for name in lowered))
            )
            found = [(str(k), str(k)) for k in conn.execute(keyed).scalars()]
            found += [(str(k), str(k)) for k in conn.execute(recorded).scalars()]
            found += [(str(k), str(n).rpartition("~")[0]) for k, n in conn.execute(held)]
        # (another namespace's key, a name it has or had)
        others = {name.casefold() for owner, name in found if owner.casefold() != key.casefold()}
        return list(dict.fromkeys([key, *(n for n in bound if n.casefold() not in others)]))


class QueueKeys:
    """:meth:`Ledger.queue_keys` for the service's queue, without a read for a batch whose
    names were all found bound, in the last ``seconds``, to the very id each pair says. A
    name changes hands (:meth:`Ledger.take_name`) only for another id: a pair saying
    another id than the one kept, or none (a scheduled job, which cannot tell), is read
    from the ledger, so one namespace never runs under two keys. A name bound to nothing
    is read every time: its first delivery may bind it; an operator's rebinding reaches
    the keys within ``seconds``."""

    def __init__(
        self, ledger: Ledger, seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ledger, self.seconds, self.clock = ledger, seconds, clock
        self._bound: dict[str, tuple[tuple[str, int], float]] = {}  # name -> (binding, until)
        self._lock = threading.Lock()

    def __call__(
        self, named: Collection[tuple[str, int | None]]
    ) -> dict[tuple[str, int | None], str]:
        now = self.clock()
        kept: dict[str, tuple[str, int]] = {}
        with self._lock:
            for name, _ in named:
                found = self._bound.get(name.casefold())
                if found is not None and found[1] > now:
                    kept[name.casefold()] = found[0]
        if all(name.casefold() in kept and kept[name.casefold()][1] == rid for name, rid in named):
            return _queue_keys(named, kept, {})
        by_name, by_id = self.ledger._bindings_of(named)
        with self._lock:
            for name, bound in by_name.items():
                self._bound[name] = (bound, now + self.seconds)
        return _queue_keys(named, by_name, by_id)


def _queue_keys(
    named: Collection[tuple[str, int | None]],
    by_name: Mapping[str, tuple[str, int]],
    by_id: Mapping[tuple[str, int], str],
) -> dict[tuple[str, int | None], str]:
    """:meth:`Ledger.queue_keys` of ``named`` from what is bound (:meth:`Ledger._bindings_of`)."""
    keys: dict[tuple[str, int | None], str] = {}
    for name, rid in named:
        bound = by_name.get(name.casefold())
        if bound is not None and rid in (None, bound[1]):
            keys[(name, rid)] = bound[0]
        elif rid is not None:
            # The id's first name when a name is bound to it (renamed, into this name or
            # into one bound to another id); else the name, or one of its own when the name
            # is another id's (a new holder, before the forge confirms it takes it).
            own = name if bound is None else f"{name}~{rid}"
            keys[(name, rid)] = by_id.get((name.casefold().partition(":")[0], rid), own)
        else:
            keys[(name, rid)] = name
    return keys


def _upsert(
    conn: Connection,
    table: Table,
    row: dict[str, Any],
    keys: tuple[str, ...],
    keep_when_null: tuple[str, ...] = (),
    keep: tuple[str, ...] = (),
) -> None:
    """Insert ``row``, or update the row with the same ``keys``, in one statement (no race
    between two writers of one key); columns in ``keep_when_null`` keep their value when
    ``row`` has None for them, those in ``keep`` whenever they have one."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table).values(row)
    changes = {
        name: func.coalesce(statement.excluded[name], table.c[name])
        if name in keep_when_null
        else func.coalesce(table.c[name], statement.excluded[name])
        if name in keep
        else statement.excluded[name]
        for name in row
        if name not in keys
    }
    conn.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=changes))


def _people(data: Any) -> dict[str, int | None]:
    """:attr:`PinnedSettings.people` as stored (anything else in it is dropped)."""
    if not isinstance(data, dict):
        return {}
    return {
        str(login): (value if isinstance(value, int) and not isinstance(value, bool) else None)
        for login, value in data.items()
    }
