"""``/api/v1``: the UI's data as JSON, read only (GET; any other method is 405). Every
answer is one repository's (``repo``, default the first the request may see), through
:meth:`sluice.bot.web.site.Site.open`; an id of another repository is not found."""

from __future__ import annotations

from datetime import date
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from sluice.bot.web import schema as s
from sluice.bot.web.logs import follow, start_of
from sluice.bot.web.schema import MAX_STEPS
from sluice.bot.web.site import Site

Repo = Annotated[str | None, Query(max_length=300, description="The repository, forge:owner/name.")]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]
Limit = Annotated[int, Query(ge=1, le=200)]
Name = Annotated[str, Path(max_length=300)]
Status = Annotated[str | None, Query(pattern="^(active|expired|invalidated)$")]
Search = Annotated[str | None, Query(max_length=200)]
CalendarUnit = Annotated[
    str,
    Query(
        pattern="^(auto|day|month)$",
        description="What one cell is; auto: days if "
        "the page's intervals fit one window of days, else months.",
    ),
]
SampleKind = Annotated[
    str,
    Query(pattern="^(differing|source_only|target_only)$", description="Which example rows."),
]
Until = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        description="The window's last day (YYYY-MM-DD, 1970..9000); default the latest built.",
    ),
]
PlanId = Annotated[
    str | None,
    Query(max_length=100, description="A recorded plan: its models, coloured by its impact."),
]
Focus = Annotated[str | None, Query(max_length=300, description="Cut the graph around this model.")]
Steps = Annotated[int, Query(ge=0, le=MAX_STEPS)]
T = TypeVar("T")


def _found(value: T | None, what: str) -> T:
    if value is None:
        raise HTTPException(404, f"no such {what} in this repository")
    return value


def until_date(until: str | None) -> date | None:
    """``until`` as a date, within the calendar's years.

    Raises:
        HTTPException: 422 when it is not a date of 1970..9000.
    """
    if until is None:
        return None
    try:
        day = date.fromisoformat(until)
    except ValueError:
        raise HTTPException(422, f"until {until!r} is not a date (YYYY-MM-DD)") from None
    if not date(1970, 1, 1) <= day <= date(9000, 12, 31):
        raise HTTPException(422, "until must be a date of 1970..9000")
    return day


def _no_store(response: Response) -> None:
    """An answer is one person's view (what they may read): no cache keeps it."""
    response.headers["Cache-Control"] = "no-store"


def router(site: Site) -> APIRouter:
    api = APIRouter(prefix="/api/v1", tags=["ui"], dependencies=[Depends(_no_store)])

    @api.get("/repositories")
    def repositories(request: Request) -> list[s.Repository]:
        """The repositories this Sluice shows the request."""
        return [s.Repository(key=r) for r in site.visible(request)]

    @api.get("/environments")
    def environments(
        request: Request,
        repo: Repo = None,
        status: Status = None,
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> s.Page[s.Environment]:
        """Prod, the promotion tiers and every PR environment (filter: ``status``)."""
        return site.open(request, repo).environments(status=status, offset=offset, limit=limit)

    @api.get("/environments/{name}")
    def environment(request: Request, name: Name, repo: Repo = None) -> s.Environment:
        """One environment, with every model's version."""
        return _found(site.open(request, repo).environment(name), "environment")

    @api.get("/environments/{name}/intervals")
    def intervals(
        request: Request,
        name: Name,
        repo: Repo = None,
        unit: CalendarUnit = "auto",
        until: Until = None,
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> s.IntervalCalendar:
        """The intervals each model of an environment holds (its models by name, a page of
        them): their spans (runs of consecutive intervals) and a calendar window of cells."""
        reader = site.open(request, repo)
        calendar = reader.intervals(
            name, unit=unit, until=until_date(until), offset=offset, limit=limit
        )
        return _found(calendar, "environment")

    @api.get("/plans/{plan_id}")
    def plan(request: Request, plan_id: Name, repo: Repo = None) -> s.PlanView:
        """A recorded plan: categories and why, SQL diffs, backfill ranges."""
        return _found(site.open(request, repo).plan(plan_id), "plan")

    @api.get("/pulls")
    def pulls(
        request: Request, repo: Repo = None, offset: Offset = 0, limit: Limit = 50
    ) -> s.Page[s.PullSummary]:
        """The pull requests Sluice planned, newest first."""
        return site.open(request, repo).pulls_page(offset=offset, limit=limit)

    @api.get("/pulls/{number}")
    def pull(
        request: Request, number: Annotated[int, Path(ge=1, le=10**9)], repo: Repo = None
    ) -> s.PullRequestView:
        """A pull request's plan, checks, approvals and builds."""
        return _found(site.open(request, repo).pull(number), "pull request")

    @api.get("/pulls/{number}/table-diffs/{model}")
    def table_diff_samples(
        request: Request,
        number: Annotated[int, Path(ge=1, le=10**9)],
        model: Name,
        repo: Repo = None,
        kind: SampleKind = "differing",
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> s.TableDiffSamples:
        """A pull request's table diff of one model against prod, with a page of the
        example rows it kept (``kind``: differing, only in the PR's, only in prod's)."""
        reader = site.open(request, repo)
        samples = reader.table_diff_samples(number, model, kind=kind, offset=offset, limit=limit)
        return _found(samples, "table diff")

    @api.get("/jobs")
    def jobs(request: Request, repo: Repo = None, offset: Offset = 0, limit: Limit = 50) -> s.Jobs:
        """The queue's jobs (waiting, running, retrying with reason and next try) and the
        Spark jobs' logs, newest first."""
        return site.open(request, repo).jobs(offset=offset, limit=limit)

    @api.get("/jobs/queue/{job_id}")
    def queue_job(
        request: Request, job_id: Annotated[int, Path(ge=1, le=2**62)], repo: Repo = None
    ) -> s.QueueJob:
        """One job of the queue."""
        return _found(site.open(request, repo).queue_job(job_id), "job")

    @api.get(
        "/jobs/{job_id}/log",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "The log."}},
    )
    def job_log(
        request: Request,
        job_id: Name,
        repo: Repo = None,
        last_event_id: Annotated[str | None, Header(max_length=20)] = None,
    ) -> StreamingResponse:
        """A Spark job's log as server-sent events: every line (from ``Last-Event-ID``, the
        byte offset a reconnecting browser had reached), then the new ones as they are
        written, then an ``end`` event."""
        path = _found(site.open(request, repo).log_path(job_id), "job log")
        return StreamingResponse(
            follow(path, start=start_of(last_event_id, path)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @api.get("/history")
    def prod_history(
        request: Request, repo: Repo = None, offset: Offset = 0, limit: Limit = 50
    ) -> s.Page[s.HistoryEntry]:
        """Prod's promotions and rollbacks, newest first."""
        return site.open(request, repo).history(offset=offset, limit=limit)

    @api.get("/history/runs")
    def scheduled_runs(
        request: Request, repo: Repo = None, offset: Offset = 0, limit: Limit = 50
    ) -> s.Page[s.ScheduledRun]:
        """Prod's scheduled runs that had intervals due or failed, newest first: when,
        how long, which models and intervals, and the outcome."""
        return site.open(request, repo).runs(offset=offset, limit=limit)

    @api.get("/audit")
    def audit(
        request: Request, repo: Repo = None, offset: Offset = 0, limit: Limit = 50
    ) -> s.Page[s.AuditRow]:
        """The audit log: every gate decision and action, newest first."""
        return site.open(request, repo).audit(offset=offset, limit=limit)

    @api.get("/models")
    def models(
        request: Request,
        repo: Repo = None,
        q: Search = None,
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> s.Page[s.ModelView]:
        """Prod's models (``q``: whose name holds it)."""
        return site.open(request, repo).models(search=q, offset=offset, limit=limit)

    @api.get("/models/{name}")
    def model(request: Request, name: Name, repo: Repo = None) -> s.ModelView:
        """One of prod's models."""
        return _found(site.open(request, repo).model(name), "model")

    @api.get("/lineage")
    def lineage(
        request: Request,
        repo: Repo = None,
        plan: PlanId = None,
        focus: Focus = None,
        up: Steps = 3,
        down: Steps = 3,
    ) -> s.LineageGraph:
        """The model graph (models and kinds, and which model each reads) of prod, or,
        with ``plan``, of the environment that plan points at, each model coloured by the
        plan's impact; with ``focus``, only that model and the models ``up`` steps
        upstream and ``down`` steps downstream of it."""
        reader = site.open(request, repo)
        found = reader.lineage(plan_id=plan, focus=focus, up=up, down=down)
        return _found(found, "plan or model")

    @api.get("/lineage/columns")
    def column_lineage(
        request: Request,
        model: Annotated[str, Query(max_length=300, description="The model.")],
        repo: Repo = None,
        column: Annotated[
            str | None, Query(max_length=300, description="One of its columns.")
        ] = None,
        plan: PlanId = None,
    ) -> s.ColumnLineageView:
        """A model's columns; with ``column``, the columns upstream its value comes from
        and the models' columns downstream its value reaches (and the models whose rows
        it decides), among the graph's models (``plan`` as for the graph)."""
        reader = site.open(request, repo)
        found = reader.column_lineage(model, column, plan_id=plan)
        return _found(found, "plan, model or column")

    return api
