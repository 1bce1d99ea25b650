"""Hypothesis strategies for webhook payloads: any JSON, JSON shaped like the forges'
payloads, and the real payloads under ``tests/fixtures/webhooks`` with some fields damaged.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from functools import cache
from typing import Any

from hypothesis import strategies as st

from tests.helpers.cases import REALCASES, case_paths

# --- JSON ------------------------------------------------------------------------------------

# Keys and strings the parsers look at, so shaped JSON reaches past the first lookup.
GITHUB_KEYS = (
    "action", "pull_request", "number", "head", "base", "sha", "ref", "repo", "id",
    "full_name", "user", "login", "draft", "merged", "merge_commit_sha", "title", "issue",
    "comment", "body", "review", "state", "commit_id", "check_run", "check_suite", "name",
    "head_sha", "pull_requests", "sender", "requested_action", "identifier", "after",
    "deleted", "pusher", "release", "tag_name", "repository", "installation",
    "merge_group", "head_ref", "base_ref", "base_sha", "reason",
)  # fmt: skip
GITLAB_KEYS = (
    "object_kind", "object_attributes", "action", "iid", "id", "last_commit", "oldrev",
    "source_branch", "target_branch", "source_project_id", "target_project_id", "source",
    "target", "path_with_namespace", "project", "user", "username", "author_id", "draft",
    "work_in_progress", "merge_commit_sha", "title", "changes", "previous", "current",
    "noteable_type", "system", "note", "merge_request", "ref", "after", "checkout_sha",
    "user_username", "pipeline", "sha", "status",
)  # fmt: skip
WORDS = (
    "opened", "synchronize", "reopened", "ready_for_review", "closed", "created", "edited",
    "deleted", "submitted", "dismissed", "rerequested", "requested_action", "published",
    "approved", "approval", "unapproved", "unapproval", "open", "reopen", "update", "merge",
    "close", "create", "merge_request", "note", "tag_push", "MergeRequest", "refs/tags/",
    "refs/tags/v1", "refs/heads/main", "0000000000000000000000000000000000000000",
    "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "/sluice deploy", "/sluice diff a.b",
    "checks_requested", "destroyed", "dequeued",
    "refs/heads/gh-readonly-queue/main/pr-1-ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    "refs/merge-requests/1/train", "merge_request_event", "running", "success", "canceling",
)  # fmt: skip
GITHUB_EVENTS = ("pull_request", "issue_comment", "pull_request_review", "check_run",
                 "check_suite", "push", "release", "ping", "create", "merge_group",
                 "")  # fmt: skip
GITLAB_EVENTS = ("Merge Request Hook", "Note Hook", "Tag Push Hook", "Pipeline Hook",
                 "System Hook", "")  # fmt: skip

# What json.loads can return that no database stores: NUL, lone surrogates ("\\ud800").
unstorable = st.text(st.characters(categories=["Cs"]) | st.sampled_from(["\x00", "a"]), min_size=1)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities too: Python's json.loads accepts them
    | st.text()
    | unstorable
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


def shaped_json(keys: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """JSON objects whose keys and strings are mostly the ones the parser reads."""
    key = st.sampled_from(keys) | st.text(max_size=8)
    leaf = scalars | st.sampled_from(WORDS)
    return st.dictionaries(
        key,
        st.recursive(
            leaf,
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(key, inner, max_size=6),
            max_leaves=40,
        ),
        max_size=8,
    )


def _nested(depth: int, leaf: Any, as_list: bool) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


class _Delete:
    def __repr__(self) -> str:
        return "<deleted>"


class _Corrupt:
    """Keep the field's type, spoil its value: text gets a NUL or a lone surrogate (JSON can
    carry both, no database stores them), an integer is pushed past 64 bits."""

    def __init__(self, char: str, at: float) -> None:
        self.char, self.at = char, at

    def __repr__(self) -> str:
        return f"<corrupted with {self.char!r}>"

    def apply(self, value: Any) -> Any:
        if isinstance(value, str):
            cut = int(len(value) * self.at)
            return value[:cut] + self.char + value[cut:]
        if isinstance(value, int) and not isinstance(value, bool):
            return value + (2**64 if value >= 0 else -(2**64))
        return value


class _Short:
    """A replacement value with a short repr (Hypothesis prints failing examples)."""

    def __init__(self, value: Any, label: str) -> None:
        self.value, self.label = value, label

    def __repr__(self) -> str:
        return self.label


# Replacements for one field of a real payload.
shallow_replacements = st.one_of(
    st.builds(_Delete),
    st.builds(_Corrupt, st.sampled_from(["\x00", "\ud800", "\udfff"]), st.floats(0, 1)),
    st.none(),
    json_values,  # any other JSON, mostly of a wrong type
    st.sampled_from(WORDS),
    st.sampled_from(["\ud800", "a\x00", 2**63, -(2**63) - 1, 2**63 - 1, 0, -1]),
    st.builds(
        lambda c, n: _Short(c * n, f"<{c!r} * {n}>"), st.characters(), st.integers(10_000, 300_000)
    ),
)
replacements = shallow_replacements | st.builds(
    lambda depth, leaf, as_list: _Short(
        _nested(depth, leaf, as_list),
        f"<{leaf!r} in {depth} {'lists' if as_list else 'objects'}>",
    ),
    st.integers(100, 5_000),
    json_values,
    st.booleans(),
)

_SLOT_DEPTH = 12  # real payloads are shallower; deeper is what a mutation nested


def _slots(root: Any) -> list[tuple[Any, ...]]:
    """The path of every key and index in a JSON tree, down to ``_SLOT_DEPTH``."""
    found: list[tuple[Any, ...]] = []
    todo: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        if len(path) >= _SLOT_DEPTH:
            continue
        keys = (
            list(node)
            if isinstance(node, dict)
            else range(len(node))
            if isinstance(node, list)
            else ()
        )
        for key in keys:
            found.append((*path, key))
            todo.append((node[key], (*path, key)))
    return found


@dataclasses.dataclass
class Damaged:
    """A real payload with some fields damaged; its repr says which and how."""

    header: str
    source: str
    changes: list[tuple[tuple[Any, ...], Any]]
    payload: Any = dataclasses.field(repr=False)

    def __repr__(self) -> str:
        return f"Damaged({self.header!r}, {self.source!r}, changes={self.changes!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer
        printer.text(repr(self))


@st.composite
def damaged(
    draw: st.DrawFn,
    cases: tuple[tuple[str, str, dict[str, Any]], ...],
    replacing: st.SearchStrategy[Any] = replacements,
) -> Damaged:
    """A real payload (and the header it came with) with one to four fields damaged, each
    replaced by a value drawn from ``replacing``."""
    # Uniform choices: Hypothesis would favour the first case and the first field.
    choose = draw(st.randoms(use_true_random=True))
    header, source, pristine = choose.choice(cases)
    payload = copy.deepcopy(pristine)
    changes: list[tuple[tuple[Any, ...], Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(payload)
        if not slots:
            break
        path = choose.choice(slots)
        *parents, last = path
        node = payload
        for part in parents:
            node = node[part]
        value = draw(replacing)
        changes.append((path, value))
        if isinstance(value, _Delete):
            node.pop(last)
        elif isinstance(value, _Corrupt):
            node[last] = value.apply(node[last])
        else:
            node[last] = value.value if isinstance(value, _Short) else value
    return Damaged(header, source, changes, payload)


_READ = frozenset(GITHUB_KEYS + GITLAB_KEYS)
_STORED = frozenset(
    {
        ("repository", "full_name"), ("pull_request", "head", "sha"), ("after",),
        ("check_run", "head_sha"), ("check_suite", "head_sha"), ("merge_group", "head_sha"),
        ("project", "path_with_namespace"), ("object_attributes", "last_commit", "id"),
        ("checkout_sha",),
    }
)  # fmt: skip


@st.composite
def corrupted(draw: st.DrawFn, cases: tuple[tuple[str, str, dict[str, Any]], ...]) -> Damaged:
    """A real payload with one text or integer field the parsers read corrupted (see
    ``_Corrupt``)."""
    choose = draw(st.randoms(use_true_random=True))
    header, source, pristine = choose.choice(cases)
    payload = copy.deepcopy(pristine)
    leaves = []
    for path in _slots(payload):
        node = payload
        for part in path[:-1]:
            node = node[part]
        value = node[path[-1]]
        if path[-1] in _READ and isinstance(value, str | int) and not isinstance(value, bool):
            leaves.append((node, path))
    # Half the time a field the service stores in a column (the repository in the queue's
    # key, the head commit): where text a database refuses does the most harm.
    stored = [(n, p) for n, p in leaves if p in _STORED]
    node, path = choose.choice(stored if stored and choose.random() < 0.5 else leaves)
    corruption = _Corrupt(choose.choice(["\x00", "\ud800", "\udfff"]), choose.random())
    node[path[-1]] = corruption.apply(node[path[-1]])
    return Damaged(header, source, [(path, corruption)], payload)


@cache
def _cases(pattern: str) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """(header, file, payload) of each real payload; GitHub's header is its folder's name."""
    found = []
    for path in case_paths(pattern):
        payload = json.loads(path.read_text(encoding="utf-8"))
        header = path.parent.name if path.parent.parent.name == "github" else ""
        found.append((header, str(path.relative_to(REALCASES)), payload))
    return tuple(found)


def real_payloads(pattern: str, *, deep: bool = True) -> st.SearchStrategy[Damaged]:
    """The real payloads matching ``pattern`` (e.g. ``github/*/*.json``), damaged, or with
    one field corrupted; without ``deep``, never nested deeper than ``json.dumps`` can write."""
    cases = _cases(pattern)
    assert cases, f"no real webhook body matches {pattern} under {REALCASES}"
    return damaged(cases, replacements if deep else shallow_replacements) | corrupted(cases)
