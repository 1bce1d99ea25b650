"""Webhook authenticity checks: is this request really from the forge? Fail closed.

The service calls these before it parses or stores anything, so they answer a plain
True/False and never raise on what a client sends: a missing or malformed header is
simply "not verified". An empty secret or token never verifies, so a service started
without its secret refuses every delivery instead of accepting them all.
"""

from __future__ import annotations

import hmac
import re

# GitHub sends a lower-case hex HMAC-SHA256 digest after a lower-case "sha256=" prefix.
# Anything else is malformed; matching the shape first also keeps non-ASCII text away
# from hmac.compare_digest, which raises TypeError on it.
_GITHUB_SIGNATURE = re.compile(r"sha256=[0-9a-f]{64}")


def verify_github(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` (``X-Hub-Signature-256``) signs ``body`` with ``secret``.

    Args:
        secret: The webhook secret configured on GitHub.
        body: The raw request body, exactly as received (before any JSON parsing).
        header: The ``X-Hub-Signature-256`` value, ``sha256=<64 lower-case hex>``;
            None when the request had no such header.

    Returns:
        True only for a well-formed header whose digest matches, compared in
        constant time; False otherwise, including for an empty secret.
    """
    if not secret or header is None or _GITHUB_SIGNATURE.fullmatch(header) is None:
        return False
    expected = "sha256=" + hmac.digest(secret, body, "sha256").hex()
    return hmac.compare_digest(expected, header)


def verify_token(expected: str, given: str | None) -> bool:
    """Whether a shared token (GitLab's ``X-Gitlab-Token``) matches, in constant time.

    Args:
        expected: The token configured for the webhook.
        given: The token the request carried, None when it carried none.

    Returns:
        False when either token is empty or missing, or when they differ.
    """
    if not expected or not given:
        return False
    # Compare bytes: compare_digest rejects str with non-ASCII characters, and
    # surrogatepass keeps a header decoded with surrogateescape from raising.
    return hmac.compare_digest(
        expected.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
    )


GITLAB_PROJECT_TOKEN_CONTEXT = "sluice-gitlab-project:"
"""What the service's secret signs to make one GitLab project's webhook token."""

_GITLAB_PROJECT_TOKEN = re.compile(r"[0-9a-f]{64}")


def gitlab_project_token(secret: str, project_id: int) -> str:
    """The webhook token (``X-Gitlab-Token``) of GitLab project ``project_id``: the
    lower-case hex HMAC-SHA256 of ``sluice-gitlab-project:<id>`` under the service's
    secret (``SLUICE_GITLAB_WEBHOOK_SECRET``). Each project's webhook holds its own, so a
    maintainer of one project, who sees that token, cannot sign another project's hooks;
    ``sluice gitlab-webhook-token <id>`` prints it.

    >>> gitlab_project_token("s3cret", 42)[:16]
    '90b96f7d8f5439ea'
    """
    if not secret:
        raise ValueError("no secret to derive a GitLab project's webhook token from")
    if isinstance(project_id, bool) or not isinstance(project_id, int) or project_id <= 0:
        raise ValueError(f"a GitLab project id is a positive integer, not {project_id!r}")
    message = f"{GITLAB_PROJECT_TOKEN_CONTEXT}{project_id}".encode()
    return hmac.digest(secret.encode("utf-8", "surrogatepass"), message, "sha256").hex()


def gitlab_token_shaped(given: str | None) -> bool:
    """Whether ``given`` can be a project's token at all (64 lower-case hex digits): the
    service refuses anything else before it reads the body."""
    return given is not None and _GITLAB_PROJECT_TOKEN.fullmatch(given) is not None


def gitlab_project_of(payload: object) -> int | None:
    """The GitLab project id a hook's body names (``project.id``: in every Merge Request,
    Note, Push, Tag Push and Pipeline Hook), read no deeper than that; None when the body
    names none, or names something that is no project id (a positive integer)."""
    if not isinstance(payload, dict):
        return None
    project = payload.get("project")
    if not isinstance(project, dict):
        return None
    found = project.get("id")
    if isinstance(found, bool) or not isinstance(found, int) or found <= 0:
        return None
    return found


def verify_gitlab(
    secret: str, project_id: int | None, given: str | None, *, shared: bool = False
) -> bool:
    """Whether ``given`` (``X-Gitlab-Token``) is the webhook token of GitLab project
    ``project_id``, compared in constant time.

    Args:
        secret: The service's ``SLUICE_GITLAB_WEBHOOK_SECRET``.
        project_id: The ``project.id`` the delivery's body names; None when it names none.
        given: The token the request carried, None when it carried none.
        shared: Also accept the bare secret (a service serving exactly one GitLab project,
            named without a pattern: the secret's holders are that project's maintainers).

    Returns:
        False when the secret, the token or the project id is missing, or when the token
        is neither the project's own nor (``shared``) the secret.
    """
    if not secret or not given or project_id is None:
        return False
    if verify_token(gitlab_project_token(secret, project_id), given):
        return True
    return shared and verify_token(secret, given)
