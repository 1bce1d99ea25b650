"""The GitHub API client: authentication (a token, or a GitHub App's installation token,
cached until shortly before it expires), retries, and credentials kept out of messages and
logs. With :mod:`sluice.bot.forge.github.forge`, the only modules that import ``github``.

Every PyGithub or ``requests`` failure met inside :func:`boundary` becomes a
:class:`~sluice.bot.forge.base.ForgeError` carrying what was asked, the HTTP status and
GitHub's own message, never a credential.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import jwt
import requests
from github import Auth, Github, GithubException, GithubIntegration, GithubRetry
from urllib3 import Retry

from sluice.bot.forge.base import ForgeError
from sluice.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TIMEOUT = 30  # seconds, per request
TOKEN_REFRESH_MARGIN = 300.0  # seconds before expiry an installation token is replaced

# Anything that looks like a GitHub credential: token prefixes, and the ``token=`` query
# parameter of pre-signed archive links.
_SECRET = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,})\b"
    r"|(?<=token=)[^&\s'\"]+"
    r"|(?<=\"token\": \")[^\"]+"
    r"|(?<='token': ')[^']+"
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----"
)

# A GitHub login: letters, digits and hyphens (older ones may hold runs of them), ``_``
# in Enterprise Managed Users' (``octocat_acme``), an App's bot user ``<slug>[bot]``; no
# ``/`` and no ``..`` (it goes into request paths).
LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,99}(?:\[bot\])?")


def redact(text: str) -> str:
    """``text`` with anything that looks like a GitHub token or private key replaced."""
    return _SECRET.sub("[redacted]", text)


class _RedactFilter(logging.Filter):
    """PyGithub logs request and response bodies at DEBUG, including the body of
    ``POST /app/installations/{id}/access_tokens`` (a live token) and archive links."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_REDACT_FILTER = _RedactFilter()


def _install_log_redaction() -> None:
    for name in ("github.Requester", "github.GithubRetry"):
        logger = logging.getLogger(name)
        if _REDACT_FILTER not in logger.filters:
            logger.addFilter(_REDACT_FILTER)


# --- authentication -------------------------------------------------------------------


@dataclass
class TokenCache:
    """Installation tokens by (API URL, App id, installation or repository), and each App's
    bot login by (API URL, App id); thread-safe.

    A token is reused until :data:`TOKEN_REFRESH_MARGIN` seconds before it expires. The
    lock is held while a token is fetched, so concurrent workers fetch it once.
    """

    clock: Callable[[], float] = time.time
    _tokens: dict[tuple[str, ...], tuple[str, float]] = field(default_factory=dict)
    _logins: dict[tuple[str, ...], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: tuple[str, ...], fetch: Callable[[], tuple[str, datetime]]) -> str:
        """The cached token for ``key``, or a fresh one from ``fetch`` (token, expiry)."""
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and cached[1] - self.clock() > TOKEN_REFRESH_MARGIN:
                return cached[0]
            token, expires_at = fetch()
            self._tokens[key] = (token, expires_at.timestamp())
            return token

    def login(self, key: tuple[str, ...], fetch: Callable[[], str]) -> str:
        """The App's bot login for ``key`` (API URL, App id), asked of ``fetch`` once."""
        with self._lock:
            if key not in self._logins:
                self._logins[key] = fetch()
            return self._logins[key]

    def clear(self) -> None:
        """Forget every token and login (after an App's key is rotated, and in tests)."""
        with self._lock:
            self._tokens.clear()
            self._logins.clear()


INSTALLATION_TOKENS = TokenCache()


class InstallationAuth(Auth.Auth):
    """Authenticates each request with the current installation token from the cache, so a
    long-lived client never sends an expired one; :meth:`bot_login` is the login the App's
    comments are written by."""

    def __init__(self, current: Callable[[], str], bot_login: Callable[[], str]) -> None:
        self._current = current
        self.bot_login = bot_login

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        return self._current()

    @property
    def _masked_token(self) -> str:
        return "token (installation token removed)"


class _Retry(GithubRetry):
    """PyGithub's retry (rate limits, 5xx) without repeating a POST that may have
    succeeded: a POST is retried only when GitHub said it was rate limited (403 / 429),
    so a flaky 502 never posts a second comment."""

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() == "POST":
            if status_code not in (403, 429):
                return False
            forced = self.status_forcelist is not None and status_code in self.status_forcelist
            after = (
                self.respect_retry_after_header
                and has_retry_after
                and status_code in self.RETRY_AFTER_STATUS_CODES
            )
            return bool(self.total) and (forced or after)
        return super().is_retry(method, status_code, has_retry_after)


def default_retry() -> Retry:
    """Three retries with a short backoff; rate limits waited out up to a minute, beyond
    that the call fails (the job queue retries later). After the last retry the final
    response is returned, so PyGithub raises its exception with GitHub's message."""
    return _Retry(
        total=3,
        backoff_factor=0.25,
        raise_on_status=False,
        max_rate_limit_wait=60,
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "PATCH"},
    )


def github_client(
    *,
    repo: str,
    api_url: str = DEFAULT_API_URL,
    token: str | None = None,
    app_id: str | None = None,
    private_key: str | None = None,
    installation_id: int | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    retry: Retry | None = None,
    seconds_between_requests: float | None = 0.25,
    seconds_between_writes: float | None = 1.0,
    cache: TokenCache | None = None,
) -> Github:
    """An authenticated, lazy :class:`github.Github` for ``repo`` (``owner/name``).

    With ``token`` (a personal access token or an Actions ``GITHUB_TOKEN``), that token;
    otherwise, with ``app_id`` and ``private_key``, the App's installation token for
    ``installation_id``, or, when the webhook payload carried none, for the installation
    found by repository. A token wins when both are given. ``api_url`` is GitHub
    Enterprise's ``https://HOST/api/v3`` when not github.com. The defaults for the pauses
    between requests follow GitHub's advice for integrations (a second between writes).

    Raises:
        ConfigError: no credentials given.
    """
    _install_log_redaction()
    api_url = api_url.rstrip("/")
    retry = retry if retry is not None else default_retry()
    auth: Auth.Auth
    if token:
        auth = Auth.Token(token)
    elif app_id and private_key:
        auth = _app_installation_auth(
            api_url=api_url,
            app_id=app_id,
            private_key=private_key,
            installation_id=installation_id,
            repo=repo,
            timeout=timeout,
            retry=retry,
            cache=cache if cache is not None else INSTALLATION_TOKENS,
        )
    else:
        raise ConfigError(
            "no GitHub credentials",
            hint="set SLUICE_GITHUB_TOKEN, or SLUICE_GITHUB_APP_ID and SLUICE_GITHUB_PRIVATE_KEY",
        )
    return Github(
        auth=auth,
        base_url=api_url,
        timeout=timeout,
        retry=retry,
        per_page=100,
        seconds_between_requests=seconds_between_requests,
        seconds_between_writes=seconds_between_writes,
        lazy=True,
    )


def _app_installation_auth(
    *,
    api_url: str,
    app_id: str,
    private_key: str,
    installation_id: int | None,
    repo: str,
    timeout: int,
    retry: Retry,
    cache: TokenCache,
) -> Auth.Auth:
    owner, _, name = repo.partition("/")
    where = f"installation {installation_id}" if installation_id else f"repository {repo}"
    key = (api_url, str(app_id), where)

    def integration_() -> GithubIntegration:
        return GithubIntegration(
            auth=Auth.AppAuth(app_id, private_key),
            base_url=api_url,
            timeout=timeout,
            retry=retry,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )

    def fetch() -> tuple[str, datetime]:
        integration = integration_()
        number = installation_id
        if number is None:
            with boundary(f"finding the App installation for {repo}"):
                number = integration.get_repo_installation(owner, name).id
        with boundary(f"creating an installation token for installation {number}"):
            granted = integration.get_access_token(number)
        log.debug("GitHub: installation token for %s expires at %s", where, granted.expires_at)
        return granted.token, granted.expires_at

    def fetch_login() -> str:
        # GET /app with the App's JWT: its slug; its comments are written by <slug>[bot].
        with boundary("reading the App's own record (GET /app)"):
            slug = integration_().get_app().slug
        if not LOGIN.fullmatch(f"{slug}[bot]"):
            raise ForgeError(f"GitHub: the App's slug {slug!r} is not one GitHub gives")
        return f"{slug}[bot]"

    return InstallationAuth(
        lambda: cache.get(key, fetch), lambda: cache.login((api_url, str(app_id)), fetch_login)
    )


# --- errors ---------------------------------------------------------------------------


def github_message(error: GithubException) -> str:
    data = error.data
    if isinstance(data, dict):
        message = str(data.get("message") or "")
        details = [
            str(e.get("message") or f"{e.get('field', '')} {e.get('code', '')}".strip())
            for e in data.get("errors") or []
            if isinstance(e, dict)
        ]
        if details:
            message += f" ({'; '.join(details)})"
        return message or "no message"
    return str(data)[:300] if data else "no message"


@contextmanager
def boundary(what: str) -> Iterator[None]:
    """Turn PyGithub and requests failures into ForgeError; never show a credential."""
    try:
        yield
    except ForgeError:
        raise
    except GithubException as error:
        text = redact(f"GitHub: {what} failed: {error.status} {github_message(error)}")
        raise ForgeError(text) from None
    except requests.RequestException as error:
        # requests' messages hold URLs, and an archive link holds a token: keep only the kind.
        status = error.response.status_code if error.response is not None else None
        reason = f"{status}" if status is not None else type(error).__name__
        raise ForgeError(f"GitHub: {what} failed: {reason} (network error)") from None
    except (ValueError, TypeError, jwt.PyJWTError) as error:
        # PyJWT and cryptography raise these for an unusable private key; say which, no more.
        raise ForgeError(
            f"GitHub: {what} failed: {type(error).__name__} while signing or reading",
            hint="check that SLUICE_GITHUB_PRIVATE_KEY is the App's PEM private key",
        ) from None


# --- Markdown-aware truncation ----------------------------------------------------------
