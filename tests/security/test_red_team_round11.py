"""Red team, round 11: Sluice's comment by its id (ledger migration 18).

As the code stood with commit 193190d: ``StickyComment.publish`` passes the id of the
comment its newest answered post wrote (``Ledger.comment_writes``: ``comment_id``, learnt
only from ``Ledger.comment_written_later`` of a post that returned) to
``Forge.upsert_comment``, which edits that comment while it is still the bot's own on this
PR, whatever it reads (no marker asked), else the bot's oldest comment holding the marker,
else creates one; ``Forge.own_comment`` reads it likewise. ``comment_guard.check`` reads by
the id when the marker finds another comment or none (and falls back to the marker when
the id'd comment is gone); ``comment_edits.on_edit`` handles an edit hook of the id'd
comment though the marker was dropped.

The attacker is the pull request's author with write access (edits and deletes anyone's
comment; an edit's hook may be lost). carol, the required approver, approves what Sluice's
comment shows her. Driven as round 9: the ledger on SQLite, the in-memory forge
(``tests/helpers/gate_world.py``), real webhook bodies. A second project of the same
repository (a monorepo) is a second service: its own ledger, its own marker, the same
forge account (one GitHub App, or the Action's ``github-actions[bot]``).

Findings (xfail):

1. Medium. A monorepo's two projects come to share one comment, for good: the id is not
   bound to a project. alice deletes finance's comment and adds finance's marker line to
   the root project's comment; finance's next publication reads back by its dead id,
   falls back to its marker (``_own``: the oldest bot comment holding it), finds the
   root project's comment and overwrites it, and learns its id. From then on both
   ledgers hold that id: ``upsert_comment``/``own_comment`` by id take the comment
   whatever marker it holds, so every routine publication of either project writes its
   text over the other's, and every read back of the other keeps it as an edit (a
   publication of no plan): carol's approvals in both projects are refused whenever the
   other project has written since, and Sluice edits the other project's comment
   (attack c, d). Before the change this was one put-back (the root project, no longer
   finding its marker, made a new comment). Path: ``memory._own`` /
   ``GitHubForge._by_id`` / ``GitLabForge._note_by_id`` with ``comment_guard.check``'s
   and ``StickyComment.publish``'s id. Fix: a comment holding another project's marker
   (``<!-- sluice:pr-comment:...``) is never this project's, by id nor by marker (its
   marker must be its first line; by id, pass over one whose first line is another
   marker), and the id is learnt only from a comment this project created or found
   holding its own marker alone.
2. Low. A ledger upgraded from migration 17 keeps every open PR's row with no id, so
   round 9's finding 7 is open for them until their next answered post: alice drops the
   marker line and rewrites the plan, the read back finds nothing by marker and has no
   id (``comment_guard.check``: ``writes.comment_id is None``), keeps "deleted", and the
   put-back creates a new comment: alice's fake plan stays, authored by Sluice's
   account, above the real one (attack b). Fix: learn the id from a read back too:
   when the guard (or ``approval.refresh``) finds the comment by marker reading what
   Sluice wrote and the row has no id, record ``found.comment_id``
   (``Ledger.comment_seen``-like), so the id is known before anyone can drop the marker.
3. Low. The id is learnt only from an answered post: when Sluice's first post on a PR
   creates the comment but its answer is lost (a timeout, a 502 after the write),
   nothing is guarded (no text answered: ``changed`` says nothing) and no id is kept;
   alice drops the marker and writes a fake plan, and the next publication creates a
   second comment: the fake stays under Sluice's name (attack b). Fix: as 2 (learn the
   id of the comment found by marker reading a text under way), and have the guard
   treat a comment found by nothing while a failed post's text is under way as
   "deleted" (it puts back and keeps a publication of no plan).

4. Medium (timing: needs two posts racing). Two jobs posting after Sluice's comment was
   deleted (alice deletes it, then comments ``/sluice plan`` while a promotion's word is
   being written on the PR) both find none and both create; the ledger keeps the id of
   the newest answer, and every read back (``comment_guard.check``: found by marker,
   another id, so read by the id) and put-back goes by it. The other comment of
   Sluice's, holding the marker, the first of Sluice's on the PR, is never read back:
   rewritten with no hook it shows alice's plan under Sluice's name and carol's approval
   of it counts for the real plan (attack a, b). The race was there before; the id makes
   the unguarded copy the older one. Fix: at each publication, a bot comment holding
   this project's marker other than the id'd one is a stale duplicate: delete it (or
   rewrite it to a stub naming the live one), and keep it as an edit when it reads no
   text of Sluice's; or serialise the first post of a PR's comment (a row lock taken
   before the forge's lookup).

Finding 1 is shown at the wire as well (GitHub's ``_by_id``, GitLab's ``_note_by_id``).

Closed since (their tests pass): 1 as driven here (a comment is found by a project's
marker only when it opens with it, ``forge.base.opens_with``; the wire tests stay
xfail: an id is taken whatever its comment opens with, so that a rewrite never leaves its
text under Sluice's name, and a writer who rewrites a comment's first line to another
project's marker can still make two projects hold one id, a denial of service), and 4
(each read back takes every comment of Sluice's account opening with the marker: one
other than Sluice's comment is a copy, read back as it is and rewritten to the stub,
``comment_guard.sort``, ``StickyComment.rewrite_copies``). Open: 2 and 3.

Defended (their tests pass): the id of another PR's comment in this PR's row edits
nothing there (each forge reads the id on this PR only); an edit hook of Sluice's comment
whose marker was dropped is kept (``on_edit`` by the id) and put back in place, no fake
left; a comment deleted and re-created by Sluice's put-back is the one the ledger knows
from then on (an approval after the plan is shown again counts); a bot reply echoing the
marker (a usage error quoting ``/sluice plan <!-- sluice:pr-comment -->``) is not taken
for Sluice's comment while the id'd one stands, and an edit of it leaves carol's approval
alone; a marker-dropping rewrite on another project's comment is not this project's (its
id is not this project's); on GitLab, an id kept for a system note of the token's user
holding the marker, or for the bot's note on another merge request, is passed over
(``_is_own``, the note read under this merge request).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from sqlalchemy import create_engine, text

from sluice.bot.flow.deps import Deps, make_deps
from sluice.bot.flow.job import Job
from sluice.bot.forge.base import ForgeError, Posted
from sluice.bot.forge.github import GitHubForge, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.forge.memory import Comment
from sluice.bot.present import comment as present
from sluice.bot.present import replies
from sluice.bot.present.comment import copy_stub
from tests.helpers import gate_world as gw
from tests.helpers.cases import realcase
from tests.helpers.gate_world import (
    GATED,
    KEY,
    MINUTE,
    OTHER,
    OWNER,
    A,
    Bot,
    given,
    published,
    review_hook,
)
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_wire import FakeGitLab

REAL = "Plan: `s.other` changed (backfills 3 years)"
"""What the head's plan really does, as Sluice's comment shows it."""

FORGED = "Plan: `s.change` changed"
"""What alice rewrites it to read."""

FINANCE = "warehouse/finance"
"""A second project of the same repository (a monorepo), served by its own service."""


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


@pytest.fixture
def finance(bot: Bot) -> Iterator[Deps]:
    """The finance project's service: its own ledger, the same forge account."""
    deps = make_deps(project_python="on", forge_for=lambda _event: bot.forge,
                     workdir=bot.root / "finance-work", project_path=FINANCE,
                     state_url=f"sqlite:///{bot.root / 'finance.db'}",
                     clock=bot.clock)  # fmt: skip
    yield deps
    deps.close()


def _sluices(bot: Bot, number: int = 7) -> Comment:
    marker = bot.deps.sticky.marker
    return next(
        c for c in bot.forge.comments[number] if c.author == bot.forge.bot_user and marker in c.body
    )


def _by_id(bot: Bot, comment_id: int, number: int = 7) -> Comment:
    return next(c for c in bot.forge.comments[number] if c.id == comment_id)


def _publish(deps: Deps, bot: Bot, **what: Any) -> int | None:
    job = Job.start(deps, bot.forge)
    try:
        return job.publish(7, **what)
    finally:
        job.close()


def _show(bot: Bot, text: str = REAL) -> Comment:
    """A's plan ``text`` published on PR 7 and recorded, as ``pr_build`` does."""
    at = _publish(bot.deps, bot, body=f"{bot.deps.sticky.marker}\n### Sluice\n{text}\n")
    published(bot, A, OTHER, at if at is not None else bot.clock.now)
    return _sluices(bot)


def _rewrite(bot: Bot, mine: Comment, body: str) -> None:
    """alice edits a comment; the forge stamps it now; no hook comes."""
    mine.body, mine.updated = body, bot.clock.now


def _approve(bot: Bot, user: str, review_id: int) -> None:
    given(bot, user, "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook(user, "approved", A, review_id, bot.clock.now))


def _edited_rows(bot: Bot) -> list[tuple[int, str]]:
    return [r for r in bot.ledger.plans_shown(KEY, 7) if r[1] == ":edited"]


def _bots_with(bot: Bot, words: str) -> list[Comment]:
    return [c for c in bot.forge.comments[7] if c.author == bot.forge.bot_user and words in c.body]


def _edit_hook(comment_id: int, body: str, *, author: str, sender: str) -> dict[str, Any]:
    """GitHub's ``issue_comment`` ``edited`` webhook of PR 7."""
    hook = realcase("github/issue_comment/edited.payload.json", OWNER, action="edited", **{
        "issue.number": 7, "comment.id": comment_id, "comment.body": body,
        "comment.user.login": author, "sender.login": sender,
    })  # fmt: skip
    hook["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{OWNER}/pulls/7"}
    return hook


# == 1. a monorepo's two projects share one comment ====================================


def test_a_monorepos_two_projects_never_come_to_share_one_comment(bot: Bot, finance: Deps) -> None:
    """Closed: a comment is found by a project's marker only when it opens with it
    (``forge.base.opens_with``): finance's marker added further down the root project's
    comment does not make it finance's, which posts its own again."""
    fin = finance.sticky.marker
    mine = _show(bot)
    _publish(finance, bot, body=f"{fin}\n### Sluice\nfinance's plan\n")
    theirs = next(c for c in bot.forge.comments[7] if fin in c.body)
    assert theirs.id != mine.id
    bot.clock.now += MINUTE
    # alice (write access) deletes finance's comment and adds its marker to the root's.
    bot.forge.comments[7].remove(theirs)
    _rewrite(bot, mine, f"{mine.body}\n{fin}\n")
    bot.clock.now += MINUTE
    _publish(finance, bot, section=("note", "finance's section"))  # any routine write
    bot.clock.now += MINUTE
    gw.refresh(bot)  # the root project's gate: its comment now reads finance's text
    _show(bot)  # /sluice plan: A's plan shown again
    bot.clock.now += MINUTE
    _approve(bot, "carol", 101)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    bot.clock.now += MINUTE
    _publish(finance, bot, section=("note", "finance's section, again"))  # routine
    bot.clock.now += MINUTE
    rows = len(_edited_rows(bot))
    gw.refresh(bot)
    assert len(_edited_rows(bot)) == rows, "finance's routine write refused carol's approval"
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert _bots_with(bot, fin), "finance's comment is the root project's, written over"


# == 2. a row from before migration 18 ====================================================


@pytest.mark.xfail(
    strict=True,
    reason="finding 2: rows upgraded from migration 17 have no comment_id, so "
    "comment_guard.check cannot read a marker-dropped rewrite by id and the put-back "
    "creates a new comment; fix: learn the id from a read back by marker that finds "
    "Sluice's text",
)
def test_a_row_from_before_migration_18_leaves_no_fake_plan_under_sluices_name(
    bot: Bot,
) -> None:
    mine = _show(bot)
    engine = create_engine(bot.url)  # the row as migration 18 found it: no id
    with engine.begin() as conn:
        conn.execute(text("UPDATE sluice_pr_comments SET comment_id = NULL"))
    engine.dispose()
    assert bot.ledger.comment_writes(KEY, 7).comment_id is None
    bot.clock.now += MINUTE
    _rewrite(bot, mine, f"### Sluice\n{FORGED}\n")  # the marker line dropped, no hook
    bot.clock.now += MINUTE
    gw.refresh(bot)
    assert _edited_rows(bot)
    fakes = _bots_with(bot, FORGED)
    assert not fakes, f"a comment of Sluice's account still shows alice's plan: {fakes}"


# == 3. a first post whose answer was lost ================================================


@pytest.mark.xfail(
    strict=True,
    reason="finding 3: the id is learnt only from an answered post "
    "(Ledger.comment_written_later): a created comment whose answer was lost is not "
    "Sluice's by id, and dropped from its marker it keeps alice's text; fix: learn the "
    "id from the read back by marker of a text under way, and keep a comment found by "
    "nothing while a failed post's text is under way as deleted",
)
def test_a_first_post_whose_answer_was_lost_leaves_no_fake_plan(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    forge = bot.forge
    bot.forge.comments.pop(7, None)  # a PR with no comment of Sluice's yet
    bot.ledger.close()
    engine = create_engine(bot.url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM sluice_pr_comments"))
    engine.dispose()
    real = forge.upsert_comment

    def lost(number: int, marker: str, body: str, comment_id: int | None = None) -> Posted:
        real(number, marker, body, comment_id)  # written on the forge...
        raise ForgeError("github: 502 Bad Gateway")  # ...its answer lost

    monkeypatch.setattr(forge, "upsert_comment", lost)
    with pytest.raises(ForgeError):
        _publish(bot.deps, bot, body=f"{bot.deps.sticky.marker}\n### Sluice\n{REAL}\n")
    monkeypatch.undo()
    mine = _sluices(bot)
    bot.clock.now += MINUTE
    _rewrite(bot, mine, f"### Sluice\n{FORGED}\n")  # the marker dropped, no hook
    bot.clock.now += MINUTE
    _show(bot)  # the build's next publication
    fakes = _bots_with(bot, FORGED)
    assert not fakes, f"a comment of Sluice's account still shows alice's plan: {fakes}"


# == 4. two jobs racing: a stale duplicate of Sluice's comment ===========================


def test_two_racing_posts_leave_no_unguarded_comment_of_sluices(bot: Bot) -> None:
    """Closed: each read back takes every comment of Sluice's account opening with the
    marker; one other than Sluice's comment is a copy, read back as it is (kept as an
    edit unless it reads Sluice's text) and rewritten to the stub."""
    forge = bot.forge
    mine = _show(bot)
    bot.clock.now += MINUTE
    forge.comments[7].remove(mine)  # alice deletes Sluice's comment
    real_upsert, real_own = forge.upsert_comment, forge._own
    state = {"outer": True, "looking": False}

    def promotion() -> None:  # the prod key's job: its word on the PR, meanwhile
        _publish(bot.deps, bot, section=("promotion", "**Promotion:** queued"))

    def own(number: int, marker: str, comment_id: int | None) -> list[Comment]:
        found = real_own(number, marker, comment_id)
        if state["looking"] and state["outer"]:
            state["outer"] = False  # the outer post looked and found none; the other
            other = threading.Thread(target=promotion)  # job posts in between
            other.start()
            other.join()
        return found

    def upsert(number: int, marker: str, body: str, comment_id: int | None = None) -> Posted:
        state["looking"] = True
        try:
            return real_upsert(number, marker, body, comment_id)
        finally:
            state["looking"] = False

    forge._own = own  # type: ignore[method-assign]
    forge.upsert_comment = upsert  # type: ignore[method-assign]
    try:
        _show(bot)  # /sluice plan: A's plan shown again, racing the promotion's word
    finally:
        forge._own, forge.upsert_comment = real_own, real_upsert  # type: ignore[method-assign]
    ours = _bots_with(bot, bot.deps.sticky.marker)
    assert len(ours) == 2, "the race made two comments of Sluice's"
    known = bot.ledger.comment_writes(KEY, 7).comment_id
    assert known is not None
    stale = next(c for c in ours if c.id != known)
    rows = len(_edited_rows(bot))
    bot.clock.now += MINUTE
    _rewrite(bot, stale, f"{bot.deps.sticky.marker}\n### Sluice\n{FORGED}\n")  # no hook
    bot.clock.now += MINUTE
    _approve(bot, "carol", 106)  # carol approves what Sluice's comment shows her
    assert stale.id < known, "the unguarded one is the first of Sluice's on the PR"
    counted = bot.approval(A).conclusion == "success" and len(_edited_rows(bot)) == rows
    assert not (counted and _bots_with(bot, FORGED)), (
        "a comment of Sluice's account shows alice's plan and carol's approval counts"
    )


def test_a_copy_reading_sluices_text_is_stubbed_and_refuses_nothing(bot: Bot) -> None:
    """The race alone, no attacker: the copy reads Sluice's text. It is rewritten to the
    stub, nothing is kept as an edit, and carol's approval counts."""
    mine = _show(bot)
    copy = Comment(mine.id - 1, bot.forge.bot_user, mine.body, updated=bot.clock.now)
    bot.forge.comments[7].insert(0, copy)  # the other post of the race, older
    bot.clock.now += MINUTE
    _approve(bot, "carol", 107)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot) and copy.body == copy_stub(bot.deps.sticky.marker)
    assert _by_id(bot, mine.id).body.startswith(mine.body.rstrip())
    gw.refresh(bot)  # the stub read back again: nothing kept, nothing written
    assert not _edited_rows(bot) and bot.approval(A).conclusion == "success"


# == 1, at the wire: an id is taken whatever project's marker its comment holds ==========

ROOT_MARK, FIN_MARK = present.marker("."), present.marker(FINANCE)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(repo=OWNER)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


@pytest.fixture
def gitlab() -> Iterator[FakeGitLab]:
    fake = FakeGitLab()
    fake.add_mr(7, sha="a" * 40)
    fake.add_mr(8, sha="b" * 40)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def _github_forge() -> GitHubForge:
    client = github_client(repo=OWNER, token="ghp_" + "t0ken" * 8,
                           seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
    return GitHubForge(client, OWNER)


def _gitlab_forge(fake: FakeGitLab) -> GitLabForge:
    return GitLabForge(gitlab_client(fake.url, "glpat-" + "x" * 20), fake.project)


@pytest.mark.xfail(
    strict=True,
    reason="finding 1 at the wire: GitHubForge._by_id takes comment comment_id while it is "
    "the bot's on this PR, whatever it opens with (so a rewrite never leaves its text under "
    "Sluice's name), so two projects holding one id both write it (a denial of service); "
    "fix: bind each comment to one project (no id learnt from another project's comment)",
)
def test_github_an_id_holding_another_projects_marker_is_not_this_projects(
    github: FakeGitHub,
) -> None:
    forge = _github_forge()
    root = f"{ROOT_MARK}\n### Sluice\nthe root project's plan"
    theirs = forge.upsert_comment(7, ROOT_MARK, root).comment_id
    assert theirs is not None  # finance's ledger came to hold this id (finding 1)
    _github_forge().upsert_comment(7, FIN_MARK, f"{FIN_MARK}\nfinance's plan", theirs)
    assert github.comments[theirs]["body"] == root, "finance's text over the root's comment"


@pytest.mark.xfail(
    strict=True,
    reason="finding 1 at the wire: GitLabForge._note_by_id takes note comment_id while it "
    "is the token user's, whatever it opens with; fix: as on GitHub",
)
def test_gitlab_an_id_holding_another_projects_marker_is_not_this_projects(
    gitlab: FakeGitLab,
) -> None:
    root = f"{ROOT_MARK}\n### Sluice\nthe root project's plan"
    theirs = _gitlab_forge(gitlab).upsert_comment(7, ROOT_MARK, root).comment_id
    assert theirs is not None
    fin = f"{FIN_MARK}\nfinance's plan"
    _gitlab_forge(gitlab).upsert_comment(7, FIN_MARK, fin, theirs)
    assert [n["body"] for n in gitlab.bot_notes(7)] == [root, fin]


def test_gitlab_a_system_note_or_another_mrs_note_is_never_taken_by_id(
    gitlab: FakeGitLab,
) -> None:
    """An id kept for a system note of the token's user holding the marker, or for the
    bot's note on !8. Defended: ``_note_by_id`` passes over system notes and reads the id
    under this merge request only; Sluice's note is made on !7, the others are untouched."""
    system = gitlab.add_note(7, f"{ROOT_MARK}\nchanged the description", author="sluice-bot",
                             system=True)  # fmt: skip
    other = _gitlab_forge(gitlab).upsert_comment(8, ROOT_MARK, f"{ROOT_MARK}\non !8").comment_id
    assert other is not None
    for wrong in (system, other):
        forge = _gitlab_forge(gitlab)
        assert wrong not in {c.comment_id for c in forge.own_comments(7)}
        made = forge.upsert_comment(7, ROOT_MARK, f"{ROOT_MARK}\nours", wrong)
        assert made.comment_id not in (system, other)
    assert [n["body"] for n in gitlab.notes_on(8)] == [f"{ROOT_MARK}\non !8"]
    assert [n["body"] for n in gitlab.notes_on(7) if n["id"] == system] == [
        f"{ROOT_MARK}\nchanged the description"
    ]
    assert [n["body"] for n in gitlab.bot_notes(7)] == [f"{ROOT_MARK}\nours"]


# == defended ===========================================================================


def test_another_prs_comment_id_edits_nothing_there(bot: Bot) -> None:
    """PR 7's row holds the id of Sluice's comment on PR 8 (a stale or confused row).
    Defended: the forge reads the id on this PR only; PR 8's comment is left alone."""
    marker = bot.deps.sticky.marker
    bot.forge.open_pull(8, head_sha=A, base="main", author="alice")
    other = bot.forge.upsert_comment(8, marker, f"{marker}\nPR 8's plan\n")
    assert other.comment_id is not None
    made = bot.forge.upsert_comment(7, marker, f"{marker}\nPR 7's plan\n", other.comment_id)
    assert made.comment_id != other.comment_id
    assert bot.forge.comments[8][0].body == f"{marker}\nPR 8's plan\n"
    assert [c.comment_id for c in bot.forge.own_comments(7)] == [made.comment_id]


def test_an_edit_hook_of_sluices_comment_without_its_marker_is_kept_and_put_back(
    bot: Bot,
) -> None:
    """alice drops the marker and rewrites the plan; the edit's hook comes. Defended:
    ``on_edit`` knows the comment by its id, keeps the edit and puts Sluice's text back
    in that comment; carol's approval of the fake is refused."""
    mine = _show(bot)
    bot.clock.now += MINUTE
    forged = f"### Sluice\n{FORGED}\n"
    _rewrite(bot, mine, forged)
    bot.deliver(
        "issue_comment", _edit_hook(mine.id, forged, author=bot.forge.bot_user, sender="alice")
    )
    bot.clock.now += MINUTE
    _approve(bot, "carol", 102)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary
    assert _edited_rows(bot)
    assert not _bots_with(bot, FORGED)
    assert _by_id(bot, mine.id).body.startswith(bot.deps.sticky.marker)


def test_a_deleted_comment_recreated_by_the_put_back_is_the_one_known(bot: Bot) -> None:
    """alice deletes Sluice's comment (no hook); the read back keeps it and Sluice posts
    its text again. Defended: the new comment's id is learnt; the plan shown again, carol's
    approval counts, and a later rewrite of the new comment is seen."""
    mine = _show(bot)
    bot.clock.now += MINUTE
    bot.forge.comments[7].remove(mine)
    gw.refresh(bot)
    assert _edited_rows(bot)
    again = _show(bot)
    assert again.id != mine.id
    assert bot.ledger.comment_writes(KEY, 7).comment_id == again.id
    bot.clock.now += MINUTE
    _approve(bot, "carol", 103)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    rows = len(_edited_rows(bot))
    bot.clock.now += MINUTE
    _rewrite(bot, again, f"### Sluice\n{FORGED}\n")
    bot.clock.now += MINUTE
    gw.refresh(bot)
    assert len(_edited_rows(bot)) > rows and not _bots_with(bot, FORGED)


def test_a_bot_reply_echoing_the_marker_is_not_sluices_comment(bot: Bot) -> None:
    """alice comments ``/sluice plan <!-- sluice:pr-comment -->``: Sluice's usage error
    quotes it, a comment of Sluice's account holding the marker further down: not a copy
    of Sluice's comment. Then she rewrites that reply to open with the marker and show a
    plan of her own. Defended: a comment of Sluice's account opening with the marker is a
    copy of Sluice's comment (``comment_guard.sort``), read back as the comment is: carol
    may have read it, so her approval counts for no plan until the plan is shown again,
    and the copy is rewritten to the stub (``present.comment.copy_stub``)."""
    marker = bot.deps.sticky.marker
    mine = _show(bot)
    line = f"/sluice plan {marker}"  # the usage error run_command replies with
    bot.forge.reply(7, replies.usage_error("alice", "`/sluice plan` takes no arguments", line, ""))
    echo = bot.forge.comments[7][-1]
    assert echo.author == bot.forge.bot_user and marker in echo.body and echo.id != mine.id
    bot.clock.now += MINUTE
    gw.refresh(bot)  # the quoting reply is no copy: nothing kept
    assert not _edited_rows(bot) and echo.body != copy_stub(marker)
    _rewrite(bot, echo, f"{marker}\n### Sluice\n{FORGED}\n")
    bot.clock.now += MINUTE
    _approve(bot, "carol", 104)
    assert bot.approval(A).conclusion != "success", bot.approval(A).summary
    assert _edited_rows(bot) and echo.body == copy_stub(marker) and not _bots_with(bot, FORGED)
    assert _by_id(bot, mine.id).body.startswith(mine.body.rstrip())
    _show(bot)  # /sluice plan: the plan shown again
    bot.clock.now += MINUTE
    _approve(bot, "carol", 105)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_another_projects_comment_without_its_marker_is_not_this_projects(
    bot: Bot, finance: Deps
) -> None:
    """finance's comment, older than the root project's, rewritten to drop its marker,
    hook and all. Defended: its id is finance's, not this project's; carol's approval of
    the root project's plan counts, and finance's own read back puts its text back."""
    fin = finance.sticky.marker
    _publish(finance, bot, body=f"{fin}\n### Sluice\nfinance's plan\n")
    theirs = next(c for c in bot.forge.comments[7] if fin in c.body)
    _show(bot)
    bot.clock.now += MINUTE
    forged = f"### Sluice\n{FORGED}\n"
    _rewrite(bot, theirs, forged)
    bot.deliver(
        "issue_comment", _edit_hook(theirs.id, forged, author=bot.forge.bot_user, sender="alice")
    )
    bot.clock.now += MINUTE
    _approve(bot, "carol", 105)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot)
    _publish(finance, bot, section=("note", "finance's section"))
    assert not _bots_with(bot, FORGED) and _by_id(bot, theirs.id).body.startswith(fin)
