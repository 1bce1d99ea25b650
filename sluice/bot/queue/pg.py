"""The job queue's batch intake on PostgreSQL: one server-side function, one round trip.

:meth:`sluice.bot.queue.store.JobQueue.accept_many` stores a batch of deliveries and their jobs.
Done as separate statements that takes BEGIN, four to six statements and COMMIT, each a
round trip; the intake's writer thread then waits for the GIL after every one while the
event loop parses requests, and a batch took 20-35 ms of wall time for 5-10 ms of work.
``sluice_accept_deliveries(batch json)`` does the same steps inside the server, in one
statement, so a batch is one round trip in autocommit (a function call is atomic).

The steps and their guarantees are those of the SQLite path in ``queue.py``, in order:

1. store the deliveries, in batch order; the ones whose id is already stored are refused;
2. create or lock the key rows of the fresh deliveries' jobs, sorted (by code point, as
   every batch does), so that accepts of one key queue up behind each other and a
   superseding job always sees the jobs accepted before it;
3. insert the jobs in batch order (ids drawn in it, so they run in it) and record each
   delivery's job id;
4. supersede: every queued job of a key and kind for another head commit is marked
   superseded by the first (lowest id) superseding job of the batch that came after it.

``batch`` is a JSON array of ``{n, d, f, e, t, k, c, p, h, s}``: position, delivery id,
forge, event, time (epoch ms), job key (null: no job), kind, payload (JSON text), head sha,
supersede. The result has one row per fresh delivery: its id, its job id (null without a
job) and how many queued jobs that job superseded.
"""

from __future__ import annotations

from sqlalchemy import text

FUNCTION = "sluice_accept_deliveries"

# Created by the queue's migration 2 (schema.MIGRATIONS); a new body is a new migration
# running it again (CREATE OR REPLACE). Statuses are the values of JobStatus, passed in.
# Custom plans (PostgreSQL 12+): each call plans its statements for the batch at hand.
# After five calls PL/pgSQL would otherwise keep generic plans, which made a batch of 25
# cost the server 4.5-5.7 ms of CPU instead of 2.6-2.9 (planning included), measured
# alternately on the same database.
_DDL = """
CREATE OR REPLACE FUNCTION sluice_accept_deliveries(batch json)
RETURNS TABLE (stored_delivery varchar, its_job bigint, jobs_superseded bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $fn$
DECLARE
  fresh varchar[];
  made_ids bigint[];
  made_deliveries varchar[];
  moot_by bigint[];
BEGIN
  WITH stored AS (
    INSERT INTO sluice_deliveries AS x (delivery_id, forge, event, received_ts)
    SELECT r.d, r.f, r.e, r.t
    FROM json_to_recordset(batch) AS r(n int, d varchar, f varchar, e varchar, t bigint)
    ORDER BY r.n
    ON CONFLICT (delivery_id) DO NOTHING
    RETURNING x.delivery_id)
  SELECT coalesce(array_agg(stored.delivery_id), '{}') INTO fresh FROM stored;

  INSERT INTO sluice_job_keys AS y ("key", running_job_id)
  SELECT u.k, NULL FROM (
    SELECT DISTINCT r.k FROM json_to_recordset(batch) AS r(d varchar, k varchar)
    WHERE r.k IS NOT NULL AND r.d = ANY(fresh)) AS u
  ORDER BY u.k COLLATE "C"
  ON CONFLICT ("key") DO UPDATE SET running_job_id = y.running_job_id;

  WITH made AS (
    INSERT INTO sluice_jobs AS j
      (delivery_id, "key", kind, payload, head_sha, status, attempts, created_ts)
    SELECT r.d, r.k, r.c, r.p, r.h, '{queued}', 0, r.t
    FROM json_to_recordset(batch)
      AS r(n int, d varchar, k varchar, c varchar, p text, h varchar, t bigint)
    WHERE r.k IS NOT NULL AND r.d = ANY(fresh)
    ORDER BY r.n
    RETURNING j.id, j.delivery_id),
  linked AS (
    UPDATE sluice_deliveries AS x SET job_id = made.id FROM made
    WHERE x.delivery_id = made.delivery_id)
  SELECT coalesce(array_agg(made.id), '{}'), coalesce(array_agg(made.delivery_id), '{}')
  INTO made_ids, made_deliveries FROM made;

  WITH news AS (
    SELECT m.id, r.k, r.c, r.h, r.t
    FROM unnest(made_ids, made_deliveries) AS m(id, d)
    JOIN json_to_recordset(batch) AS r(d varchar, k varchar, c varchar, h varchar, t bigint,
                                       s boolean) ON r.d = m.d
    WHERE r.s),
  moot AS (
    SELECT DISTINCT ON (q.id) q.id AS queued_id, n.id AS by_id, n.h, n.t
    FROM news AS n
    JOIN sluice_jobs AS q ON q."key" = n.k AND q.kind = n.c AND q.id < n.id
      AND q.head_sha IS DISTINCT FROM n.h
    WHERE q.status = '{queued}'
    ORDER BY q.id, n.id),
  marked AS (
    UPDATE sluice_jobs AS q
    SET status = '{superseded}', finished_ts = moot.t,
        error = 'superseded by job ' || moot.by_id || ' (head ' || coalesce(moot.h, 'None') || ')'
    FROM moot WHERE q.id = moot.queued_id AND q.status = '{queued}'
    RETURNING moot.by_id)
  SELECT coalesce(array_agg(marked.by_id), '{}') INTO moot_by FROM marked;

  RETURN QUERY
  SELECT f.d, m.id, (SELECT count(*) FROM unnest(moot_by) AS b(id) WHERE b.id = m.id)
  FROM unnest(fresh) AS f(d)
  LEFT JOIN unnest(made_ids, made_deliveries) AS m(id, d) ON m.d = f.d;
END
$fn$
"""

CALL = text(
    f"SELECT stored_delivery, its_job, jobs_superseded FROM {FUNCTION}(CAST(:rows AS json))"
)


def function_ddl(*, queued: str, superseded: str) -> str:
    """The ``CREATE OR REPLACE FUNCTION`` statement, for the given job status values."""
    return _DDL.replace("'{queued}'", f"'{queued}'").replace("'{superseded}'", f"'{superseded}'")
