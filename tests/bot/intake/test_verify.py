"""Webhook signature and token checks, against GitHub's published test vector."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from sluice.bot.intake.verify import (
    gitlab_project_of,
    gitlab_project_token,
    gitlab_token_shaped,
    verify_github,
    verify_gitlab,
    verify_token,
)

# github/docs, "Validating webhook deliveries" (CC-BY-4.0); also in
# tests/fixtures/webhooks/github/signature_vector.txt.
SECRET = b"It's a Secret to Everybody"
BODY = b"Hello, World!"
DIGEST = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
HEADER = f"sha256={DIGEST}"


def test_published_vector_verifies() -> None:
    assert verify_github(SECRET, BODY, HEADER)


def test_vector_file_agrees(realcases: Path) -> None:
    text = (realcases / "github" / "signature_vector.txt").read_text(encoding="utf-8")
    assert HEADER in text


def test_any_body_signed_with_the_secret_verifies() -> None:
    body = b'{"zen": "Keep it logically awesome.", "hook_id": 1}\n'
    header = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert verify_github(b"s3cret", body, header)


@pytest.mark.parametrize(
    ("secret", "body"),
    [
        (b"It's a Secret to Everybody!", BODY),  # wrong secret
        (SECRET, b"Hello, World!\n"),  # body changed by one byte
        (SECRET, b"Hello, World"),
        (SECRET, b""),
    ],
)
def test_wrong_secret_or_body_fails(secret: bytes, body: bytes) -> None:
    assert not verify_github(secret, body, HEADER)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        DIGEST,  # no prefix
        f"SHA256={DIGEST}",  # upper-case prefix
        f"Sha256={DIGEST}",
        f"sha256={DIGEST.upper()}",  # GitHub sends lower-case hex
        f"sha1={DIGEST}",
        "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6",  # the legacy header's format
        f"sha256={DIGEST[:-1]}",  # 63 digits
        f"sha256={DIGEST}0",  # 65 digits
        f"sha256= {DIGEST}",
        f" sha256={DIGEST}",
        f"sha256={DIGEST} ",
        f"sha256={DIGEST}\n",
        f"sha256={DIGEST},sha256={DIGEST}",
        f"sha256={DIGEST[:-1]}g",  # not hex
        f"sha256={DIGEST[:-1]}é",  # non-ASCII: compare_digest would raise on it
        "sha256=",
        "sha256",
    ],
)
def test_missing_or_malformed_header_fails_without_raising(header: str | None) -> None:
    assert not verify_github(SECRET, BODY, header)


def test_empty_secret_never_verifies() -> None:
    # Even a header correctly computed with the empty key: an unset secret fails closed.
    header = "sha256=" + hmac.new(b"", BODY, hashlib.sha256).hexdigest()
    assert not verify_github(b"", BODY, header)


def test_token_matches() -> None:
    assert verify_token("glpat-token", "glpat-token")
    assert verify_token("jeton-é", "jeton-é")


@pytest.mark.parametrize(
    ("expected", "given"),
    [
        ("token", None),
        ("token", ""),
        ("", ""),  # an unset token fails closed, even against an empty header
        ("", "token"),
        ("token", "token "),
        ("token", "Token"),
        ("token", "tok"),
        ("token", "tokén"),  # non-ASCII: compare_digest on str would raise
        ("token", "\udcff"),  # a lone surrogate, as surrogateescape decoding yields
    ],
)
def test_token_mismatch_fails_without_raising(expected: str, given: str | None) -> None:
    assert not verify_token(expected, given)


def test_a_gitlab_project_token_verifies_for_its_project_only() -> None:
    token = gitlab_project_token("master", 7)
    assert gitlab_token_shaped(token) and verify_gitlab("master", 7, token)
    assert not verify_gitlab("master", 8, token)  # another project's id
    assert not verify_gitlab("other", 7, token)  # another secret
    assert not verify_gitlab("master", None, token)  # the body names no project
    assert not verify_gitlab("", 7, token) and not verify_gitlab("master", 7, None)
    assert not verify_gitlab("master", 7, "master")  # the bare secret...
    assert verify_gitlab("master", 7, "master", shared=True)  # ...only where it is shared
    assert not verify_gitlab("master", 7, token.upper(), shared=True)
    assert not gitlab_token_shaped(token.upper()) and not gitlab_token_shaped(token + "0")


@pytest.mark.parametrize(
    ("payload", "found"),
    [
        ({"project": {"id": 7}}, 7),
        ({"project": {"id": 7}, "project_id": 8}, 7),  # project.id decides, as the parser
        ({"project_id": 7}, None),
        ({"project": {"id": True}}, None),  # a JSON true, which Python counts as 1
        ({"project": {"id": 7.0}}, None),
        ({"project": {"id": "7"}}, None),
        ({"project": {"id": 0}}, None),
        ({"project": [7]}, None),
        ([{"project": {"id": 7}}], None),
        (None, None),
    ],
)
def test_the_project_a_gitlab_body_names(payload: object, found: int | None) -> None:
    assert gitlab_project_of(payload) == found
