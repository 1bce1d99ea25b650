"""GitHub payloads -> neutral events, on real deliveries captured by other projects.

Every file under ``tests/fixtures/webhooks/github/<X-GitHub-Event>/`` is parsed; see that
folder's NOTES.md and MANIFEST.tsv for where each comes from and which trap it holds.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.bot.events.github import PayloadError, parse_github
from sluice.bot.events.neutral import (
    CheckRunEvent,
    CommentEvent,
    Event,
    PullRequestEvent,
    ReviewEvent,
    TagEvent,
    event_from_json,
)
from sluice.core.errors import SluiceError
from tests.helpers.cases import CASE_REPOSITORY_ID, REALCASES, case_paths, load_case

PR = "pull_request"
COMMENT = "comment"
REVIEW = "review"
CHECK = "check_run"
TAG = "tag"

# What each real payload must become: the event's kind, or None for "no work".
EXPECTED_KIND: dict[str, str | None] = {
    "check_run/requested_action.payload.json": CHECK,
    "check_run/rerequested.payload.json": CHECK,
    "check_run/rerequested.with-organization.payload.json": CHECK,
    "check_suite/rerequested.payload.json": CHECK,
    "check_suite/rerequested.with-organization.payload.json": CHECK,
    # Tag creation by "create" is covered by the push event that comes with it.
    "create/payload.json": None,
    "create/with-description.payload.json": None,
    "create/with-installation.payload.json": None,
    "create/with-organization.payload.json": None,
    "installation/created.payload.json": None,
    "installation/created.with-requester.payload.json": None,
    "issue_comment/atlantis__githubIssueCommentEvent.json": COMMENT,
    "issue_comment/drone-go-scm__comment.json": COMMENT,
    # The octokit comments are on plain issues.
    "issue_comment/created.1.payload.json": None,
    "issue_comment/created.payload.json": None,
    "issue_comment/created.with-installation.payload.json": None,
    "issue_comment/created.with-organization.payload.json": None,
    "issue_comment/edited.payload.json": None,
    "issue_comment/edited.with-organization.payload.json": None,
    "merge_group/checks_requested.payload.json": "merge_group",
    "pull_request/closed.payload.json": PR,
    "pull_request/closed.with-organization.payload.json": PR,
    "pull_request/drone-go-scm__pr_edited.json": None,
    "pull_request/labeled.payload.json": None,
    "pull_request/labeled.with-organization.payload.json": None,
    "pull_request/nodejs-github-bot__pull-request-opened-mapproxy.json": PR,
    "pull_request/nodejs-github-bot__pull-request-opened-v8.json": PR,
    "pull_request/opened.payload.json": PR,
    "pull_request/opened.with-null-body.json": PR,
    "pull_request/opened.with-organization.payload.json": PR,
    "pull_request/ready_for_review.payload.json": PR,
    "pull_request/ready_for_review.with-installation.payload.json": PR,
    "pull_request/ready_for_review.with-organization.payload.json": PR,
    "pull_request/reopened.payload.json": PR,
    "pull_request/reopened.with-organization.payload.json": PR,
    "pull_request/synchronize.payload.json": PR,
    "pull_request/woodpecker__HookPullRequestClosed.json": PR,
    "pull_request/woodpecker__HookPullRequestEdited.json": None,
    "pull_request/woodpecker__HookPullRequestMerged.json": PR,
    "pull_request_review/dismissed.payload.json": REVIEW,
    "pull_request_review/submitted.payload.json": REVIEW,
    "pull_request_review/submitted.with-organization.payload.json": REVIEW,
    # The octokit pushes of refs/tags/simple-tag are all deletions.
    "push/1.payload.json": None,
    "push/payload.json": None,
    "push/with-installation.payload.json": None,
    "push/with-organization.payload.json": None,
    "push/with-new-branch.payload.json": "branch_push",
    "push/with-no-username-committer.payload.json": "branch_push",
    "push/woodpecker__HookPush.json": "branch_push",
    "push/drone-go-scm__push_tag.json": TAG,
    "push/woodpecker__HookTag.json": TAG,
    "release/created.payload.json": TAG,
    "release/created.with-discussion-url.payload.json": TAG,
    "release/created.with-installation.payload.json": TAG,
    "release/published.payload.json": TAG,
    "release/published.with-discussion-url.payload.json": TAG,
}

CASES = [p.relative_to(REALCASES / "github").as_posix() for p in case_paths("github/*/*.json")]

HELLO_HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def parse_case(relpath: str) -> Event | None:
    """Parse ``github/<relpath>`` with its folder as the ``X-GitHub-Event`` name."""
    return parse_github(relpath.partition("/")[0], load_case(f"github/{relpath}"))


def parsed(relpath: str, cls: type[Any]) -> Any:
    event = parse_case(relpath)
    assert isinstance(event, cls), f"{relpath} gave {event!r}"
    return event


# --- every real payload ---------------------------------------------------------------------


def test_every_case_has_an_expectation(realcases: Path) -> None:
    assert sorted(CASES) == sorted(EXPECTED_KIND)


@pytest.mark.parametrize("relpath", CASES)
def test_real_payload_kind_and_round_trip(relpath: str) -> None:
    event = parse_case(relpath)
    expected = EXPECTED_KIND[relpath]
    if expected is None:
        assert event is None
        return
    assert event is not None
    assert event.kind == expected
    assert event.forge == "github"
    assert event.repo == load_case(f"github/{relpath}")["repository"]["full_name"]
    assert event_from_json(event.to_json()) == event


@pytest.mark.parametrize("relpath", CASES)
def test_installation_id_follows_the_payload(relpath: str) -> None:
    event = parse_case(relpath)
    if event is None:
        return
    installation = load_case(f"github/{relpath}").get("installation")
    assert event.installation_id == (installation["id"] if installation else None)


# --- pull_request ---------------------------------------------------------------------------


def test_opened_same_repo_pr() -> None:
    event = parsed("pull_request/opened.payload.json", PullRequestEvent)
    assert event == PullRequestEvent(
        forge="github",
        repo="Codertocat/Hello-World",
        installation_id=1,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="opened",
        number=2,
        head_sha=HELLO_HEAD,
        head_ref="changes",
        base_ref="master",
        base_sha="f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
        author="Codertocat",
        draft=False,
        fork=False,
        merged=False,
        merge_sha=None,
        title="Update the README with new information.",
        updated_ms=1557933633000,  # pull_request.updated_at 2019-05-15T15:20:33Z
        pusher="Codertocat",  # sender.login: who opened it pushed its head
        pusher_id=21031067,  # sender.id: the account, whatever its login becomes
        author_id=21031067,  # pull_request.user.id
    )


def test_opened_with_null_body_parses() -> None:
    event = parsed("pull_request/opened.with-null-body.json", PullRequestEvent)
    assert (event.number, event.head_sha, event.author, event.fork) == (
        2,
        HELLO_HEAD,
        "Codertocat",
        False,
    )


@pytest.mark.parametrize(
    ("relpath", "number", "author"),
    [
        ("pull_request/nodejs-github-bot__pull-request-opened-v8.json", 9422, "cristiancavalli"),
        ("pull_request/nodejs-github-bot__pull-request-opened-mapproxy.json", 7972, "jasnell"),
    ],
)
def test_fork_prs(relpath: str, number: int, author: str) -> None:
    event = parsed(relpath, PullRequestEvent)
    assert (event.action, event.number, event.author) == ("opened", number, author)
    assert event.fork is True
    # Its pushes are told to the fork alone: its owner counts as having pushed to the PR.
    assert event.head_owner == author
    assert event.base_ref == "master"
    assert event.head_ref == "mapproxy"
    # 2017 payloads predate draft PRs: no "draft" key at all.
    assert event.draft is False
    assert event.installation_id is None


def test_edited_pr_is_no_work_and_its_fork_flag_is_a_trap() -> None:
    relpath = "pull_request/drone-go-scm__pr_edited.json"
    assert parse_case(relpath) is None
    # head.repo.fork is true only because the repository itself is a fork; head and base
    # are the same repository, so were this an opened PR it would not be a fork PR.
    payload = load_case(f"github/{relpath}")
    assert payload["pull_request"]["head"]["repo"]["fork"] is True
    payload["action"] = "opened"
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.fork is False
    assert event.head_owner is None  # the base repository's pushes are told to it


def test_merged_close() -> None:
    event = parsed("pull_request/woodpecker__HookPullRequestMerged.json", PullRequestEvent)
    assert (event.action, event.number, event.merged) == ("closed", 62, True)
    assert event.merge_sha == "473d70eb7c50a54ae62bf9b124efa1c3eb245be8"
    assert (event.head_ref, event.base_ref) == ("anbraten-patch-3", "main")
    assert event.fork is False


@pytest.mark.parametrize(
    "relpath",
    [
        "pull_request/closed.payload.json",
        "pull_request/closed.with-organization.payload.json",
        "pull_request/woodpecker__HookPullRequestClosed.json",
    ],
)
def test_unmerged_close_ignores_merge_commit_sha(relpath: str) -> None:
    payload = load_case(f"github/{relpath}")
    assert payload["pull_request"]["merge_commit_sha"]  # GitHub's test merge
    event = parsed(relpath, PullRequestEvent)
    assert event.action == "closed"
    assert event.merged is False
    assert event.merge_sha is None


@pytest.mark.parametrize(
    "relpath",
    [
        "pull_request/ready_for_review.payload.json",
        "pull_request/reopened.payload.json",
        "pull_request/synchronize.payload.json",
    ],
)
def test_other_pr_actions_keep_their_name(relpath: str) -> None:
    event = parsed(relpath, PullRequestEvent)
    assert event.action == Path(relpath).name.partition(".")[0]
    assert (event.number, event.head_sha, event.fork) == (2, HELLO_HEAD, False)


# --- issue_comment --------------------------------------------------------------------------


def test_pr_comment_drone() -> None:
    event = parsed("issue_comment/drone-go-scm__comment.json", CommentEvent)
    assert event == CommentEvent(
        forge="github",
        repo="abc/def-ci-webhook-test",
        installation_id=None,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="created",
        number=2,
        comment_id=751955664,
        author="lts-def",
        body="trigger abc",
        created_ms=1609220954000,  # comment.created_at 2020-12-29T05:49:14Z
        author_id=10278482,  # comment.user.id
    )


def test_pr_comment_atlantis() -> None:
    event = parsed("issue_comment/atlantis__githubIssueCommentEvent.json", CommentEvent)
    assert (event.action, event.number, event.comment_id) == ("created", 1, 396926483)
    assert (event.author, event.body) == ("runatlantis", "###comment body###")
    assert event.repo == "runatlantis/atlantis-tests"


def test_edited_and_deleted_pr_comments_are_kept() -> None:
    payload = load_case("github/issue_comment/drone-go-scm__comment.json")
    payload["sender"].update(login="alice", id=77)
    for action in ("edited", "deleted"):
        payload["action"] = action
        event = parse_github("issue_comment", payload)
        assert isinstance(event, CommentEvent)
        assert event.action == action
        # Who edited it: the signed hook's sender, never the comment's author.
        assert (event.editor, event.editor_id, event.author) == ("alice", 77, "lts-def")
    payload["action"] = "created"
    created = parse_github("issue_comment", payload)
    assert isinstance(created, CommentEvent) and created.editor is None


def test_comment_with_null_pull_request_link_is_an_issue_comment() -> None:
    payload = load_case("github/issue_comment/drone-go-scm__comment.json")
    payload["issue"]["pull_request"] = None
    assert parse_github("issue_comment", payload) is None


# --- pull_request_review --------------------------------------------------------------------


def test_review_dismissed() -> None:
    event = parsed("pull_request_review/dismissed.payload.json", ReviewEvent)
    assert event == ReviewEvent(
        forge="github",
        repo="Codertocat/Hello-World",
        installation_id=1,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="dismissed",
        number=2,
        reviewer="Codertocat",
        state="DISMISSED",
        commit_sha=HELLO_HEAD,
        head_sha=HELLO_HEAD,
        review_id=237895671,
        submitted_ms=1557933638000,  # review.submitted_at 2019-05-15T15:20:38Z
        reviewer_id=21031067,  # review.user.id
    )


def test_review_submitted_state_is_upper_cased() -> None:
    event = parsed("pull_request_review/submitted.payload.json", ReviewEvent)
    assert (event.action, event.state) == ("submitted", "COMMENTED")
    payload = load_case("github/pull_request_review/submitted.payload.json")
    payload["review"]["state"] = "approved"
    event = parse_github("pull_request_review", payload)
    assert isinstance(event, ReviewEvent)
    assert event.state == "APPROVED"


# --- check_run / check_suite ----------------------------------------------------------------


def test_check_run_requested_action() -> None:
    event = parsed("check_run/requested_action.payload.json", CheckRunEvent)
    assert event == CheckRunEvent(
        forge="github",
        repo="electron/electron",
        installation_id=690857,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        action="requested_action",
        check_name="API Review",
        head_sha="5bd5f196a46b8222fb7484f05faba41a73cf34bd",
        numbers=(26764,),
        requester="codebytere",
        identifier="lgtm|26764",
        check_run_id=1494503112,
        requester_id=2036040,  # sender.id
        app_id=25811,  # check_run.app.id: the App that made the run
    )


def test_check_run_rerequested_without_prs() -> None:
    event = parsed("check_run/rerequested.payload.json", CheckRunEvent)
    assert (event.action, event.check_name, event.numbers) == ("rerequested", "randscape", ())
    assert event.head_sha == "d6fde92930d4715a2b49857d24b940956b26d2d3"
    assert (event.requester, event.identifier) == ("octocat", None)


def test_check_suite_rerequested_means_every_check() -> None:
    event = parsed("check_suite/rerequested.payload.json", CheckRunEvent)
    assert (event.action, event.check_name, event.numbers) == ("rerequested", "", (2,))
    assert event.head_sha == HELLO_HEAD
    assert event.requester == "octocoders-linter[bot]"
    assert event.installation_id == 957387


@pytest.mark.parametrize("action", ["created", "completed"])
def test_check_run_lifecycle_is_no_work(action: str) -> None:
    # Our own check runs echo back as created/completed; acting on them would loop.
    payload = load_case("github/check_run/rerequested.payload.json")
    payload["action"] = action
    assert parse_github("check_run", payload) is None


# --- push / release / create ----------------------------------------------------------------


def test_tag_push_woodpecker() -> None:
    event = parsed("push/woodpecker__HookTag.json", TagEvent)
    assert event == TagEvent(
        forge="github",
        repo="6543/test_ci_tmp",
        installation_id=None,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        tag="the-tag-v1",
        sha="67012991d6c69b1c58378346fca366b864d8d1a1",
        source="push",
        actor="6543",
        actor_id=24977596,  # sender.id: who released is compared by account (released_by)
    )


def test_tag_push_drone() -> None:
    event = parsed("push/drone-go-scm__push_tag.json", TagEvent)
    assert (event.tag, event.sha, event.source) == (
        "v0.0.1",
        "d2b75aa7797ec26b088fa2dd527e9d2c052fcedd",
        "push",
    )
    assert event.actor == "bradrydzewski"


def test_tag_push_actor_falls_back_to_the_pusher() -> None:
    payload = load_case("github/push/woodpecker__HookTag.json")
    del payload["sender"]
    payload["pusher"]["name"] = "someone"
    event = parse_github("push", payload)
    assert isinstance(event, TagEvent)
    assert event.actor == "someone"


def test_tag_deleted_flag_or_zero_after_is_no_work() -> None:
    payload = load_case("github/push/woodpecker__HookTag.json")
    payload["after"] = "0" * 40
    assert parse_github("push", payload) is None
    payload = load_case("github/push/woodpecker__HookTag.json")
    payload["deleted"] = True
    assert parse_github("push", payload) is None


@pytest.mark.parametrize(
    "relpath",
    ["release/published.payload.json", "release/published.with-discussion-url.payload.json"],
)
def test_release_published(relpath: str) -> None:
    event = parsed(relpath, TagEvent)
    assert event == TagEvent(
        forge="github",
        repo="Codertocat/Hello-World",
        installation_id=None,
        repo_id=CASE_REPOSITORY_ID,  # repository.id (tests.helpers.cases)
        tag="0.0.1",
        sha=None,
        source="release",
        actor="Codertocat",
        release_id=17372790,
        actor_id=21031067,
    )


def test_draft_release_created_is_no_work() -> None:
    payload = load_case("github/release/created.payload.json")
    payload["release"]["draft"] = True
    assert parse_github("release", payload) is None


@pytest.mark.parametrize("action", ["unpublished", "deleted", "edited", "prereleased"])
def test_other_release_actions_are_no_work(action: str) -> None:
    payload = load_case("github/release/published.payload.json")
    payload["action"] = action
    assert parse_github("release", payload) is None


@pytest.mark.parametrize("event", ["ping", "installation", "create", "issues", "status", ""])
def test_events_sluice_does_not_act_on(event: str) -> None:
    assert parse_github(event, {"zen": "Design for failure."}) is None


# --- malformed payloads ---------------------------------------------------------------------


def _opened() -> dict[str, Any]:
    return load_case("github/pull_request/opened.payload.json")


def test_missing_field_is_named() -> None:
    payload = _opened()
    del payload["pull_request"]["head"]["sha"]
    with pytest.raises(PayloadError, match=r"^pull_request\.head\.sha is missing$"):
        parse_github("pull_request", payload)


def test_missing_object_on_the_way_names_the_full_path() -> None:
    payload = _opened()
    del payload["pull_request"]["head"]
    with pytest.raises(PayloadError, match=r"^pull_request\.head\.sha is missing$"):
        parse_github("pull_request", payload)


def test_payload_error_is_a_sluice_error() -> None:
    assert issubclass(PayloadError, SluiceError)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda p: p["pull_request"].update(head="x"),
            "pull_request.head should be an object, not a string",
        ),
        (lambda p: p["pull_request"]["head"].update(sha=None), "pull_request.head.sha is null"),
        (
            lambda p: p["pull_request"].update(number="2"),
            "pull_request.number should be an integer, not a string",
        ),
        (
            lambda p: p["pull_request"].update(number=True),
            "pull_request.number should be an integer, not true or false",
        ),
        (
            lambda p: p["pull_request"].update(draft="no"),
            "pull_request.draft should be true or false, not a string",
        ),
        (lambda p: p.update(repository=[]), "repository should be an object, not an array"),
        (lambda p: p.pop("repository"), "repository.full_name is missing"),
        (lambda p: p["pull_request"]["head"].pop("repo"), "pull_request.head.repo is missing"),
        (
            lambda p: p.update(installation={"id": "1"}),
            "installation.id should be an integer, not a string",
        ),
        (lambda p: p.pop("action"), "action is missing"),
    ],
)
def test_wrong_shapes_are_payload_errors(mutate: Any, message: str) -> None:
    payload = _opened()
    mutate(payload)
    with pytest.raises(PayloadError) as info:
        parse_github("pull_request", payload)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        # Found by tests/fuzz: json.loads accepts these, the state database does not; the
        # service answered 500 (SQLite) or 503 for ever (PostgreSQL) instead of 400.
        (
            ("repository", "full_name"),
            "o/\ud800",
            "repository.full_name is not valid Unicode: it holds an unpaired surrogate",
        ),
        (("pull_request", "head", "sha"), "ab\x00", "pull_request.head.sha holds a NUL"),
        (("pull_request", "title"), "\udfff", "pull_request.title is not valid Unicode"),
        (("pull_request", "number"), 2**63, "pull_request.number is out of range"),
        (("installation",), {"id": -(2**63) - 1}, "installation.id is out of range"),
    ],
)
def test_values_no_database_stores_are_payload_errors(
    path: tuple[str, ...], value: Any, message: str
) -> None:
    payload = _opened()
    *parents, last = path
    node = payload
    for key in parents:
        node = node[key]
    node[last] = value
    with pytest.raises(PayloadError, match=f"^{re.escape(message)}"):
        parse_github("pull_request", payload)


def test_integers_at_the_edge_of_64_bits_are_kept() -> None:
    payload = _opened()
    payload["pull_request"]["number"] = 2**63 - 1
    payload["installation"] = {"id": -(2**63)}
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert (event.number, event.installation_id) == (2**63 - 1, -(2**63))


def test_payload_that_is_not_an_object() -> None:
    with pytest.raises(PayloadError, match="should be an object, not an array"):
        parse_github("pull_request", [])  # type: ignore[arg-type]


def test_check_run_pr_list_items_are_checked() -> None:
    payload = load_case("github/check_run/requested_action.payload.json")
    payload["check_run"]["pull_requests"] = [7]
    with pytest.raises(PayloadError, match=r"check_run\.pull_requests\[0\] should be an object"):
        parse_github("check_run", payload)
    payload["check_run"]["pull_requests"] = [{"number": 1}, {"id": 2}]
    with pytest.raises(PayloadError, match=r"^check_run\.pull_requests\[1\]\.number is missing$"):
        parse_github("check_run", payload)


def test_requested_action_needs_its_identifier() -> None:
    payload = load_case("github/check_run/requested_action.payload.json")
    del payload["requested_action"]
    with pytest.raises(PayloadError, match=r"^requested_action\.identifier is missing$"):
        parse_github("check_run", payload)


def test_ignored_actions_need_no_fields() -> None:
    # A labelled PR is no work, so a body without the PR fields is not an error.
    assert parse_github("pull_request", {"action": "labeled"}) is None
    assert parse_github("push", {"ref": "refs/notes/commits"}) is None
    # A push to a branch is work (who pushed is recorded): its fields are needed.
    with pytest.raises(PayloadError, match="after is missing"):
        parse_github("push", {"ref": "refs/heads/main"})


# --- forks, by hand -------------------------------------------------------------------------


def test_deleted_fork_counts_as_fork() -> None:
    payload = _opened()
    payload["pull_request"]["head"]["repo"] = None
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.fork is True


def test_fork_by_name_when_ids_are_absent() -> None:
    payload = _opened()
    del payload["pull_request"]["head"]["repo"]["id"]
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.fork is False
    payload["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World"
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.fork is True


def test_fork_by_id_survives_a_rename() -> None:
    payload = _opened()
    payload["pull_request"]["head"]["repo"]["full_name"] = "Codertocat/Old-Name"
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent)
    assert event.fork is False


# --- no payload makes the parser crash ------------------------------------------------------


def _slots(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) in a JSON tree, parents before children."""
    if isinstance(node, dict):
        for key in list(node):
            yield node, key
            yield from _slots(node[key])
    elif isinstance(node, list):
        for index in range(len(node)):
            yield node, index
            yield from _slots(node[index])


_MISSING = object()
_REPLACEMENTS: list[Any] = [_MISSING, None, "x", 7, True, [], {}, [{}]]


@pytest.mark.parametrize("relpath", [c for c in CASES if EXPECTED_KIND.get(c) is not None])
def test_any_damaged_field_gives_an_event_none_or_payload_error(relpath: str) -> None:
    """Each field replaced in turn (dropped, null, wrong type): never KeyError/TypeError."""
    event_name = relpath.partition("/")[0]
    payload = load_case(f"github/{relpath}")
    pristine = copy.deepcopy(payload)
    for container, key in list(_slots(payload)):
        original = container[key]
        for replacement in _REPLACEMENTS:
            if replacement is _MISSING:
                if isinstance(container, list):
                    continue
                del container[key]
            else:
                container[key] = copy.deepcopy(replacement)
            try:
                parse_github(event_name, payload)
            except PayloadError:
                pass
            finally:
                container[key] = original
    assert payload == pristine


def test_forge_times_are_read_and_an_unknown_form_never_refuses_a_delivery() -> None:
    payload = load_case("github/pull_request/opened.payload.json")
    payload["pull_request"]["updated_at"] = "2019-05-15T17:20:33+02:00"  # an offset
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent) and event.updated_ms == 1557933633000
    for odd in ("yesterday", "", 1557933633, None):
        payload["pull_request"]["updated_at"] = odd
        event = parse_github("pull_request", payload)
        assert isinstance(event, PullRequestEvent) and event.updated_ms is None
    del payload["pull_request"]["updated_at"]
    event = parse_github("pull_request", payload)
    assert isinstance(event, PullRequestEvent) and event.updated_ms is None
