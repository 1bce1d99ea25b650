"""The web UI's sessions and their cookies, the one owner of both: who is signed in
(:meth:`Sessions.current`), the sign-in's ``state`` (:meth:`Sessions.begin_sign_in`,
:meth:`Sessions.finish_sign_in`), signing out, and each session's CSRF token.

A cookie is ``<payload>.<mac>``: the payload base64url JSON, the mac HMAC-SHA256 of a
purpose and the payload under the service's key (``SLUICE_UI_SESSION_KEY``, else random
per process), so a session cookie cannot pass as a sign-in cookie nor the reverse. Cookies
are HttpOnly, SameSite=Lax, Secure when the service is reached over https, and expire
(the payload's ``exp`` is checked, not only the browser's Max-Age).

The session cookie carries an id, the forge and the login; the forge's token and what it
may read stay in this process's memory (:class:`Session`), never in a cookie or on disk.
A restart signs everyone out.

CSRF: a session's token is the HMAC of its id (nothing stored); every state-changing
request carries it as the form field ``csrf`` or the header ``X-Sluice-CSRF``
(:meth:`Sessions.csrf_ok`). The sign-in itself is guarded by ``state``: random, kept in a
signed cookie for 10 minutes, compared with the forge's redirect.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from fastapi import HTTPException
from starlette.requests import Request
from starlette.responses import Response

COOKIE = "sluice_session"
SIGN_IN_COOKIE = "sluice_sign_in"
SIGN_IN_PATH = "/ui/auth"  # the sign-in cookie goes only to the callbacks
SESSION_SECONDS = 8 * 3600
SIGN_IN_SECONDS = 600
MAX_SESSIONS = 10_000  # the oldest are signed out past it
MAX_COOKIE = 4096
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-Sluice-CSRF"
MAX_FORM = 64 * 1024
MAX_FLASHES = 5  # a session's messages waiting for its next page, at most


class SignInFailed(Exception):
    """A sign-in's return refused: the message says why and what to do."""


@dataclass
class Session:
    """One signed-in person: their forge, login and token (never shown), when it ends,
    and what the forge said they may read ((repository, the binding of its name it was
    asked under) -> (answer, when asked))."""

    sid: str
    forge: str
    login: str
    token: str = field(repr=False)
    expires: float
    csrf: str = field(repr=False)
    readable: dict[tuple[str, tuple[str, int] | None], tuple[bool, float]] = field(
        default_factory=dict
    )
    flashes: list[Flash] = field(default_factory=list)
    user_id: int | None = None  # their forge account's id: what the gate compares people by


@dataclass(frozen=True)
class Flash:
    """What the next page a session opens says first: an action's outcome (``kind``
    ``queued`` or ``refused``), its ``text`` (escaped where shown) and a ``link`` (the
    job's; empty: none). Kept in the process's memory with the session, never in a URL,
    so no link can make a page claim an action it did not take."""

    kind: str
    text: str
    link: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """HMAC-SHA256 signed JSON, bound to a purpose."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def mac(self, purpose: str, body: str) -> str:
        message = purpose.encode() + b"\0" + body.encode("ascii")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def sign(self, purpose: str, payload: dict[str, Any]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self.mac(purpose, body)}"

    def unsign(self, purpose: str, text: str | None) -> dict[str, Any] | None:
        """The payload of ``text`` when its mac is this key's for ``purpose``, else None."""
        if not text or len(text) > MAX_COOKIE or not text.isascii():
            return None
        body, dot, mac = text.partition(".")
        if not dot or not hmac.compare_digest(mac.encode(), self.mac(purpose, body).encode()):
            return None
        try:
            payload = json.loads(_unb64(body))
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None


class Sessions:
    """Every session of this process. ``key`` signs the cookies (None: a random one);
    ``secure`` marks them Secure (None: when the request came over https)."""

    def __init__(
        self,
        key: bytes | None = None,
        *,
        secure: bool | None = None,
        seconds: float = SESSION_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._signer = Signer(key or secrets.token_bytes(32))
        self._secure, self._seconds, self._clock = secure, seconds, clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    # -- the session ---------------------------------------------------------------------

    def start(
        self,
        request: Request,
        response: Response,
        *,
        forge: str,
        login: str,
        token: str,
        user_id: int | None = None,
    ) -> Session:
        """A new session for ``login`` on ``forge``, its cookie set on ``response``: a new
        id always, the browser's previous session (if any) signed out."""
        previous = self.current(request)
        sid = secrets.token_urlsafe(32)
        now = self._clock()
        expires = now + self._seconds
        session = Session(
            sid, forge, login, token, expires, csrf=self._signer.mac("csrf", sid), user_id=user_id
        )
        with self._lock:
            if previous is not None:
                self._sessions.pop(previous.sid, None)
            # oldest first: the expired ones, then any past the cap, are forgotten
            while self._sessions and (
                len(self._sessions) >= MAX_SESSIONS
                or next(iter(self._sessions.values())).expires <= now
            ):
                self._sessions.popitem(last=False)
            self._sessions[sid] = session
        payload = {"sid": sid, "forge": forge, "login": login, "exp": int(expires)}
        self._set(request, response, COOKIE, self._signer.sign("session", payload), "/")
        return session

    def current(self, request: Request) -> Session | None:
        """The request's session: its cookie signed by this key, not expired, and still
        held here (a signed-out or forgotten one is not); else None."""
        payload = self._signer.unsign("session", request.cookies.get(COOKIE))
        if payload is None:
            return None
        exp, sid = payload.get("exp"), payload.get("sid")
        if not isinstance(exp, int) or exp <= self._clock() or not isinstance(sid, str):
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and session.expires <= self._clock():
                del self._sessions[sid]
                session = None
        if session is None or (session.forge, session.login) != (
            payload.get("forge"),
            payload.get("login"),
        ):
            return None
        return session

    def end(self, request: Request, response: Response) -> None:
        """Sign the request's session out (forgotten here) and clear its cookie."""
        session = self.current(request)
        if session is not None:
            with self._lock:
                self._sessions.pop(session.sid, None)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax")

    def flash(self, session: Session, flash: Flash) -> None:
        """Show ``flash`` on ``session``'s next page (the oldest dropped past
        :data:`MAX_FLASHES`)."""
        with self._lock:
            session.flashes.append(flash)
            del session.flashes[:-MAX_FLASHES]

    def take_flashes(self, request: Request) -> list[Flash]:
        """The messages waiting for the request's session, now shown (so forgotten)."""
        session = self.current(request)
        if session is None:
            return []
        with self._lock:
            taken, session.flashes = session.flashes, []
        return taken

    def csrf_ok(self, request: Request, session: Session | None, token: str | None) -> bool:
        """Whether ``token`` is ``session``'s CSRF token (False without a session)."""
        if session is None or not token or len(token) > 200 or not token.isascii():
            return False
        return hmac.compare_digest(token.encode(), session.csrf.encode())

    # -- the sign-in ---------------------------------------------------------------------

    def begin_sign_in(self, request: Request, response: Response, *, forge: str, then: str) -> str:
        """A fresh ``state`` for a sign-in with ``forge``, kept in a signed cookie with
        where to go after (``then``)."""
        state = secrets.token_urlsafe(32)
        payload = {
            "state": state,
            "forge": forge,
            "then": then,
            "exp": int(self._clock() + SIGN_IN_SECONDS),
        }
        self._set(
            request,
            response,
            SIGN_IN_COOKIE,
            self._signer.sign("sign-in", payload),
            SIGN_IN_PATH,
            max_age=SIGN_IN_SECONDS,
        )
        return state

    def finish_sign_in(self, request: Request, *, forge: str, state: str | None) -> str:
        """Where to go after a sign-in with ``forge`` that came back with ``state``.

        Raises:
            SignInFailed: no sign-in was started in this browser (or it expired, or was for
                another forge), or ``state`` is not the one it started with.
        """
        again = "start again from /ui/login"
        payload = self._signer.unsign("sign-in", request.cookies.get(SIGN_IN_COOKIE))
        if payload is None:
            raise SignInFailed(f"no sign-in was started in this browser: {again}")
        exp = payload.get("exp")
        if not isinstance(exp, int) or exp <= self._clock():
            raise SignInFailed(f"the sign-in took more than 10 minutes: {again}")
        kept = payload.get("state")
        if payload.get("forge") != forge or not isinstance(kept, str):
            raise SignInFailed(f"this sign-in was started with another forge: {again}")
        if not state or not hmac.compare_digest(state.encode(), kept.encode()):
            raise SignInFailed(f"the sign-in's state does not match this browser's: {again}")
        then = payload.get("then")
        return then if isinstance(then, str) else "/ui/"

    @staticmethod
    def clear_sign_in(response: Response) -> None:
        response.delete_cookie(SIGN_IN_COOKIE, path=SIGN_IN_PATH, httponly=True, samesite="lax")

    # -- cookies -------------------------------------------------------------------------

    def _set(
        self,
        request: Request,
        response: Response,
        name: str,
        value: str,
        path: str,
        *,
        max_age: float | None = None,
    ) -> None:
        secure = self._secure if self._secure is not None else request.url.scheme == "https"
        response.set_cookie(
            name,
            value,
            max_age=int(max_age if max_age is not None else self._seconds),
            path=path,
            secure=secure,
            httponly=True,
            samesite="lax",
        )


async def checked_form(request: Request, sessions: Sessions) -> tuple[Session, dict[str, str]]:
    """The session and the form fields of a state-changing request, once its CSRF token
    (the form's ``csrf`` field, or the ``X-Sluice-CSRF`` header) is the session's.

    Raises:
        HTTPException: 401 without a session, 413 for a form over 64 KiB, 403 when the
            token is missing or not the session's.
    """
    session = sessions.current(request)
    if session is None:
        raise HTTPException(401, "sign in first: open /ui/login")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            raise HTTPException(413, "the form is larger than 64 KiB")
    fields: dict[str, str] = {}
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        try:
            fields = dict(parse_qsl(body.decode("utf-8"), max_num_fields=100))
        except ValueError:
            raise HTTPException(400, "the form could not be read") from None
    token = fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    if not sessions.csrf_ok(request, session, token):
        raise HTTPException(
            403,
            "this form's CSRF token is missing or is not this session's: reload the page "
            "and try again",
        )
    return session, fields
