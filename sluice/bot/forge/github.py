"""GitHub as a forge, through PyGithub: the only module that imports ``github``.

:func:`github_client` builds an authenticated :class:`github.Github` (a token, or a GitHub
App's installation token, cached until shortly before it expires) and
:class:`GitHubForge` speaks for one repository with it. Every PyGithub or ``requests``
failure is turned into :class:`~sluice.bot.forge.base.ForgeError` here; messages carry
what was asked, the HTTP status and GitHub's own message, never a credential.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import jwt
import requests
from github import Auth, Github, GithubException, GithubIntegration, GithubRetry
from github.CheckRun import CheckRun
from github.GithubException import RateLimitExceededException, UnknownObjectException
from urllib3 import Retry

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, extract
from sluice.bot.forge.base import Check, ForgeError, PullRequest, Review, UnusableTree
from sluice.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TIMEOUT = 30  # seconds, per request
DEFAULT_WORKDIR_LIMIT = TREE_LIMITS.total_bytes
ACTIONS_BOT = "github-actions[bot]"  # who an Actions GITHUB_TOKEN writes as
OUTPUT_LIMIT = 65535  # GitHub's cap on a check run's output.summary and output.text
STATUS_DESCRIPTION_LIMIT = 140  # GitHub's cap on a commit status description
TOKEN_REFRESH_MARGIN = 300.0  # seconds before expiry an installation token is replaced
TAG_DEPTH = 5  # annotated tags peeled through at most this many tag objects
ROLES = ("admin", "maintain", "write", "triage", "read", "none")
# How a check run's status and conclusion read as a commit status (the token fallback).
STATUS_STATES = {
    "queued": "pending",
    "in_progress": "pending",
    "success": "success",
    "neutral": "success",
    "skipped": "success",
    "failure": "failure",
    "cancelled": "failure",
    "action_required": "failure",
    "timed_out": "failure",
    "stale": "failure",
}

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
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,99}(?:\[bot\])?")


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


class _InstallationAuth(Auth.Auth):
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
            with _boundary(f"finding the App installation for {repo}"):
                number = integration.get_repo_installation(owner, name).id
        with _boundary(f"creating an installation token for installation {number}"):
            granted = integration.get_access_token(number)
        log.debug("GitHub: installation token for %s expires at %s", where, granted.expires_at)
        return granted.token, granted.expires_at

    def fetch_login() -> str:
        # GET /app with the App's JWT: its slug; its comments are written by <slug>[bot].
        with _boundary("reading the App's own record (GET /app)"):
            slug = integration_().get_app().slug
        if not _LOGIN.fullmatch(f"{slug}[bot]"):
            raise ForgeError(f"GitHub: the App's slug {slug!r} is not one GitHub gives")
        return f"{slug}[bot]"

    return _InstallationAuth(
        lambda: cache.get(key, fetch), lambda: cache.login((api_url, str(app_id)), fetch_login)
    )


# --- errors ---------------------------------------------------------------------------


def _github_message(error: GithubException) -> str:
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
def _boundary(what: str) -> Iterator[None]:
    """Turn PyGithub and requests failures into ForgeError; never show a credential."""
    try:
        yield
    except ForgeError:
        raise
    except GithubException as error:
        text = redact(f"GitHub: {what} failed: {error.status} {_github_message(error)}")
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


def _utf16_len(text: str) -> int:
    # GitHub counts characters as JavaScript does; astral characters count twice.
    return len(text.encode("utf-16-le")) // 2


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _closers(text: str) -> str:
    """What closes the fenced code block and the ``<details>`` blocks ``text`` leaves open."""
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
        elif (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not line.strip().lstrip(fence[0])
        ):
            fence = None
    outside = text if fence is None else text[: text.rfind(fence)]
    opened = len(re.findall(r"<details\b", outside)) - len(re.findall(r"</details>", outside))
    closing = f"{fence}\n" if fence is not None else ""
    return closing + "</details>\n" * max(opened, 0)


def fit(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters at a line boundary, with open code fences and
    ``<details>`` closed and a note saying how much was left out."""
    if _utf16_len(text) <= limit:
        return text
    budget = limit
    while True:
        kept = text[: max(budget - 100, 0)]
        if "\n" in kept:
            kept = kept[: kept.rfind("\n") + 1]
        dropped = len(text) - len(kept)
        if kept and not kept.endswith("\n"):
            kept += "\n"  # one long line: cut inside it rather than lose it all
        note = f"\n... (truncated: {dropped} more characters)\n"
        result = kept + _closers(kept) + note
        excess = _utf16_len(result) - limit
        if excess <= 0:
            return result
        budget -= max(excess, 1)


# --- the forge --------------------------------------------------------------------------


class GitHubForge:
    """The :class:`~sluice.bot.forge.base.Forge` for one GitHub repository.

    Args:
        client: An authenticated client, usually from :func:`github_client`.
        repo: ``owner/name``.
        workdir_limit_bytes: The largest total size of the files :meth:`fetch_tree`
            writes, and of the (compressed) archive it downloads; overrides
            ``tree_limits.total_bytes`` when given.
        tree_limits: The service's limits on a commit's files (:class:`TreeLimits`).
        session: The HTTP session archives are downloaded with (tests inject one).
        bot_login: The login the bot's comments are written by, when a token is used
            that cannot say (an installation token given as a token). Otherwise it is
            asked: an App's ``<slug>[bot]`` (``GET /app``), a token's user (``GET /user``),
            and ``github-actions[bot]`` for an Actions ``GITHUB_TOKEN`` (403 there).
    """

    name: str = "github"
    comment_limit: int = 65536

    def __init__(
        self,
        client: Github,
        repo: str,
        *,
        workdir_limit_bytes: int | None = None,
        session: requests.Session | None = None,
        bot_login: str | None = None,
        tree_limits: TreeLimits = TREE_LIMITS,
    ) -> None:
        self.repo = repo
        if workdir_limit_bytes is not None:
            tree_limits = dataclasses.replace(tree_limits, total_bytes=workdir_limit_bytes)
        self.tree_limits = tree_limits
        self.workdir_limit_bytes = tree_limits.total_bytes
        self._client = client
        self._session = session or requests.Session()
        self._timeout = (10, DEFAULT_TIMEOUT)
        self._statuses_only = False  # check runs refused (a plain token): commit statuses
        self._check_runs: dict[tuple[str, str], CheckRun] = {}
        self._login: str | None = bot_login  # whose comments are ours
        self._teams: dict[str, frozenset[str]] = {}  # for the forge's lifetime (one job)
        with _boundary(f"opening {repo}"):
            self._repo = client.get_repo(repo)

    # -- files ---------------------------------------------------------------------------

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Download the tarball of ``sha`` and extract it into ``dest`` (see the protocol)."""
        with _boundary(f"asking for the archive of {sha}"):
            link = self._repo.get_archive_link("tarball", sha)
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=dest.parent) as archive:
            self._download(link, sha, archive)
            archive.seek(0)
            extract(archive, dest, forge="GitHub", sha=sha, strip_top=True, limits=self.tree_limits)

    def _download(self, link: str, sha: str, out: IO[bytes]) -> None:
        limit = self.workdir_limit_bytes
        too_big = UnusableTree(
            f"GitHub: the archive of {sha} is larger than the limit of {limit:,} bytes of all "
            "files together (total_bytes, a setting of the Sluice service, not of the "
            "repository)",
            hint="keep large or generated files out of the repository, or ask the operator of "
            "the Sluice service to raise the limit",
        )
        # The link is pre-signed (it carries its own short-lived token): no Authorization
        # header goes to codeload.
        with (
            _boundary(f"downloading the archive of {sha}"),
            self._session.get(link, stream=True, timeout=self._timeout) as response,
        ):
            if response.status_code != 200:
                raise ForgeError(
                    f"GitHub: downloading the archive of {sha} failed: "
                    f"{response.status_code} {response.reason}"
                )
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise too_big
            size = 0
            for chunk in response.iter_content(chunk_size=1024 * 1024):
                size += len(chunk)
                if size > limit:
                    raise too_big
                out.write(chunk)

    def read_file(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist."""
        what = f"reading {path} at {ref}"
        with _boundary(what):
            try:
                content = self._repo.get_contents(path, ref=ref)
            except UnknownObjectException:
                return None
            if isinstance(content, list):
                raise ForgeError(f"GitHub: {what} failed: {path} is a directory, not a file")
            if content.encoding != "base64":
                raise ForgeError(
                    f"GitHub: {what} failed: the file is too large for the contents API (1 MB)"
                )
            raw = content.decoded_content
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ForgeError(f"GitHub: {what} failed: the file is not UTF-8 text") from None

    # -- pull requests -------------------------------------------------------------------

    def pull_request(self, number: int) -> PullRequest:
        """The pull request as GitHub reports it now."""
        with _boundary(f"reading pull request #{number}"):
            pr = self._repo.get_pull(number)
            head_repo = pr.head.repo  # None when the fork was deleted
            base_repo = pr.base.repo
            fork = head_repo is None or head_repo.full_name.lower() != base_repo.full_name.lower()
            return PullRequest(
                number=pr.number,
                head_sha=pr.head.sha,
                head_ref=pr.head.ref,
                base_ref=pr.base.ref,
                base_sha=pr.base.sha,
                author=pr.user.login if pr.user is not None else "ghost",
                draft=bool(pr.draft),
                fork=fork,
                open=pr.state == "open",
                merged=bool(pr.merged),
                title=pr.title or "",
            )

    def reviews(self, number: int) -> list[Review]:
        """Every review of pull request ``number``, oldest first."""
        with _boundary(f"listing the reviews of pull request #{number}"):
            out = []
            for review in self._repo.get_pull(number).get_reviews():
                submitted = review.submitted_at
                out.append(
                    Review(
                        id=review.id,
                        user=review.user.login if review.user is not None else "ghost",
                        state=(review.state or "").upper(),
                        commit_sha=review.commit_id,
                        submitted_at=submitted.isoformat() if submitted is not None else None,
                    )
                )
            return out

    def permission(self, user: str) -> str:
        """``user``'s role on the repository; ``none`` for a stranger, and for a name that
        is no GitHub login (not asked: it would become a path in the request's URL)."""
        if not _LOGIN.fullmatch(user):
            return "none"
        with _boundary(f"reading {user}'s permission on {self.repo}"):
            try:
                role = self._repo.get_collaborator_role_name(user)
                if role in ROLES:
                    return role
                # A custom organisation role: fall back to the base permission it extends.
                legacy = self._repo.get_collaborator_permission(user)
            except UnknownObjectException:
                return "none"
            return legacy if legacy in ROLES else "none"

    # -- comments ------------------------------------------------------------------------

    def _own_login(self) -> str:
        """The login the bot's comments are written by, asked once per forge: an App's
        ``<slug>[bot]`` (``GET /app`` with its JWT, cached per App), a token's user
        (``GET /user``), or, when ``GET /user`` answers 403 as it does for an Actions
        ``GITHUB_TOKEN``, ``github-actions[bot]``."""
        if self._login is None:
            auth = self._client.requester.auth
            if isinstance(auth, _InstallationAuth):
                self._login = auth.bot_login()
            else:
                try:
                    self._login = self._client.get_user().login
                except GithubException as error:
                    if error.status != 403 or isinstance(error, RateLimitExceededException):
                        raise
                    log.debug("GitHub: GET /user answered 403: an Actions token, %s", ACTIONS_BOT)
                    self._login = ACTIONS_BOT
        return self._login

    def upsert_comment(self, number: int, marker: str, body: str) -> None:
        """Edit our comment holding ``marker`` on pull request ``number``, or create it.

        Ours: the oldest comment holding ``marker`` written by the bot's own login
        (:meth:`_own_login`). Anyone else's comment holding the marker, a person's or
        another App's, is never edited nor taken as ours.
        """
        if marker not in body:
            raise ValueError(f"the comment body does not contain its marker {marker!r}")
        with _boundary(f"updating the comment on pull request #{number}"):
            issue = self._repo.get_issue(number)
            login = self._own_login().casefold()
            for comment in issue.get_comments():
                author = comment.user.login if comment.user is not None else None
                if marker in (comment.body or "") and (author or "").casefold() == login:
                    if comment.body != body:
                        comment.edit(body)
                    return
            issue.create_comment(body)

    def reply(self, number: int, body: str) -> None:
        """Post a new comment on pull request ``number``."""
        with _boundary(f"commenting on pull request #{number}"):
            self._repo.get_issue(number).create_comment(body)

    def react(self, number: int, comment_id: int, reaction: str) -> bool:
        """Add ``reaction`` to comment ``comment_id`` of pull request ``number``; False
        when the comment is gone (404)."""
        with _boundary(f"reacting to comment {comment_id} on pull request #{number}"):
            try:
                self._repo.get_issue(number).get_comment(comment_id).create_reaction(reaction)
            except UnknownObjectException:
                return False
        return True

    # -- teams, refs and branches --------------------------------------------------------

    def team_members(self, team: str) -> frozenset[str]:
        """The logins of ``org/team-slug``'s members (child teams included, as GitHub
        lists them), read once per forge.

        Empty, and logged, when the team does not exist or is not visible to the
        credentials (404), or may not be read (403: an App without the organisation's
        *Members: read* permission): its members then approve nothing, the gate fails
        closed. Other failures raise :class:`ForgeError`.
        """
        cached = self._teams.get(team)
        if cached is not None:
            return cached
        org, _, slug = team.removeprefix("@").partition("/")
        if not org or not slug or "/" in slug:
            log.warning("GitHub: %r is not a team name (org/team-slug): no members", team)
            return frozenset()
        with _boundary(f"listing the members of the team {team}"):
            try:
                listed = self._client.get_organization(org).get_team_by_slug(slug).get_members()
                members = frozenset(member.login for member in listed)
            except UnknownObjectException:
                log.info("GitHub: the team %s does not exist or is not visible: no members", team)
                members = frozenset()
            except RateLimitExceededException:
                raise
            except GithubException as error:
                if error.status != 403:
                    raise
                log.warning(
                    "GitHub: the members of the team %s may not be read (%s %s): no members; "
                    "grant the App the organisation permission Members: read",
                    team,
                    error.status,
                    _github_message(error),
                )
                members = frozenset()
        self._teams[team] = members
        return members

    def commit_of(self, ref: str) -> str | None:
        """The commit ``ref`` points at, through the git refs API (exact names, no guessing
        from shas): ``main`` is tried as the branch ``heads/main`` then the tag
        ``tags/main``; ``heads/...``, ``tags/...`` and ``refs/...`` are taken as written.
        Annotated tags are peeled to their commit. None when there is no such ref, or it
        names a tree or a blob."""
        name = ref.removeprefix("refs/")
        if name.startswith(("heads/", "tags/")):
            candidates = [name]
        else:
            candidates = [f"heads/{name}", f"tags/{name}"]
        with _boundary(f"resolving {ref}"):
            for candidate in candidates:
                try:
                    target = self._repo.get_git_ref(candidate).object
                except UnknownObjectException:
                    continue
                kind, sha = target.type, target.sha
                for _ in range(TAG_DEPTH):  # a tag may point at another tag
                    if kind != "tag":
                        break
                    peeled = self._repo.get_git_tag(sha).object
                    kind, sha = peeled.type, peeled.sha
                if kind == "commit":
                    return sha
                log.info("GitHub: %s points at a %s, not a commit", ref, kind)
                return None
        return None

    def on_branch(self, sha: str, branch: str) -> bool:
        """Whether ``sha`` is reachable from ``branch`` (a branch name or a commit): GitHub
        compares ``branch...sha`` and says ``behind`` or ``identical``. False when either
        is unknown (404)."""
        with _boundary(f"comparing {sha} with {branch}"):
            try:
                status = self._repo.compare(branch, sha).status
            except UnknownObjectException:
                log.info("GitHub: %s or %s is unknown: not on the branch", sha, branch)
                return False
        return status in ("behind", "identical")

    # -- merging and deployment records --------------------------------------------------

    def merge(self, number: int, method: str, sha: str) -> str:
        """Merge pull request ``number`` with ``method`` if its head is still ``sha``; the
        merge commit's sha. GitHub refuses with 409 when the head moved and 405 when the
        pull request is not mergeable (conflicts, failing required checks, a draft):
        :class:`ForgeError` with GitHub's message."""
        what = f"merging pull request #{number} ({method}) at {sha}"
        with _boundary(what):
            result = self._repo.get_pull(number).merge(merge_method=method, sha=sha)
            if not result.merged or not result.sha:
                raise ForgeError(f"GitHub: {what} failed: {result.message or 'not merged'}")
            return result.sha

    def start_deployment(
        self, sha: str, environment: str, description: str, ref: str = ""
    ) -> int | None:
        """Create a deployment record of ``sha`` to ``environment`` (required checks not
        enforced: Sluice has its own gate); its id.

        Deployment records are a report, not the promotion itself: when the credentials
        may not write them (403, e.g. an App without *Deployments: write*) this logs a
        warning and returns None, and the promotion goes on without a record. Other
        failures raise :class:`ForgeError`.
        """
        with _boundary(f"recording a deployment of {sha} to {environment}"):
            try:
                deployment = self._repo.create_deployment(
                    ref=sha,
                    environment=environment,
                    description=description[:STATUS_DESCRIPTION_LIMIT],
                    auto_merge=False,
                    required_contexts=[],
                    production_environment=environment == "prod",
                )
            except GithubException as error:
                if not _forbidden(error):
                    raise
                log.warning(
                    "GitHub: deployments may not be recorded on %s (%s %s): promoting "
                    "without a deployment record",
                    self.repo,
                    error.status,
                    _github_message(error),
                )
                return None
            return int(deployment.id)

    def deployment_status(self, deployment: int, state: str, description: str) -> None:
        """Add a status (in_progress, success, failure, error) to deployment ``deployment``.
        Like :meth:`start_deployment`, a 403 is logged and ignored."""
        with _boundary(f"setting deployment {deployment} to {state}"):
            try:
                self._repo.get_deployment(deployment).create_status(
                    state, description=description[:STATUS_DESCRIPTION_LIMIT]
                )
            except GithubException as error:
                if not _forbidden(error):
                    raise
                log.warning(
                    "GitHub: deployment %s may not be updated (%s %s): its state is not %s",
                    deployment,
                    error.status,
                    _github_message(error),
                    state,
                )

    # -- checks --------------------------------------------------------------------------

    def set_check(self, sha: str, check: Check) -> None:
        """Create or update the check run ``check.name`` on ``sha``; with a token that may
        not write check runs, a commit status with the same context instead."""
        if not self._statuses_only:
            try:
                with _boundary(f"setting the check {check.name} on {sha}"):
                    self._set_check_run(sha, check)
                return
            except _ChecksRefused:
                log.info(
                    "GitHub: check runs refused on %s (not a GitHub App token); "
                    "using commit statuses",
                    self.repo,
                )
                self._statuses_only = True
        with _boundary(f"setting the status {check.name} on {sha}"):
            self._set_status(sha, check)

    def _set_check_run(self, sha: str, check: Check) -> None:
        output: dict[str, Any] = {"title": check.title, "summary": fit(check.summary)}
        if check.text is not None:
            output["text"] = fit(check.text)
        fields: dict[str, Any] = {
            "status": check.status,
            "output": output,
            "actions": [
                {"label": a.label, "description": a.description, "identifier": a.identifier}
                for a in check.actions
            ],
        }
        if check.conclusion is not None:
            fields["conclusion"] = check.conclusion
        try:
            existing = self._check_runs.get((sha, check.name))
            if existing is None:
                for run in self._repo.get_commit(sha).get_check_runs(check_name=check.name):
                    if run.name == check.name:
                        existing = run
                        break
            if existing is not None:
                existing.edit(**fields)
            else:
                existing = self._repo.create_check_run(name=check.name, head_sha=sha, **fields)
            self._check_runs[(sha, check.name)] = existing  # later updates skip the lookup
        except RateLimitExceededException:
            raise
        except GithubException as error:
            if error.status == 403:
                raise _ChecksRefused from None
            raise

    def _set_status(self, sha: str, check: Check) -> None:
        key = check.conclusion if check.status == "completed" else check.status
        state = STATUS_STATES.get(key or "", "pending")
        description = check.title
        if len(description) > STATUS_DESCRIPTION_LIMIT:
            description = description[: STATUS_DESCRIPTION_LIMIT - 1] + "\u2026"
        self._repo.get_commit(sha).create_status(
            state=state, description=description, context=check.name
        )


def _forbidden(error: GithubException) -> bool:
    """A plain 403 (the credentials lack a permission), not a rate limit."""
    return error.status == 403 and not isinstance(error, RateLimitExceededException)


class _ChecksRefused(Exception):
    """GitHub answered 403 to a check-run call: the credentials cannot write check runs."""


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
