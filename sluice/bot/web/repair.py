"""The web UI's drift repair (issue 47): the ``sluice/drift`` check's buttons as forms on
``/ui/drift``, for every forge (a GitLab status has no buttons), for a signed-in person.

- ``POST /ui/drift/request``: "Plan the repair";
- ``POST /ui/drift/approve``: "Approve the repair";
- ``POST /ui/drift/override``: "Override policies", with a reason (``reason``: 1 to 500
  printable characters, line breaks and tabs made spaces, no other control character),
  which the ``policy override`` row of the audit log keeps.

No second gate, as for the pull request's forms (:mod:`sluice.bot.web.actions`): each form
becomes the event the check's button becomes, a ``CheckRunEvent`` of the ``sluice/drift``
check with origin WEB, the signed-in forge user as its requester (and their account id),
queued under prod's key; the flow (:func:`sluice.bot.flow.drift_repair.on_click`) decides
as it does for the button: a writer asks, the required approvers (never who asked), the
owners or the budget's approver the plan needs approve, and someone a failing soft policy
names overrides it; anyone else's form is refused in the audit log, nothing done.

What this module checks before anything is queued: a session (401), the form's CSRF token
(403), a repository the person can read (404), the form's fields (422: ``nonce``,
``head`` the prod branch's commit shown, ``plan`` the repair plan's 32-character
fingerprint shown, ``reason``), and that the page the form came from showed what prod's
drift view holds now (:mod:`sluice.bot.flow.drift_view`: the same commit and repair
plan): a form from an older page is refused, nothing queued. The event names the plan's
fingerprint (its button's identifier), and the flow makes the plan again when it runs:
an approval or override of a plan that changed in between is refused there too.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from sluice.bot.events.neutral import WEB, CheckRunEvent
from sluice.bot.flow.drift_repair import REASON_CHARS
from sluice.bot.intake.group_commit import IntakeClosed, job_of
from sluice.bot.present import checks
from sluice.bot.queue.store import Delivery
from sluice.bot.web.access import SignedIn
from sluice.bot.web.actions import NONCE, NOT_SIGNED_IN, SHA, Submit, _delivery_id, _field
from sluice.bot.web.session import Flash, checked_form
from sluice.bot.web.site import Site
from sluice.core.errors import StateError

log = logging.getLogger(__name__)

Action = Literal["request", "approve", "override"]
Repo = Annotated[str | None, Query(max_length=300)]
FINGERPRINT = re.compile(r"^[0-9a-f]{32}$")
BUTTONS = {
    "request": checks.PLAN_REPAIR,
    "approve": checks.APPROVE_REPAIR,
    "override": checks.WAIVE_REPAIR,
}
WORDS = {
    "request": "request (“Plan the repair”)",
    "approve": "approval (“Approve the repair”)",
    "override": "override (“Override policies”)",
}


def router(site: Site, submit: Submit) -> APIRouter:
    """``POST /ui/drift/request``, ``/approve`` and ``/override`` on ``site``."""
    forms = APIRouter(prefix="/ui", include_in_schema=False)

    async def act(request: Request, repo: str | None, action: Action) -> RedirectResponse:
        access = site.access
        if not isinstance(access, SignedIn):
            raise HTTPException(403, NOT_SIGNED_IN)
        session, fields = await checked_form(request, access.sessions)
        reader = await run_in_threadpool(site.open, request, repo)
        nonce = _field(fields, "nonce", NONCE)
        plan, head = _field(fields, "plan", FINGERPRINT), _field(fields, "head", SHA)
        reason = ""
        if action == "override":
            reason = " ".join(fields.get("reason", "").split())
            if not reason or len(reason) > REASON_CHARS or not reason.isprintable():
                raise HTTPException(
                    422,
                    f"an override needs a reason of 1 to {REASON_CHARS} printable characters",
                )
        back = RedirectResponse(
            f"/ui/drift?{urlencode({'repo': reader.repo})}",
            303,
            headers={"Cache-Control": "no-store"},
        )
        view = await run_in_threadpool(reader.drift)
        shown = (view or {}).get("repair") or {}
        if view is None or (view.get("head"), shown.get("fingerprint")) != (head, plan):
            now = (
                f"repair plan {str(shown['fingerprint'])[:12]} at {str(view['head'])[:12]}"
                if view is not None and shown.get("fingerprint")
                else "no repair plan"
            )
            access.sessions.flash(
                session,
                Flash(
                    "refused",
                    f"Not sent: the page showed repair plan {plan[:12]} at {head[:12]}, and "
                    f"prod's drift has {now} now (prod or its drift changed since). Nothing "
                    "was queued: review the plan below, then try again.",
                ),
            )
            return back
        delivery_id = _delivery_id(session, f"drift {action}", reader.repo, 0, nonce)
        forge, _, name = reader.repo.partition(":")
        installation = dict(await run_in_threadpool(reader.ledger.repositories)).get(reader.repo)
        # The forge's id the name is bound to: the flow's rename and successor checks apply
        # to the action as to the forge's own delivery (None: no delivery said one yet).
        bound = await run_in_threadpool(reader.ledger.name_binding, reader.repo)
        repo_id = None if bound is None else bound[1]
        event = CheckRunEvent(
            forge=forge,
            repo=name,
            installation_id=installation,
            repo_id=repo_id,
            action="requested_action",
            check_name=checks.DRIFT,
            head_sha=head,
            numbers=(),
            requester=session.login,
            requester_id=session.user_id,
            identifier=f"{BUTTONS[action]}:{plan[: checks.PLAN_IN_ACTION]}",
            origin=WEB,
            reason=reason,
        )
        try:
            fresh = await submit(
                Delivery(delivery_id, forge, f"web drift {action}", job_of(event), time.time())
            )
        except (StateError, IntakeClosed) as exc:
            log.error("web UI: %s's drift %s of %s not queued: %s", session.login, action,
                      reader.repo, exc)  # fmt: skip
            raise HTTPException(503, "the service could not queue it: try again shortly") from None
        job_id = (
            await run_in_threadpool(reader.queue.delivery_job, delivery_id)
            if reader.queue is not None
            else None
        )
        text = f"Your {WORDS[action]} of repair plan {plan[:12]} was queued"
        if not fresh:
            text += " already (this form was sent before)"
        text += (f" as job {job_id}" if job_id is not None else "") + (
            ": the gate decides whether it counts; this page and the audit log say."
        )
        link = f"/ui/jobs?{urlencode({'repo': reader.repo})}#job-{job_id}" if job_id else ""
        access.sessions.flash(session, Flash("queued", text, link))
        log.info("web UI: %s sent the drift %s of %s (job %s)", session.login, action,
                 reader.repo, job_id)  # fmt: skip
        return back

    @forms.post("/drift/request")
    async def request_repair(request: Request, repo: Repo = None) -> RedirectResponse:
        return await act(request, repo, "request")

    @forms.post("/drift/approve")
    async def approve_repair(request: Request, repo: Repo = None) -> RedirectResponse:
        return await act(request, repo, "approve")

    @forms.post("/drift/override")
    async def override_policies(request: Request, repo: Repo = None) -> RedirectResponse:
        return await act(request, repo, "override")

    return forms
