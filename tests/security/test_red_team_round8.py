"""Red team, round 8: attacks on the guard against Sluice's comment rewritten by another.

As the code stood at ed875bc and c69f989: ``run_command.on_comment`` hands every comment
edit (GitHub's ``issue_comment`` ``edited``, GitLab's note hook ``update``) to
``comment_edits.on_edit``, which reads the comment back with the service's token
(``Forge.comment``: ``PostedComment.own``, ``updated_ms``) and, when it is Sluice's own,
holds this project's marker and no longer reads what Sluice last wrote
(``StickyComment.shown``), keeps a publication of no plan (``Ledger.record_shown`` kind
``edited``, ``plans_shown``: ``:edited``) at the service's time and the forge's
``updated_ms``, audits it and puts Sluice's text back with ``edited_section``.
``Ledger.plans_shown`` orders publications by ``shown_ts`` and ``gate_rules.shown_at``
takes the last made before an approval.

The attacker is the pull request's author with write access (GitHub lets her edit and
delete anyone's comment on the repository, and dismiss reviews); the required approver
(carol) is honest and approves what Sluice's comment showed her then; an outsider may
comment on the pull request and edit their own comments. Each test asserts what a sound
service does: an attack that works against the code as it is is ``xfail(strict=True)``
naming the code path and the fix proposed; the others are attacks tried and defended,
each saying which defence holds. GitHub is driven as round 7 drives it: the ledger on
SQLite, real webhook bodies, the in-memory forge (whose ``comment`` answers the time it is
read as the comment's last ``updated_at``: a test that needs GitHub's time of an edit
reads it back at that time).

Findings (xfail unless closed):

1. An edit undone before its hook is handled is never seen: ``on_edit`` compares only the
   comment as it reads now with ``StickyComment.shown``. alice rewrites the plan, carol
   approves what she read, alice puts Sluice's text back; the hooks, queued behind the
   PR's build, find Sluice's text and record nothing: carol's approval counts.
2. The edit is kept at the comment's last ``updated_at`` (``found.updated_ms``), not at
   the edit the hook is for: alice rewrites, carol approves, alice edits again (a typo);
   the publication of no plan is kept after carol's approval, which counts.
3. A deletion of Sluice's comment is ignored (``issue_comment`` ``deleted`` returns in
   ``on_comment``; GitLab sends no hook): the plan stays "shown" while nothing shows it,
   and an approval given then counts for it.
4. A false "rewritten": the hook GitHub sends for Sluice's own edit, handled while a job
   under another queue key (a promotion's section) is between its ledger write and its
   forge write, reads the old text against the ledger's new one; the PR's approvals are
   then refused until someone comments ``/sluice plan``, and the comment says it was
   edited by someone else. Nobody need edit anything: the race is Sluice's own.
5. The audit row of a rewrite names no editor (``actor`` the service): the hook's sender,
   signed by GitHub, is not even parsed (``CommentEvent.author`` is the comment's author).
6. On GitLab the guard needs no race to pass: a Maintainer turns the project's webhook
   off, rewrites Sluice's note, and turns it on after carol approved; no note hook ever
   comes, and the approval counts (the text put back or not).
7. An edit whose text holds a ``/sluice deploy`` line is keyed to the repository's prod
   queue (``events.neutral.pr_key`` reads an edited body as a command): alice ends her
   rewrite with one, its read-back waits behind prod (another PR's promotion), carol's
   click on the PR's queue is handled first and counts, and its approval section, written
   whole, puts Sluice's text back before the edit is read: nothing is ever kept.

Closed since (their tests pass): 1, 2, 4, 5 and 7. The hook's word on who edited is now
taken (GitHub's ``sender``, signed by GitHub; GitLab's ``user``: a maintainer holding the
project's token could claim an edit falsely, which refuses approvals until the plan is
shown again, as a push of hers would): an edit by anyone but the comment's author is kept
whatever the comment reads when the hook is handled (1), and Sluice's own edits never are
(4); the edit is kept a millisecond after the last publication of a plan by the forge's
clock (2); the audit row names the editor (5); a comment edit is keyed to its PR, and the
gate is asked again once an edit is kept (7). 3 and 6 are closed by one fix (6 only for
a rewrite left in place since round 9: see there): the ledger
keeps the forge's time of each of Sluice's answered writes of its comment (and the texts
posted but not answered yet), and each refresh of the gate reads the comment back
(``comment_guard.read_back``) before writing its own section; gone, or an ``updated_at``
later than Sluice's last answered write while reading none of the texts under way, it
is kept as a publication of no plan, whatever it reads now, and put back.

Defended: an outsider's own comment holding Sluice's marker, edited, triggers nothing
(``PostedComment.own``); a hook's body is never taken (the read-back decides: a forged
GitLab note hook naming Sluice's note, sent many times, records and publishes nothing);
Sluice's own put-back and its section writes, read back, are no rewrite (no loop); the put-
back and its audit row carry no text of the editor's (no injection, no mention); an edit
of Sluice's comment on another PR, or of another project's marker, is not this PR's. On
GitLab at the wire: a rewrite with its note hook is kept and put back, and an approval
after it refused; forged note hooks naming Sluice's note edit nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import parse_github
from sluice.bot.events.neutral import pr_key
from sluice.bot.flow.job import Job
from sluice.bot.forge.memory import Comment
from sluice.bot.present import comment as present
from tests.helpers import accounts
from tests.helpers import gate_world as gw
from tests.helpers.cases import load_case, realcase
from tests.helpers.gate_world import (
    CHANGE,
    GATED,
    KEY,
    MINUTE,
    OTHER,
    OWNER,
    SECOND,
    A,
    Bot,
    given,
    published,
    review_hook,
)
from tests.helpers.gitlab_gate import (
    PID,
    S8,
    approval_hook,
    approval_state,
    clock,
    commit_heads,
    mr_world,
    open_mr8,
    serving,
)
from tests.helpers.gitlab_service import GitLabService, project_token
from tests.helpers.gitlab_wire import FakeGitLab
from tests.helpers.lifecycle_prod import GitLabWorld

REAL = "Plan: `s.other` changed (backfills 3 years)"
"""What A's plan really does, as Sluice's comment shows it."""

FORGED = "Plan: `s.change` changed"
"""What alice rewrites it to read."""


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    made = gw.make_bot(tmp_path, GATED, {"alice": "write", "bob": "write", "carol": "admin"})
    made.forge.open_pull(7, head_sha=A, base="main", author="alice")
    made.deliver("pull_request", gw.pr_event("opened", A, "alice"))
    yield made
    made.close()


def _show(bot: Bot, text: str = REAL, made: Any = OTHER) -> Comment:
    """A's plan ``text`` published on PR 7 as ``pr_build`` publishes it and then records
    it (both clocks); Sluice's comment."""
    job = Job.start(bot.deps, bot.forge)
    try:
        marker = job.deps.sticky.marker
        at = job.publish(7, body=f"{marker}\n### Sluice\n{text}\n")
    finally:
        job.close()
    published(bot, A, made, at if at is not None else bot.clock.now)
    return next(c for c in bot.forge.comments[7] if c.id == _sluices(bot).id)


def _sluices(bot: Bot, number: int = 7) -> Comment:
    marker = bot.deps.sticky.marker
    return next(
        c for c in bot.forge.comments[number] if c.author == bot.forge.bot_user and marker in c.body
    )


def _edit_hook(
    comment_id: int,
    body: str,
    *,
    author: str,
    sender: str,
    number: int = 7,
    action: str = "edited",
) -> dict[str, Any]:
    """GitHub's ``issue_comment`` webhook (``edited``, or ``deleted``) of PR ``number``."""
    hook = realcase("github/issue_comment/edited.payload.json", OWNER, action=action, **{
        "issue.number": number, "comment.id": comment_id, "comment.body": body,
        "comment.user.login": author, "sender.login": sender,
    })  # fmt: skip
    hook["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{OWNER}/pulls/{number}"}
    return hook


def _approve(bot: Bot, user: str, review_id: int) -> None:
    """``user`` approves A now (GitHub's time), and the review's hook is handled."""
    given(bot, user, "APPROVED", A, bot.clock.now)
    bot.deliver("pull_request_review", review_hook(user, "approved", A, review_id, bot.clock.now))


def _edited_rows(bot: Bot) -> list[tuple[int, str]]:
    return [r for r in bot.ledger.plans_shown(KEY, 7) if r[1] == ":edited"]


# == 1. an edit undone before its hook is handled ========================================


def test_an_edit_undone_before_its_hook_is_handled_still_counts_for_no_plan(bot: Bot) -> None:
    mine = _show(bot)
    # A build runs under the PR's key (alice pushed a no-op, or commented /sluice plan): the
    # hooks below wait for it. alice rewrites Sluice's comment...
    shown = mine.body
    mine.body = shown.replace(REAL, FORGED)
    edited = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    bot.clock.now += MINUTE
    # ... carol approves what she reads ...
    given(bot, "carol", "APPROVED", A, bot.clock.now)
    review = review_hook("carol", "approved", A, 91, bot.clock.now)
    bot.clock.now += MINUTE
    # ... and alice puts Sluice's text back, to the byte.
    mine.body = shown
    undone = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    bot.clock.now += MINUTE
    # The build ends; the hooks are handled in the order delivered.
    bot.deliver("issue_comment", edited)
    bot.deliver("pull_request_review", review)
    bot.deliver("issue_comment", undone)
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol approved {FORGED!r}, which alice wrote into Sluice's comment and took back "
        f"before Sluice looked; it counts for A's real plan: {check.summary}"
    )


# == 2. the edit kept at the comment's last time, not the edit's ===========================


def test_a_rewrite_is_kept_at_the_first_edit_not_the_last(bot: Bot) -> None:
    mine = _show(bot)
    mine.body = mine.body.replace(REAL, FORGED)
    first = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    bot.clock.now += MINUTE
    given(bot, "carol", "APPROVED", A, bot.clock.now)  # carol approves what she reads
    review = review_hook("carol", "approved", A, 92, bot.clock.now)
    bot.clock.now += MINUTE
    # alice edits it again (a typo of hers): GitHub's updated_at is now this edit's time.
    mine.body = mine.body.replace(FORGED, FORGED + ".")
    second = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    bot.deliver("issue_comment", first)  # read back now: updated_at the second edit's
    bot.deliver("issue_comment", second)
    bot.deliver("pull_request_review", review)
    assert _edited_rows(bot), "the rewrite was seen and kept"
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol approved the rewrite; it was kept at alice's last edit, after her approval, "
        f"which counts for A's plan: {check.summary}"
    )


# == 3. Sluice's comment deleted ========================================================


def test_an_approval_given_while_sluices_comment_was_deleted_does_not_count(bot: Bot) -> None:
    mine = _show(bot)
    bot.clock.now += SECOND
    bot.forge.comments[7].remove(mine)  # alice deletes Sluice's comment
    bot.deliver(
        "issue_comment",
        _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice",
                   action="deleted"),
    )  # fmt: skip
    bot.clock.now += MINUTE
    _approve(bot, "carol", 93)  # no plan is shown: nothing carol approves is A's plan
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"Sluice's comment was deleted; carol's approval counts for A's plan: {check.summary}"
    )


# == 4. a false "rewritten" between another job's ledger write and its forge write ========


def test_sluices_own_edit_read_while_another_job_writes_is_no_rewrite(bot: Bot) -> None:
    mine = _show(bot, FORGED, CHANGE)
    bot.clock.now += MINUTE
    # Sluice's own edit (its approval section) made GitHub send issue_comment edited,
    # sender Sluice; it is handled under the PR's key while a job under the prod key writes
    # its section: the ledger written, the forge's comment not yet.
    hook = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender=bot.forge.bot_user)
    real = bot.forge.upsert_comment
    raced: list[bool] = []

    def between(number: int, marker: str, body: str, comment_id: int | None = None) -> object:
        if not raced:
            raced.append(True)
            bot.deliver("issue_comment", hook)
        return real(number, marker, body, comment_id)

    bot.forge.upsert_comment = between  # type: ignore[method-assign]
    job = Job.start(bot.deps, bot.forge)
    try:
        job.publish(7, section=("promotion", "**Promotion:** queued behind another PR"))
    finally:
        job.close()
        bot.forge.upsert_comment = real  # type: ignore[method-assign]
    assert raced
    # GitHub's hook of that job's own write, handled next under the PR's key.
    bot.deliver("issue_comment", _edit_hook(mine.id, _sluices(bot).body,
                                            author=bot.forge.bot_user,
                                            sender=bot.forge.bot_user))  # fmt: skip
    bot.clock.now += MINUTE
    _approve(bot, "carol", 94)  # carol approves the plan Sluice shows, untouched by anyone
    assert bot.approval(A).conclusion == "success", bot.approval(A).summary
    assert not _edited_rows(bot), "Sluice's own edit was taken for someone else's"


# == 7. a rewrite holding a deploy command: its edit handled under the prod key ==========


def test_a_rewrite_holding_a_deploy_line_is_handled_before_a_click_it_precedes(bot: Bot) -> None:
    mine = _show(bot)
    # alice rewrites the plan, and ends it with a line any reader takes for Sluice's help.
    mine.body = mine.body.replace(REAL, FORGED) + "\n/sluice deploy\n"
    hook = _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    parsed = parse_github("issue_comment", accounts.github(hook, bot.forge.account_id))
    assert parsed is not None
    key = pr_key(parsed)
    bot.clock.now += MINUTE
    # That key's queue is busy (prod: another PR's promotion); carol's click, on PR 7's
    # key, is handled at once. (Under PR 7's key the edit would be handled first.)
    if key.endswith(":prod"):
        gw.click(bot, "carol", A)
        # Handling the click wrote Sluice's approval section, the whole comment: Sluice's
        # text is back before the edit is read.
        assert FORGED not in _sluices(bot).body
        bot.clock.now += MINUTE
        bot.deliver("issue_comment", hook)
    else:
        bot.deliver("issue_comment", hook)
        bot.clock.now += MINUTE
        gw.click(bot, "carol", A)
    bot.clock.now += MINUTE
    gw.refresh(bot)
    check = bot.approval(A)
    assert check.conclusion != "success", (
        f"carol clicked on the plan alice rewrote (its edit under {key}): {check.summary}"
    )


# == 5. the audit row of a rewrite ======================================================


def test_the_audit_row_of_a_rewrite_names_its_editor(bot: Bot) -> None:
    mine = _show(bot)
    mine.body = mine.body.replace(REAL, FORGED)
    bot.deliver(
        "issue_comment", _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    )
    [row] = [e for e in bot.ledger.entries(repo=KEY) if e.outcome == "comment rewritten"]
    assert row.actor == "alice", row


# == defended ===========================================================================


def test_an_outsiders_own_comment_holding_the_marker_edited_triggers_nothing(bot: Bot) -> None:
    """mallory (no access) posts a comment copying Sluice's marker and a made-up plan, and
    edits it. Defended: ``PostedComment.own`` (the comment's author is not Sluice's
    account): nothing kept, nothing published, carol's approval of the real plan counts."""
    mine = _show(bot, FORGED, CHANGE)
    marker = bot.deps.sticky.marker
    bot.forge._ids += 1
    theirs = Comment(bot.forge._ids, "mallory", f"{marker}\n### Sluice\n{REAL}\n")
    bot.forge.comments[7].append(theirs)
    before = (bot.ledger.plans_shown(KEY, 7), mine.body, len(bot.forge.calls))
    for n in range(5):
        theirs.body += f"\nedit {n}"
        bot.deliver("issue_comment", _edit_hook(theirs.id, theirs.body, author="mallory",
                                                sender="mallory"))  # fmt: skip
    assert bot.ledger.plans_shown(KEY, 7) == before[0]
    assert _sluices(bot).body == before[1]
    assert not [c for c in bot.forge.calls[before[2] :] if c[0] == "upsert_comment"]
    bot.clock.now += MINUTE
    _approve(bot, "carol", 96)
    assert bot.approval(A).conclusion == "success"


def test_a_hooks_body_is_never_taken_for_the_comment(bot: Bot) -> None:
    """A hook naming Sluice's comment with a body it does not hold, edited by alice, sent
    twenty times (a GitHub redelivery; a GitLab Maintainer's note hook signed with the
    project's token). Defended: the hook's body is never published nor kept (the
    put-back is Sluice's text, read from its ledger); its word that alice edited the
    comment is taken once (one publication of no plan, at one time), so an approval
    counts only once the plan is shown again; no loop of put-backs."""
    mine = _show(bot, FORGED, CHANGE)
    before = bot.ledger.plans_shown(KEY, 7, forge=True)
    for n in range(20):
        bot.deliver("issue_comment", _edit_hook(mine.id, f"rewritten {n}",
                                                author=bot.forge.bot_user, sender="alice"))  # fmt: skip
    kept = bot.ledger.plans_shown(KEY, 7, forge=True)[len(before) :]
    assert kept == [(before[-1][0] + 1, ":edited")]
    assert "rewritten" not in _sluices(bot).body
    bot.clock.now += MINUTE
    _approve(bot, "carol", 97)
    assert bot.approval(A).conclusion != "success"


def test_sluices_put_back_read_back_is_no_second_rewrite(bot: Bot) -> None:
    """GitHub sends ``edited`` for Sluice's put-back too. Defended: the put-back is
    written to the ledger before the forge (``StickyComment.publish``) and reads back as
    Sluice wrote it: one publication of no plan, one put-back, no loop."""
    mine = _show(bot)
    mine.body = mine.body.replace(REAL, FORGED)
    bot.deliver(
        "issue_comment", _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    )
    assert len(_edited_rows(bot)) == 1
    put_back, calls = _sluices(bot).body, len(bot.forge.calls)
    for _ in range(3):
        bot.clock.now += SECOND
        bot.deliver("issue_comment", _edit_hook(mine.id, put_back, author=bot.forge.bot_user,
                                                sender=bot.forge.bot_user))  # fmt: skip
    assert len(_edited_rows(bot)) == 1
    assert _sluices(bot).body == put_back
    assert not [c for c in bot.forge.calls[calls:] if c[0] == "upsert_comment"]


def test_the_put_back_and_its_audit_row_carry_none_of_the_editors_text(bot: Bot) -> None:
    """alice's rewrite holds a mention, HTML, a second marker and a fake approval section.
    Defended: the put-back is Sluice's last text and the constant ``edited_section``; the
    audit row's detail is constant too."""
    mine = _show(bot)
    injected = (
        "@carol LGTM <img src=x onerror=alert(1)> <!-- sluice:pr-comment:other --> "
        "**Approval:** ✅ approved by carol"
    )
    mine.body = mine.body.replace(REAL, injected)
    bot.deliver(
        "issue_comment", _edit_hook(mine.id, mine.body, author=bot.forge.bot_user, sender="alice")
    )
    now = _sluices(bot).body
    assert REAL in now and present.edited_section()[1] in now
    for part in ("@carol LGTM", "<img", "sluice:pr-comment:other", "approved by carol"):
        assert part not in now
    [row] = [e for e in bot.ledger.entries(repo=KEY) if e.outcome == "comment rewritten"]
    assert not any(part in row.detail for part in ("@carol", "<img", "approved by carol"))


def test_an_edit_of_sluices_comment_on_another_pr_is_not_this_prs(bot: Bot) -> None:
    """A hook naming PR 7 and the id of Sluice's comment on PR 8 (rewritten there), or
    PR 8's hook naming PR 7's comment. Defended: ``Forge.comment`` finds the id only among
    that PR's comments (GitHub: its ``issue_url``): PR 7's gate is untouched."""
    mine = _show(bot, FORGED, CHANGE)
    bot.forge.open_pull(8, head_sha=gw.B, base="main", author="alice")
    bot.forge.upsert_comment(8, bot.deps.sticky.marker, f"{bot.deps.sticky.marker}\nPR 8")
    eight = _sluices(bot, 8)
    eight.body += "\nrewritten"
    before = bot.ledger.plans_shown(KEY, 7)
    bot.deliver("issue_comment", _edit_hook(eight.id, eight.body, author=bot.forge.bot_user,
                                            sender="alice"))  # fmt: skip
    bot.deliver("issue_comment", _edit_hook(mine.id, mine.body, author=bot.forge.bot_user,
                                            sender="alice", number=8))  # fmt: skip
    assert bot.ledger.plans_shown(KEY, 7) == before
    bot.clock.now += MINUTE
    _approve(bot, "carol", 98)
    assert bot.approval(A).conclusion == "success"


def test_another_projects_marker_is_not_this_projects_comment(bot: Bot) -> None:
    """A monorepo: another project's Sluice comment on PR 7 (its own marker) rewritten.
    Defended: ``on_edit`` needs this project's marker, whole (``comment.marker`` ends each
    project's line): the other project's edit keeps nothing in this one's ledger."""
    mine = _show(bot, FORGED, CHANGE)
    other = present.marker("warehouse/finance")
    assert bot.deps.sticky.marker not in other
    bot.forge.upsert_comment(7, other, f"{other}\n### Sluice\nfinance's plan\n")
    theirs = next(c for c in bot.forge.comments[7] if other in c.body)
    assert theirs.id != mine.id
    theirs.body += "\nrewritten"
    before = bot.ledger.plans_shown(KEY, 7)
    bot.deliver("issue_comment", _edit_hook(theirs.id, theirs.body, author=bot.forge.bot_user,
                                            sender="alice"))  # fmt: skip
    assert bot.ledger.plans_shown(KEY, 7) == before
    assert "finance's plan" in theirs.body and "rewritten" in theirs.body


def test_a_hooked_rewrite_that_drops_the_marker_is_kept_and_put_back(bot: Bot) -> None:
    """alice rewrites Sluice's comment and drops the marker, the hook on. Defended: the
    comment is Sluice's by the id its last post wrote (ledger migration 18), so its hook
    is handled as any rewrite: kept as a publication of no plan, the text put back."""
    mine = _show(bot)
    bot.clock.now += MINUTE
    mine.body, mine.updated = f"### Sluice\n{FORGED}\n", bot.clock.now
    bot.deliver("issue_comment", _edit_hook(mine.id, mine.body, author=bot.forge.bot_user,
                                            sender="alice"))  # fmt: skip
    assert [kind for _, kind in bot.ledger.plans_shown(KEY, 7)][-1] == ":edited"
    assert bot.deps.sticky.marker in mine.body and REAL in mine.body and FORGED not in mine.body
    assert len(bot.forge.bot_comments(7)) == 1


# == GitLab, through the whole service ==================================================


@pytest.fixture
def world(tmp_path: Path) -> Iterator[GitLabWorld]:
    env = mr_world(tmp_path)
    yield env
    env.close()


@pytest.fixture
def service(world: GitLabWorld) -> Iterator[GitLabService]:
    with serving(world) as running:
        yield running


def _note_update(
    gitlab: FakeGitLab, note_id: int, body: str, user: str = "alice"
) -> dict[str, Any]:
    """A Note Hook ``update`` of note ``note_id`` on MR !8 saying ``body``, as GitLab
    sends it for an edit (or a Maintainer makes it, with the project's webhook token)."""
    payload = load_case("gitlab/note_merge_request.docs.json")
    payload["project"].update(id=PID, path_with_namespace=gitlab.project)
    payload["project_id"] = PID
    payload["user"].update(username=user, id=gitlab.user_id(user))
    payload["object_attributes"].update(
        note=body, id=note_id, project_id=PID, action="update",
        created_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    )  # fmt: skip
    payload["merge_request"]["iid"] = 8
    return payload


def _deliver_note(service: GitLabService, payload: dict[str, Any]) -> None:
    response = service.deliver("Note Hook", payload, token=project_token(PID))
    assert response.status_code == 202, response.text
    service.idle(timeout=300)


def _rewrite(gitlab: FakeGitLab, note: dict[str, Any], body: str) -> None:
    """alice (a Maintainer) edits Sluice's note in GitLab's UI: GitLab stamps it."""
    with gitlab.lock:
        note["body"] = body
        note["updated_at"] = gitlab._now()


_RESTORED = pytest.mark.xfail(
    strict=True,
    reason="GitLab's own_comments says no time (an emoji moves a note's updated_at): a "
    "rewrite put back to Sluice's text before any read-back leaves nothing to tell by. "
    "Fix: GitLab's edit history of the note (none in its notes API), or the note's hook, "
    "which the maintainer turned off",
)


@pytest.mark.parametrize(
    "put_back",
    [pytest.param(False, id="left"), pytest.param(True, id="put back", marks=_RESTORED)],
)
def test_gitlab_a_rewrite_made_with_the_webhook_off_counts_for_no_plan(
    world: GitLabWorld, service: GitLabService, put_back: bool
) -> None:
    """Closed for a rewrite left in place (the next hook's evaluation reads the note back:
    its text is none of Sluice's). Put back to Sluice's very text before any evaluation,
    it is open: GitLab's note ``updated_at`` moves on an emoji too (round 9, finding 5), so
    nothing tells the restored note from Sluice's own."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    [note] = gitlab.bot_notes(8)
    shown = note["body"]
    # alice turns the webhook off and rewrites Sluice's note.
    _rewrite(gitlab, note, shown.split("\n")[0] + "\n### Sluice\nNo change to prod.\n")
    time.sleep(0.01)
    gitlab.approve(8, "carol")  # carol approves what she reads
    time.sleep(0.01)
    if put_back:
        _rewrite(gitlab, note, shown)  # alice puts Sluice's text back, then the webhook on
    approval_hook(world, service, S8)  # the next hook: the gate reads carol's approval
    state = approval_state(gitlab, S8)
    assert state["state"] != "success", (
        f"carol approved the note alice rewrote with the webhook off; it counts: {state}"
    )


def test_gitlab_a_rewrite_with_its_hook_is_kept_and_put_back(
    world: GitLabWorld, service: GitLabService
) -> None:
    """The same rewrite with the webhook on. Defended (ed875bc, at the wire): GitLab's
    note hook makes the job read the note back (``GitLabForge.comment``: Sluice's own,
    ``updated_at``): kept as a publication of no plan, Sluice's text put back with the
    edited section, and carol's approval given after it does not count."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    [note] = gitlab.bot_notes(8)
    shown = note["body"]
    _rewrite(gitlab, note, shown.split("\n")[0] + "\n### Sluice\nNo change to prod.\n")
    _deliver_note(service, _note_update(gitlab, note["id"], note["body"]))
    assert "Edited by someone else" in note["body"] and "No change to prod" not in note["body"]
    time.sleep(0.01)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] != "success", approval_state(gitlab, S8)


def test_gitlab_a_forged_note_hook_naming_sluices_note_changes_nothing(
    world: GitLabWorld, service: GitLabService
) -> None:
    """alice (a Maintainer: she holds the project's webhook token) posts Note Hook
    ``update`` bodies naming Sluice's note and claiming she rewrote it, ten times.
    Defended as far as it can be: the hooks' text is never published (the put-back is
    Sluice's own, from its ledger) and the note is edited once (the word that it was
    edited), not once a hook; her claim is taken, so carol's approval counts only once
    the plan is shown again: what a push of hers would cost too, no more."""
    gitlab = world.gitlab
    clock(gitlab)
    commit_heads(world)
    open_mr8(world, service, S8)
    [note] = gitlab.bot_notes(8)
    edits = len(note["bodies"])
    for n in range(10):
        _deliver_note(service, _note_update(gitlab, note["id"], f"rewritten {n}"))
    assert len(note["bodies"]) <= edits + 1
    assert not any("rewritten" in body for body in note["bodies"])
    time.sleep(0.01)
    gitlab.approve(8, "carol")
    approval_hook(world, service, S8)
    assert approval_state(gitlab, S8)["state"] != "success", approval_state(gitlab, S8)
