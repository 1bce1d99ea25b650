"""Sign-in's pages: ``/ui/login`` (a button a forge), ``/ui/login/{forge}`` (to the forge,
with a fresh ``state``), ``/ui/auth/{forge}/callback`` (the forge's return: ``state``
checked, the code traded for the user's token, a session started) and ``POST /ui/logout``
(CSRF-checked). Thin: sessions and cookies are :mod:`sluice.bot.web.session`'s, the
forges' OAuth :mod:`sluice.bot.forge.signin`'s, who sees what
:class:`sluice.bot.web.access.SignedIn`'s."""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sluice import __version__
from sluice.bot.forge.base import ForgeError
from sluice.bot.forge.signin import SignIn, SignInRefused
from sluice.bot.web.access import SignedIn, SignInRequired
from sluice.bot.web.pages import CSP, templates
from sluice.bot.web.session import SignInFailed, checked_form

log = logging.getLogger(__name__)

ForgeName = Annotated[str, Path(pattern="^(github|gitlab)$")]
Then = Annotated[str | None, Query(alias="next", max_length=1000)]
HOME = "/ui/"


def safe_next(then: str | None) -> str:
    """Where to go after signing in: a path of this service's UI or API, else its home
    (never another site: ``//host``, ``/\\host`` and schemes are refused)."""
    if (
        not then
        or not (then == "/ui" or then.startswith(("/ui/", "/ui?", "/api/v1/")))
        or "\\" in then
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in then)
    ):
        return HOME
    return then


def router(access: SignedIn, *, ui_url: str | None = None) -> APIRouter:
    """The sign-in pages of ``access``; ``ui_url`` is where people open the service
    (the callbacks' base), else each request's own address."""
    signin = APIRouter(prefix="/ui", include_in_schema=False)
    env = templates()
    sessions = access.sessions

    def forge_of(name: str) -> SignIn:
        sign_in = access.sign_ins.get(name)
        if sign_in is None:
            raise HTTPException(404, f"sign-in with {name} is not configured here")
        return sign_in

    def callback(request: Request, forge: str) -> str:
        base = ui_url.rstrip("/") if ui_url else str(request.base_url).rstrip("/")
        return f"{base}/ui/auth/{forge}/callback"

    def page(then: str, problem: str = "", status: int = 200) -> HTMLResponse:
        html = env.get_template("sign_in.html.j2").render(
            forges=list(access.sign_ins.values()),
            query=urlencode({"next": then}),
            problem=problem,
            version=__version__,
        )
        return HTMLResponse(
            html, status, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store"}
        )

    @signin.get("/login")
    def login(request: Request, then: Then = None) -> Response:
        if sessions.current(request) is not None:
            return RedirectResponse(safe_next(then), 303)
        return page(safe_next(then))

    @signin.get("/login/{forge}")
    def begin(request: Request, forge: ForgeName, then: Then = None) -> Response:
        sign_in = forge_of(forge)
        response = RedirectResponse(HOME, 303, headers={"Cache-Control": "no-store"})
        state = sessions.begin_sign_in(request, response, forge=forge, then=safe_next(then))
        response.headers["location"] = sign_in.authorize_url(
            redirect_uri=callback(request, forge), state=state
        )
        return response

    @signin.get("/auth/{forge}/callback")
    def finish(
        request: Request,
        forge: ForgeName,
        code: Annotated[str | None, Query(max_length=1000)] = None,
        state: Annotated[str | None, Query(max_length=200)] = None,
        error: Annotated[str | None, Query(max_length=200)] = None,
    ) -> Response:
        sign_in = forge_of(forge)
        try:
            then = sessions.finish_sign_in(request, forge=forge, state=state)
        except SignInFailed as failed:
            return page(HOME, str(failed), 400)
        if error is not None or not code:
            # the person said no on the forge, or the forge sent no code
            return page(then, f"{sign_in.label} did not sign you in: try again", 400)
        try:
            token = sign_in.exchange(code, redirect_uri=callback(request, forge))
            user, user_id = sign_in.account(token)
        except SignInRefused as refused:
            return page(then, f"{refused.message}: try again", 400)
        except ForgeError as failed:
            log.warning("sign-in with %s failed: %s", forge, failed.message)
            return page(then, f"{failed.message}; try again shortly", 502)
        response = RedirectResponse(then, 303, headers={"Cache-Control": "no-store"})
        sessions.start(request, response, forge=forge, login=user, token=token, user_id=user_id)
        sessions.clear_sign_in(response)
        log.info("signed in to the web UI: %s on %s", user, forge)
        return response

    @signin.post("/logout")
    async def logout(request: Request) -> Response:
        response = RedirectResponse("/ui/login", 303)
        if sessions.current(request) is not None:  # else nothing to sign out
            await checked_form(request, sessions)
        sessions.end(request, response)
        return response

    return signin


def sign_in_required(request: Request, exc: Exception) -> Response:
    """No session: a page goes to sign in (and back after), the API answers 401."""
    assert isinstance(exc, SignInRequired)
    if request.url.path == "/ui" or request.url.path.startswith("/ui/"):
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/ui/login?{urlencode({'next': safe_next(here)})}", 303)
    return JSONResponse({"detail": exc.detail}, exc.status_code)
