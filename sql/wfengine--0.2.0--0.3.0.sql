/* sql/wfengine--0.2.0--0.3.0.sql -- upgrade wfengine from 0.2.0 to 0.3.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine UPDATE TO '0.3.0'" to load this file. \quit

/*
 * 0.2.0 is released: sql/wfengine--0.1.0--0.2.0.sql never changes again
 * (sql/released.sha256).  Every schema change from here on is written in
 * this file, in the order it is made (docs/upgrading.md).
 */

-- ==== issue 30: wf.list_runs is an API call ====
-- wf.list_runs was PL/pgSQL run as the caller, so it skipped the shard
-- check every API call makes: on a shard that had moved the caller's
-- partition away it listed the rows left there until the move's cleanup.
-- Its body keeps its code as wf._list_runs, run as an API call by a C
-- entry point (src/api.c, WfCallInternal), like wf.definition_graph.
ALTER FUNCTION wf.list_runs(jsonb, integer, uuid) RENAME TO _list_runs;
REVOKE ALL ON FUNCTION wf._list_runs(jsonb, integer, uuid) FROM wfengine_app;
COMMENT ON FUNCTION wf._list_runs(jsonb, integer, uuid) IS
'Internal: the body of wf.list_runs, run as an API call by its entry point.';

CREATE FUNCTION wf.list_runs(filter jsonb DEFAULT '{}', max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, definition_name text, definition_version integer, status text,
               current_step text, created_at timestamptz, finished_at timestamptz)
AS 'MODULE_PATHNAME', 'wfengine_list_runs'
LANGUAGE C STABLE;
COMMENT ON FUNCTION wf.list_runs(jsonb, integer, uuid) IS
'The caller''s runs a filter selects (definition, version, status, started_*/finished_*), at most max_runs in run id order after the run id "after"; no payloads.';
REVOKE ALL ON FUNCTION wf.list_runs(jsonb, integer, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.list_runs(jsonb, integer, uuid) TO wfengine_app;
-- ==== end issue 30: wf.list_runs is an API call ====

-- ==== issue 31: the worker calls return rows of named types ====
-- The calls a worker makes on every step (wf.claim_tasks, the _and_claim
-- forms, wf.start_and_claim) return rows of a named composite type instead
-- of RETURNS TABLE: same columns, same answers, but the statement that
-- calls one no longer builds the row type from the function's argument
-- arrays each time it is parsed (the type cache keeps a named type's).
-- bench/callgrind.sh, an eager step: 665,624 -> 639,557 instructions.
-- A function's result type cannot be changed in place: each is dropped and
-- made again, with its comment and grants (below).
CREATE TYPE wf.claimed_task AS (
    task_id bigint,
    run_id uuid,
    step text,
    attempt integer,
    fence bigint,
    idempotency_key text,
    input jsonb,
    lease_expires_at timestamptz,
    queue text,
    activity text,
    deliveries integer
);
COMMENT ON TYPE wf.claimed_task IS
'A task attempt leased to a worker: a row of wf.claim_tasks, wf.claim_tasks_any and wf.start_and_claim.';
CREATE TYPE wf.claim_answer AS (
    answer text,
    task_id bigint,
    run_id uuid,
    step text,
    attempt integer,
    fence bigint,
    idempotency_key text,
    input jsonb,
    lease_expires_at timestamptz,
    queue text,
    activity text,
    deliveries integer
);
COMMENT ON TYPE wf.claim_answer IS
'A report''s verdict (answer) and a task attempt leased to the worker: a row of wf.complete_and_claim and wf.fail_and_claim.';
CREATE TYPE wf.claim_answers AS (
    answers text[],
    task_id bigint,
    run_id uuid,
    step text,
    attempt integer,
    fence bigint,
    idempotency_key text,
    input jsonb,
    lease_expires_at timestamptz,
    queue text,
    activity text,
    deliveries integer
);
COMMENT ON TYPE wf.claim_answers IS
'The verdicts of a batch of reports (answers, on the first row) and a task attempt leased to the worker: a row of wf.complete_tasks_and_claim and wf.fail_tasks_and_claim.';

DROP FUNCTION wf.claim_tasks(text, text, integer, interval, interval);
CREATE FUNCTION wf.claim_tasks(queue text,
                               worker text,
                               max_tasks integer DEFAULT 1,
                               lease interval DEFAULT '30 seconds',
                               wait interval DEFAULT NULL)
RETURNS SETOF wf.claimed_task
AS 'MODULE_PATHNAME', 'wfengine_claim_tasks'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.claim_tasks(text, text, integer, interval, interval) IS
'Leases up to max_tasks claimable tasks of a queue; with a wait (up to 5 minutes, READ COMMITTED only), sleeps until one can be claimed.';

DROP FUNCTION wf.claim_tasks_any(text[], text, integer, interval, interval);
CREATE FUNCTION wf.claim_tasks_any(queues text[],
                                   worker text,
                                   max_tasks integer DEFAULT 1,
                                   lease interval DEFAULT '30 seconds',
                                   wait interval DEFAULT NULL)
RETURNS SETOF wf.claimed_task
AS 'MODULE_PATHNAME', 'wfengine_claim_tasks_any'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.claim_tasks_any(text[], text, integer, interval, interval) IS
'wf.claim_tasks over several queues (1 to 64): up to max_tasks leases, from the queues in the order given; with a wait, sleeps until a task of one of them can be claimed.';

DROP FUNCTION wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval);
CREATE FUNCTION wf.complete_and_claim(task_id bigint,
                                      fence bigint,
                                      output jsonb,
                                      queue text,
                                      worker text,
                                      max_tasks integer DEFAULT 1,
                                      lease interval DEFAULT '30 seconds')
RETURNS SETOF wf.claim_answer
AS 'MODULE_PATHNAME', 'wfengine_complete_and_claim'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval) IS
'wf.complete_task, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; the next step of the same run first), in one call and transaction; answer is complete_task''s verdict.';

DROP FUNCTION wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval);
CREATE FUNCTION wf.fail_and_claim(task_id bigint,
                                  fence bigint,
                                  error jsonb,
                                  retryable boolean,
                                  queue text,
                                  worker text,
                                  max_tasks integer DEFAULT 1,
                                  lease interval DEFAULT '30 seconds')
RETURNS SETOF wf.claim_answer
AS 'MODULE_PATHNAME', 'wfengine_fail_and_claim'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval) IS
'wf.fail_task, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; a task the failure scheduled for the same run first), in one call and transaction; answer is fail_task''s verdict.';

DROP FUNCTION wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval);
CREATE FUNCTION wf.complete_tasks_and_claim(task_ids bigint[],
                                            fences bigint[],
                                            outputs jsonb[],
                                            queue text,
                                            worker text,
                                            max_tasks integer DEFAULT 10,
                                            lease interval DEFAULT '30 seconds')
RETURNS SETOF wf.claim_answers
AS 'MODULE_PATHNAME', 'wfengine_complete_tasks_and_claim'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval) IS
'wf.complete_tasks, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; the next steps of the same runs first), in one call and transaction; answers are complete_tasks'' verdicts in input order.';

DROP FUNCTION wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval);
CREATE FUNCTION wf.fail_tasks_and_claim(task_ids bigint[],
                                        fences bigint[],
                                        errors jsonb[],
                                        retryables boolean[],
                                        queue text,
                                        worker text,
                                        max_tasks integer DEFAULT 10,
                                        lease interval DEFAULT '30 seconds')
RETURNS SETOF wf.claim_answers
AS 'MODULE_PATHNAME', 'wfengine_fail_tasks_and_claim'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval) IS
'wf.fail_tasks, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; tasks the failures scheduled for the same runs first), in one call and transaction; answers are fail_tasks'' verdicts in input order.';

REVOKE ALL ON FUNCTION
    wf.claim_tasks(text, text, integer, interval, interval),
    wf.claim_tasks_any(text[], text, integer, interval, interval),
    wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval),
    wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval),
    wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval),
    wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    wf.claim_tasks(text, text, integer, interval, interval),
    wf.claim_tasks_any(text[], text, integer, interval, interval),
    wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval),
    wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval),
    wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval),
    wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval)
    TO wfengine_worker;
-- ==== end issue 31: the worker calls return rows of named types ====

-- ==== issue 31: eager start ====
-- wf.start_and_claim: wf.start_run and the new run's first task attempt
-- leased to the caller's worker in the same transaction (Temporal's eager
-- workflow start), as one row in the columns of wf.claim_tasks; without an
-- attempt to hand out (the first step is not a task, the idempotency key
-- found the run started before, the tenant's limit of tasks in flight),
-- one row with the run's id and NULLs.
CREATE FUNCTION wf.start_and_claim(definition text,
                                   input jsonb,
                                   worker text,
                                   lease interval DEFAULT '30 seconds',
                                   idempotency_key text DEFAULT NULL)
RETURNS SETOF wf.claimed_task
AS 'MODULE_PATHNAME', 'wfengine_start_and_claim'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.start_and_claim(text, jsonb, text, interval, text) IS
'wf.start_run, and the run''s first task attempt leased to worker, in one call and transaction (eager start); one row in the columns of wf.claim_tasks, or the run id and NULLs when no attempt was leased.';
REVOKE ALL ON FUNCTION wf.start_and_claim(text, jsonb, text, interval, text) FROM PUBLIC;
-- ==== end issue 31: eager start ====
-- it starts a run (wfengine_app) and leases a task (wfengine_worker): the
-- app role may execute it, and the entry point refuses a caller that does
-- not have wfengine_worker's privileges too
GRANT EXECUTE ON FUNCTION wf.start_and_claim(text, jsonb, text, interval, text) TO wfengine_app;

-- ==== issue 31: task_scheduled without what the definition and the event give ====
-- Since 0.3.0 a task_scheduled event leaves out of wf.events what the run's
-- definition and the event itself give (queue, activity, the default
-- idempotency key, available_at when it is the event's time, and, as
-- before, the input when it is the run's input as it stands).  The hash
-- chain covers the payload as stored.  wf.history puts what was left out
-- back (src/replay.c, WfHistoryFillEvent), so that it answers as in 0.2.0:
-- it is now a C function with the same signature and grants (CREATE OR
-- REPLACE keeps them).  Events written before the update have every key
-- and are shown as they are.
CREATE OR REPLACE FUNCTION wf.history(run uuid)
RETURNS TABLE (seq integer,
               type text,
               step text,
               attempt integer,
               payload jsonb,
               actor text,
               created_at timestamptz,
               hash text)
AS 'MODULE_PATHNAME', 'wfengine_history'
LANGUAGE C STABLE STRICT;
-- ==== end issue 31: task_scheduled without what the definition and the event give ====

-- ==== issue 31: an attempt's row without a copy of the run's input ====
-- An attempt whose input is the run's input as it stands (context.input:
-- every step without an input mapping) is written with input NULL rather
-- than a copy of it; the claim, and every reader of an attempt's input,
-- takes the run's (src/runstore.c, WfRunInputOf), and wf.update_context
-- first writes the input it replaces into those rows.  Rows written
-- before keep their copy.
ALTER TABLE wf.tasks ALTER COLUMN input DROP NOT NULL;
COMMENT ON COLUMN wf.tasks.input IS
'The attempt''s input; NULL: the run''s input as it stands ($.input of wf.runs.context), which wf.claim_tasks hands out.';
-- ==== end issue 31: an attempt's row without a copy of the run's input ====

-- ==== issue 31: a completed attempt's row is deleted ====
-- An attempt completed by a result that the history records in
-- task_completed (the event names the task, the fence the result was
-- accepted under, the step, visit and attempt) is deleted from wf.tasks
-- instead of being updated to 'completed' (src/runstore.c, end_attempt):
-- the update, not HOT, and the finished row's new entries in tasks_pkey,
-- tasks_attempt_key and tasks_finished_idx were about 460 bytes of every
-- step's WAL.  What read the finished row reads the history instead:
--  * a late or doubled report or heartbeat, naming only (task_id, fence),
--    finds its attempt's run through events_task_completed_idx and is
--    answered 'duplicate' or 'stale' as before (src/result.c);
--  * wf.queue_stats and wf.run_stats count completed attempts from the
--    task_completed events of the last minutes (events_completed_at_idx);
--  * wf.verify_run accepts a completed attempt without a row (and checks
--    one that is there).
-- Failed and withdrawn attempts, a result held for a paused run and an
-- approval's notification task keep their row as before.  The rows of
-- attempts completed before the update stay (readable as before: every
-- reader takes a row first, then the history); they go with their runs at
-- the purge.
CREATE INDEX events_task_completed_idx ON wf.events
    (((payload OPERATOR(pg_catalog.->>) 'task_id')::pg_catalog.int8))
    WHERE type OPERATOR(pg_catalog.=) 'task_completed';
COMMENT ON INDEX wf.events_task_completed_idx IS
'The run of a completed attempt by its task id (its task_completed event): late and doubled reports name only the task and fence.';
-- By time, a BRIN index: the history is appended in time order, and an
-- event added to a block range not yet summarized (the table's last, until
-- a VACUUM summarizes it once full) writes nothing to the index, where a
-- btree entry was 64 bytes of every step's WAL.  A scan reads the ranges
-- whose summary overlaps the minutes asked for, and those not yet
-- summarized: the newest, which is where the last minutes are.  With
-- autosummarize, a range is summarized (by autovacuum, within about a
-- minute) once the history has grown past it, so the ranges not yet
-- summarized stay the last minute's few, not everything appended since the
-- table's last VACUUM.
CREATE INDEX events_completed_at_idx ON wf.events USING brin (created_at)
    WITH (autosummarize = on)
    WHERE type OPERATOR(pg_catalog.=) 'task_completed';
COMMENT ON INDEX wf.events_completed_at_idx IS
'Completed attempts by time (their task_completed events; BRIN: nothing written while the table grows at its end): the last minutes of wf.queue_stats and wf.run_stats.';

-- The queues of a definition's task steps and compensations, for
-- wf.queue_stats: it counts completed attempts by their task_completed
-- events, which name the step, not the queue, and it reads no payload or
-- spec column (the monitor role's contract, docs/monitoring.md).  Each
-- element is '<step> <queue>' (names hold no space); a compensation's step
-- is "compensate:<step>".  A stored generated column of wf.definitions,
-- computed when a version is published (and by this ALTER for those
-- published before).  Not inlined (SET search_path).
CREATE FUNCTION wf._spec_task_queues(spec jsonb)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT COALESCE(pg_catalog.array_agg(q.pair ORDER BY q.n, q.k), ARRAY[]::text[])
FROM (SELECT s.n, 0 AS k,
             (s.v OPERATOR(pg_catalog.->>) 'name') OPERATOR(pg_catalog.||) ' '
             OPERATOR(pg_catalog.||) (s.v OPERATOR(pg_catalog.->>) 'queue') AS pair
      FROM pg_catalog.jsonb_array_elements(spec OPERATOR(pg_catalog.->) 'steps') WITH ORDINALITY s(v, n)
      WHERE s.v OPERATOR(pg_catalog.->>) 'queue' IS NOT NULL
      UNION ALL
      SELECT s.n, 1,
             'compensate:' OPERATOR(pg_catalog.||) (s.v OPERATOR(pg_catalog.->>) 'name')
             OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||)
             COALESCE(s.v OPERATOR(pg_catalog.->) 'compensate' OPERATOR(pg_catalog.->>) 'queue',
                      s.v OPERATOR(pg_catalog.->>) 'queue')
      FROM pg_catalog.jsonb_array_elements(spec OPERATOR(pg_catalog.->) 'steps') WITH ORDINALITY s(v, n)
      WHERE pg_catalog.jsonb_typeof(s.v OPERATOR(pg_catalog.->) 'compensate') OPERATOR(pg_catalog.=) 'object') q
$$;
COMMENT ON FUNCTION wf._spec_task_queues(jsonb) IS
'Internal: ''<step> <queue>'' of every task step and compensation of a definition spec; wf.definitions.task_queues, for wf.queue_stats.';
REVOKE ALL ON FUNCTION wf._spec_task_queues(jsonb) FROM PUBLIC;
ALTER TABLE wf.definitions
    ADD COLUMN task_queues text[] GENERATED ALWAYS AS (wf._spec_task_queues(spec)) STORED;
COMMENT ON COLUMN wf.definitions.task_queues IS
'''<step> <queue>'' of every task step and compensation (generated from spec): the queue of a completed attempt, for wf.queue_stats.';

CREATE OR REPLACE VIEW wf.queue_stats WITH (security_invoker = false, security_barrier = true) AS
WITH ready AS (
    SELECT t.tenant_id, t.queue, pg_catalog.count(*) AS ready,
           pg_catalog.min(t.available_at)
               FILTER (WHERE t.available_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS oldest_available_at
    FROM wf.tasks t
    WHERE t.status OPERATOR(pg_catalog.=) 'ready'
      AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
          CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                    OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
               THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
               ELSE ARRAY[wf.current_tenant()] END)
    GROUP BY t.tenant_id, t.queue
), leased AS (
    SELECT t.tenant_id, t.queue, pg_catalog.count(*) AS leased,
           pg_catalog.count(*)
               FILTER (WHERE t.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now()) AS expired_leases,
           pg_catalog.count(*)
               FILTER (WHERE t.claimed_at OPERATOR(pg_catalog.>)
                       (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) AS claims
    FROM wf.tasks t
    WHERE t.status OPERATOR(pg_catalog.=) 'leased'
      AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
          CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                    OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
               THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
               ELSE ARRAY[wf.current_tenant()] END)
    GROUP BY t.tenant_id, t.queue
), finished AS (
    SELECT f.tenant_id, f.queue,
           pg_catalog.sum(f.claims)::pg_catalog.int8 AS claims,
           pg_catalog.sum(f.completions)::pg_catalog.int8 AS completions,
           pg_catalog.sum(f.failures)::pg_catalog.int8 AS failures
    FROM (
        -- attempts that keep their row when they end: failed, withdrawn,
        -- and completed ones whose history has no task_completed for them
        -- (an approval's notification) or that 0.2.0 left (counted below)
        SELECT t.tenant_id, t.queue,
               pg_catalog.count(*)
                   FILTER (WHERE t.claimed_at OPERATOR(pg_catalog.>)
                           (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) AS claims,
               pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'completed') AS completions,
               pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'failed') AS failures
        FROM wf.tasks t
        WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
          AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')
          AND (t.status OPERATOR(pg_catalog.<>) 'completed'
               OR NOT EXISTS (SELECT 1 FROM wf.events x
                              WHERE x.run_id OPERATOR(pg_catalog.=) t.run_id
                                AND x.type OPERATOR(pg_catalog.=) 'task_completed'
                                AND x.step OPERATOR(pg_catalog.=) t.step
                                AND x.attempt OPERATOR(pg_catalog.=) t.attempt))
          AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
              CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                        OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
                   THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
                   ELSE ARRAY[wf.current_tenant()] END)
        GROUP BY t.tenant_id, t.queue
        UNION ALL
        -- attempts completed (their row deleted since 0.3.0): the history's
        -- task_completed events of the last minute, by definition and step,
        -- each counted as a claim of the last minute too
        SELECT c.tenant_id,
               (SELECT pg_catalog.split_part(x, ' ', 2) FROM pg_catalog.unnest(d.task_queues) x
                WHERE pg_catalog.split_part(x, ' ', 1) OPERATOR(pg_catalog.=) c.step LIMIT 1),
               c.n, c.n, 0
        FROM (SELECT t.tenant_id, r.definition_id, t.step, pg_catalog.count(*) AS n
              FROM wf.events t
              JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) t.run_id
                            AND r.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
              WHERE t.type OPERATOR(pg_catalog.=) 'task_completed'
                AND t.created_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')
                AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
                    CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                              OR NOT pg_catalog.row_security_active('wf.events'::pg_catalog.regclass)
                         THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
                         ELSE ARRAY[wf.current_tenant()] END)
              GROUP BY t.tenant_id, r.definition_id, t.step) c
        JOIN wf.definitions d ON d.definition_id OPERATOR(pg_catalog.=) c.definition_id
    ) f
    GROUP BY f.tenant_id, f.queue
), queues AS (
    SELECT tenant_id, queue FROM ready
    UNION SELECT tenant_id, queue FROM leased
    UNION SELECT tenant_id, queue FROM finished
)
SELECT q.tenant_id, q.queue,
       COALESCE(r.ready, 0) AS ready,
       COALESCE(l.leased, 0) AS leased,
       COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) r.oldest_available_at),
                0) AS oldest_ready_age_seconds,
       COALESCE(l.claims, 0) OPERATOR(pg_catalog.+) COALESCE(f.claims, 0) AS claims_1m,
       COALESCE(f.completions, 0) AS completions_1m,
       COALESCE(f.failures, 0) AS failures_1m,
       COALESCE(l.expired_leases, 0) AS expired_leases
FROM queues q
LEFT JOIN ready r ON r.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND r.queue OPERATOR(pg_catalog.=) q.queue
LEFT JOIN leased l ON l.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND l.queue OPERATOR(pg_catalog.=) q.queue
LEFT JOIN finished f ON f.tenant_id OPERATOR(pg_catalog.=) q.tenant_id AND f.queue OPERATOR(pg_catalog.=) q.queue;

CREATE OR REPLACE VIEW wf.run_stats WITH (security_invoker = false, security_barrier = true) AS
WITH live AS (
    -- per tenant, so that runs_status_idx (tenant_id, status, ...) serves
    -- every caller: the live runs only, never a scan of every run (every
    -- run's tenant has a definition)
    SELECT tn.tenant_id, l.definition_name, l.definition_version, l.running, l.paused, l.undoing
    FROM (SELECT DISTINCT d.tenant_id FROM wf.definitions d
          WHERE d.tenant_id OPERATOR(pg_catalog.=) ANY (
              CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                        OR NOT pg_catalog.row_security_active('wf.runs'::pg_catalog.regclass)
                   THEN ARRAY(SELECT DISTINCT d2.tenant_id FROM wf.definitions d2)
                   ELSE ARRAY[wf.current_tenant()] END)) tn
    CROSS JOIN LATERAL (
        SELECT r.definition_name, r.definition_version,
               pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'running') AS running,
               pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'paused') AS paused,
               pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.<>) 'running'
                                             AND r.status OPERATOR(pg_catalog.<>) 'paused') AS undoing
        FROM wf.runs r
        WHERE r.tenant_id OPERATOR(pg_catalog.=) tn.tenant_id
          AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused', 'cancelling', 'compensating'])
        GROUP BY r.definition_name, r.definition_version) l
), done AS (
    SELECT r.tenant_id, r.definition_name, r.definition_version,
           pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'completed') AS completed,
           pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) ANY (ARRAY['failed', 'compensation_failed'])) AS failed,
           pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) ANY (ARRAY['cancelled', 'compensated', 'terminated'])) AS stopped,
           pg_catalog.percentile_cont(0.5) WITHIN GROUP
               (ORDER BY pg_catalog.date_part('epoch', r.finished_at OPERATOR(pg_catalog.-) r.created_at))
               FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'completed') AS p50,
           pg_catalog.percentile_cont(0.95) WITHIN GROUP
               (ORDER BY pg_catalog.date_part('epoch', r.finished_at OPERATOR(pg_catalog.-) r.created_at))
               FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'completed') AS p95
    FROM wf.runs r
    WHERE r.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '5 minutes')
      AND r.status OPERATOR(pg_catalog.<>) ALL (ARRAY['running', 'paused', 'cancelling', 'compensating'])
      AND r.tenant_id OPERATOR(pg_catalog.=) ANY (
          CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                    OR NOT pg_catalog.row_security_active('wf.runs'::pg_catalog.regclass)
               THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
               ELSE ARRAY[wf.current_tenant()] END)
    GROUP BY r.tenant_id, r.definition_name, r.definition_version
), tries AS (
    SELECT r.tenant_id, r.definition_name, r.definition_version,
           pg_catalog.count(*) FILTER (WHERE a.attempt OPERATOR(pg_catalog.>) 1) AS retries,
           pg_catalog.count(*) FILTER (WHERE a.attempt OPERATOR(pg_catalog.=) 1) AS first_attempts
    FROM (
        -- attempts that keep their row when they end (see wf.queue_stats)
        SELECT t.run_id, t.attempt
        FROM wf.tasks t
        WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
          AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '5 minutes')
          AND (t.status OPERATOR(pg_catalog.<>) 'completed'
               OR NOT EXISTS (SELECT 1 FROM wf.events x
                              WHERE x.run_id OPERATOR(pg_catalog.=) t.run_id
                                AND x.type OPERATOR(pg_catalog.=) 'task_completed'
                                AND x.step OPERATOR(pg_catalog.=) t.step
                                AND x.attempt OPERATOR(pg_catalog.=) t.attempt))
          AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
              CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                        OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
                   THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
                   ELSE ARRAY[wf.current_tenant()] END)
        UNION ALL
        -- attempts completed: the history's task_completed events
        SELECT t.run_id, t.attempt
        FROM wf.events t
        WHERE t.type OPERATOR(pg_catalog.=) 'task_completed'
          AND t.created_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '5 minutes')
          AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
              CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                        OR NOT pg_catalog.row_security_active('wf.events'::pg_catalog.regclass)
                   THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
                   ELSE ARRAY[wf.current_tenant()] END)
    ) a
    JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id
    GROUP BY r.tenant_id, r.definition_name, r.definition_version
), versions AS (
    SELECT tenant_id, definition_name, definition_version FROM live
    UNION SELECT tenant_id, definition_name, definition_version FROM done
    UNION SELECT tenant_id, definition_name, definition_version FROM tries
)
SELECT v.tenant_id, v.definition_name, v.definition_version,
       COALESCE(l.running, 0) AS running,
       COALESCE(l.paused, 0) AS paused,
       COALESCE(l.undoing, 0) AS undoing,
       COALESCE(d.completed, 0) AS completed_5m,
       COALESCE(d.failed, 0) AS failed_5m,
       COALESCE(d.stopped, 0) AS stopped_5m,
       d.p50 AS duration_p50_seconds,
       d.p95 AS duration_p95_seconds,
       d.failed::double precision OPERATOR(pg_catalog./)
           NULLIF(d.completed OPERATOR(pg_catalog.+) d.failed, 0)::double precision AS failure_rate_5m,
       COALESCE(tr.retries, 0) AS retries_5m,
       tr.retries::double precision OPERATOR(pg_catalog./)
           NULLIF(tr.first_attempts, 0)::double precision AS retries_per_step_5m
FROM versions v
LEFT JOIN live l ON l.tenant_id OPERATOR(pg_catalog.=) v.tenant_id
    AND l.definition_name OPERATOR(pg_catalog.=) v.definition_name
    AND l.definition_version OPERATOR(pg_catalog.=) v.definition_version
LEFT JOIN done d ON d.tenant_id OPERATOR(pg_catalog.=) v.tenant_id
    AND d.definition_name OPERATOR(pg_catalog.=) v.definition_name
    AND d.definition_version OPERATOR(pg_catalog.=) v.definition_version
LEFT JOIN tries tr ON tr.tenant_id OPERATOR(pg_catalog.=) v.tenant_id
    AND tr.definition_name OPERATOR(pg_catalog.=) v.definition_name
    AND tr.definition_version OPERATOR(pg_catalog.=) v.definition_version;
-- ==== end issue 31: a completed attempt's row is deleted ====

-- ==== issue 31: room on the pages of wf.runs ====
-- A transition updates its run's row in place (a HOT update, on the same
-- page) while the page has room.  A batch of reports (wf.complete_tasks,
-- wf.complete_tasks_and_claim) updates many runs of the same pages in one
-- transaction, and on full pages the new versions went to other pages:
-- a whole new row, a lock of the old one and an entry in each of the
-- table's indexes.  bench/wal_step.sh, batches of 100 of 20-step runs:
-- 2,253 + 100 bytes of WAL per step with the pages full, 1,902 + 94 with
-- 30 % of each left free (single reports: the same either way).  Pages
-- written from now on keep that room; the price is space, finished runs
-- on pages 70 % full (the history, far larger, is not touched).
ALTER TABLE wf.runs SET (fillfactor = 70);
-- ==== end issue 31: room on the pages of wf.runs ====

-- ==== issue 31: one unique index of attempts instead of two ====
-- tasks_attempt_key, unique on (run_id, step, visit, attempt), and
-- tasks_one_live_attempt, unique on (run_id, step) of the live attempts,
-- were two entries in every attempt's insert and two more in its claim
-- (an update that is not HOT: the status is in the indexes' predicates).
-- One index holds both rules: a live attempt's key is (run_id, step, 0, 0),
-- so a step of a run has at most one; a finished one's is (run_id, step,
-- visit, attempt), so an attempt of a visit is numbered once.  A live
-- attempt leaves the slot when it fails or is withdrawn (its row takes its
-- own key then, which must still be free) or is deleted, completed.  Built
-- on the rows as they are, the index cannot fail: the two it replaces held
-- them unique already, and no finished attempt has visit 0.
-- bench/wal_step.sh: 87 bytes of WAL less per eager step; bench/callgrind.sh:
-- 643,222 -> 629,827 instructions per eager step, 1,307,919 -> 1,280,202 per
-- start + claim + complete cycle.
DROP INDEX wf.tasks_one_live_attempt;
DROP INDEX wf.tasks_attempt_key;
CREATE UNIQUE INDEX tasks_attempt_key ON wf.tasks (run_id, step,
    (CASE WHEN status OPERATOR(pg_catalog.=) 'ready' OR status OPERATOR(pg_catalog.=) 'leased'
          THEN 0 ELSE visit END),
    (CASE WHEN status OPERATOR(pg_catalog.=) 'ready' OR status OPERATOR(pg_catalog.=) 'leased'
          THEN 0 ELSE attempt END));
COMMENT ON INDEX wf.tasks_attempt_key IS
'At most one live (ready or leased) attempt per step of a run, whose key is (run_id, step, 0, 0); every finished attempt of a visit once, (run_id, step, visit, attempt).';
-- ==== end issue 31: one unique index of attempts instead of two ====

-- ==== issue 31: idempotency keys indexed only where there is one ====
-- The unique constraint on wf.runs (tenant_id, idempotency_key) gave every
-- run an entry, those started without a key too (NULLs are distinct), and
-- another at each update of the run that is not HOT (its end, when its
-- status changes): 144 bytes of WAL of a start + claim + complete cycle of
-- a run without a key.  A unique index partial on the key being there
-- refuses the same duplicates and serves the same lookups (an equality on
-- the key implies it is not null; src/rowwrite.c, WfRowExists).
ALTER TABLE wf.runs DROP CONSTRAINT runs_tenant_id_idempotency_key_key;
CREATE UNIQUE INDEX runs_tenant_id_idempotency_key_key ON wf.runs (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
COMMENT ON INDEX wf.runs_tenant_id_idempotency_key_key IS
'A tenant''s runs by idempotency key, once each; runs started without one are not in it.';
-- ==== end issue 31: idempotency keys indexed only where there is one ====

-- ==== issue 31: one row of history per step ====
-- A task_scheduled or run_completed event appended right after another
-- event of the same transition is stored in that event's row, in the new
-- column "more" (a json array of [type, step, attempt, payload] arrays,
-- step and attempt null when the event has none; its k-th element is
-- event seq + k, with the row's actor and created_at; json, the text, not
-- jsonb: about 55 bytes of a step's row against 100 for the common case of
-- one task_scheduled, and only the readers of a whole history parse it),
-- rather than in a row of its own (src/state.c, WfEventRidesAlong): a
-- step's completion and its next attempt are one row and one events_pkey
-- entry.  The row's hash is that of its last event, the chain running
-- through the events it holds as if each had its own row; wf.history and
-- wf.verify_run read every event with its seq and hash as before.  Rows
-- written before the update have no "more".  Adding a column that may be
-- NULL rewrites nothing.
ALTER TABLE wf.events ADD COLUMN more json;
COMMENT ON COLUMN wf.events.more IS
'The events that follow this row''s event in the same transition and share its row (task_scheduled, run_completed): a json array of [type, step, attempt, payload] (step and attempt null when none), the k-th element event seq + k, with this row''s actor and created_at; NULL: none.  wf.history shows them as events of their own.';

-- Every event, one row each, those a row holds in "more" too: for whoever
-- reads the history across runs by type (a task_scheduled or run_completed
-- is not a row of wf.events of its own any more).  As the caller
-- (security_invoker): the row-level security of wf.events applies.
CREATE VIEW wf.event_log WITH (security_invoker = true) AS
SELECT e.run_id, e.tenant_id, e.seq, e.type, e.step, e.attempt, e.payload, e.actor,
       e.created_at, e.seq AS row_seq
FROM wf.events e
UNION ALL
SELECT e.run_id, e.tenant_id, e.seq OPERATOR(pg_catalog.+) m.n::pg_catalog.int4,
       m.x OPERATOR(pg_catalog.->>) 0, m.x OPERATOR(pg_catalog.->>) 1,
       (m.x OPERATOR(pg_catalog.->>) 2)::pg_catalog.int4,
       (m.x OPERATOR(pg_catalog.->) 3)::pg_catalog.jsonb, e.actor, e.created_at, e.seq
FROM wf.events e
     CROSS JOIN LATERAL pg_catalog.json_array_elements(e.more) WITH ORDINALITY m(x, n)
WHERE e.more IS NOT NULL;
COMMENT ON VIEW wf.event_log IS
'Every event of the runs the caller may see, one row each: the rows of wf.events and the events their column more holds (row_seq: the seq of the row that holds the event).  Payloads as stored; wf.history(run) shows one run''s as 0.2.0 stored them.';
GRANT SELECT ON wf.event_log TO wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin;

-- The events of a run of tenant, for wf.run_graph (its owner's body names
-- the tenant).
CREATE FUNCTION wf._run_events(run uuid, tenant text)
RETURNS TABLE (seq integer, type text, step text, attempt integer, payload jsonb,
               actor text, created_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at
FROM wf.event_log e
WHERE e.run_id OPERATOR(pg_catalog.=) run AND e.tenant_id OPERATOR(pg_catalog.=) tenant
$$;
COMMENT ON FUNCTION wf._run_events(uuid, text) IS
'Internal: the events of a run of a tenant (wf.event_log), unordered; for wf.run_graph.';
REVOKE ALL ON FUNCTION wf._run_events(uuid, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wf._run_graph(run uuid, format text DEFAULT 'mermaid')
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r        wf.runs;
    spec     jsonb;
    path     jsonb;
    ev       wf.events;
    exit_to  text;
    current  text;
    stopped  text;
BEGIN
    IF format IS NULL OR format NOT IN ('mermaid', 'dot') THEN
        RAISE EXCEPTION 'unsupported graph format "%"', format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use format => ''mermaid'' or format => ''dot''.';
    END IF;
    SELECT * INTO r FROM wf.runs x
    WHERE x.run_id OPERATOR(pg_catalog.=) run
      AND x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', run USING ERRCODE = 'undefined_object';
    END IF;
    SELECT d.spec INTO spec FROM wf.definitions d
    WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id
      AND d.tenant_id OPERATOR(pg_catalog.=) r.tenant_id;

    -- Each visit of a step, in the order the run entered them: the first
    -- of its entering events (task_scheduled of attempt 1, sleep_started,
    -- approval_requested, choice_made, wait_started) per step and visit
    -- (an approval step also schedules its notification task).  With the
    -- branch a choice took, and whether an approval expired.  Since 0.3.0
    -- a task_scheduled may ride in the row of the event before it
    -- (wf._run_events unpacks them).
    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
               'step', v.step,
               'choice', v.payload->'output'->'choice',
               'expired', EXISTS (SELECT 1 FROM wf.events a
                                  WHERE a.run_id OPERATOR(pg_catalog.=) run
                                    AND a.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                                    AND a.step OPERATOR(pg_catalog.=) v.step
                                    AND (a.payload->'visit') OPERATOR(pg_catalog.=) (v.payload->'visit')
                                    AND ((a.type OPERATOR(pg_catalog.=) 'approval_completed'
                                          AND a.payload->'output'->>'outcome' OPERATOR(pg_catalog.=) 'expired')
                                         OR a.type OPERATOR(pg_catalog.=) 'wait_timed_out')))
               ORDER BY v.seq)
    INTO path
    FROM (SELECT DISTINCT ON (e.step, COALESCE(e.payload->'visit', pg_catalog.to_jsonb(-e.seq)))
                 e.seq, e.step, e.payload
          FROM wf._run_events(run, r.tenant_id) e
          WHERE e.step IS NOT NULL
            AND e.step NOT LIKE 'compensate:%'
            AND (e.type IN ('sleep_started', 'approval_requested', 'choice_made', 'wait_started',
                            'children_started')
                 OR (e.type OPERATOR(pg_catalog.=) 'task_scheduled' AND e.attempt OPERATOR(pg_catalog.=) 1))
          ORDER BY e.step, COALESCE(e.payload->'visit', pg_catalog.to_jsonb(-e.seq)), e.seq) v;

    IF r.status IN ('running', 'paused') THEN
        current := r.current_step;
    ELSIF r.status OPERATOR(pg_catalog.=) 'completed' THEN
        exit_to := 'end';
    ELSE
        SELECT * INTO ev FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run
          AND e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
          AND e.type IN ('run_failed', 'run_terminated', 'cancel_requested',
                         'compensation_requested')
        ORDER BY e.seq DESC LIMIT 1;
        -- a cancelled run stopped where wf.cancel_run found it
        stopped := COALESCE(ev.payload->>'step', r.current_step);
        IF stopped LIKE 'compensate:%' THEN
            stopped := NULL;
        END IF;
        IF ev.payload->>'reason' OPERATOR(pg_catalog.=) 'approval_expired'
           OR (ev.payload->>'reason' OPERATOR(pg_catalog.=) 'step_timeout'
               AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(spec->'steps') st
                           WHERE st->>'name' OPERATOR(pg_catalog.=) (ev.payload->>'step')
                             AND st->>'type' OPERATOR(pg_catalog.=) 'wait_event')) THEN
            exit_to := 'fail';
        END IF;
        -- a run can fail while it enters a step (an approval step that
        -- finds no approvers): the run still went there
        IF stopped IS NOT NULL AND (path IS NULL OR (path->-1->>'step') IS DISTINCT FROM stopped) THEN
            path := COALESCE(path, '[]'::jsonb)
                 || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('step', stopped));
        END IF;
    END IF;

    RETURN wf._graph_render(
        r.definition_name || ' v' || r.definition_version || ' run ' || r.run_id,
        spec, format,
        pg_catalog.jsonb_build_object('path', COALESCE(path, '[]'::jsonb), 'exit', exit_to,
                                      'current', current, 'stopped', stopped));
END
$$;
-- ==== end issue 31: one row of history per step ====

-- ==== issue 30: the cut-over takes no lock that waits for a vacuum ====
-- wf.move_in_cutover, which runs while the partition is refused, emptied
-- wfshard.moved_runs with TRUNCATE: an ACCESS EXCLUSIVE lock, which waits
-- for anything that holds the table, an autovacuum of it among them (a
-- copy of 1,000,000 runs writes 1,000,000 rows there), and an autovacuum
-- gives way only after deadlock_timeout.  bench/move_dark.sh, 1,000,000
-- runs: the target took the partition in 1,105 ms, its log saying
-- "canceling autovacuum task ... of relation wfshard.moved_runs" (a
-- pg_dump of the target would have held it for its whole length).  The
-- cut-over now leaves the list alone; the router empties it when it
-- cleans up after the cut-over (and wf.move_in_begin when a move begins).
CREATE OR REPLACE FUNCTION wf.move_in_cutover(p integer, state jsonb, verified_at timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('move_in_cutover');
    me text := (SELECT s.shard FROM wfshard.self s);
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    hi bigint;
    map text[];
    leased integer;
BEGIN
    IF wf._partition_owner(p) OPERATOR(pg_catalog.=) me THEN
        RETURN 0;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_subscription x WHERE x.subname OPERATOR(pg_catalog.=) sub) THEN
        RAISE EXCEPTION 'partition % has no copy on shard "%"', p, me
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- nothing more comes in
    EXECUTE pg_catalog.format('ALTER SUBSCRIPTION %I DISABLE', sub);
    PERFORM wf._take_definitions(p, state OPERATOR(pg_catalog.->) 'definitions');
    INSERT INTO wf.tenant_policies
        SELECT * FROM pg_catalog.jsonb_populate_recordset(NULL::wf.tenant_policies, state OPERATOR(pg_catalog.->) 'policies')
        ON CONFLICT (tenant_id) DO NOTHING;
    -- fences: every fence handed out here from now on is above every fence
    -- the source handed out, and the leases held there are stale here (a
    -- new fence each, and the deadline now: the engine worker takes the
    -- lease back and the task is delivered again)
    hi := (state OPERATOR(pg_catalog.->>) 'fence')::bigint OPERATOR(pg_catalog.-) wf._fence_base();
    IF hi OPERATOR(pg_catalog.>) 17592186044414 THEN
        RAISE EXCEPTION 'cannot move partition %: its fences are beyond the timeline of shard "%"', p, me
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'The source is on a later timeline than the target.';
    END IF;
    IF hi OPERATOR(pg_catalog.>) 0 THEN
        PERFORM pg_catalog.setval('wf.fence_seq', hi, true)
        WHERE hi OPERATOR(pg_catalog.>) COALESCE(pg_catalog.pg_sequence_last_value('wf.fence_seq'::regclass), 0);
    END IF;
    UPDATE wf.tasks x
    SET fence = wf._fence_base() OPERATOR(pg_catalog.+) pg_catalog.nextval('wf.fence_seq'),
        lease_expires_at = LEAST(x.lease_expires_at, pg_catalog.clock_timestamp()),
        deadline_at = LEAST(x.deadline_at, pg_catalog.clock_timestamp())
    WHERE x.status OPERATOR(pg_catalog.=) 'leased'
      AND pg_catalog.hashtext(x.tenant_id) OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) p;
    GET DIAGNOSTICS leased = ROW_COUNT;
    -- the runs changed since the copy was verified verify too
    PERFORM wf.verify_partition(p, verified_at);
    -- (wfshard.moved_runs is emptied after the cut-over, not in it: see
    -- above)
    -- and the partition is this shard's, in the same transaction
    map := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(state OPERATOR(pg_catalog.->) 'map'));
    PERFORM wf.configure_shard(me, map, NULL, (state OPERATOR(pg_catalog.->>) 'map_version')::bigint);
    RETURN leased;
END
$$;
COMMENT ON TABLE wfshard.moved_runs IS
'The runs a move''s subscription wrote on this shard, with when (wf._note_moved_run): what the cut-over verifies. Emptied when a move begins and after it cuts over (by the router), never in the cut-over.';
-- ==== end issue 30: the cut-over takes no lock that waits for a vacuum ====

-- ==== issue 31: a step's output written once ====
-- Since 0.3.0 a step output of 256 bytes or more (its jsonb) is not copied
-- into the run's context: $.steps.<step> keeps "output_seq", the seq of
-- the event of wf.events that holds it, instead of "output", so that a
-- step does not write every large output before it again (src/state.c,
-- record_step_output).  The engine puts the outputs back wherever it reads
-- the context (mappings, choices, wf.verify_run); wf.run_context(run)
-- returns the context whole.  Contexts written before the update keep
-- their outputs.
CREATE FUNCTION wf.run_context(run uuid)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'wfengine_run_context'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION wf.run_context(uuid) IS
'The run''s context whole, as mappings and choices read it: {"input": ..., "steps": {"<step>": {"output", "attempt", "visit"}}, ...}, with the input and the large step outputs that wf.runs.context leaves to wf.runs.input and wf.events put back.';
REVOKE ALL ON FUNCTION wf.run_context(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.run_context(uuid) TO wfengine_app;
-- ==== end issue 31: a step's output written once ====

-- ==== issue 31: a large mapped input written once ====
-- An attempt whose input an input mapping made (not the run's input) and
-- whose jsonb is 256 bytes or more is written with input NULL and
-- input_seq, the seq of its task_scheduled event, which holds the input
-- already: the claim, and every reader of an attempt's input, takes it
-- from there (src/runstore.c, WfTaskInputOf).  A step mapping the step
-- before's whole output of 2 kB wrote it three times a step (the output in
-- task_completed, the input in task_scheduled and in wf.tasks); now twice.
ALTER TABLE wf.tasks ADD COLUMN input_seq integer;
COMMENT ON COLUMN wf.tasks.input_seq IS
'With input NULL: the seq of the run''s event (task_scheduled) whose payload holds the attempt''s input. NULL: the input is wf.tasks.input, or, that NULL too, the run''s input as it stands.';
COMMENT ON COLUMN wf.tasks.input IS
'The attempt''s input; NULL: the input of the task_scheduled event input_seq names, or, input_seq NULL too, the run''s input as it stands ($.input of wf.runs.context). wf.claim_tasks hands out either.';
-- ==== end issue 31: a large mapped input written once ====
