"""``/ui``: the pages, rendered on the server from the same values the API answers with
(:mod:`sluice.bot.web.reader`), one Jinja2 template a page over one layout. Autoescaped:
every text a person wrote (a PR's title, a model's name, SQL) is escaped where it is
shown, and the pages' Content-Security-Policy lets only Sluice's own files run or style
them (no CDN, no inline script)."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from sluice import __version__
from sluice.bot.web import api
from sluice.bot.web.access import SignedIn
from sluice.bot.web.reader import Reader
from sluice.bot.web.sidebyside import side_by_side
from sluice.bot.web.site import Site
from sluice.core.plan.plan import iso
from sluice.core.timeutil import to_ds
from sluice.core.words import duration, size

TEMPLATES = FilePath(__file__).parent / "templates"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
Repo = Annotated[str | None, Query(max_length=300)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]
Name = Annotated[str, Path(max_length=300)]
PER_PAGE = 50
RUN_MODELS = 30
"""Models of one scheduled run the history page lists (the API gives its record's)."""
IMPACTS = (
    ("breaking", "breaking"),
    ("non-breaking", "non-breaking"),
    ("forward-only", "forward-only"),
    ("metadata", "metadata only"),
    ("indirect", "changed downstream"),
    ("added", "added"),
    ("unchanged", "unchanged"),
)
"""The lineage page's legend: each impact a plan colours a model with, and its words."""


def _when(ms: float | None, *, seconds: bool = False) -> str:
    if ms is None:
        return "-"
    value = ms if seconds else ms / 1000
    return datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


SAMPLE_TEXT = 300
"""Characters of one sample value a page shows (the API gives it whole)."""


def _sample(value: Any) -> str:
    """A sample row's value as text: a differing column's ``source → target``, NULL for
    a null, JSON for the rest but strings; a value cut at :data:`SAMPLE_TEXT` characters."""
    if isinstance(value, dict) and set(value) == {"source", "target"}:
        return f"{_sample(value['source'])} → {_sample(value['target'])}"  # each side cut
    if value is None:
        text = "NULL"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= SAMPLE_TEXT else text[: SAMPLE_TEXT - 1] + "…"


def templates() -> Environment:
    """The pages' Jinja2 environment (autoescaped, strict), with their filters."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template is HTML
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["day"] = to_ds
    env.filters["sample"] = _sample
    env.filters["when_s"] = lambda v: _when(v, seconds=True)
    env.filters["took"] = lambda v: "-" if v is None else ("under 1 s" if v < 0.5 else duration(v))
    env.filters["instant"] = iso
    env.filters["size"] = lambda n: "-" if n is None else size(n)
    env.filters["side_by_side"] = side_by_side
    return env


def router(site: Site, *, actions: bool = False) -> APIRouter:
    """The pages of ``site``; with ``actions`` (the service's web UI actions are mounted,
    :mod:`sluice.bot.web.actions`), a signed-in person's pull request page has their forms."""
    pages = APIRouter(prefix="/ui", include_in_schema=False)
    env = templates()

    def render(request: Request, template: str, repo: Reader, **values: Any) -> HTMLResponse:
        def link(path: str, **query: Any) -> str:
            params = {"repo": repo.repo, **{k: v for k, v in query.items() if v is not None}}
            return f"/ui{path}?{urlencode(params)}"

        access = site.access
        viewer = access.viewer(request)
        signed_in = isinstance(access, SignedIn)
        html = env.get_template(template).render(
            repo=repo.repo,
            repos=site.visible(request),
            link=link,
            version=__version__,
            page=template.removesuffix(".html.j2"),
            viewer=viewer,
            # an action's outcome, once; the forms only for a signed-in person
            flashes=access.sessions.take_flashes(request) if isinstance(access, SignedIn) else [],
            acts=actions and signed_in and viewer is not None,
            nonce=secrets.token_urlsafe(16),
            **values,
        )
        # a page is one person's view (what they may read, their CSRF token): no cache keeps it
        return HTMLResponse(
            html, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store"}
        )

    def found(value: Any, what: str) -> Any:
        if value is None:
            raise HTTPException(404, f"no such {what} in this repository")
        return value

    @pages.get("")
    @pages.get("/")
    def index(request: Request, repo: Repo = None) -> RedirectResponse:
        reader = site.open(request, repo)
        return RedirectResponse(f"/ui/environments?{urlencode({'repo': reader.repo})}", 303)

    @pages.get("/environments")
    def environments(
        request: Request, repo: Repo = None, status: str | None = None, offset: Offset = 0
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        chosen = status if status in ("active", "expired", "invalidated") else None
        listed = reader.environments(status=chosen, offset=offset, limit=PER_PAGE)
        titles = {p.number: p.title for p in reader.pulls_page(offset=0, limit=200).items}
        return render(
            request, "environments.html.j2", reader, listed=listed, status=chosen, titles=titles
        )

    @pages.get("/environments/{name}")
    def environment(request: Request, name: Name, repo: Repo = None) -> HTMLResponse:
        reader = site.open(request, repo)
        env_ = found(reader.environment(name), "environment")
        return render(request, "environment.html.j2", reader, env=env_)

    @pages.get("/environments/{name}/intervals")
    def intervals(
        request: Request,
        name: Name,
        repo: Repo = None,
        unit: api.CalendarUnit = "auto",
        until: api.Until = None,
        offset: Offset = 0,
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        day = api.until_date(until)
        calendar = reader.intervals(name, unit=unit, until=day, offset=offset, limit=PER_PAGE)
        chosen = unit if unit != "auto" else None
        return render(
            request,
            "intervals.html.j2",
            reader,
            calendar=found(calendar, "environment"),
            chosen=chosen,
            until=until,
        )

    @pages.get("/pulls")
    def pulls(request: Request, repo: Repo = None, offset: Offset = 0) -> HTMLResponse:
        reader = site.open(request, repo)
        listed = reader.pulls_page(offset=offset, limit=PER_PAGE)
        return render(request, "pulls.html.j2", reader, listed=listed)

    @pages.get("/pulls/{number}")
    def pull(
        request: Request, number: Annotated[int, Path(ge=1, le=10**9)], repo: Repo = None
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        view = found(reader.pull(number), "pull request")
        return render(request, "pull.html.j2", reader, pr=view, plan=view.plan)

    @pages.get("/pulls/{number}/table-diffs/{model}")
    def table_diff(
        request: Request,
        number: Annotated[int, Path(ge=1, le=10**9)],
        model: Name,
        repo: Repo = None,
        kind: api.SampleKind = "differing",
        offset: Offset = 0,
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        samples = reader.table_diff_samples(number, model, kind=kind, offset=offset, limit=PER_PAGE)
        return render(request, "table_diff.html.j2", reader, d=found(samples, "table diff"))

    @pages.get("/plans/{plan_id}")
    def plan(request: Request, plan_id: Name, repo: Repo = None) -> HTMLResponse:
        reader = site.open(request, repo)
        return render(request, "plan.html.j2", reader, plan=found(reader.plan(plan_id), "plan"))

    @pages.get("/jobs")
    def jobs(request: Request, repo: Repo = None, offset: Offset = 0) -> HTMLResponse:
        reader = site.open(request, repo)
        listed = reader.jobs(offset=offset, limit=PER_PAGE)
        return render(request, "jobs.html.j2", reader, listed=listed)

    @pages.get("/jobs/{job_id}")
    def job(request: Request, job_id: Name, repo: Repo = None) -> HTMLResponse:
        reader = site.open(request, repo)
        found(reader.log_path(job_id), "job log")
        stream = f"/api/v1/jobs/{job_id}/log?{urlencode({'repo': reader.repo})}"
        return render(request, "job.html.j2", reader, job_id=job_id, stream=stream)

    @pages.get("/history")
    def history(
        request: Request, repo: Repo = None, offset: Offset = 0, runs_offset: Offset = 0
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        listed = reader.history(offset=offset, limit=PER_PAGE)
        runs = reader.runs(offset=runs_offset, limit=PER_PAGE)
        return render(
            request, "history.html.j2", reader, listed=listed, runs=runs, run_models=RUN_MODELS
        )

    @pages.get("/drift")
    def drift(request: Request, repo: Repo = None) -> HTMLResponse:
        """Prod's drift, its repair plan and the policies' verdicts (issue 47), with the
        forms of the ``sluice/drift`` check's buttons (:mod:`sluice.bot.web.repair`)."""
        reader = site.open(request, repo)
        return render(request, "drift.html.j2", reader, view=reader.drift())

    @pages.get("/audit")
    def audit(request: Request, repo: Repo = None, offset: Offset = 0) -> HTMLResponse:
        reader = site.open(request, repo)
        listed = reader.audit(offset=offset, limit=PER_PAGE)
        return render(request, "audit.html.j2", reader, listed=listed)

    @pages.get("/models")
    def models(
        request: Request,
        repo: Repo = None,
        q: Annotated[str | None, Query(max_length=200)] = None,
        offset: Offset = 0,
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        listed = reader.models(search=q, offset=offset, limit=PER_PAGE)
        return render(request, "models.html.j2", reader, listed=listed, q=q or "")

    @pages.get("/models/{name}")
    def model(request: Request, name: Name, repo: Repo = None) -> HTMLResponse:
        reader = site.open(request, repo)
        return render(request, "model.html.j2", reader, model=found(reader.model(name), "model"))

    @pages.get("/lineage")
    def lineage(
        request: Request,
        repo: Repo = None,
        plan: api.PlanId = None,
        focus: api.Focus = None,
    ) -> HTMLResponse:
        reader = site.open(request, repo)
        chosen = found(reader.plan(plan), "plan") if plan else None
        plans = reader.environment_plans()
        if chosen is not None and (chosen.environment, chosen.plan_id) not in plans:
            plans.append((chosen.environment, chosen.plan_id))  # an older plan, linked
        query = urlencode({"repo": reader.repo, **({"plan": plan} if plan else {})})
        return render(
            request,
            "lineage.html.j2",
            reader,
            plans=plans,
            plan=plan or "",
            focus=focus or "",
            graph_api=f"/api/v1/lineage?{query}",
            columns_api=f"/api/v1/lineage/columns?{query}",
            impacts=IMPACTS,
        )

    return pages
