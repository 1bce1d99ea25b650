"""Red team, round 12: the copies of Sluice's comment.

As the code stood with commit c1cab28: ``Forge.own_comments`` lists every comment of the
bot's account on the PR; ``comment_guard.sort`` takes Sluice's comment (by the ledger's id
whatever it reads, else the oldest opening with the marker: ``forge.base.opens_with``) and
its copies (the bot's other comments opening with the marker). A copy not reading the stub
is stale; a stale copy reading no text of Sluice's is kept as an edit (a publication of no
plan); every stale copy with an id is rewritten to ``present.comment.copy_stub`` by
``StickyComment.rewrite_copies`` (after a publication's post, after ``approval.refresh``'s
read back, in ``comment_guard.read_back``) through ``Forge.upsert_comment(number, marker,
stub, copy_id)``.

The attacker is alice, the pull request's author with write access (edits and deletes
anyone's comment; the edit's hook may be lost). carol, the required approver, approves what
a comment of Sluice's shows her. Driven as rounds 9 to 11: the ledger on SQLite, the
in-memory forge (``tests/helpers/gate_world.py``), and the GitHub and GitLab wire fakes.

Findings (xfail):

1. Low/Medium. Sluice rewrites its own comment to the stub. ``rewrite_copies`` rewrites a
   copy through ``upsert_comment`` with the copy's id, and ``upsert_comment`` falls back to
   the marker when that id is no longer the bot's comment on the PR (``memory._own``,
   ``GitHubForge._by_id or _own``, ``GitLabForge._note_by_id or _own_note``): alice
   deletes the copy between the read back and its rewrite, and the stub is written over
   the oldest comment of Sluice's opening with the marker: Sluice's comment itself (or,
   when none opens with it, a new stub comment is created). Sluice's comment shows no plan
   under Sluice's own write; the next read back keeps that as an edit by someone else
   (approvals since count for nothing) and puts the text back. The gate stays sound (no
   approval is counted for the stub), but alice turns Sluice against its own comment at
   will and the ledger's story is wrong (an "edit by another account" that was Sluice's).
   The same happens when a publication moved Sluice's comment onto the copy (its id'd
   comment deleted, the post falling back to the marker) while a read back holding the
   old sort rewrites that copy. Fix: rewrite a copy by its id only, never by the marker
   (a ``Forge.edit_comment(number, comment_id, body) -> bool`` that answers False when the
   comment is gone or no longer the bot's, or an ``upsert_comment(..., create=False,
   by_marker=False)``), and never a copy whose id is now the ledger's. Shown on the
   in-memory forge, and at the wire on GitHub and GitLab.
2. Low. A copy with no id is never rewritten, so it refuses every approval for good. The
   local forge gives no ids (``LocalForge.own_comments``), so ``check`` returns no copy to
   rewrite while it keeps counting a stale copy reading no text of Sluice's as an edit: a
   second comment file of the bot's opening with the marker (alice drops the marker from
   ``comment.md``, Sluice posts ``comment-2.md``, alice puts the marker back with a plan of
   her own: the old file is now the oldest, so Sluice's; the new one a copy reading an
   older text) makes every later evaluation keep a publication of no plan: no approval
   ever counts again, whatever Sluice shows. Shown on the in-memory forge with its ids
   withheld as the local forge withholds them. Fix: a copy with no id is rewritten by its
   place (the local forge's file name as its id), or the "copy edited" rule counts a copy
   once (keep its digest as seen, ``Ledger.comment_seen``-like, and keep it again only
   when it reads another text).
3. Low (a gap the copy rule leaves, not made by it). A comment of Sluice's account is read
   back only when it opens with the marker: alice rewrites one of Sluice's replies (any
   command answer) to open with a zero-width space, or a byte-order mark, before the
   marker line (``opens_with`` strips whitespace only, ``str.lstrip``), or with no marker at
   all, and shows a plan of her own under Sluice's name; GitHub renders it as Sluice's
   comment. It is no copy: nothing is kept, the reply keeps her plan, and carol's approval
   counts (for the plan Sluice's real comment shows, so the gate is sound; carol was
   shown another). Fix: read back every comment of the bot's account, not only those
   opening with the marker: keep the digest of each reply Sluice posts (as
   ``comment_writes`` keeps the comment's), and treat a bot comment reading neither a
   reply's text nor the stub nor Sluice's text as a copy edited (kept and stubbed); or
   at least have ``opens_with`` ignore leading format characters (``unicodedata``
   category ``Cf``) so the marker line hidden behind one is still a copy.

Closed since (their tests pass): 1 (a copy is rewritten by its id only,
``Forge.edit_comment``, which answers False when it is gone or another's; a publication
never stubs the comment it just posted to); 2 (a copy with no id is not read back: the
local forge's files are its single user's own); 3 for the marker hidden behind invisible
characters (``opens_with`` skips leading format characters, category ``Cf``). Open: a
reply of Sluice's rewritten with no marker at all is not read back (low: the gate counts
an approval for the plan Sluice's comment shows).

Defended (their tests pass): a flood of copies (alice rewrites ten of Sluice's replies to
open with the marker and a plan of hers) costs one publication of no plan and one stub
write per copy, once: read back again, the stubs are not rewritten and carol's approval
of the plan shown again counts (no loop, no refusal for good); the stub is idempotent
(a copy reading it with other line ends or trailing blanks is not rewritten); a comment
opening with the marker written by someone else (alice's own) is no copy and is never
rewritten; another pull request's comment of Sluice's is never stubbed by this PR's read
back; no reply Sluice posts with text the commenter chooses opens with the marker (each
opens with a mention or a code span), so no command answer is taken for a copy or for
Sluice's comment; a case or whitespace variant of the marker line (upper case, a space
inside the comment) is no copy; on GitLab a system note of the token's user opening with
the marker is no copy and is never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from sluice.bot.flow.job import Job
from sluice.bot.forge.base import Posted, PostedComment, opens_with
from sluice.bot.forge.github import GitHubForge, github_client
from sluice.bot.forge.gitlab import GitLabForge, gitlab_client
from sluice.bot.forge.memory import Comment
from sluice.bot.present import comment as present
from sluice.bot.present import replies
from sluice.bot.present.comment import copy_stub
from tests.helpers import gate_world as gw
from tests.helpers.gate_world import GATED, KEY, MINUTE, OTHER, OWNER, A, Bot, given, published
from tests.helpers.gate_world import review_hook as hook
from tests.helpers.github_wire import FakeGitHub
from tests.helpers.gitlab_wire import FakeGitLab

REAL = "Plan: `s.other` changed (backfills 3 years)"
"""What the head's plan really does, as Sluice's comment shows it."""

FORGED = "Plan: `s.change` changed"
"""What alice rewrites a comment of Sluice's to read."""

ROOT_MARK = present.marker(".")


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


def _publish(bot: Bot, **what: Any) -> int | None:
    job = Job.start(bot.deps, bot.forge)
    try:
        return job.publish(7, **what)
    finally:
        job.close()


def _by_id(bot: Bot, comment_id: int, number: int = 7) -> Comment:
    return next(c for c in bot.forge.comments[number] if c.id == comment_id)


def _show(bot: Bot, text: str = REAL) -> Comment:
    """A's plan ``text`` published on PR 7 and recorded, as ``pr_build`` does."""
    at = _publish(bot, body=f"{bot.deps.sticky.marker}\n### Sluice\n{text}\n")
    published(bot, A, OTHER, at if at is not None else bot.clock.now)
    known = bot.ledger.comment_writes(KEY, 7).comment_id
    assert known is not None
    return _by_id(bot, known)


def _rewrite(bot: Bot, mine: Comment, body: str) -> None:
    """alice edits a comment; the forge stamps it now; no hook comes."""
    mine.body, mine.updated = body, bot.clock.now


def _approve(bot: Bot, user: str, review_id: int) -> None:
    given(bot, user, "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", hook(user, "approved", A, review_id, bot.clock.now))


def _edited_rows(bot: Bot) -> list[tuple[int, str]]:
    return [r for r in bot.ledger.plans_shown(KEY, 7) if r[1] == ":edited"]


def _bots_with(bot: Bot, words: str, number: int = 7) -> list[Comment]:
    return [
        c for c in bot.forge.comments[number] if c.author == bot.forge.bot_user and words in c.body
    ]


def _copy(bot: Bot, body: str, *, before: Comment | None = None) -> Comment:
    """A comment of Sluice's account reading ``body`` (a racing post's, or a reply)."""
    bot.forge.reply(7, body)
    made = bot.forge.comments[7].pop()
    made.updated = bot.clock.now
    at = bot.forge.comments[7].index(before) if before is not None else len(bot.forge.comments[7])
    bot.forge.comments[7].insert(at, made)
    return made


def _stubs(bot: Bot, since: int) -> int:
    """The stubs Sluice wrote since call ``since`` of the forge."""
    stub = copy_stub(bot.deps.sticky.marker)
    return sum(1 for c in bot.forge.calls[since:] if c[0] == "edit_comment" and c[1][2] == stub)


# == 1. a copy deleted before its rewrite: Sluice stubs its own comment ===================


def test_a_copy_deleted_before_its_rewrite_leaves_sluices_comment_alone(bot: Bot) -> None:
    """Closed: a copy is rewritten by its id only (``Forge.edit_comment``), never by the
    marker; one deleted meanwhile is left gone."""
    forge = bot.forge
    mine = _show(bot)
    shown = mine.body
    copy = _copy(bot, shown, before=mine)  # a racing post's, older, reading Sluice's text
    real = forge.own_comments

    def listed_then_deleted(number: int) -> list[PostedComment]:
        found = real(number)
        if copy in forge.comments[7]:
            forge.comments[7].remove(copy)  # alice deletes the copy meanwhile
        return found

    forge.own_comments = listed_then_deleted  # type: ignore[method-assign]
    try:
        bot.clock.now += MINUTE
        gw.refresh(bot)  # any evaluation of the gate: the copy read back, then rewritten
    finally:
        forge.own_comments = real  # type: ignore[method-assign]
    assert not _edited_rows(bot), "Sluice's own stub write kept as someone else's edit"
    assert "An older copy" not in _by_id(bot, mine.id).body, "the stub over Sluice's comment"
    assert REAL in _by_id(bot, mine.id).body
    assert not _bots_with(bot, "An older copy"), "a stub made where there was no copy"


def _github_forge() -> GitHubForge:
    client = github_client(repo=OWNER, token="ghp_" + "t0ken" * 8,
                           seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
    return GitHubForge(client, OWNER)


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
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.install(mock)
        yield fake


def test_github_the_stub_of_a_deleted_copy_is_written_nowhere(github: FakeGitHub) -> None:
    forge = _github_forge()
    body = f"{ROOT_MARK}\n### Sluice\n{REAL}"
    mine = forge.upsert_comment(7, ROOT_MARK, body).comment_id
    assert mine is not None
    copy = github.add_comment(7, body, user="sluice-bot[bot]", kind="Bot")
    assert {c.comment_id for c in forge.own_comments(7)} == {mine, copy}
    del github.comments[copy]  # alice deletes the copy after the read back
    assert not forge.edit_comment(7, copy, copy_stub(ROOT_MARK))  # rewrite_copies
    assert [c["body"] for c in github.comments_on(7)] == [body]


def test_gitlab_the_stub_of_a_deleted_copy_is_written_nowhere(gitlab: FakeGitLab) -> None:
    forge = GitLabForge(gitlab_client(gitlab.url, "glpat-" + "x" * 20), gitlab.project)
    body = f"{ROOT_MARK}\n### Sluice\n{REAL}"
    mine = forge.upsert_comment(7, ROOT_MARK, body).comment_id
    copy = gitlab.add_note(7, body, author="sluice-bot")
    assert {c.comment_id for c in forge.own_comments(7)} == {mine, copy}
    notes = gitlab.notes_on(7)
    notes.remove(next(n for n in notes if n["id"] == copy))  # alice deletes the copy
    assert not forge.edit_comment(7, copy, copy_stub(ROOT_MARK))  # rewrite_copies
    assert [n["body"] for n in gitlab.bot_notes(7)] == [body]


# == 2. a copy with no id (the local forge) refuses every approval for good ===============


def test_a_copy_with_no_id_does_not_refuse_every_approval(bot: Bot) -> None:
    """Closed: a copy with no id (the local forge's files, which the single user keeps)
    can be neither told apart nor rewritten, and is not read back."""
    forge = bot.forge
    real_own, real_upsert = forge.own_comments, forge.upsert_comment

    def no_ids(number: int) -> list[PostedComment]:  # as LocalForge.own_comments reads them
        return [PostedComment(c.author, c.author_id, c.body, None, True) for c in real_own(number)]

    def no_id(number: int, marker: str, body: str, comment_id: int | None = None) -> Posted:
        real_upsert(number, marker, body, comment_id)
        return Posted(None, None)  # as LocalForge.upsert_comment answers

    forge.own_comments = no_ids  # type: ignore[method-assign]
    forge.upsert_comment = no_id  # type: ignore[method-assign]
    try:
        marker = bot.deps.sticky.marker
        _publish(bot, body=f"{marker}\n### Sluice\n{REAL}\n")
        published(bot, A, OTHER, bot.clock.now)
        mine = _bots_with(bot, marker)[0]
        # comment-2.md: a second file of Sluice's opening with the marker, newer, reading an
        # older text of Sluice's (alice's play with the marker of comment.md, see above).
        _copy(bot, f"{marker}\n### Sluice\nan older plan\n")
        bot.clock.now += MINUTE
        gw.refresh(bot)  # kept once as an edit: fair, carol may have read it
        _publish(bot, body=f"{marker}\n### Sluice\n{REAL}\n")  # /sluice plan: shown again
        published(bot, A, OTHER, bot.clock.now)
        assert REAL in _by_id(bot, mine.id).body
        rows = len(_edited_rows(bot))
        bot.clock.now += MINUTE
        _approve(bot, "carol", 201)
        conclusion = bot.approval(A).conclusion
        kept = len(_edited_rows(bot)) - rows
    finally:
        forge.own_comments, forge.upsert_comment = real_own, real_upsert  # type: ignore[method-assign]
    assert not kept, f"the copy no one can rewrite is kept as an edit again ({kept} more)"
    assert conclusion == "success", "the unrewritable copy refuses carol's approval for good"


# == 3. a bot comment hiding its marker line: no copy, alice's plan under Sluice's name ====


def test_a_reply_rewritten_behind_a_zero_width_space_is_read_back(bot: Bot) -> None:
    """Closed for the marker hidden behind invisible characters: ``opens_with`` skips
    leading blanks and format characters (Unicode ``Cf``), so the reply is a copy, read
    back and stubbed. A reply rewritten with no marker at all is still not read back
    (open, low: the gate counts the approval for the plan Sluice's comment shows)."""
    marker = bot.deps.sticky.marker
    _show(bot)
    bot.forge.reply(7, replies.pr_closed("alice"))  # any command answer of Sluice's
    reply = bot.forge.comments[7][-1]
    bot.clock.now += MINUTE
    _rewrite(bot, reply, f"\u200b{marker}\n### Sluice\n{FORGED}\n")  # no hook
    assert opens_with(reply.body, marker)
    bot.clock.now += MINUTE
    _approve(bot, "carol", 202)
    counted = bot.approval(A).conclusion == "success" and not _edited_rows(bot)
    assert not (counted and _bots_with(bot, FORGED)), (
        "a comment of Sluice's account shows alice's plan and carol's approval counts"
    )


# == defended =============================================================================


def test_a_flood_of_copies_costs_one_stub_each_once_and_refuses_nothing_for_good(
    bot: Bot,
) -> None:
    """alice gets ten replies out of Sluice (any command answer) and rewrites each to open
    with the marker and a plan of hers. Defended: one read back keeps it as an edit and
    rewrites each to the stub; read back again nothing is written, and carol's approval of
    the plan shown again counts."""
    marker = bot.deps.sticky.marker
    mine = _show(bot)
    flood = []
    for _ in range(10):
        bot.forge.reply(7, replies.pr_closed("alice"))
        flood.append(bot.forge.comments[7][-1])
    bot.clock.now += MINUTE
    for reply in flood:
        _rewrite(bot, reply, f"{marker}\n### Sluice\n{FORGED}\n")
    bot.clock.now += MINUTE
    since = len(bot.forge.calls)
    gw.refresh(bot)
    assert _edited_rows(bot)
    assert all(r.body == copy_stub(marker) for r in flood) and not _bots_with(bot, FORGED)
    assert _stubs(bot, since) == len(flood)  # each copy's stub
    _show(bot)
    assert REAL in _by_id(bot, mine.id).body
    rows = len(_edited_rows(bot))
    bot.clock.now += MINUTE
    _approve(bot, "carol", 203)
    since = len(bot.forge.calls)
    for _ in range(3):
        gw.refresh(bot)
    assert _stubs(bot, since) == 0, "the stubs are rewritten again at each evaluation"
    assert len(_edited_rows(bot)) == rows
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary


def test_a_stub_read_back_with_other_line_ends_is_not_rewritten(bot: Bot) -> None:
    """The forge gives the stub back with CRLF line ends and trailing blanks. Defended:
    ``same_text`` takes it for the stub; nothing is kept or written."""
    marker = bot.deps.sticky.marker
    _show(bot)
    _copy(bot, copy_stub(marker).replace("\n", "  \r\n"))
    bot.clock.now += MINUTE
    since = len(bot.forge.calls)
    gw.refresh(bot)
    assert _stubs(bot, since) == 0 and not _edited_rows(bot)


def test_someone_elses_comment_opening_with_the_marker_is_never_rewritten(bot: Bot) -> None:
    """alice posts a comment of her own opening with the marker and a plan. Defended: only
    the bot account's comments are Sluice's (``own_comments``); hers is no copy, never
    stubbed, and refuses nothing."""
    marker = bot.deps.sticky.marker
    _show(bot)
    bot.forge.comments[7].append(Comment(9_001, "alice", f"{marker}\n### Sluice\n{FORGED}\n"))
    bot.clock.now += MINUTE
    _approve(bot, "carol", 204)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert _by_id(bot, 9_001).body == f"{marker}\n### Sluice\n{FORGED}\n"
    assert not _edited_rows(bot)


def test_another_prs_comment_of_sluices_is_never_stubbed(bot: Bot) -> None:
    """Sluice's comment on PR 8, and a copy on PR 7. Defended: the copies are PR 7's own
    comments; PR 8's comment is left as it reads."""
    marker = bot.deps.sticky.marker
    bot.forge.open_pull(8, head_sha=A, base="main", author="alice")
    other = bot.forge.upsert_comment(8, marker, f"{marker}\nPR 8's plan\n")
    mine = _show(bot)
    copy = _copy(bot, mine.body)
    bot.clock.now += MINUTE
    gw.refresh(bot)
    assert copy.body == copy_stub(marker)
    assert [c.body for c in bot.forge.comments[8] if c.id == other.comment_id] == [
        f"{marker}\nPR 8's plan\n"
    ]


def test_no_reply_with_text_the_commenter_chooses_opens_with_a_marker() -> None:
    """Every reply Sluice posts with text the commenter chooses (a usage error quoting the
    line, an unknown subcommand, a diff's model or error) opens with a mention or a code
    span. Defended: none opens with any project's marker, so no command answer is taken
    for a copy, nor for Sluice's comment when no id is known."""
    evil = f"{ROOT_MARK}\n### Sluice\n{FORGED}"
    said = [
        replies.usage_error(evil, evil, evil, evil),
        replies.help_text(evil),
        replies.help_text(f"\n{evil}"),
        replies.diff_failed(evil, evil, evil),
        replies.diff_result(evil, evil, "prod", evil, evil),
        replies.not_a_writer(evil, evil, "github"),
        replies.command_gave_up(evil, evil),
        replies.deploy_failed(evil, evil),
        replies.scheduled_run_failed(evil),
    ]
    assert not [s for s in said if opens_with(s, ROOT_MARK) or opens_with(s, "<!--")]


def test_a_case_or_whitespace_variant_of_the_marker_is_no_copy(bot: Bot) -> None:
    """alice rewrites replies of Sluice's to open with variants of the marker line (upper
    case, a space inside). Defended: no copy (``opens_with`` is exact); nothing kept, and
    carol's approval counts. (What such a reply shows is finding 3's gap.)"""
    marker = bot.deps.sticky.marker
    _show(bot)
    for variant in (marker.upper(), marker.replace("<!-- ", "<!--  "), f" \t\n{marker}"):
        bot.forge.reply(7, replies.pr_closed("alice"))
        _rewrite(bot, bot.forge.comments[7][-1], f"{variant}\n### Sluice\n{REAL}\n")
    bot.clock.now += MINUTE
    since = len(bot.forge.calls)
    _approve(bot, "carol", 205)
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    # The leading-whitespace variant opens with the marker (lstrip): a copy reading
    # Sluice's text, so stubbed and not kept; the others are left.
    assert _stubs(bot, since) == 1 and not _edited_rows(bot)


def test_gitlab_a_system_note_opening_with_the_marker_is_no_copy(gitlab: FakeGitLab) -> None:
    """A system note of the token's user opening with the marker. Defended: it is not
    among ``own_comments`` (``_is_own``), so never a copy, never rewritten."""
    forge = GitLabForge(gitlab_client(gitlab.url, "glpat-" + "x" * 20), gitlab.project)
    mine = forge.upsert_comment(7, ROOT_MARK, f"{ROOT_MARK}\nours").comment_id
    system = gitlab.add_note(7, f"{ROOT_MARK}\nchanged the description", author="sluice-bot",
                             system=True)  # fmt: skip
    assert [c.comment_id for c in forge.own_comments(7)] == [mine]
    assert [n["body"] for n in gitlab.notes_on(7) if n["id"] == system] == [
        f"{ROOT_MARK}\nchanged the description"
    ]
