"""What the UI shows, read from the state database through its owners' modules: the
state store (environments, plans, snapshots), the ledger (plans reviewed on each head,
approvals, the state's repository) and the job queue; and from the forge, through
:class:`PullSource`, a pull request's title and checks. Read only: nothing here writes.

A plan is shown from the JSON its :class:`~sluice.core.plan.plan.Plan` recorded
(``to_json``, the form the CLI prints): categories, versions, diffs and backfill ranges are
the planner's, not decided again here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from sluice.bot.events.neutral import KEY_MARKS
from sluice.bot.flow import drift_view
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.reviewed_plan import PlanReview, own_key
from sluice.bot.forge.base import Check, PullRequest
from sluice.bot.present.checks import APPROVAL
from sluice.bot.queue.schema import JobRecord, JobStatus
from sluice.bot.queue.store import JobQueue
from sluice.bot.web import calendar, lineage
from sluice.bot.web import schema as s
from sluice.core.plan.column_types import ColumnTypes
from sluice.core.plan.plan import VIEW_MARKER, iso
from sluice.core.rollback import history
from sluice.core.runs import RecordedRun, recorded_runs
from sluice.core.snapshot.naming import PROD, pr_environment
from sluice.core.snapshot.snapshot import Snapshot
from sluice.core.spark import connect
from sluice.core.spark.writes import TESTED_MODEL
from sluice.core.state import EnvironmentRecord, JobResult, PlanRecord, open_state
from sluice.core.tablediff.result import TableDiffResult
from sluice.core.timeutil import DAY_MS, to_ds, to_ms
from sluice.core.workflow import PLAN_SNAPSHOTS

_PR_ENV = re.compile(r"^(?:[a-z0-9_]+_)?pr_([0-9]{1,9})$")
LOG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""A job's id as its log file is named (``submit._safe``: word characters, dots, dashes)."""
HISTORY_LIMIT = 1000
TABLE_DIFF, AUDIT, UNIT_TEST = "table_diff", "audit", "unit_test"  # results a build records
TESTS_READ = 200
"""The newest unit test results a model's page looks through for its tests."""
TEST_CHARS = 64 * 1024
"""The longest unit test result (its payload's JSON) a model's page reads: the driver's
own list at most 20 rows of a diff; a job may store up to 1 MiB, so the page's read is
bounded by these two (12.5 MiB), not by what a pull request's driver saved."""
MAX_DIFF = 4000
APPROVALS_READ = 100
"""Changed models of one promotion whose approval prod history looks up (by name)."""


class PullSource(Protocol):
    """What the forge says of a pull request: itself (None: no such PR) and a commit's
    checks."""

    def pull(self, number: int) -> PullRequest | None: ...

    def checks(self, sha: str) -> list[Check]: ...


def now_ms() -> int:
    return int(time.time() * 1000)


class Reader:
    """One repository's records in the state database at ``url``; ``logs``: the folder its
    jobs' logs are written to; ``queue``: whether the database holds the service's queue;
    ``state``: its engine state's database when not ``url`` (its namespace's, issue 46);
    ``spark_root``: its Spark root, whose warm Connect server the jobs page shows (None:
    this process runs none). Its records are read under the key the flow keeps them by
    (``key``: its namespace's, as the caller looked it up with ``state``; None: the name's
    binding now, :meth:`~sluice.bot.flow.ledger.Ledger.canonical`: a renamed repository's
    first name, a name's new holder's ``<name>~<id>``), fixed for the reader's life: a
    name that changes hands gets a reader of its own (:meth:`sluice.bot.web.site.Site.open`)."""

    def __init__(
        self,
        repo: str,
        url: str,
        *,
        logs: Path | None = None,
        pulls: PullSource | None = None,
        queue: bool = True,
        clock: Callable[[], int] = now_ms,
        state: str | None = None,
        spark_root: Path | None = None,
        key: str | None = None,
    ) -> None:
        self.repo, self.logs, self.pulls, self.clock = repo, logs, pulls, clock
        self.spark_root = spark_root
        self.state = open_state(state or url)  # its namespace's, when isolated (issue 46)
        self.ledger = Ledger(url)
        # The key of its records: its namespace's (a renamed repository's first name).
        self.key = key if key is not None else self.ledger.canonical(repo)
        self.queue = JobQueue(url) if queue else None
        self.sets = lineage.ModelSets(
            lambda ids: (Snapshot.from_stored(v) for v in self.state.get_snapshots(ids).values())
        )

    def close(self) -> None:
        self.state.close()
        self.ledger.close()
        if self.queue is not None:
            self.queue.close()

    # -- environments ---------------------------------------------------------------------

    def _environment(self, record: EnvironmentRecord, *, versions: bool) -> s.Environment:
        found = _PR_ENV.match(record.name)
        kind = "prod" if record.name == PROD else ("pr" if found else "tier")
        if record.invalidated:
            status = "invalidated"
        elif record.expiration_ts is not None and record.expiration_ts <= self.clock():
            status = "expired"
        else:
            status = "active"
        plan = self.state.get_plan(record.plan_id)
        return s.Environment(
            name=record.name,
            kind=kind,
            status=status,
            plan_id=record.plan_id,
            previous_plan_id=record.previous_plan_id,
            pull_request=int(found.group(1)) if found else None,
            created=plan.created_ts if plan is not None else None,
            updated=record.updated_ts,
            expires=record.expiration_ts,
            models=len(record.snapshots),
            versions=[
                s.ModelVersion(name=r.name, version=r.version, identifier=r.identifier)
                for r in sorted(record.snapshots, key=lambda r: r.name)
            ]
            if versions
            else [],
        )

    def environments(self, *, status: str | None, offset: int, limit: int) -> s.Page[s.Environment]:
        records = {r.name: r for r in self.state.list_environments()}
        listed = [self._environment(r, versions=False) for r in records.values()]
        order = {"prod": 0, "tier": 1, "pr": 2}
        listed.sort(key=lambda e: (order[e.kind], e.pull_request or 0, e.name))
        if status is not None:
            listed = [e for e in listed if e.status == status]
        page = listed[offset : offset + limit]
        self._own_sizes(page, records)
        return s.Page(items=page, total=len(listed), offset=offset, limit=limit)

    def environment_plans(self) -> list[tuple[str, str]]:
        """Each environment's name and the plan it points at, as :meth:`environments`
        orders them (prod, the tiers, the pull requests')."""

        def order(name: str) -> tuple[int, int, str]:
            found = _PR_ENV.match(name)
            kind = 0 if name == PROD else (2 if found else 1)
            return kind, int(found.group(1)) if found else 0, name

        records = self.state.list_environments()
        return [(r.name, r.plan_id) for r in sorted(records, key=lambda r: order(r.name))]

    def _own_sizes(self, page: list[s.Environment], records: dict[str, EnvironmentRecord]) -> None:
        """Each environment's ``own_bytes``: the measured size of its tables that are not
        prod's (one read of the sizes for the whole page)."""
        prod = records.get(PROD)
        shared = {(r.name, r.version) for r in prod.snapshots} if prod is not None else set()
        own = {
            e.name: {(r.name, r.version) for r in records[e.name].snapshots} - shared
            for e in page
            if e.kind != "prod"
        }
        sizes = self.state.get_table_sizes({name for keys in own.values() for name, _ in keys})
        for environment in page:
            if environment.name in own:
                environment.own_bytes = sum(
                    sizes[key].bytes for key in own[environment.name] if key in sizes
                )

    def environment(self, name: str) -> s.Environment | None:
        """One environment with its models' versions, which of them are its own (not
        prod's) and their tables' measured sizes."""
        record = self.state.get_environment(name)
        if record is None:
            return None
        view = self._environment(record, versions=True)
        prod = self.state.get_environment(PROD) if name != PROD else None
        shared = {(r.name, r.version) for r in prod.snapshots} if prod is not None else set()
        sizes = self.state.get_table_sizes(v.name for v in view.versions)
        own = 0
        for version in view.versions:
            size = sizes.get((version.name, version.version))
            version.own = name != PROD and (version.name, version.version) not in shared
            if size is not None:
                version.bytes, version.rows = size.bytes, size.rows
                own += size.bytes if version.own else 0
        view.own_bytes = own if name != PROD else None
        return view

    # -- plans and pull requests ----------------------------------------------------------

    def plan(self, plan_id: str) -> s.PlanView | None:
        record = self.state.get_plan(plan_id)
        return None if record is None else _plan_view(record)

    def pull_numbers(self) -> list[int]:
        numbers = set(self.ledger.builds(self.key))
        for record in self.state.list_environments():
            found = _PR_ENV.match(record.name)
            if found:
                numbers.add(int(found.group(1)))
        return sorted(numbers, reverse=True)

    def pulls_page(self, *, offset: int, limit: int) -> s.Page[s.PullSummary]:
        numbers = self.pull_numbers()
        items = []
        for number in numbers[offset : offset + limit]:
            pr = self.pulls.pull(number) if self.pulls is not None else None
            record = self.state.get_environment(pr_environment(number))
            items.append(
                s.PullSummary(
                    number=number,
                    title=pr.title if pr is not None else "",
                    environment=pr_environment(number),
                    plan_id=record.plan_id if record is not None else None,
                    head_sha=pr.head_sha if pr is not None else None,
                )
            )
        return s.Page(items=items, total=len(numbers), offset=offset, limit=limit)

    def pull(self, number: int) -> s.PullRequestView | None:
        builds = self.ledger.builds(self.key).get(number, [])
        environment = pr_environment(number)
        record = self.state.get_environment(environment)
        pr = self.pulls.pull(number) if self.pulls is not None else None
        if not builds and record is None:
            return None  # not a pull request of this repository that Sluice planned
        plan = self.state.get_plan(record.plan_id) if record is not None else None
        head = pr.head_sha if pr is not None else (builds[-1][0] if builds else None)
        checks = (
            [_check(c) for c in self.pulls.checks(head)] if self.pulls is not None and head else []
        )
        approvals = None
        review: PlanReview | None = self.ledger.review(self.key, number, head) if head else None
        if review is not None:
            approvals = s.Approvals(
                review=review.fingerprint,
                clicks=[c.user for c in self.ledger.clicks(self.key, number) if c.sha == head],
                owners_of_changes=dict(review.direct_owners),
                breaking_owners=dict(review.breaking_owners),
                merge_intervals=review.merge_intervals,
                check=next((c for c in checks if c.name == APPROVAL), None),
            )
        results = self.state.get_results(plan_id=plan.plan_id) if plan is not None else []
        return s.PullRequestView(
            repository=self.repo,
            number=number,
            title=pr.title if pr is not None else "",
            author=pr.author if pr is not None else None,
            head_sha=head,
            open=pr.open if pr is not None else None,
            environment=environment,
            plan=_plan_view(plan) if plan is not None else None,
            checks=checks,
            approvals=approvals,
            builds=[s.Build(sha=sha, fingerprint=fp, created=at) for sha, fp, at in builds],
            table_diffs=[_table_diff(r) for r in _last_of_each(results, TABLE_DIFF)],
            audits=[
                s.AuditOutcome(
                    name=r.name,
                    passed=r.passed,
                    violations=_int(r.payload.get("violations")),
                )
                for r in results
                if r.kind == AUDIT
            ],
        )

    def table_diff_samples(
        self, number: int, model: str, *, kind: str, offset: int, limit: int
    ) -> s.TableDiffSamples | None:
        """A page of the example rows of ``kind`` that the table diff of ``model`` kept
        for pull request ``number``'s plan now (the last it recorded); None when the PR
        has no environment or its plan no such diff."""
        record = self.state.get_environment(pr_environment(number))
        if record is None or kind not in SAMPLE_KINDS:
            return None
        results = _last_of_each(self.state.get_results(plan_id=record.plan_id), TABLE_DIFF)
        last = next((r for r in results if r.name == model), None)
        if last is None:
            return None
        diff = TableDiffResult.from_json(last.payload)  # type: ignore[arg-type]
        rows = [dict(row) for row in getattr(diff.samples, kind)]
        page = rows[offset : offset + limit]
        return s.TableDiffSamples(
            pull_request=number,
            plan_id=record.plan_id,
            diff=_table_diff(last),
            kind=kind,
            columns=_columns(diff.keys, page),
            rows=s.Page(items=page, total=len(rows), offset=offset, limit=limit),
        )

    # -- queue and jobs -------------------------------------------------------------------

    def _job_names(self) -> list[str]:
        """What this repository's queued jobs are keyed by, read on each call: its
        namespace's key (every job since a delivery bound its name), then the names bound
        to it now that no other namespace has or had
        (:meth:`~sluice.bot.flow.ledger.Ledger.job_names`), for a job queued under a name
        before any delivery bound it. Never the page's name as such: the name a repository
        left is its old holder's key, the very string of the name its new holder has.

        Given up, for a name that is or was another namespace's (another's key, the key
        of records no delivery bound, or a name that changed hands): the jobs queued
        under it while it was bound to nothing are listed on this repository's pages no
        more (they run all the same; the namespace the name keys lists them), since
        whose they were cannot be told."""
        return self.ledger.job_names(self.key)

    def jobs(self, *, offset: int, limit: int) -> s.Jobs:
        if self.queue is not None:
            key, *names = self._job_names()
            records, total = self.queue.page(key, offset=offset, limit=limit, also=names)
            queue = s.Page[s.QueueJob](
                items=[_queue_job(r) for r in records], total=total, offset=offset, limit=limit
            )
        else:
            queue = s.Page[s.QueueJob](items=[], total=0, offset=offset, limit=limit)
        logs = self._logs()
        return s.Jobs(
            queue=queue,
            logs=s.Page(
                items=logs[offset : offset + limit], total=len(logs), offset=offset, limit=limit
            ),
            spark_server=self.spark_server(),
        )

    def spark_server(self) -> s.SparkServer | None:
        """This repository's Spark Connect server in the service's pool (its own root's
        alone), or None: the service runs none, or none for this root yet."""
        if self.spark_root is None:
            return None
        found = connect.pool_status(root=self.spark_root.resolve())
        if not found:
            return None
        server = found[0]
        return s.SparkServer(
            state=server.state,
            port=server.port,
            jobs=server.jobs,
            idle_since=server.idle_since,
            stopped_because=server.stopped_because,
        )

    def queue_job(self, job_id: int) -> s.QueueJob | None:
        record = self.queue.job(job_id) if self.queue is not None else None
        if record is None or not any(_of_repo(record.job.key, n) for n in self._job_names()):
            return None  # another repository's job is not found here
        return _queue_job(record)

    def _logs(self) -> list[s.JobLog]:
        if self.logs is None or not self.logs.is_dir():
            return []
        found = []
        for path in self.logs.glob("*.log"):
            job_id = path.name[: -len(".log")]
            if LOG_ID.match(job_id) and path.is_file():
                info = path.stat()
                found.append(s.JobLog(job_id=job_id, size=info.st_size, modified=info.st_mtime))
        found.sort(key=lambda j: (-j.modified, j.job_id))
        return found

    def log_path(self, job_id: str) -> Path | None:
        """The log of job ``job_id``; None when its id is not a job's or it has none."""
        if self.logs is None or not LOG_ID.match(job_id):
            return None
        path = self.logs / f"{job_id}.log"
        return path if path.is_file() else None

    # -- prod's history -------------------------------------------------------------------

    def history(self, *, offset: int, limit: int) -> s.Page[s.HistoryEntry]:
        plans = history(self.state, PROD, limit=HISTORY_LIMIT)
        seen: list[frozenset[tuple[str, str]]] = [_refs(p) for p in plans]
        items = []
        for index, plan in enumerate(plans[offset : offset + limit], start=offset):
            payload = plan.payload
            changed = [str(c["name"]) for c in _list(payload, "directly_modified")] + [
                str(c["name"]) for c in _list(payload, "indirectly_modified")
            ]
            # a scheduled run: prod's tables as the plan before, nothing changed
            run = seen[index + 1 : index + 2] == [seen[index]] and not _changes(payload, changed)
            earlier = seen[index + 2 :]  # a plan pointing prod back at an older one's tables
            rollback = not run and bool(seen[index]) and seen[index] in earlier
            source, by = (None, None) if rollback or run else self._approved_by(plan)
            items.append(
                s.HistoryEntry(
                    plan_id=plan.plan_id,
                    environment=plan.environment,
                    created=plan.created_ts,
                    kind="run" if run else ("rollback" if rollback else "promotion"),
                    source=source,
                    by=by,
                    added=[str(n) for n in payload.get("added", [])],
                    removed=[str(n) for n in payload.get("removed", [])],
                    changed=changed,
                )
            )
        return s.Page(items=items, total=len(plans), offset=offset, limit=limit)

    def runs(self, *, offset: int, limit: int) -> s.Page[s.ScheduledRun]:
        """Prod's scheduled runs as the state recorded them (:mod:`sluice.core.runs`),
        newest first."""
        found, total = recorded_runs(self.state, PROD, offset=offset, limit=limit)
        return s.Page(items=[self._run(r) for r in found], total=total, offset=offset, limit=limit)

    def _run(self, run: RecordedRun) -> s.ScheduledRun:
        p = run.payload
        started, finished = _int(p.get("started")), _int(p.get("finished"))
        models = [m for m in p.get("models", []) if isinstance(m, dict)]
        spark = p.get("spark_seconds")
        error = p.get("error")
        return s.ScheduledRun(
            job_id=run.job_id,
            plan_id=run.plan_id,
            environment=run.environment,
            outcome="ok" if run.ok else "failed",
            at=_int(p.get("at")),
            started=started,
            finished=finished,
            seconds=(finished - started) / 1000
            if started is not None and finished is not None
            else None,
            spark_seconds=float(spark) if isinstance(spark, int | float) else None,
            intervals=_int(p.get("intervals")) or 0,
            tables_built=_int(p.get("tables_built")) or 0,
            models=[
                s.RunModel(
                    name=str(m.get("name", "")),
                    version=str(m.get("version", "")),
                    start=_int(m.get("start")) or 0,
                    end=_int(m.get("end")) or 0,
                    intervals=_int(m.get("intervals")) or 0,
                )
                for m in models
            ],
            models_total=_int(p.get("models_total")) or len(models),
            error=str(error) if error is not None else None,
            log=self.log_path(run.job_id) is not None,
        )

    def intervals(
        self, name: str, *, unit: str, until: date | None, offset: int, limit: int
    ) -> s.IntervalCalendar | None:
        """The intervals each model of environment ``name`` holds (its models by name,
        ``offset``/``limit`` of them), over a window of ``unit`` cells (``auto``: days when
        the page's spans fit one window of days) ending with ``until``'s cell (None: the
        page's latest built day, else today). None: no such environment."""
        record = self.state.get_environment(name)
        if record is None:
            return None
        refs = sorted(record.snapshots, key=lambda r: r.name)
        page = refs[offset : offset + limit]
        stored = self.state.get_intervals((r.name, r.version) for r in page)
        held = {key: [sp for sp in spans if sp != VIEW_MARKER] for key, spans in stored.items()}
        built = [sp for spans in held.values() for sp in spans]
        chosen: calendar.Unit = (
            calendar.choose(built) if unit == "auto" else ("day" if unit == "day" else "month")
        )
        latest = max((e for _, e in built), default=self.clock())
        end = to_ms(until) + DAY_MS - 1 if until is not None else latest - 1
        cells = calendar.window(chosen, end)
        items = []
        for ref in page:
            key = (ref.name, ref.version)
            spans = held.get(key, [])
            items.append(
                s.ModelIntervals(
                    name=ref.name,
                    version=ref.version,
                    view=VIEW_MARKER in stored.get(key, []),
                    spans=[
                        s.Span(start=a, end=b, start_text=iso(a), end_text=iso(b))
                        for a, b in spans[: calendar.MAX_SPANS]
                    ],
                    spans_total=len(spans),
                    cells=calendar.fill(spans, cells),
                )
            )
        return s.IntervalCalendar(
            environment=record.name,
            plan_id=record.plan_id,
            unit=chosen,
            cells=[
                s.CalendarCell(start=c.start, end=c.end, label=c.label, group=c.group)
                for c in cells
            ],
            earlier=to_ds(cells[0].start - 1) if cells[0].start > 0 else None,
            later=(
                to_ds(min(calendar.ahead(chosen, cells[-1].start), latest - 1))
                if cells[-1].end < latest
                else None
            ),
            models=s.Page(items=items, total=len(refs), offset=offset, limit=limit),
        )

    # -- prod's drift (issue 47) ------------------------------------------------------------

    def drift(self) -> dict[str, Any] | None:
        """Prod's last drift check as the flow kept it (:mod:`sluice.bot.flow.drift_view`):
        None when no check kept one."""
        return drift_view.load(self.ledger, self.key)

    # -- the audit log ----------------------------------------------------------------------

    def audit(self, *, offset: int, limit: int) -> s.Page[s.AuditRow]:
        """This repository's audit log, newest first."""
        rows = self.ledger.entries(repo=self.key, offset=offset, limit=limit, newest_first=True)
        items = [
            s.AuditRow(
                id=r.id or 0,
                at=r.at,
                kind=r.kind,
                actor=r.actor,
                ref=r.ref,
                plan_id=r.plan_id,
                outcome=r.outcome,
                detail=r.detail,
            )
            for r in rows
        ]
        total = self.ledger.audit_count(self.key)
        return s.Page(items=items, total=total, offset=offset, limit=limit)

    def _approved_by(self, plan: PlanRecord) -> tuple[str | None, str | None]:
        """The pull requests whose gate approved what ``plan`` changed, and who approved
        it (the ledger's approved contents: :func:`reviewed_plan.own_key` of each
        changed model's snapshot, the first :data:`APPROVALS_READ` by name: a gate approves
        a pull request's changes whole, and a first build of 1,000 models would otherwise
        cost the page most of half a second); (None, None) when no gate did (a plan
        applied with the CLI, a rollback)."""
        changed = {str(c["name"]) for c in _list(plan.payload, "directly_modified")}
        changed |= {str(n) for n in plan.payload.get("added", [])}
        refs = plan.payload.get(PLAN_SNAPSHOTS)
        if not changed or not isinstance(refs, list):
            return None, None
        ids = sorted(
            (str(r[0]), str(r[1]))
            for r in refs
            if isinstance(r, list) and len(r) == 3 and r[0] in changed
        )
        stored = self.state.get_snapshots(ids[:APPROVALS_READ])
        keys = [(name, own_key(Snapshot.from_stored(snap))) for (name, _), snap in stored.items()]
        found = self.ledger.approvals(self.key, keys)
        if not found:
            return None, None
        numbers = sorted({number for number, _ in found.values()})
        users = sorted({user for _, approvers in found.values() for user in approvers})
        prs = ", ".join(f"#{n}" for n in numbers)
        return f"pull request {prs}", ", ".join(users) or None

    # -- models ---------------------------------------------------------------------------

    def _prod_snapshots(self) -> list[Snapshot]:
        """Prod's models, decoded once per set of snapshots (the lineage page's too)."""
        record = self.state.get_environment(PROD)
        if record is None:
            return []
        return self.sets.snapshots(r.id for r in record.snapshots)

    def _models_of(
        self, plan_id: str | None
    ) -> tuple[str, list[tuple[str, str]], dict[str, Any] | None] | None:
        """The environment, snapshot ids and recorded plan of the lineage graph: prod's
        (no plan), or those plan ``plan_id`` points its environment at (None: no such
        plan)."""
        if plan_id is None:
            record = self.state.get_environment(PROD)
            return PROD, [r.id for r in record.snapshots] if record is not None else [], None
        plan = self.state.get_plan(plan_id)
        if plan is None:
            return None
        refs = plan.payload.get(PLAN_SNAPSHOTS)
        ids = (
            [(str(r[0]), str(r[1])) for r in refs if isinstance(r, list) and len(r) == 3]
            if isinstance(refs, list)
            else []
        )
        return plan.environment, ids, plan.payload

    def lineage(
        self, *, plan_id: str | None, focus: str | None, up: int, down: int
    ) -> s.LineageGraph | None:
        """The model graph of prod, or of plan ``plan_id``'s environment coloured by its
        impact; cut around ``focus`` (``up``/``down`` steps). None: no such plan, or
        ``focus`` is not one of its models."""
        found = self._models_of(plan_id)
        if found is None:
            return None
        environment, ids, payload = found
        return lineage.graph(
            self.sets.snapshots(ids),
            environment=environment,
            plan_id=plan_id,
            payload=payload,
            focus=focus,
            up=up,
            down=down,
        )

    def column_lineage(
        self, model: str, column: str | None, *, plan_id: str | None
    ) -> s.ColumnLineageView | None:
        """Model ``model``'s columns and ``column``'s lineage among the lineage graph's
        models. None: no such plan, model or column."""
        found = self._models_of(plan_id)
        if found is None:
            return None
        ids = found[1]
        snapshot = next((n for n in self.sets.snapshots(ids) if n.name == model), None)
        if snapshot is None:
            return None
        return lineage.columns(self.sets.graph(ids), snapshot, column)

    def models(self, *, search: str | None, offset: int, limit: int) -> s.Page[s.ModelView]:
        views = [_model(snap) for snap in self._prod_snapshots()]
        if search:
            views = [v for v in views if search.casefold() in v.name.casefold()]
        page = views[offset : offset + limit]
        self._sizes(page)
        return s.Page(items=page, total=len(views), offset=offset, limit=limit)

    def model(self, name: str) -> s.ModelView | None:
        """One of prod's models, with its size, its unit tests and, when its model does
        not declare them, its columns and types as the planner infers them (the parents'
        as prod has them: :class:`~sluice.core.plan.column_types.ColumnTypes`)."""
        snapshots = self._prod_snapshots()
        view = next((_model(n) for n in snapshots if n.name == name), None)
        if view is None:
            return None
        self._sizes([view])
        view.tests = self._tests(name)
        if not view.columns:
            typed = ColumnTypes({n.name: n.model for n in snapshots})(name) or ()
            described = dict(next(n for n in snapshots if n.name == name).model.column_descriptions)
            view.columns = [
                s.Column(name=c, type=t or "unknown", description=described.get(c))
                for c, t in typed
            ]
            view.columns_inferred = bool(typed)
        return view

    def _sizes(self, views: list[s.ModelView]) -> None:
        """Each view's prod table's measured size (one read for them all)."""
        sizes = self.state.get_table_sizes(v.name for v in views)
        for view in views:
            size = sizes.get((view.name, view.version))
            if size is not None:
                view.bytes, view.rows, view.measured = size.bytes, size.rows, size.measured_ts

    def _tests(self, model: str) -> list[s.UnitTestView]:
        """The unit tests of ``model`` that the last build testing it ran (among the
        newest :data:`TESTS_READ` unit test results of at most :data:`TEST_CHARS`), by
        name."""
        found, _ = self.state.get_results_page(
            UNIT_TEST, None, offset=0, limit=TESTS_READ, max_chars=TEST_CHARS
        )
        mine = [r for r in found if r.payload.get(TESTED_MODEL) == model]
        if not mine:
            return []
        last = mine[0].job_id  # newest first
        return sorted(
            (
                s.UnitTestView(
                    name=r.name,
                    passed=r.passed,
                    at=r.created_ts,
                    plan_id=r.plan_id,
                    diff=str(r.payload.get("diff") or "")[:MAX_DIFF],
                )
                for r in mine
                if r.job_id == last
            ),
            key=lambda t: t.name,
        )


def _of_repo(key: str, repo: str) -> bool:
    """Whether queue key ``key`` (``forge:owner/name#7``, ``...:prod``, ``...@sha``) is
    ``repo``'s (not merely one whose name starts the same)."""
    return key.startswith(repo) and key[len(repo) : len(repo) + 1] in KEY_MARKS


def _queue_job(record: JobRecord) -> s.QueueJob:
    job = record.job
    retrying = record.status == JobStatus.QUEUED and job.attempts > 0 and record.error
    return s.QueueJob(
        id=job.id,
        key=job.key,
        kind=job.kind,
        status="retrying" if retrying else record.status.value,
        attempts=job.attempts,
        head_sha=job.head_sha,
        created=job.created_ts,
        started=record.started_ts,
        finished=record.finished_ts,
        error=record.error,
        next_try=record.not_before if retrying else None,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _table_diff(result: JobResult) -> s.TableDiff:
    """A PR table's comparison with prod's, as the job recorded it (core's own reading of
    the record: the same the comment's table diff is rendered from)."""
    diff = TableDiffResult.from_json(result.payload)  # type: ignore[arg-type]
    return s.TableDiff(
        name=diff.name,
        source=diff.source,
        target=diff.target,
        identical=diff.identical,
        source_rows=diff.source_rows,
        target_rows=diff.target_rows,
        source_only=diff.source_only,
        target_only=diff.target_only,
        differing_rows=diff.differing_rows,
        changed_columns=list(diff.changed_columns),
        note=diff.note,
        keys=list(diff.keys),
        samples=s.SampleCounts(
            differing=len(diff.samples.differing),
            source_only=len(diff.samples.source_only),
            target_only=len(diff.samples.target_only),
        ),
    )


SAMPLE_KINDS = ("differing", "source_only", "target_only")


def _last_of_each(results: list[JobResult], kind: str) -> list[JobResult]:
    """The last result of ``kind`` for each name (a job run again records its diff
    again), in the order the names first came."""
    last: dict[str, JobResult] = {}
    for result in results:
        if result.kind == kind:
            kept = last.get(result.name)
            if kept is None or result.created_ts >= kept.created_ts:
                last[result.name] = result
    return list(last.values())


def _columns(keys: tuple[str, ...], rows: list[dict[str, Any]]) -> list[str]:
    """The key columns, then every other column of ``rows`` in the order first seen."""
    seen = dict.fromkeys(keys)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _check(check: Check) -> s.CheckView:
    return s.CheckView(
        name=check.name,
        status=check.status,
        conclusion=check.conclusion,
        title=check.title,
        summary=check.summary,
    )


def _list(payload: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = payload.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _changes(payload: dict[str, Any], changed: list[str]) -> bool:
    """Whether a recorded plan changed any model (added, removed, modified, metadata)."""
    return bool(
        changed or payload.get("added") or payload.get("removed") or payload.get("metadata_only")
    )


def _refs(plan: PlanRecord) -> frozenset[tuple[str, str]]:
    refs = plan.payload.get(PLAN_SNAPSHOTS)
    if not isinstance(refs, list):
        return frozenset()
    return frozenset((str(r[0]), str(r[2])) for r in refs if isinstance(r, list) and len(r) == 3)


def _change(data: dict[str, Any]) -> s.Change:
    return s.Change(
        name=str(data.get("name", "")),
        category=str(data.get("category", "")),
        version=str(data.get("version", "")),
        previous_version=str(data.get("previous_version", "")),
        why=[str(n) for n in (data.get("reached_by") or data.get("reshaped_by") or [])],
        diff=str(data.get("diff") or ""),
    )


def _plan_view(record: PlanRecord) -> s.PlanView:
    payload = record.payload
    return s.PlanView(
        plan_id=record.plan_id,
        environment=record.environment,
        base_plan_id=record.base_plan_id,
        created=record.created_ts,
        added=[str(n) for n in payload.get("added", [])],
        removed=[str(n) for n in payload.get("removed", [])],
        directly_modified=[_change(c) for c in _list(payload, "directly_modified")],
        indirectly_modified=[_change(c) for c in _list(payload, "indirectly_modified")],
        metadata_only=[str(n) for n in payload.get("metadata_only", [])],
        unaffected=[str(n) for n in payload.get("unaffected", [])],
        backfill=[
            s.BackfillRange(
                model=str(b.get("model", "")),
                version=str(b.get("version", "")),
                start=str(b.get("start", "")),
                end=str(b.get("end", "")),
                intervals=int(b.get("intervals", 0)),
                batches=int(b.get("batches", 0)),
            )
            for b in _list(payload, "backfill")
        ],
        warnings=[str(w) for w in payload.get("warnings", [])],
        scan_bytes=_int(payload.get("scan_bytes")),
        write_rows=_int(payload.get("write_rows")),
        write_bytes=_int(payload.get("write_bytes")),
    )


_PROJECT_FOLDERS = ("models", "seeds", "audits", "macros")


def _in_project(path: str) -> str:
    """A model file's path from its project's folders (``models/orders.sql``), never the
    host's path to the checkout it was loaded from."""
    parts = Path(path).parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in _PROJECT_FOLDERS:
            return "/".join(parts[index:])
    return Path(path).name


def _model(snapshot: Snapshot) -> s.ModelView:
    model = snapshot.model
    described = dict(model.column_descriptions)
    return s.ModelView(
        name=model.name,
        kind=model.kind.name.value,
        owner=model.owner,
        description=model.description,
        version=snapshot.version,
        columns=[s.Column(name=n, type=t, description=described.get(n)) for n, t in model.columns],
        audits=[a.name for a in model.audits],
        cron=model.cron,
        depends_on=list(model.depends_on),
        path=_in_project(model.path),
        query=model.query_sql,
    )
