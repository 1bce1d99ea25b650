"""State for the janitor and for job results (state migration 2), mixed into the SQL store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, insert, select, tuple_

from sluice.core.db.documents import dump_json, load_json
from sluice.core.db.transactions import Transactions
from sluice.core.state import schema
from sluice.core.state.records import VIEWS_DROPPED, JobResult, TableKey, chunks

_CHUNK = 500


class HousekeepingMixin(Transactions):
    """Orphaned physical tables and job results, for a bound state store."""

    def list_tables(self) -> set[TableKey]:
        """Every physical table some stored snapshot uses."""
        t = schema.snapshots
        with self._reading("list physical tables") as conn:
            return {(r[0], r[1]) for r in conn.execute(select(t.c.name, t.c.version).distinct())}

    def set_orphans(self, tables: Iterable[TableKey], now: int) -> dict[TableKey, int]:
        """Make ``tables`` the set of unreferenced tables; return since when each is.

        A table already known keeps its first time; one referenced again is forgotten.
        """
        wanted = set(tables)
        t = schema.orphans
        with self._writing("record unreferenced tables") as conn:
            known = {(r.name, r.version): int(r.since_ts) for r in conn.execute(select(t))}
            gone = [key for key in known if key not in wanted]
            for chunk in chunks(gone, _CHUNK):
                conn.execute(delete(t).where(tuple_(t.c.name, t.c.version).in_(chunk)))
            fresh = [{"name": n, "version": v, "since_ts": now} for n, v in wanted - set(known)]
            if fresh:
                conn.execute(insert(t), fresh)
        return {key: known.get(key, now) for key in wanted}

    def forget_tables(self, tables: Iterable[TableKey]) -> None:
        """Remove every trace of dropped tables: orphan marks, intervals, sizes, what runs
        read, snapshots."""
        keys = list(dict.fromkeys(tables))
        with self._writing("forget dropped tables") as conn:
            for table in (
                schema.orphans,
                schema.intervals,
                schema.table_sizes,
                schema.run_inputs,
                schema.snapshots,
            ):
                for chunk in chunks(keys, _CHUNK):
                    conn.execute(
                        delete(table).where(tuple_(table.c.name, table.c.version).in_(chunk))
                    )

    def save_results(self, results: Iterable[JobResult]) -> None:
        """Store what a job found."""
        rows = [
            {
                "job_id": r.job_id,
                "plan_id": r.plan_id,
                "kind": r.kind,
                "name": r.name,
                "passed": r.passed,
                "payload": dump_json(r.payload),
                "created_ts": r.created_ts,
            }
            for r in results
        ]
        if rows:
            with self._writing("save job results") as conn:
                conn.execute(insert(schema.results), rows)

    def get_results(
        self, *, job_id: str | None = None, plan_id: str | None = None
    ) -> list[JobResult]:
        """The results of one job or of every job run for one plan, oldest first."""
        t = schema.results
        query = select(t).order_by(t.c.id)
        if job_id is not None:
            query = query.where(t.c.job_id == job_id)
        if plan_id is not None:
            query = query.where(t.c.plan_id == plan_id)
        with self._reading("read job results") as conn:
            return [_result(r) for r in conn.execute(query)]

    def unswept_plans(self) -> list[tuple[str, str, int]]:
        """(environment, plan id, recorded at) of every plan of an environment other than
        prod that no ``views_dropped`` result marks (the janitor's, once it dropped the
        views the plan could have made)."""
        plans, results = schema.plans, schema.results
        marked = (
            select(results.c.id)
            .where(results.c.kind == VIEWS_DROPPED, results.c.plan_id == plans.c.plan_id)
            .exists()
        )
        query = (
            select(plans.c.environment, plans.c.plan_id, plans.c.created_ts)
            .where(plans.c.environment != "prod", ~marked)
            .order_by(plans.c.created_ts)
        )
        with self._reading("list plans whose views no janitor dropped") as conn:
            return [(str(r[0]), str(r[1]), int(r[2])) for r in conn.execute(query)]

    def get_results_page(
        self,
        kind: str,
        name: str | None,
        *,
        offset: int,
        limit: int,
        max_chars: int | None = None,
    ) -> tuple[list[JobResult], int]:
        """The results of ``kind`` named ``name`` (a scheduled run's of one environment;
        None: of any name), newest first: ``limit`` from ``offset``, and how many there
        are; with ``max_chars``, only those whose payload's JSON is at most that long."""
        t = schema.results
        mine = t.c.kind == kind if name is None else (t.c.kind == kind) & (t.c.name == name)
        if max_chars is not None:
            mine = mine & (func.length(t.c.payload) <= max_chars)
        query = select(t).where(mine).order_by(t.c.id.desc()).offset(offset).limit(limit)
        with self._reading(f"read {kind} results") as conn:
            rows = [_result(r) for r in conn.execute(query)]
            total = conn.execute(select(func.count()).select_from(t).where(mine)).scalar_one()
        return rows, int(total)


def _result(row: Any) -> JobResult:
    """A row of the results table as a :class:`JobResult`."""
    return JobResult(
        row.job_id,
        row.plan_id,
        row.kind,
        row.name,
        bool(row.passed),
        load_json(row.payload, dict, "job result", row.job_id),
        int(row.created_ts),
    )
