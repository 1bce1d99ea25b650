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
