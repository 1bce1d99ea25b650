"""Forge.pushers_of: who the forge's own records say pushed a branch to a commit, asked of
each forge at the wire.

A push webhook is the pusher's to keep from being sent (GitHub sends none for a push of
over 5,000 branches at once, GitLab none for over 3), so the gate asks the forge who
pushed a pull request's head no hook told of: GitHub's repository activity, GitLab's push
events. GitHub and GitLab are mocked at the wire with ``responses`` (PyGithub and
python-gitlab run for real, in a strict mock: an unregistered request is a
ConnectionError). What an answer says is taken only where its own entry says it (the ref,
the commit), never because the query asked for it; the pages read are bounded, and past
the bound nobody is named (the gate then asks one approval more).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from sluice.bot.forge.base import PUSH_RECORDS_LIMIT, ForgeError
from sluice.bot.forge.memory import MemoryForge
from tests.helpers.forge_clients import GITHUB_API, GITLAB, github_forge, gitlab_forge, rs

__all__ = ["rs"]  # fixtures

ACTIVITY = f"{GITHUB_API}/repos/octo/widgets/activity"
EVENTS = f"{GITLAB}/api/v4/projects/data%2Fwarehouse/events"
A, B, C = "a" * 40, "b" * 40, "c" * 40


def _query(call: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(call.request.url).query)


# -- GitHub: the repository's activity ----------------------------------------------------


def _activity(ref: str, after: str, actor: str | None, uid: int = 5,
              kind: str = "push") -> dict[str, Any]:  # fmt: skip
    who = None if actor is None else {"login": actor, "id": uid, "type": "User"}
    return {"id": 1, "node_id": "RA_1", "before": "0" * 40, "after": after, "ref": ref,
            "timestamp": "2026-11-21T10:00:00Z", "activity_type": kind, "actor": who}  # fmt: skip


def test_github_names_who_created_the_branch_at_the_head(rs: responses.RequestsMock) -> None:
    # bob's `git push origin bobs:change junk/0 ... junk/5000`: no webhook, but the
    # activity keeps the branch's creation, by bob, at B.
    asked = rs.get(ACTIVITY, json=[
        _activity("refs/heads/change", C, "alice", 7),
        _activity("refs/heads/change", B, "bob", 5, "branch_creation"),
    ])  # fmt: skip
    assert github_forge().pushers_of("change", B) == [("bob", 5)]
    query = _query(asked.calls[0])  # every branch's activity: no ref asked
    assert query == {"per_page": ["100"]}


def test_github_an_entry_naming_someone_else_for_another_sha_is_not_taken(
    rs: responses.RequestsMock,
) -> None:
    # carol pushed A to the branch; nobody is named for its head B.
    rs.get(ACTIVITY, json=[_activity("refs/heads/change", A, "carol", 9)])
    assert github_forge().pushers_of("change", B) == []


def test_github_a_page_that_lies_about_the_ref_is_not_taken(rs: responses.RequestsMock) -> None:
    # carol's pushes of B to another branch (or a tag): pushers_of names who pushed the
    # branch itself, by what each entry says.
    rs.get(ACTIVITY, json=[
        _activity("refs/heads/other", B, "carol", 9),
        _activity("refs/tags/change", B, "carol", 9),
        _activity("refs/heads/change/x", B, "carol", 9),
        _activity("refs/heads/change", B, None),  # a deleted account: names nobody
        "not an entry",
    ])  # fmt: skip
    assert github_forge().pushers_of("change", B) == []


def test_github_reads_the_next_page_by_its_cursor_never_by_the_link_s_address(
    rs: responses.RequestsMock,
) -> None:
    # The next link points elsewhere: only its `after` cursor is used, on GitHub's own
    # address for this repository (the token never goes to another host).
    link = '<https://evil.example.com/steal?per_page=100&after=CURSOR2>; rel="next"'
    first = rs.get(ACTIVITY, json=[_activity("refs/heads/change", A, "alice", 7)],
                   headers={"Link": link})  # fmt: skip
    second = rs.get(ACTIVITY, json=[_activity("refs/heads/change", B, "bob", 5)],
                    match=[responses.matchers.query_param_matcher(
                        {"per_page": "100", "after": "CURSOR2"})])  # fmt: skip
    assert github_forge().pushers_of("change", B) == [("bob", 5)]
    assert first.call_count == 1 and second.call_count == 1


def test_github_past_its_bound_names_nobody(rs: responses.RequestsMock) -> None:
    # Pages without end: three are read (PUSH_RECORDS_LIMIT, 100 a page), then nobody is
    # named: the gate asks one approval more, as for a push nobody names.
    pages = PUSH_RECORDS_LIMIT // 100
    entries = [_activity("refs/heads/change", A, "alice", 7)] * 100
    link = f'<{ACTIVITY}?per_page=100&after=MORE>; rel="next"'
    asked = rs.get(ACTIVITY, json=entries, headers={"Link": link})
    assert github_forge().pushers_of("change", B) == []
    assert asked.call_count == pages == 3


@pytest.mark.parametrize("status", [403, 404])
def test_github_a_failure_is_a_forge_error_naming_what_was_asked(
    rs: responses.RequestsMock, status: int
) -> None:
    rs.get(ACTIVITY, status=status, json={"message": "Resource not accessible by integration"})
    with pytest.raises(ForgeError, match=rf"reading who pushed bbbbbbbbbbbb.*{status}"):
        github_forge().pushers_of("change", B)


def test_github_an_answer_that_is_no_list_is_a_forge_error(rs: responses.RequestsMock) -> None:
    rs.get(ACTIVITY, json={"after": B, "actor": {"login": "alice", "id": 7}})
    with pytest.raises(ForgeError, match="not a list"):
        github_forge().pushers_of("change", B)


# -- GitLab: the project's push events -----------------------------------------------------


def _event(ref: str | None, sha: str, username: str, uid: int, *,
           ref_type: str = "branch", ref_count: int | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "id": 1, "project_id": 3, "action_name": "pushed to", "target_type": None,
        "author_id": uid, "author_username": username, "created_at": "2026-11-21T10:00:00Z",
        "author": {"id": uid, "username": username, "name": username.title()},
        "push_data": {"commit_count": 1, "action": "pushed", "ref_type": ref_type,
                      "commit_from": None, "commit_to": sha, "ref": ref,
                      "commit_title": "change", "ref_count": ref_count},
    }  # fmt: skip


def test_gitlab_names_who_pushed_the_branch_to_the_head(rs: responses.RequestsMock) -> None:
    asked = rs.get(EVENTS, json=[_event("change", C, "alice", 7), _event("change", B, "bob", 5)])
    assert gitlab_forge().pushers_of("change", B) == [("bob", 5)]
    assert _query(asked.calls[0])["action"] == ["pushed"]


def test_gitlab_takes_only_what_an_event_itself_says(rs: responses.RequestsMock) -> None:
    # carol's pushes: of another sha, of B to another branch, a tag named as the branch,
    # and a push of many branches at once (one event naming none): nobody is named.
    rs.get(EVENTS, json=[
        _event("change", A, "carol", 9),
        _event("other", B, "carol", 9),
        _event("change", B, "carol", 9, ref_type="tag"),
        _event(None, B, "carol", 9, ref_count=5001),
        {"id": 2, "action_name": "pushed to", "push_data": None, "author": None},
    ])  # fmt: skip
    assert gitlab_forge().pushers_of("change", B) == []


def test_gitlab_past_its_bound_names_nobody(rs: responses.RequestsMock) -> None:
    # Pages without end, of pushes to other branches (the API filters no branch): three
    # are read, then nobody is named (the gate asks one approval more).
    events = [_event("other", A, "alice", 7)] * 100
    link = f'<{EVENTS}?action=pushed&per_page=100&page=2>; rel="next"'
    asked = rs.get(EVENTS, json=events, headers={"Link": link, "X-Next-Page": "2"})
    assert gitlab_forge().pushers_of("change", B) == []
    assert asked.call_count == PUSH_RECORDS_LIMIT // 100 == 3


def test_gitlab_a_failure_is_a_forge_error_naming_what_was_asked(
    rs: responses.RequestsMock,
) -> None:
    rs.get(EVENTS, status=403, json={"message": "403 Forbidden"})
    with pytest.raises(ForgeError, match=r"reading who pushed bbbbbbbbbbbb.*403"):
        gitlab_forge().pushers_of("change", B)


# -- the in-memory forge -------------------------------------------------------------------


def test_memory_names_whom_its_push_log_does_within_the_bound() -> None:
    forge = MemoryForge()
    forge.commit("r" * 40, {"config.yaml": "x"}, branch="main")
    forge.open_pull(1, head_sha=B, base="main", author="alice", head_ref="change",
                    pushed_by="bob")  # fmt: skip
    forge.push(1, C, by="")  # a push it keeps no record of
    assert forge.pushers_of("change", B) == [("bob", forge.account_id("bob"))]
    assert forge.pushers_of("change", C) == []
    forge.push_log += [("other", A, "alice")] * PUSH_RECORDS_LIMIT
    assert forge.pushers_of("change", B) == []  # older than the newest it reads


# -- one listing, of every branch, for every commit of a pull request ----------------------


def test_github_lists_the_records_of_every_commit_asked_in_one_listing(
    rs: responses.RequestsMock,
) -> None:
    # bob made `change` at A (from nothing: all zeros), alice pushed B and C on top in one
    # push (C names them both: its `before` is A); carol's push of B to another branch is
    # a record of B all the same (whoever then brought it to `change`, carol pushed it
    # first); dave's of a commit not asked, and an entry naming no ref, name nobody.
    made = _activity("refs/heads/change", A, "bob", 5, "branch_creation")
    pushed = {**_activity("refs/heads/change", C, "alice", 7), "before": A.upper()}
    asked = rs.get(ACTIVITY, json=[
        pushed,
        _activity("refs/heads/other", B, "carol", 9),
        {**_activity("refs/heads/x", B, "erin", 13), "ref": None},
        _activity("refs/heads/change", "d" * 40, "dave", 11),
        made,
    ])  # fmt: skip
    records = github_forge().push_records([A, B, C])
    assert [(r.before, r.after, r.login, r.user_id, r.ref) for r in records] == [
        (A, C, "alice", 7, "refs/heads/change"),
        (None, B, "carol", 9, "refs/heads/other"),
        (None, A, "bob", 5, "refs/heads/change"),
    ]
    assert asked.call_count == 1 and _query(asked.calls[0]) == {"per_page": ["100"]}


def test_gitlab_names_the_head_a_push_of_many_commits_left_and_where_it_began(
    rs: responses.RequestsMock,
) -> None:
    # A push of 25 commits (its hook lists 20 of them): the event names its last commit
    # and the head before it, so the gate can tell which commits it brought.
    many = _event("change", C, "alice", 7)
    many["push_data"] = {**many["push_data"], "commit_count": 25, "commit_from": A}
    made = _event("change", A, "bob", 5)
    made["push_data"] = {**made["push_data"], "commit_from": "0" * 40}
    asked = rs.get(EVENTS, json=[many, _event("other", B, "carol", 9), made])
    records = gitlab_forge().push_records([A, B, C])
    assert [(r.before, r.after, r.login, r.user_id) for r in records] == [
        (A, C, "alice", 7),
        (None, B, "carol", 9),
        (None, A, "bob", 5),
    ]
    assert asked.call_count == 1


def test_gitlab_lists_the_records_of_every_branch_and_tag_by_what_each_names(
    rs: responses.RequestsMock,
) -> None:
    # carol pushed B to `side`, dave tagged it, erin's push of many refs at once names no
    # ref (GitLab's bulk event: a commit it names is still hers); a push of another commit
    # names nobody. The query asks no branch (the API filters none).
    asked = rs.get(EVENTS, json=[
        _event("side", B, "carol", 9),
        _event("v1", B, "dave", 11, ref_type="tag"),
        _event(None, B, "erin", 13, ref_count=4),
        _event("side", "d" * 40, "frank", 15),
    ])  # fmt: skip
    records = gitlab_forge().push_records([A, B])
    assert [(r.after, r.login, r.user_id, r.ref) for r in records] == [
        (B, "carol", 9, "refs/heads/side"),
        (B, "dave", 11, "refs/tags/v1"),
        (B, "erin", 13, None),
    ]
    assert _query(asked.calls[0]) == {"action": ["pushed"], "per_page": ["100"]}


def test_memory_lists_the_records_of_every_branch_each_after_its_branch_s_last() -> None:
    forge = MemoryForge()
    forge.push_log += [("side", A, "mallory"), ("change", C, "bob"), ("side", B, "mallory")]
    forge.push_log += [("change", B, "alice")]
    records = forge.push_records([B])
    assert records is not None
    assert [(r.before, r.after, r.login, r.ref) for r in records] == [
        (C, B, "alice", "refs/heads/change"),
        (A, B, "mallory", "refs/heads/side"),
    ]
    assert forge.pushers_of("change", B) == [("alice", forge.account_id("alice"))]
