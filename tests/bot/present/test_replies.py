"""Replies quote what users and their files wrote only as code (mentions aside): a forge
error naming a PR's own files reaches the PR fenced."""

from __future__ import annotations

from sluice.bot.present import replies

HOSTILE = "conflicts in [click](https://evil.example) @everyone <img src=x> `x`"


def test_a_merge_error_naming_the_prs_files_is_fenced() -> None:
    text = replies.deployed_merge_failed("bob", HOSTILE)
    head, _, fenced = text.partition("\n\n")
    assert head == "@bob deployed to prod, but merging failed:"
    assert HOSTILE not in head
    assert fenced.startswith("```") and fenced.rstrip().endswith("```")
    assert HOSTILE in fenced


def test_a_diff_error_and_a_gave_up_error_are_fenced_too() -> None:
    for text in (
        replies.diff_failed("bob", "s.t", HOSTILE),
        replies.command_gave_up("bob", HOSTILE),
    ):
        before, _, fenced = text.partition("\n\n")
        assert HOSTILE not in before and fenced.startswith("```")
