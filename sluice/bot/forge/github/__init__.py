"""GitHub, through PyGithub: :mod:`.client` (authentication, retries, credentials kept out
of messages and logs) and :mod:`.forge` (:class:`GitHubForge`, one repository). The only
package that imports ``github``."""

from sluice.bot.forge.github.client import (
    DEFAULT_API_URL,
    INSTALLATION_TOKENS,
    TokenCache,
    default_retry,
    github_client,
    redact,
)
from sluice.bot.forge.github.forge import GitHubForge, fit

__all__ = [
    "DEFAULT_API_URL",
    "INSTALLATION_TOKENS",
    "GitHubForge",
    "TokenCache",
    "default_retry",
    "fit",
    "github_client",
    "redact",
]
