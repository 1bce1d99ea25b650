"""The web UI's actions (issue 44): approve this plan, deploy, roll back, each a form on a
pull request's page, for a signed-in person only.

No second gate: an action becomes the neutral event the forge's own button or command
becomes, the signed-in forge user as its requester or author, and is queued as a webhook's
delivery is (:func:`sluice.bot.intake.group_commit.job_of`, the intake's group commit). So
the flow decides as it does for the forge: "Approve this plan" is the ``sluice/approval``
check's ``requested_action`` (the gate never counts the author's own; it counts only its
approvers), deploy and roll back are ``/sluice deploy`` and ``/sluice rollback [plan]``
comments (write permission asked of the forge, the gate passed, the tiers a merge
reaches, never a tag's and its ``released_by``; a rollback only by the gate's
approvers), their replies posted on the pull request and their rows in the audit log
(:mod:`sluice.bot.flow.audit`) with the person as actor, "from the web UI".

What this module checks, before anything is queued: a session (401), the form's CSRF
token (:func:`~sluice.bot.web.session.checked_form`, 403), a repository the person can
read (:meth:`~sluice.bot.web.site.Site.open`, 404), a pull request Sluice planned
(404), the form's fields (422), and that the page the form came from showed the plan
that is the pull request's now (its plan id and head commit): a form from an older page
is refused, nothing queued, since what was reviewed is what is approved or deployed. The
approval is pinned to that head in its event too, so the flow counts it only for that
head's plan. A form sent twice (its ``nonce``) is one delivery. The outcome is a message
on the next page (:class:`~sluice.bot.web.session.Flash`) with the queued job's link.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from sluice.bot.events.neutral import WEB, CheckRunEvent, CommentEvent, Event
from sluice.bot.intake.group_commit import IntakeClosed, job_of
from sluice.bot.present.checks import APPROVAL, approve_identifier
from sluice.bot.queue.store import Delivery
from sluice.bot.web.access import SignedIn
from sluice.bot.web.session import Flash, Session, checked_form
from sluice.bot.web.site import Site
from sluice.core.errors import StateError

log = logging.getLogger(__name__)

Submit = Callable[[Delivery], Awaitable[bool]]
"""Stores a delivery and its job (the service's intake: True when fresh, False when the
same delivery was stored before)."""

Action = Literal["approve", "deploy", "rollback"]
Repo = Annotated[str | None, Query(max_length=300)]
Number = Annotated[int, Path(ge=1, le=10**9)]
SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
PLAN = re.compile(r"^[0-9A-Za-z_-]{1,128}$")
NONCE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
ROLLBACK_TO = re.compile(r"^[0-9a-fA-F]{7,64}$")  # the command's own rule for a plan id
NOT_SIGNED_IN = (
    "actions in the web UI need sign-in with the forge (the service's "
    "SLUICE_GITHUB_OAUTH_CLIENT_ID / SLUICE_GITLAB_OAUTH_CLIENT_ID): a public viewer reads "
    "only; approve, deploy and roll back on the forge instead"
)
DONE = {
    "approve": "Your approval (“Approve this plan”) of plan {plan} at {head} was queued",
    "deploy": "Your `/sluice deploy` of plan {plan} at {head} was queued",
    "rollback": "Your `/sluice rollback{to}` was queued",
}
AFTER = {
    "approve": "the gate decides whether it counts: the sluice/approval check and the audit "
    "log say",
    "deploy": "Sluice replies on the pull request: deployed, or why not",
    "rollback": "Sluice replies on the pull request: rolled back, or why not",
}


def router(site: Site, submit: Submit) -> APIRouter:
    """``POST /ui/pulls/{number}/approve``, ``/deploy`` and ``/rollback`` on ``site``,
    each action's delivery handed to ``submit``."""
    actions = APIRouter(prefix="/ui", include_in_schema=False)

    async def act(
        request: Request, number: int, repo: str | None, action: Action
    ) -> RedirectResponse:
        access = site.access
        if not isinstance(access, SignedIn):
            raise HTTPException(403, NOT_SIGNED_IN)
        session, fields = await checked_form(request, access.sessions)
        reader = await run_in_threadpool(site.open, request, repo)
        view = await run_in_threadpool(reader.pull, number)
        if view is None:
            raise HTTPException(404, "no such pull request in this repository")
        back = RedirectResponse(
            f"/ui/pulls/{number}?{urlencode({'repo': reader.repo})}",
            303,
            headers={"Cache-Control": "no-store"},
        )
        nonce = _field(fields, "nonce", NONCE)
        plan = head = to = ""
        if action == "rollback":
            to = fields.get("to", "").strip()
            if to and not ROLLBACK_TO.match(to):
                raise HTTPException(422, "the plan to roll back to is 7 to 64 hexadecimal digits")
        else:
            plan, head = _field(fields, "plan", PLAN), _field(fields, "head", SHA)
            shown = view.plan.plan_id if view.plan is not None else None
            # An approval names the plan review the page showed (a plan made again at the
            # same head may change it and not the environment's plan).
            review = _field(fields, "review", PLAN) if action == "approve" else ""
            if (plan, head) != (shown, view.head_sha) or (
                action == "approve" and (view.approvals is None or view.approvals.review != review)
            ):
                now = f"plan {shown[:12]}" if shown else "no plan"
                at = f" at {view.head_sha[:12]}" if view.head_sha else ""
                access.sessions.flash(
                    session,
                    Flash(
                        "refused",
                        f"Not {'approved' if action == 'approve' else 'deployed'}: the page "
                        f"showed plan {plan[:12]} at {head[:12]}, and this pull request has "
                        f"{now}{at} now (or that head has no plan reviewed). Nothing was "
                        "queued: review the plan below, then try again.",
                    ),
                )
                return back
        delivery_id = _delivery_id(session, action, reader.repo, number, nonce)
        forge, _, name = reader.repo.partition(":")
        installation = dict(await run_in_threadpool(reader.ledger.repositories)).get(reader.repo)
        # The forge's id the name is bound to: the flow's rename and successor checks apply
        # to the action as to the forge's own delivery (None: no delivery said one yet).
        bound = await run_in_threadpool(reader.ledger.name_binding, reader.repo)
        repo_id = None if bound is None else bound[1]
        event: Event
        if action == "approve":
            # The approval names the plan review the page showed (checked above to be the
            # head's now): one made again before it is handled is not approved.
            event = CheckRunEvent(
                forge=forge,
                repo=name,
                installation_id=installation,
                repo_id=repo_id,
                action="requested_action",
                check_name=APPROVAL,
                head_sha=head,
                numbers=(number,),
                requester=session.login,
                requester_id=session.user_id,
                identifier=approve_identifier(review),
                origin=WEB,
            )
        else:
            body = "/sluice deploy" if action == "deploy" else f"/sluice rollback {to}".rstrip()
            event = CommentEvent(
                forge=forge,
                repo=name,
                installation_id=installation,
                repo_id=repo_id,
                action="created",
                number=number,
                # no comment: an id of this action's own, so its content key is too
                comment_id=int(delivery_id[4:19], 16),
                author=session.login,
                author_id=session.user_id,
                body=body,
                created_ms=int(time.time() * 1000),
                origin=WEB,
            )
        try:
            fresh = await submit(
                Delivery(delivery_id, forge, f"web {action}", job_of(event), time.time())
            )
        except (StateError, IntakeClosed) as exc:
            log.error(
                "web UI: %s's %s of %s#%d not queued: %s",
                session.login,
                action,
                reader.repo,
                number,
                exc,
            )
            raise HTTPException(503, "the service could not queue it: try again shortly") from None
        job_id = (
            await run_in_threadpool(reader.queue.delivery_job, delivery_id)
            if reader.queue is not None
            else None
        )
        text = DONE[action].format(plan=plan[:12], head=head[:12], to=f" {to}" if to else "")
        if not fresh:
            text += " already (this form was sent before)"
        text += (f" as job {job_id}" if job_id is not None else "") + f": {AFTER[action]}."
        link = f"/ui/jobs?{urlencode({'repo': reader.repo})}#job-{job_id}" if job_id else ""
        access.sessions.flash(session, Flash("queued", text, link))
        log.info(
            "web UI: %s asked to %s %s#%d (job %s)",
            session.login,
            action,
            reader.repo,
            number,
            job_id,
        )
        return back

    @actions.post("/pulls/{number}/approve")
    async def approve(request: Request, number: Number, repo: Repo = None) -> RedirectResponse:
        return await act(request, number, repo, "approve")

    @actions.post("/pulls/{number}/deploy")
    async def deploy(request: Request, number: Number, repo: Repo = None) -> RedirectResponse:
        return await act(request, number, repo, "deploy")

    @actions.post("/pulls/{number}/rollback")
    async def rollback(request: Request, number: Number, repo: Repo = None) -> RedirectResponse:
        return await act(request, number, repo, "rollback")

    return actions


def _field(fields: dict[str, str], name: str, pattern: re.Pattern[str]) -> str:
    value = fields.get(name, "")
    if not pattern.match(value):
        raise HTTPException(422, f"the form's {name} is missing or malformed: reload the page")
    return value


def _delivery_id(session: Session, action: str, repo: str, number: int, nonce: str) -> str:
    """One form's delivery: the same form (its nonce) sent again by the same session is the
    same delivery, so the queue stores it once."""
    key = f"{session.sid}\0{action}\0{repo}\0{number}\0{nonce}".encode()
    return f"web:{hashlib.sha256(key).hexdigest()[:40]}"
