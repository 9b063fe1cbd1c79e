/* sql/wfengine--0.1.0--0.2.0.sql -- upgrade wfengine from 0.1.0 to 0.2.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released and its script, sql/wfengine--0.1.0.sql, never changes
 * again (sql/released.sha256 holds its checksum; `make test` checks it).
 * Every schema change from here on is written in this file, in the order it
 * is made, and reaches a fresh install too: CREATE EXTENSION wfengine runs
 * the 0.1.0 script and then this one (docs/upgrading.md).
 */

/*
 * Durations beside PostgreSQL's interval (issue 14): wf._duration(text)
 * shows what a duration string of a definition or setting means, as the
 * C parser reads it, so that a test can compare it with ::interval.
 * Internal: no role but the owner executes it.
 */
CREATE FUNCTION wf._duration(duration text)
RETURNS interval
AS 'MODULE_PATHNAME', 'wfengine_duration'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf._duration(text) IS
'Internal: the interval a duration string of a definition or setting ("90s", "1h30m") means, NULL when it is not one.';
REVOKE ALL ON FUNCTION wf._duration(text) FROM PUBLIC;

-- batches and eager dispatch (issue 13)
--
-- A result and the next claim in one call (wf.complete_and_claim,
-- wf.fail_and_claim), many results in one statement (wf.complete_tasks,
-- wf.fail_tasks) and many starts (wf.start_runs); src/batch.c.

CREATE FUNCTION wf.complete_and_claim(task_id bigint,
                                      fence bigint,
                                      output jsonb,
                                      queue text,
                                      worker text,
                                      max_tasks integer DEFAULT 1,
                                      lease interval DEFAULT '30 seconds')
RETURNS TABLE (answer text,
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
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_complete_and_claim'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval) IS
'wf.complete_task, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; the next step of the same run first), in one call and transaction; answer is complete_task''s verdict.';

CREATE FUNCTION wf.fail_and_claim(task_id bigint,
                                  fence bigint,
                                  error jsonb,
                                  retryable boolean,
                                  queue text,
                                  worker text,
                                  max_tasks integer DEFAULT 1,
                                  lease interval DEFAULT '30 seconds')
RETURNS TABLE (answer text,
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
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_fail_and_claim'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval) IS
'wf.fail_task, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; a task the failure scheduled for the same run first), in one call and transaction; answer is fail_task''s verdict.';

CREATE FUNCTION wf.complete_tasks(task_ids bigint[],
                                  fences bigint[],
                                  outputs jsonb[] DEFAULT NULL)
RETURNS TABLE (task_id bigint, answer text)
AS 'MODULE_PATHNAME', 'wfengine_complete_tasks'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.complete_tasks(bigint[], bigint[], jsonb[]) IS
'wf.complete_task for each element, in one statement: one row per element, in input order, with complete_task''s verdict (unknown_task or unknown_fence instead of its errors).';

CREATE FUNCTION wf.fail_tasks(task_ids bigint[],
                              fences bigint[],
                              errors jsonb[],
                              retryables boolean[] DEFAULT NULL)
RETURNS TABLE (task_id bigint, answer text)
AS 'MODULE_PATHNAME', 'wfengine_fail_tasks'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.fail_tasks(bigint[], bigint[], jsonb[], boolean[]) IS
'wf.fail_task for each element, in one statement: one row per element, in input order, with fail_task''s verdict (unknown_task or unknown_fence instead of its errors).';

CREATE FUNCTION wf.complete_tasks_and_claim(task_ids bigint[],
                                            fences bigint[],
                                            outputs jsonb[],
                                            queue text,
                                            worker text,
                                            max_tasks integer DEFAULT 10,
                                            lease interval DEFAULT '30 seconds')
RETURNS TABLE (answers text[],
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
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_complete_tasks_and_claim'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval) IS
'wf.complete_tasks, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; the next steps of the same runs first), in one call and transaction; answers are complete_tasks'' verdicts in input order.';

CREATE FUNCTION wf.fail_tasks_and_claim(task_ids bigint[],
                                        fences bigint[],
                                        errors jsonb[],
                                        retryables boolean[],
                                        queue text,
                                        worker text,
                                        max_tasks integer DEFAULT 10,
                                        lease interval DEFAULT '30 seconds')
RETURNS TABLE (answers text[],
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
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_fail_tasks_and_claim'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval) IS
'wf.fail_tasks, then a claim of up to max_tasks tasks of the queue for the worker (without waiting; tasks the failures scheduled for the same runs first), in one call and transaction; answers are fail_tasks'' verdicts in input order.';

CREATE FUNCTION wf.start_runs(definition text,
                              inputs jsonb[],
                              idempotency_keys text[] DEFAULT NULL,
                              version integer DEFAULT NULL)
RETURNS TABLE (run_id uuid)
AS 'MODULE_PATHNAME', 'wfengine_start_runs'
LANGUAGE C VOLATILE ROWS 10;
COMMENT ON FUNCTION wf.start_runs(text, jsonb[], text[], integer) IS
'wf.start_run for each input, in order, in one statement: one run id per input (a repeated idempotency key returns its run).';

REVOKE ALL ON FUNCTION
    wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval),
    wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval),
    wf.complete_tasks(bigint[], bigint[], jsonb[]),
    wf.fail_tasks(bigint[], bigint[], jsonb[], boolean[]),
    wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval),
    wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval),
    wf.start_runs(text, jsonb[], text[], integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.start_runs(text, jsonb[], text[], integer) TO wfengine_app;
GRANT EXECUTE ON FUNCTION
    wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval),
    wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval),
    wf.complete_tasks(bigint[], bigint[], jsonb[]),
    wf.fail_tasks(bigint[], bigint[], jsonb[], boolean[]),
    wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval),
    wf.fail_tasks_and_claim(bigint[], bigint[], jsonb[], boolean[], text, text, integer, interval)
    TO wfengine_worker;

-- metrics and trace context (issue 14.2)
/*
 * Monitoring (docs/monitoring.md).  Four views over the engine's tables,
 * read with the caller's rights (security_invoker: row-level security
 * applies as the caller, so a tenant's role sees its own tenant and a
 * role with BYPASSRLS every tenant, labelled by tenant_id), each cheap
 * enough to scrape every 15 seconds on a database with a million runs:
 * they read only what is live (ready and leased attempts, live runs,
 * pending timers and approvals) and what finished in a short window,
 * through indexes.  The cumulative counters that no table holds live in
 * shared memory (metrics.c) and are read by wf.engine_counters() and the
 * histogram functions, per database and for every tenant of it, so they
 * are for pg_monitor only.
 *
 * Trace context: wf.start_run takes a W3C traceparent, recorded in the
 * run_started event; wf.run_traceparent(run) hands it to workers.
 */

-- The attempts that finished, by when: the per-minute completions,
-- failures and claims of wf.queue_stats and the retries of wf.run_stats
-- read only the last minutes through it.  Partial on the final statuses,
-- so an attempt enters it once, when it finishes (never while it is ready
-- or leased, and a final row is not updated again); its keys grow with
-- time, so inserts go to the rightmost page.
CREATE INDEX tasks_finished_idx ON wf.tasks (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE VIEW wf.queue_stats WITH (security_invoker = true, security_barrier = true) AS
WITH ready AS (
    SELECT t.tenant_id, t.queue, pg_catalog.count(*) AS ready,
           pg_catalog.min(t.available_at)
               FILTER (WHERE t.available_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS oldest_available_at
    FROM wf.tasks t
    WHERE t.status OPERATOR(pg_catalog.=) 'ready'
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
    GROUP BY t.tenant_id, t.queue
), finished AS (
    SELECT t.tenant_id, t.queue,
           pg_catalog.count(*)
               FILTER (WHERE t.claimed_at OPERATOR(pg_catalog.>)
                       (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) AS claims,
           pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'completed') AS completions,
           pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'failed') AS failures
    FROM wf.tasks t
    WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
      AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')
    GROUP BY t.tenant_id, t.queue
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
COMMENT ON VIEW wf.queue_stats IS
'Per queue: ready and leased attempts, the age of the oldest claimable one, claims, completions and failures of the last minute, and leases past their expiry the engine has not taken back yet.';

CREATE VIEW wf.run_stats WITH (security_invoker = true, security_barrier = true) AS
WITH live AS (
    -- per tenant, so that runs_status_idx (tenant_id, status, ...) serves
    -- a caller without row-level security too: the live runs only, never
    -- a scan of every run (every run's tenant has a definition)
    SELECT tn.tenant_id, l.definition_name, l.definition_version, l.running, l.paused, l.undoing
    FROM (SELECT DISTINCT d.tenant_id FROM wf.definitions d) tn
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
    GROUP BY r.tenant_id, r.definition_name, r.definition_version
), tries AS (
    SELECT r.tenant_id, r.definition_name, r.definition_version,
           pg_catalog.count(*) FILTER (WHERE t.attempt OPERATOR(pg_catalog.>) 1) AS retries,
           pg_catalog.count(*) FILTER (WHERE t.attempt OPERATOR(pg_catalog.=) 1) AS first_attempts
    FROM wf.tasks t
    JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) t.run_id
    WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
      AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '5 minutes')
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
COMMENT ON VIEW wf.run_stats IS
'Per definition version: live runs by status; runs that ended in the last 5 minutes by outcome, the median and 95th percentile duration of those that completed, the failure rate; attempts after the first (retries) and retries per step visit among the attempts that finished in the last 5 minutes.';

CREATE VIEW wf.timer_stats WITH (security_invoker = true, security_barrier = true) AS
SELECT tm.tenant_id, tm.kind,
       pg_catalog.count(*) AS pending,
       pg_catalog.count(*) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS due,
       pg_catalog.count(*) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.=) 'infinity') AS held,
       COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
                pg_catalog.min(tm.fire_at) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.<=) pg_catalog.now())),
                0) AS firing_lag_seconds
FROM wf.timers tm
WHERE tm.status OPERATOR(pg_catalog.=) 'pending'
GROUP BY tm.tenant_id, tm.kind
UNION ALL
SELECT t.tenant_id, 'task_deadline',
       pg_catalog.count(*),
       pg_catalog.count(*) FILTER (WHERE t.deadline_at OPERATOR(pg_catalog.<=) pg_catalog.now()),
       0,
       COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
                pg_catalog.min(t.deadline_at) FILTER (WHERE t.deadline_at OPERATOR(pg_catalog.<=) pg_catalog.now())),
                0)
FROM wf.tasks t
WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL
GROUP BY t.tenant_id;
COMMENT ON VIEW wf.timer_stats IS
'Per timer kind (and task_deadline for the deadlines of live attempts): pending, due now, held for paused runs, and the firing lag: how long the oldest due one has been waiting to fire.';

-- Open approvals, for wf.approval_stats: without it the view reads every
-- approval ever requested (a row per approver of every approval step, kept
-- until its run is purged: 16 ms at 100,000 rows, growing with history);
-- with it only the open ones (3 ms).  Approval rows are written at human
-- speed, never on the task path; the index makes a decision's update of
-- the row a non-HOT one.
CREATE INDEX approvals_pending_idx ON wf.approvals (tenant_id) WHERE status = 'pending';

CREATE VIEW wf.approval_stats WITH (security_invoker = true, security_barrier = true) AS
SELECT a.tenant_id, r.definition_name, a.step,
       pg_catalog.count(*) AS open,
       pg_catalog.count(DISTINCT a.run_id) AS runs,
       pg_catalog.count(*) FILTER (WHERE a.approve_hash IS NULL) AS without_token,
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(a.created_at))
           AS oldest_age_seconds,
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(a.expires_at))
           AS oldest_expiry_passed_seconds
FROM wf.approvals a
JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id
WHERE a.status OPERATOR(pg_catalog.=) 'pending'
  AND r.status OPERATOR(pg_catalog.=) 'running'
GROUP BY a.tenant_id, r.definition_name, a.step;
COMMENT ON VIEW wf.approval_stats IS
'Per definition and approval step: open approvals (approvers still to decide), their runs, those without a token yet, and the age of the oldest request.';

GRANT SELECT ON wf.queue_stats, wf.run_stats, wf.timer_stats, wf.approval_stats
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;

-- the engine counters and histograms (metrics.c): every tenant of the
-- database, so for monitoring roles only
CREATE FUNCTION wf.engine_counters()
RETURNS TABLE (name text, value bigint)
AS 'MODULE_PATHNAME', 'wfengine_engine_counters'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.engine_counters() IS
'Cumulative counters of this database''s engine (transitions, results by verdict, claims, timers), kept in shared memory across clean restarts; for pg_monitor.';

CREATE FUNCTION wf.timer_lag_histogram()
RETURNS TABLE (le double precision, count bigint)
AS 'MODULE_PATHNAME', 'wfengine_timer_lag_histogram'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.timer_lag_histogram() IS
'How late timers fired behind their due time: cumulative counts per upper bound le in seconds (the last Infinity); for pg_monitor.';

CREATE FUNCTION wf.claim_latency_histogram()
RETURNS TABLE (le double precision, count bigint)
AS 'MODULE_PATHNAME', 'wfengine_claim_latency_histogram'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.claim_latency_histogram() IS
'The time from the commit that woke a waiting wf.claim_tasks to that claim getting its tasks: cumulative counts per upper bound le in seconds; for pg_monitor.';

REVOKE ALL ON FUNCTION wf.engine_counters(), wf.timer_lag_histogram(), wf.claim_latency_histogram()
    FROM PUBLIC;
GRANT USAGE ON SCHEMA wf TO pg_monitor;
GRANT EXECUTE ON FUNCTION wf.engine_counters(), wf.timer_lag_histogram(), wf.claim_latency_histogram()
    TO pg_monitor;

-- wf.start_run with a traceparent: one signature, not an overload (an
-- overload whose extra argument has a default would make every call with
-- four arguments or fewer ambiguous).  The C function reads the fifth
-- argument only when the SQL definition has it, so the 0.1.0 definition
-- keeps working against this library until the upgrade.
DROP FUNCTION wf.start_run(text, jsonb, text, integer);
CREATE FUNCTION wf.start_run(definition text,
                             input jsonb DEFAULT '{}',
                             idempotency_key text DEFAULT NULL,
                             version integer DEFAULT NULL,
                             traceparent text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'wfengine_start_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.start_run(text, jsonb, text, integer, text) IS
'Starts a run of the latest (or the given) version of a definition and returns its id; a W3C traceparent, when given, is recorded in run_started and handed to the run''s tasks by wf.run_traceparent().';
REVOKE ALL ON FUNCTION wf.start_run(text, jsonb, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.start_run(text, jsonb, text, integer, text) TO wfengine_app;

-- the trace context of a run, for its workers: one index probe of the
-- history (run_started is event 1), as the caller (row-level security)
CREATE FUNCTION wf.run_traceparent(run uuid)
RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT e.payload OPERATOR(pg_catalog.->>) 'traceparent'
FROM wf.events e
WHERE e.run_id OPERATOR(pg_catalog.=) run AND e.seq OPERATOR(pg_catalog.=) 1
$$;
COMMENT ON FUNCTION wf.run_traceparent(uuid) IS
'The W3C traceparent the run was started with (NULL: none), as recorded in its run_started event; workers call it beside wf.claim_tasks.';
REVOKE ALL ON FUNCTION wf.run_traceparent(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.run_traceparent(uuid) TO wfengine_app, wfengine_worker;

-- ---------------------------------------------------------------------------
-- Row checks that cost less per statement (issue 13)
--
-- PostgreSQL reads every CHECK constraint of a table back from its stored
-- node tree (stringToNode) and prepares it again in every INSERT or UPDATE
-- statement.  An "IN (10 strings)" check stores a text[] constant, about
-- 2 kB of node text: measured with callgrind over 200 claim + complete
-- cycles, the status checks of wf.runs and wf.tasks were 11 % of all
-- instructions of a cycle.  The same lists, checked by a C function of the
-- column (src/rowcheck.c), are a tiny node tree; a value outside the list
-- still fails with check_violation.  The constraints keep their names.  A
-- new status or timer kind is added in C (state.c, rowcheck.c) together
-- with the upgrade script that introduces it.
CREATE FUNCTION wf._timer_status_ok(status text) RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'wfengine_timer_status_ok';
CREATE FUNCTION wf._timer_kind_ok(kind text) RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'wfengine_timer_kind_ok';
COMMENT ON FUNCTION wf._timer_status_ok(text) IS 'timers_status_check: pending, fired or cancelled.';
COMMENT ON FUNCTION wf._timer_kind_ok(text) IS 'timers_kind_check: a kind of timer the engine sets.';
-- only the engine writes these tables (as the extension's owner)
REVOKE ALL ON FUNCTION wf._timer_status_ok(text), wf._timer_kind_ok(text) FROM PUBLIC;

-- (wf.runs and wf.tasks: one check each, below, "One check per hot table")
ALTER TABLE wf.timers DROP CONSTRAINT timers_status_check,
    ADD CONSTRAINT timers_status_check CHECK (wf._timer_status_ok(status)),
    DROP CONSTRAINT timers_kind_check,
    ADD CONSTRAINT timers_kind_check CHECK (wf._timer_kind_ok(kind));

-- ---------------------------------------------------------------------------
-- wf.explain in C (issue 12): the run as a whole is answered by explain.c,
-- what a live run waits for at its step by the step kind
-- (WfStepKindOps.explain).  Same signature, same answers.
CREATE OR REPLACE FUNCTION wf.explain(run uuid)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'wfengine_explain'
LANGUAGE C STABLE STRICT;

-- ---------------------------------------------------------------------------
-- claim on several queues (issue 14.3): one connection serves a worker of
-- many queues; src/claim.c.
CREATE FUNCTION wf.claim_tasks_any(queues text[],
                                   worker text,
                                   max_tasks integer DEFAULT 1,
                                   lease interval DEFAULT '30 seconds',
                                   wait interval DEFAULT NULL)
RETURNS TABLE (task_id bigint,
               run_id uuid,
               step text,
               attempt integer,
               fence bigint,
               idempotency_key text,
               input jsonb,
               lease_expires_at timestamptz,
               queue text,
               activity text,
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_claim_tasks_any'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.claim_tasks_any(text[], text, integer, interval, interval) IS
'wf.claim_tasks over several queues (1 to 64): up to max_tasks leases, from the queues in the order given; with a wait, sleeps until a task of one of them can be claimed.';
REVOKE ALL ON FUNCTION wf.claim_tasks_any(text[], text, integer, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.claim_tasks_any(text[], text, integer, interval, interval) TO wfengine_worker;

-- shards (issue 15)
--
-- A sharded deployment spreads tenants over several databases (shards),
-- each an ordinary wfengine install, behind a router database
-- (wfengine_router, router/).  A tenant's partition is
-- hashtext(tenant) & (partitions - 1) (wf.tenant_partition), the same
-- value PL/Proxy's RUN ON uses on the router; the map gives each partition
-- to one shard.  Every shard holds the whole map and its own name: an API
-- call of a tenant whose partition the map gives to another shard is
-- refused (src/shard.c).  Both tables empty (the default): not sharded, no
-- check.  Written by wf.configure_shard; readable by every job role.  The
-- map is not tenant data, so its tables are in a schema of their own,
-- wfshard: every table of schema wf has a tenant_id and row-level security.
CREATE SCHEMA wfshard;
COMMENT ON SCHEMA wfshard IS
'The shard map of a sharded deployment (issue 15): not tenant data, so not in schema wf, whose every table is keyed by tenant.';
CREATE TABLE wfshard.partitions (
    partition integer PRIMARY KEY CHECK (partition OPERATOR(pg_catalog.>=) 0),
    shard text NOT NULL CHECK (pg_catalog.length(shard) OPERATOR(pg_catalog.<=) 63)
);
COMMENT ON TABLE wfshard.partitions IS
'The shard map of a sharded deployment: the shard each hash partition of tenants lives on (the router holds the same map). Empty: not sharded.';
CREATE TABLE wfshard.self (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    shard text NOT NULL,
    map_version bigint NOT NULL DEFAULT 1
);
COMMENT ON TABLE wfshard.self IS
'The name of this database in wfshard.partitions and the version of the map (one row, or none when not sharded).';
SELECT pg_catalog.pg_extension_config_dump('wfshard.partitions', '');
SELECT pg_catalog.pg_extension_config_dump('wfshard.self', '');
-- the same for every tenant; only superusers write it
GRANT USAGE ON SCHEMA wfshard
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;
GRANT SELECT ON wfshard.partitions, wfshard.self
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;

-- every backend reads the map once and keeps it until a statement changes
-- either table (this trigger sends the invalidation, at commit)
CREATE FUNCTION wf._shard_map_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'wfengine_shard_map_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION wf._shard_map_changed() FROM PUBLIC;
CREATE TRIGGER partitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON wfshard.partitions
    FOR EACH STATEMENT EXECUTE FUNCTION wf._shard_map_changed();
CREATE TRIGGER self_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON wfshard.self
    FOR EACH STATEMENT EXECUTE FUNCTION wf._shard_map_changed();

CREATE FUNCTION wf.tenant_partition(tenant text, partitions integer)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.hashtext(tenant) OPERATOR(pg_catalog.&) (partitions OPERATOR(pg_catalog.-) 1)
$$;
COMMENT ON FUNCTION wf.tenant_partition(text, integer) IS
'The hash partition of a tenant among partitions (a power of 2): hashtext(tenant) & (partitions - 1), as PL/Proxy''s RUN ON maps it.';
-- for administrators (the router has its own, wfrouter.tenant_partition)
REVOKE ALL ON FUNCTION wf.tenant_partition(text, integer) FROM PUBLIC;

-- the id block a database's sequences draw from (wf._use_id_block), or
-- NULL when they were never bounded
CREATE FUNCTION wf._id_block()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN s.max_value OPERATOR(pg_catalog.=) 9223372036854775807 THEN NULL
            ELSE ((s.min_value OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) 1099511627776)::integer END
FROM pg_catalog.pg_sequences s
WHERE s.schemaname OPERATOR(pg_catalog.=) 'wf' AND s.sequencename OPERATOR(pg_catalog.=) 'task_id_seq'
$$;
REVOKE ALL ON FUNCTION wf._id_block() FROM PUBLIC;

-- bounds every id sequence of the engine to block: ids block * 2^40 + 1 to
-- (block + 1) * 2^40.  A sequence goes on from where it is when that is in
-- the block, else from the block's first id.  A sequence at its bound
-- fails (the block is full) rather than hand out an id of another block.
CREATE FUNCTION wf._use_id_block(block integer)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo bigint;
    t text;
    c text;
    seq text;
    last bigint;
BEGIN
    IF block IS NULL OR block OPERATOR(pg_catalog.<) 0 OR block OPERATOR(pg_catalog.>) 8388606 THEN
        RAISE EXCEPTION 'id block % is out of range', block
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Blocks are 0 to 8388606, 2^40 ids each; give each shard its own.';
    END IF;
    lo := block::bigint OPERATOR(pg_catalog.*) 1099511627776;
    FOR t, c IN SELECT i.tab, i.col FROM wf._partition_ids() i LOOP
        seq := pg_catalog.pg_get_serial_sequence('wf.' OPERATOR(pg_catalog.||) t, c);
        last := COALESCE(pg_catalog.pg_sequence_last_value(seq::regclass), 0);
        IF last OPERATOR(pg_catalog.<=) lo OR last OPERATOR(pg_catalog.>=) (lo OPERATOR(pg_catalog.+) 1099511627776) THEN
            last := lo OPERATOR(pg_catalog.+) 1;
        ELSE
            last := last OPERATOR(pg_catalog.+) 1;
        END IF;
        EXECUTE pg_catalog.format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START WITH %s RESTART WITH %s',
            seq, lo OPERATOR(pg_catalog.+) 1, lo OPERATOR(pg_catalog.+) 1099511627776, last, last);
    END LOOP;
    RETURN lo OPERATOR(pg_catalog.+) 1;
END
$$;
REVOKE ALL ON FUNCTION wf._use_id_block(integer) FROM PUBLIC;

CREATE FUNCTION wf.configure_shard(self text, map text[], id_block integer DEFAULT NULL,
                                   map_version bigint DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := pg_catalog.cardinality(map);
    owned integer;
    block integer := COALESCE(id_block, wf._id_block());
    version bigint;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'permission denied for function wf.configure_shard'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF self IS NULL THEN
        DELETE FROM wfshard.partitions;
        DELETE FROM wfshard.self;
        RETURN 0;
    END IF;
    IF n OPERATOR(pg_catalog.<) 1 OR n OPERATOR(pg_catalog.>) 4096
       OR (n OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1)) OPERATOR(pg_catalog.<>) 0 THEN
        RAISE EXCEPTION 'shard map has % partitions', n
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The number of partitions is a power of 2 between 1 and 4096.';
    END IF;
    IF pg_catalog.array_position(map, NULL::text) IS NOT NULL THEN
        RAISE EXCEPTION 'shard map gives partition % to no shard',
            pg_catalog.array_position(map, NULL::text) OPERATOR(pg_catalog.-) 1
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF block IS NULL THEN
        RAISE EXCEPTION 'shard "%" has no id block', self
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give every shard its own block of ids: wf.configure_shard(self, map, id_block). wfrouter.configure and wfrouter.add_shard do it for you.';
    END IF;
    version := COALESCE(map_version,
                        (SELECT s.map_version OPERATOR(pg_catalog.+) 1 FROM wfshard.self s), 1);
    IF version OPERATOR(pg_catalog.<) (SELECT s.map_version FROM wfshard.self s) THEN
        RAISE EXCEPTION 'shard map version % is older than version % of shard "%"', version,
            (SELECT s.map_version FROM wfshard.self s), self
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A newer map is in place; read it with SELECT * FROM wfshard.partitions.';
    END IF;
    IF block IS DISTINCT FROM wf._id_block() THEN
        PERFORM wf._use_id_block(block);
    END IF;
    owned := pg_catalog.cardinality(pg_catalog.array_positions(map, self));
    DELETE FROM wfshard.partitions;
    INSERT INTO wfshard.partitions (partition, shard)
        SELECT (m.i OPERATOR(pg_catalog.-) 1)::integer, m.s
        FROM pg_catalog.unnest(map) WITH ORDINALITY AS m(s, i);
    INSERT INTO wfshard.self (shard, map_version) VALUES (self, version)
        ON CONFLICT (only_row) DO UPDATE SET shard = EXCLUDED.shard, map_version = EXCLUDED.map_version;
    RETURN owned;
END
$$;
COMMENT ON FUNCTION wf.configure_shard(text, text[], integer, bigint) IS
'Makes this database shard self of a sharded deployment: map[i + 1] is the shard of partition i (the router''s wfrouter.shard_map()); its ids come from id_block (kept when NULL); map_version (default: one more) never goes back. Returns how many partitions this shard owns. A null self clears the map (not sharded).';
REVOKE ALL ON FUNCTION wf.configure_shard(text, text[], integer, bigint) FROM PUBLIC;

-- moving partitions (issue 15; online, on logical replication, issue 30)
--
-- wfrouter.move_partition(p, to_shard) on the router moves a partition's
-- tenants from the shard that holds them to another (docs/scale-out.md,
-- "Moving a partition"), on PostgreSQL's logical replication.  These are
-- its pieces on the shards, for superusers only:
--   wf.move_out_begin (source): a publication of the partition's rows, one
--     row filter per table (hashtext(tenant_id) & (partitions - 1) = p);
--   wf.move_in_begin (target): the source's definitions in place of this
--     shard's copies; the router then subscribes the target to the
--     publication, which copies the rows and streams every change while
--     the partition stays live on the source;
--   wf.verify_partition (target): every copied run verifies, online;
--   wf.move_out_cutover (source): takes the partition lock (waits for the
--     calls in flight, refuses new ones), gives the partition away in the
--     map and returns the WAL position the target must reach;
--   wf.move_in_cutover (target): stops the subscription, fences above the
--     source's, leases held there made stale, the runs changed since the
--     verification verified, and the partition taken, in one transaction;
--   wf.drop_partition (source, and the target of a cancelled move): the
--     rows go.
-- Ids never collide: every shard draws its ids from its own block
-- (wf.configure_shard), so rows move with their ids and no sequence moves.
-- The tables a move replicates carry tenant_id in their replica identity
-- (a row filter of a publication that replicates updates and deletes may
-- only name such columns): it is in the primary key of the tables updated
-- on every step, and the others log the whole old row (REPLICA IDENTITY
-- FULL), which costs only on their rare updates and deletes.

-- every table of schema wf keyed by tenant, in the order rows are inserted
-- (a table of wf not listed here and not wf.secrets makes the move refuse:
-- a new table must say how it moves)
CREATE FUNCTION wf._partition_tables()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ARRAY['definitions', 'runs', 'events', 'suppressed_events', 'tasks', 'timers',
             'approvals', 'approval_attempts', 'decide_failures', 'signals', 'correlations',
             'buffered_events', 'schedules', 'tenant_policies', 'tenant_keys']
$$;
REVOKE ALL ON FUNCTION wf._partition_tables() FROM PUBLIC;

-- the id columns drawn from sequences: (table, column)
CREATE FUNCTION wf._partition_ids()
RETURNS TABLE (tab text, col text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
VALUES ('definitions', 'definition_id'), ('tasks', 'task_id'), ('timers', 'timer_id'),
       ('approvals', 'approval_id'), ('approval_attempts', 'attempt_id'),
       ('signals', 'signal_id'), ('buffered_events', 'buffer_id'), ('schedules', 'schedule_id')
$$;
REVOKE ALL ON FUNCTION wf._partition_ids() FROM PUBLIC;

-- the tables a move replicates: definitions are published on every shard
-- (the source's rows replace the target's copies, wf._take_definitions),
-- tenant policies are set on every shard, and tenants with schedules do
-- not move
CREATE FUNCTION wf._move_tables()
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ARRAY(SELECT t FROM pg_catalog.unnest(wf._partition_tables()) t
             WHERE t OPERATOR(pg_catalog.<>) ALL (ARRAY['definitions', 'schedules', 'tenant_policies']))
$$;
REVOKE ALL ON FUNCTION wf._move_tables() FROM PUBLIC;

CREATE FUNCTION wf._fence_base()
RETURNS bigint
AS 'MODULE_PATHNAME', 'wfengine_fence_base'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf._fence_base() IS
'Internal: the high bits of the fences this server hands out now (the timeline id minus one, times 2^44).';
REVOKE ALL ON FUNCTION wf._fence_base() FROM PUBLIC;

CREATE FUNCTION wf._verify_moved_run(tenant text, run uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_verify_moved_run'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf._verify_moved_run(text, uuid) IS
'Internal, for superusers: wf.verify_run(run) as tenant would call it (wf.import_partition checks every run it brings in).';
REVOKE ALL ON FUNCTION wf._verify_moved_run(text, uuid) FROM PUBLIC;

-- refuses unless the caller is a superuser and every table of wf is known
CREATE FUNCTION wf._partition_check(what text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    unknown text;
    n integer;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'permission denied for function wf.%', what
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Moving a partition is for superusers (wfrouter.move_partition on the router).';
    END IF;
    SELECT pg_catalog.string_agg(c.relname, ', ') INTO unknown
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace s ON s.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE s.nspname OPERATOR(pg_catalog.=) 'wf' AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p'])
      AND c.relname OPERATOR(pg_catalog.<>) 'secrets'
      AND c.relname OPERATOR(pg_catalog.<>) ALL (wf._partition_tables());
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'cannot move a partition: table wf.% has no moving rule', unknown
            USING ERRCODE = 'feature_not_supported';
    END IF;
    n := (SELECT pg_catalog.count(*) FROM wfshard.partitions);
    IF n OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION 'this database is not a shard'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Set the map with wf.configure_shard(self, map).';
    END IF;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION wf._partition_check(text) FROM PUBLIC;

CREATE FUNCTION wf._lock_partition(p integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_lock_partition'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf._lock_partition(integer) IS
'Internal, for superusers: the cut-over of a move takes partition p exclusively to the end of the transaction (waits for its calls in flight, bounded by lock_timeout; refuses new ones meanwhile).';
REVOKE ALL ON FUNCTION wf._lock_partition(integer) FROM PUBLIC;

-- the owner of partition p in this shard's map
CREATE FUNCTION wf._partition_owner(p integer)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT m.shard FROM wfshard.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p
$$;
REVOKE ALL ON FUNCTION wf._partition_owner(integer) FROM PUBLIC;

-- the definitions of partition p's tenants here, as JSON
CREATE FUNCTION wf.partition_definitions(p integer)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('partition_definitions');
BEGIN
    RETURN (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(d) ORDER BY d.definition_id), '[]')
            FROM wf.definitions d
            WHERE pg_catalog.hashtext(d.tenant_id) OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) p);
END
$$;
COMMENT ON FUNCTION wf.partition_definitions(integer) IS
'For superusers, on the source of a move: the definitions of partition p''s tenants, as JSON.';
REVOKE ALL ON FUNCTION wf.partition_definitions(integer) FROM PUBLIC;

-- the source's definitions in place of this shard's copies: the moved
-- runs name the source's definition ids; the same definition published
-- here under another id (no run names it: the tenant has no run here)
-- gives way to it
CREATE FUNCTION wf._take_definitions(p integer, defs jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    me text := (SELECT s.shard FROM wfshard.self s);
    d record;
    k integer := 0;
BEGIN
    FOR d IN SELECT x.* FROM pg_catalog.jsonb_populate_recordset(NULL::wf.definitions,
                                                                defs) x LOOP
        IF EXISTS (SELECT 1 FROM wf.definitions x WHERE x.definition_id OPERATOR(pg_catalog.=) d.definition_id) THEN
            IF NOT EXISTS (SELECT 1 FROM wf.definitions x
                           WHERE x.definition_id OPERATOR(pg_catalog.=) d.definition_id
                             AND x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id
                             AND x.name OPERATOR(pg_catalog.=) d.name
                             AND x.version OPERATOR(pg_catalog.=) d.version
                             AND x.digest OPERATOR(pg_catalog.=) d.digest) THEN
                RAISE EXCEPTION 'cannot move partition %: definition_id % is taken on shard "%"', p, d.definition_id, me
                    USING ERRCODE = 'unique_violation',
                          HINT = 'Give every shard its own id range with wf.set_id_block(block) before it takes tenants.';
            END IF;
            CONTINUE;
        END IF;
        IF EXISTS (SELECT 1 FROM wf.definitions x
                   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.name OPERATOR(pg_catalog.=) d.name
                     AND x.version OPERATOR(pg_catalog.=) d.version
                     AND x.digest OPERATOR(pg_catalog.<>) d.digest) THEN
            RAISE EXCEPTION 'cannot move partition %: definition "%" version % of tenant "%" differs on shard "%"',
                p, d.name, d.version, d.tenant_id, me
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'The shards disagree on a publication; publish the definition on every shard alike.';
        END IF;
        -- the copy published here has no run (the tenant had none here)
        PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
        DELETE FROM wf.definitions x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND x.name OPERATOR(pg_catalog.=) d.name
          AND x.version OPERATOR(pg_catalog.=) d.version;
        PERFORM pg_catalog.set_config('session_replication_role', 'origin', true);
        INSERT INTO wf.definitions OVERRIDING SYSTEM VALUE
            VALUES (d.definition_id, d.tenant_id, d.name, d.version, d.digest, d.spec, d.created_by, d.created_at);
        k := k OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN k;
END
$$;
REVOKE ALL ON FUNCTION wf._take_definitions(integer, jsonb) FROM PUBLIC;

CREATE FUNCTION wf.move_out_begin(p integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('move_out_begin');
    me text := (SELECT s.shard FROM wfshard.self s);
    pub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
BEGIN
    IF p IS NULL OR p OPERATOR(pg_catalog.<) 0 OR p OPERATOR(pg_catalog.>=) n THEN
        RAISE EXCEPTION 'partition % is not in the shard map of % partitions', p, n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.current_setting('wal_level') OPERATOR(pg_catalog.<>) 'logical' THEN
        RAISE EXCEPTION 'cannot move partition % from shard "%": wal_level is %', p, me,
            pg_catalog.current_setting('wal_level')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A move replicates the partition with logical replication: set wal_level = logical on every shard (a restart).';
    END IF;
    IF pg_catalog.current_setting('max_wal_senders')::integer OPERATOR(pg_catalog.<) 3
       OR pg_catalog.current_setting('max_replication_slots')::integer OPERATOR(pg_catalog.<) 3 THEN
        RAISE EXCEPTION 'cannot move partition % from shard "%": max_wal_senders is % and max_replication_slots %', p, me,
            pg_catalog.current_setting('max_wal_senders'), pg_catalog.current_setting('max_replication_slots')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A move takes a replication slot and a WAL sender, and two more while it copies: set both to 10 on every shard (the defaults; a restart).';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_publication x WHERE x.pubname OPERATOR(pg_catalog.=) pub) THEN
        RETURN pub;
    END IF;
    IF wf._partition_owner(p) OPERATOR(pg_catalog.<>) me THEN
        RAISE EXCEPTION 'partition % is not on shard "%"', p, me
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT 1 FROM wf.schedules s WHERE wf.tenant_partition(s.tenant_id, n) OPERATOR(pg_catalog.=) p) THEN
        RAISE EXCEPTION 'cannot move partition %: its tenants have schedules', p
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Their pg_cron jobs are on this database: wf.unschedule them, move, and wf.schedule them on the target.';
    END IF;
    EXECUTE pg_catalog.format('CREATE PUBLICATION %I FOR %s WITH (publish = ''insert, update, delete'')', pub,
        (SELECT pg_catalog.string_agg(pg_catalog.format(
             'TABLE wf.%I WHERE (pg_catalog.hashtext(tenant_id) OPERATOR(pg_catalog.&) %s OPERATOR(pg_catalog.=) %s)',
             t, n OPERATOR(pg_catalog.-) 1, p), ', ')
         FROM pg_catalog.unnest(wf._move_tables()) t));
    RETURN pub;
END
$$;
COMMENT ON FUNCTION wf.move_out_begin(integer) IS
'For superusers, on the source of a move: the publication wf_move_<p> of partition p''s rows (a row filter per table); returns its name.';
REVOKE ALL ON FUNCTION wf.move_out_begin(integer) FROM PUBLIC;

CREATE FUNCTION wf.move_in_begin(p integer, defs jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('move_in_begin');
    me text := (SELECT s.shard FROM wfshard.self s);
BEGIN
    IF p IS NULL OR p OPERATOR(pg_catalog.<) 0 OR p OPERATOR(pg_catalog.>=) n THEN
        RAISE EXCEPTION 'partition % is not in the shard map of % partitions', p, n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF wf._partition_owner(p) OPERATOR(pg_catalog.=) me THEN
        RAISE EXCEPTION 'partition % is already on this shard "%"', p, me
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_subscription x
               WHERE x.subname OPERATOR(pg_catalog.=) ('wf_move_' OPERATOR(pg_catalog.||) p)) THEN
        RAISE EXCEPTION 'partition % is being copied to shard "%" already', p, me
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- what an earlier copy that was cancelled or crashed left here goes
    PERFORM wf.drop_partition(p);
    TRUNCATE wfshard.moved_runs;
    RETURN wf._take_definitions(p, defs);
END
$$;
COMMENT ON FUNCTION wf.move_in_begin(integer, jsonb) IS
'For superusers, on the target of a move before its subscription: rows of partition p an earlier copy left go, and the source''s definitions (wf.partition_definitions) replace this shard''s copies; returns how many it took.';
REVOKE ALL ON FUNCTION wf.move_in_begin(integer, jsonb) FROM PUBLIC;

CREATE FUNCTION wf.move_progress(p integer)
RETURNS TABLE (tables_total integer, tables_copied integer, rows_copying bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.count(*)::integer,
       (pg_catalog.count(*) FILTER (WHERE r.srsubstate OPERATOR(pg_catalog.=) 'r'))::integer,
       (SELECT COALESCE(pg_catalog.sum(c.tuples_processed), 0)::bigint FROM pg_catalog.pg_stat_progress_copy c
        WHERE c.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
FROM pg_catalog.pg_subscription s
JOIN pg_catalog.pg_subscription_rel r ON r.srsubid OPERATOR(pg_catalog.=) s.oid
WHERE s.subname OPERATOR(pg_catalog.=) ('wf_move_' OPERATOR(pg_catalog.||) p)
$$;
COMMENT ON FUNCTION wf.move_progress(integer) IS
'For superusers, on the target of a move: how many of the subscription''s tables are copied and streaming, and the rows of the copies in progress.';
REVOKE ALL ON FUNCTION wf.move_progress(integer) FROM PUBLIC;

-- every run of partition p here verifies (since NULL), or every one a
-- move's subscription wrote here at or after since; returns when it began,
-- for the next call
CREATE FUNCTION wf.verify_partition(p integer, since timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('verify_partition');
    me text := (SELECT s.shard FROM wfshard.self s);
    began timestamptz := pg_catalog.clock_timestamp();
    r record;
BEGIN
    FOR r IN SELECT x.tenant_id, x.run_id FROM wf.runs x
             WHERE since IS NULL
               AND pg_catalog.hashtext(x.tenant_id) OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) p
             UNION ALL
             SELECT x.tenant_id, x.run_id
             FROM wfshard.moved_runs m JOIN wf.runs x ON x.run_id OPERATOR(pg_catalog.=) m.run_id
             WHERE since IS NOT NULL AND m.changed_at OPERATOR(pg_catalog.>=) since
               AND pg_catalog.hashtext(x.tenant_id) OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) p LOOP
        -- the subscription may apply a change of the run between the
        -- statements that read it: a run that does not verify is read again
        FOR i IN 1..5 LOOP
            EXIT WHEN wf._verify_moved_run(r.tenant_id, r.run_id);
            IF i OPERATOR(pg_catalog.<) 5 THEN
                PERFORM pg_catalog.pg_sleep(0.05);
                CONTINUE;
            END IF;
            RAISE EXCEPTION 'cannot move partition %: run % of tenant "%" does not verify on shard "%"',
                p, r.run_id, r.tenant_id, me
                USING ERRCODE = 'data_corrupted',
                      HINT = 'The warning before this error says what differs; the partition stays where it is.';
        END LOOP;
    END LOOP;
    RETURN began;
END
$$;
COMMENT ON FUNCTION wf.verify_partition(integer, timestamptz) IS
'For superusers: wf.verify_run on every run of partition p here (since NULL), or on those a move''s subscription wrote here at or after since (wfshard.moved_runs); returns when it began.';
REVOKE ALL ON FUNCTION wf.verify_partition(integer, timestamptz) FROM PUBLIC;

CREATE FUNCTION wf.move_out_cutover(p integer, to_shard text, wait_ms integer DEFAULT 500)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('move_out_cutover');
    me text := (SELECT s.shard FROM wfshard.self s);
    owner text := wf._partition_owner(p);
    version bigint := (SELECT s.map_version FROM wfshard.self s);
    map text[];
    holders text;
BEGIN
    IF owner OPERATOR(pg_catalog.<>) me AND owner OPERATOR(pg_catalog.<>) to_shard THEN
        RAISE EXCEPTION 'partition % is on shard "%", not on this shard "%"', p, owner, me
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF owner OPERATOR(pg_catalog.=) me THEN
        -- the calls of the partition in flight end; new ones are refused
        PERFORM pg_catalog.set_config('lock_timeout', wait_ms::text, true);
        BEGIN
            PERFORM wf._lock_partition(p);
        EXCEPTION WHEN lock_not_available THEN
            SELECT pg_catalog.string_agg(pg_catalog.format('pid %s (%s, in a transaction for %s s)', a.pid, a.usename,
                       pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start)::numeric, 1)), ', ')
            INTO holders
            FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
            WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
              AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
              AND l.classid::bigint OPERATOR(pg_catalog.=) 2003202920 AND l.objid::bigint OPERATOR(pg_catalog.=) p
              AND l.objsubid OPERATOR(pg_catalog.=) 22345;
            RETURN pg_catalog.jsonb_build_object('waiting_for', COALESCE(holders, 'a transaction'));
        END;
        PERFORM pg_catalog.set_config('lock_timeout', '0', true);
        map := ARRAY(SELECT CASE WHEN m.partition OPERATOR(pg_catalog.=) p THEN to_shard ELSE m.shard END
                     FROM wfshard.partitions m ORDER BY m.partition);
        version := version OPERATOR(pg_catalog.+) 1;
        PERFORM wf.configure_shard(me, map, NULL, version);
    ELSE
        map := ARRAY(SELECT m.shard FROM wfshard.partitions m ORDER BY m.partition);
    END IF;
    RETURN pg_catalog.jsonb_build_object(
        'lsn', pg_catalog.pg_current_wal_insert_lsn()::text,
        'fence', wf._fence_base() OPERATOR(pg_catalog.+) COALESCE(pg_catalog.pg_sequence_last_value('wf.fence_seq'::regclass), 0),
        'map', pg_catalog.to_jsonb(map), 'map_version', version,
        'definitions', wf.partition_definitions(p),
        'policies', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(x)), '[]') FROM wf.tenant_policies x
                     WHERE pg_catalog.hashtext(x.tenant_id) OPERATOR(pg_catalog.&) (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) p));
END
$$;
COMMENT ON FUNCTION wf.move_out_cutover(integer, text, integer) IS
'For superusers, on the source of a move: takes partition p (waits at most wait_ms for its calls in flight; else returns {"waiting_for": ...}), gives it to to_shard in this shard''s map, and returns the WAL position the target must reach, the fence to go above, the new map and its version, and the definitions and policies of its tenants.';
REVOKE ALL ON FUNCTION wf.move_out_cutover(integer, text, integer) FROM PUBLIC;

CREATE FUNCTION wf.move_in_cutover(p integer, state jsonb, verified_at timestamptz)
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
    -- (a truncation: the list holds every run the copy wrote)
    TRUNCATE wfshard.moved_runs;
    -- and the partition is this shard's, in the same transaction
    map := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(state OPERATOR(pg_catalog.->) 'map'));
    PERFORM wf.configure_shard(me, map, NULL, (state OPERATOR(pg_catalog.->>) 'map_version')::bigint);
    RETURN leased;
END
$$;
COMMENT ON FUNCTION wf.move_in_cutover(integer, jsonb, timestamptz) IS
'For superusers, on the target of a move once it has reached the source''s WAL position: stops the subscription, takes the definitions and policies, fences above the source''s, makes the leases held there stale, verifies the runs changed since verified_at, and takes the partition in the map the source gave (state: what wf.move_out_cutover returned). Returns how many leases it took back.';
REVOKE ALL ON FUNCTION wf.move_in_cutover(integer, jsonb, timestamptz) FROM PUBLIC;

CREATE FUNCTION wf.drop_partition(p integer)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := wf._partition_check('drop_partition');
    me text := (SELECT s.shard FROM wfshard.self s);
    t text;
    i integer;
    k bigint;
    total bigint := 0;
BEGIN
    IF p IS NULL OR p OPERATOR(pg_catalog.<) 0 OR p OPERATOR(pg_catalog.>=) n
       OR (SELECT m.shard FROM wfshard.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p)
          OPERATOR(pg_catalog.=) me THEN
        RAISE EXCEPTION 'partition % is not given to another shard', p
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Only the rows of a partition that has moved away are dropped.';
    END IF;
    -- events and definitions are append-only for the API; this is no API
    PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
    FOR i IN REVERSE pg_catalog.cardinality(wf._partition_tables())..1 LOOP
        t := (wf._partition_tables())[i];
        -- definitions and tenant policies are on every shard: they stay
        CONTINUE WHEN t OPERATOR(pg_catalog.=) ANY (ARRAY['definitions', 'tenant_policies']);
        EXECUTE pg_catalog.format('DELETE FROM wf.%I x '
            'WHERE wf.tenant_partition(x.tenant_id, $1) OPERATOR(pg_catalog.=) $2', t) USING n, p;
        GET DIAGNOSTICS k = ROW_COUNT;
        total := total OPERATOR(pg_catalog.+) k;
    END LOOP;
    PERFORM pg_catalog.set_config('session_replication_role', 'origin', true);
    RETURN total;
END
$$;
COMMENT ON FUNCTION wf.drop_partition(integer) IS
'For superusers, on the source of a move once the target has the partition: deletes every row of its tenants (definitions stay); returns how many.';
REVOKE ALL ON FUNCTION wf.drop_partition(integer) FROM PUBLIC;

CREATE FUNCTION wf.set_id_block(block integer)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo bigint;
    t text;
    c text;
    last bigint;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'permission denied for function wf.set_id_block'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF block IS NULL OR block OPERATOR(pg_catalog.<) 0 OR block OPERATOR(pg_catalog.>) 8388606 THEN
        RAISE EXCEPTION 'id block % is out of range', block
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Blocks are 0 to 8388606, 2^40 ids each; give each shard its own.';
    END IF;
    lo := block::bigint OPERATOR(pg_catalog.*) 1099511627776;
    FOR t, c IN SELECT i.tab, i.col FROM wf._partition_ids() i LOOP
        EXECUTE pg_catalog.format('SELECT pg_catalog.max(x.%I) FROM wf.%I x', c, t) INTO last;
        IF last OPERATOR(pg_catalog.>=) (lo OPERATOR(pg_catalog.+) 1099511627776) THEN
            RAISE EXCEPTION 'cannot use id block %: wf.%.% has ids up to %, beyond it', block, t, c, last
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END LOOP;
    RETURN wf._use_id_block(block);
END
$$;
COMMENT ON FUNCTION wf.set_id_block(integer) IS
'For superusers: the engine''s ids (tasks, timers, approvals, signals, definitions, ...) come from block * 2^40 + 1 to (block + 1) * 2^40, so that no two shards hand out the same id and partitions can move between them (wf.configure_shard sets it too); returns the first id.';
REVOKE ALL ON FUNCTION wf.set_id_block(integer) FROM PUBLIC;

-- a new shard takes every tenant's definitions (wfrouter.add_shard), under
-- ids of its own block; what it has already stays
CREATE FUNCTION wf.copy_definitions(defs jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k integer;
BEGIN
    PERFORM wf._partition_check('copy_definitions');
    INSERT INTO wf.definitions (tenant_id, name, version, digest, spec, created_by, created_at)
        SELECT d.tenant_id, d.name, d.version, d.digest, d.spec, d.created_by, d.created_at
        FROM pg_catalog.jsonb_populate_recordset(NULL::wf.definitions, defs) d
        ORDER BY d.definition_id
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    RETURN k;
END
$$;
COMMENT ON FUNCTION wf.copy_definitions(jsonb) IS
'For superusers, on a shard that joins a cluster: the definitions of every tenant (rows of wf.definitions as JSON), under ids of this shard; returns how many it took.';
REVOKE ALL ON FUNCTION wf.copy_definitions(jsonb) FROM PUBLIC;

-- tenant_id in the replica identity of every table a move replicates
ALTER TABLE wf.runs DROP CONSTRAINT runs_pkey, ADD PRIMARY KEY (run_id, tenant_id);
ALTER TABLE wf.tasks DROP CONSTRAINT tasks_pkey, ADD PRIMARY KEY (task_id, tenant_id);
ALTER TABLE wf.timers DROP CONSTRAINT timers_pkey, ADD PRIMARY KEY (timer_id, tenant_id);
ALTER TABLE wf.approvals DROP CONSTRAINT approvals_pkey, ADD PRIMARY KEY (approval_id, tenant_id);
ALTER TABLE wf.events REPLICA IDENTITY FULL;
ALTER TABLE wf.suppressed_events REPLICA IDENTITY FULL;
ALTER TABLE wf.approval_attempts REPLICA IDENTITY FULL;
ALTER TABLE wf.signals REPLICA IDENTITY FULL;
ALTER TABLE wf.buffered_events REPLICA IDENTITY FULL;

-- ---------------------------------------------------------------------------
-- One check per hot table (issue 13)
--
-- Every INSERT or UPDATE statement reads each CHECK constraint of its table
-- back from its node tree and prepares it again; a step of a run writes
-- wf.tasks twice and wf.runs once, and read 8 checks doing it (the status
-- IN lists of 0.1.0 and the positive seq, visit and attempt).  Each table
-- now has one check, a C function of all its checked columns
-- (src/rowcheck.c): the same rules, still check_violation.  Callgrind,
-- per eager step (wf.complete_and_claim): 5 fewer node trees read.
CREATE FUNCTION wf._run_row_ok(status text, seq integer) RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'wfengine_run_row_ok';
CREATE FUNCTION wf._task_row_ok(status text, visit integer, attempt integer) RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'wfengine_task_row_ok';
COMMENT ON FUNCTION wf._run_row_ok(text, integer) IS
'runs_row_check: a status a run is stored with, and seq > 0.';
COMMENT ON FUNCTION wf._task_row_ok(text, integer, integer) IS
'tasks_row_check: ready, leased, completed, failed or cancelled, and visit > 0 and attempt > 0.';
REVOKE ALL ON FUNCTION wf._run_row_ok(text, integer), wf._task_row_ok(text, integer, integer)
    FROM PUBLIC;

ALTER TABLE wf.runs DROP CONSTRAINT runs_status_check, DROP CONSTRAINT runs_seq_check,
    ADD CONSTRAINT runs_row_check CHECK (wf._run_row_ok(status, seq));
ALTER TABLE wf.tasks DROP CONSTRAINT tasks_status_check, DROP CONSTRAINT tasks_visit_check,
    DROP CONSTRAINT tasks_attempt_check,
    ADD CONSTRAINT tasks_row_check CHECK (wf._task_row_ok(status, visit, attempt));

-- ---------------------------------------------------------------------------
-- The inputs at the end of their rows (issue 13)
--
-- A transition rewrites the run row (a HOT update) and finishes an attempt
-- (an update of its row).  PostgreSQL logs of an update on the same page
-- only the bytes between the prefix and the suffix the old and new rows
-- share; in 0.1.0's column order wf.runs.input (and wf.tasks.input) sat
-- between columns that change on every step (current_step, seq ... context,
-- last_hash, updated_at; status ... deadline_at), so every step logged the
-- run's input again.  Moved behind the last column, the input is part of
-- the shared suffix: a step of a run with a 256-byte input logs 256 bytes
-- fewer (docs/benchmarks.md).  The move rewrites each row once, here;
-- SELECT * lists input last.  Nothing else changes: the columns keep their
-- names, types and NOT NULL, no view or index reads them.
ALTER TABLE wf.runs ADD COLUMN input_moved jsonb;
UPDATE wf.runs SET input_moved = input;
ALTER TABLE wf.runs DROP COLUMN input;
ALTER TABLE wf.runs RENAME COLUMN input_moved TO input;
ALTER TABLE wf.runs ALTER COLUMN input SET NOT NULL;

ALTER TABLE wf.tasks ADD COLUMN input_moved jsonb;
UPDATE wf.tasks SET input_moved = input;
ALTER TABLE wf.tasks DROP COLUMN input;
ALTER TABLE wf.tasks RENAME COLUMN input_moved TO input;
ALTER TABLE wf.tasks ALTER COLUMN input SET NOT NULL;

-- The run's context is compressed in its row once it reaches 256 bytes
-- (src/rowwrite.c, WfRowCompress), with the column's compression method.
-- lz4 compresses a context as small as pglz does (about 350 bytes for a
-- 20-step run's) at a fraction of the instructions (callgrind, an eager
-- step: pglz 778 k, lz4 721 k, none 718 k), so the column asks for lz4
-- where the server has it; a server built without lz4 keeps
-- default_toast_compression.
DO $$
BEGIN
    ALTER TABLE wf.runs ALTER COLUMN context SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'wf.runs.context keeps default_toast_compression: this server has no lz4';
END
$$;

-- ==== issue 29: the engine worker never waits for a client's lock ====
-- wf.worker_status() also shows, per engine worker, the due items its
-- last tick left because a transaction holds their rows (due_locked, and
-- the due time of the oldest, due_locked_since) and the notifications the
-- relay dropped for its database (relay_dropped).  The library fills only
-- the columns a definition has, so a database still on 0.1.0 keeps its
-- seven.
DROP FUNCTION wf.worker_status();
CREATE FUNCTION wf.worker_status()
RETURNS TABLE (role text,
               database text,
               pid integer,
               started_at timestamptz,
               next_due timestamptz,
               ticks bigint,
               fired bigint,
               due_locked bigint,
               due_locked_since timestamptz,
               relay_dropped bigint)
AS 'MODULE_PATHNAME', 'wfengine_worker_status'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.worker_status() IS
'The wfengine launcher and engine workers of the whole server, from shared memory: per worker what its last tick left for a lock and the notifications dropped for its database; no rows without preload.';
REVOKE ALL ON FUNCTION wf.worker_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.worker_status() TO wfengine_admin;
-- ==== end issue 29: worker ====
-- ---------------------------------------------------------------------------
-- Issue 29, point 4: an event id is idempotent per (tenant, correlation key)
-- for keep, across runs and across the live and buffered paths of
-- wf.send_event (src/events.c, "Event ids").  Also issue 29's small one: the
-- payload of wf.send_event is a JSON object, as a run's input is.
--
-- wf.event_ids records every event id wf.send_event was given, per tenant
-- and key, until the keep of that send passes (expires_at), whatever the
-- outcome; a send that finds its event id recorded and unexpired answers
-- one row (NULL, 'duplicate') and delivers to no run.  Before, only the
-- buffered path kept the id (wf.buffered_events, for keep) and the live
-- path checked it per run (wf.signals): a repeat after the run that took
-- the event ended was buffered for the next run, and one after another run
-- declared the key went to that run too.  One row of four short columns per
-- send that names an event id (none for a send without one), written under
-- the key's lock; read and written through the primary key; deleted by
-- wf.purge_runs once expired (through expires_at's index, skipping rows a
-- transaction holds).
CREATE TABLE wf.event_ids (
    tenant_id   text NOT NULL,
    key         text NOT NULL,
    event_id    text NOT NULL,
    sent_at     timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key, event_id),
    CHECK (expires_at OPERATOR(pg_catalog.>) sent_at)
);
CREATE INDEX event_ids_expiry_idx ON wf.event_ids (expires_at);
SELECT pg_catalog.pg_extension_config_dump('wf.event_ids', '');
COMMENT ON TABLE wf.event_ids IS
'The event ids wf.send_event() was given, per tenant and correlation key, until the keep of that send passes: a repeat within it is a duplicate, delivered to no run; removed by wf.purge_runs() once expired.';
ALTER TABLE wf.event_ids ENABLE ROW LEVEL SECURITY;
ALTER TABLE wf.event_ids FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON wf.event_ids
    USING (tenant_id OPERATOR(pg_catalog.=) wf.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) wf.current_tenant());
GRANT SELECT ON wf.event_ids TO wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin;
-- the event ids 0.1.0 kept with buffered events stay duplicates for their keep
INSERT INTO wf.event_ids (tenant_id, key, event_id, sent_at, expires_at)
SELECT b.tenant_id, b.key, b.event_id, b.received_at, b.expires_at
FROM wf.buffered_events b
WHERE b.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();

-- a partition's event ids move with it
CREATE OR REPLACE FUNCTION wf._partition_tables()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ARRAY['definitions', 'runs', 'events', 'suppressed_events', 'tasks', 'timers',
             'approvals', 'approval_attempts', 'decide_failures', 'signals', 'correlations',
             'buffered_events', 'event_ids', 'schedules', 'tenant_policies', 'tenant_keys']
$$;

-- wf._event_runs with the event id: records it for the key (NULL: a
-- repeat) before it looks for runs.  It replaces the one-argument form,
-- which no function of 0.2.0 calls (the C function serves both, so a
-- database still on 0.1.0 keeps its wf.send_event).
DROP FUNCTION wf._event_runs(text);
CREATE FUNCTION wf._event_runs(correlation_key text, event_id text, keep interval)
RETURNS uuid[]
AS 'MODULE_PATHNAME', 'wfengine_event_runs'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf._event_runs(text, text, interval) IS
'Internal, for wf.send_event: takes the lock of the correlation key, records the event id for the key until now + keep (wf.event_ids) and returns the live runs of the session''s tenant that declared the key, in run id order; NULL when the key has had the event id within its keep.';
REVOKE ALL ON FUNCTION wf._event_runs(text, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf._event_runs(text, text, interval) TO wfengine_app;

CREATE OR REPLACE FUNCTION wf.send_event(correlation_key text, name text, payload jsonb DEFAULT '{}',
                                         event_id text DEFAULT NULL, keep interval DEFAULT '1 day')
RETURNS TABLE (run_id uuid, outcome text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rid uuid;
    runs uuid[];
    kind text := pg_catalog.jsonb_typeof(payload);
    delivered boolean := false;
BEGIN
    IF correlation_key IS NULL OR correlation_key OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'a correlation key must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the key as "<name>:<value>", e.g. ''shipment:SH-1'', for a definition with {"correlation": {"shipment": "$.input.shipment_id"}}.';
    END IF;
    IF name IS NULL THEN
        RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF keep IS NULL OR keep OPERATOR(pg_catalog.<=) interval '0'
       OR keep OPERATOR(pg_catalog.>) interval '30 days' THEN
        RAISE EXCEPTION 'keep must be between 1 microsecond and 30 days, not %', keep
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'keep is how long an event no run has declared the key for waits for one, and how long its event id is a duplicate, e.g. ''1 day''.';
    END IF;
    -- as wf.start_run refuses a run input that is not an object (SQL NULL: '{}')
    IF kind OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'payload must be a JSON object, not %',
            CASE WHEN kind OPERATOR(pg_catalog.=) 'array' THEN 'an array'
                 WHEN kind OPERATOR(pg_catalog.=) 'null' THEN 'null'
                 ELSE 'a ' OPERATOR(pg_catalog.||) kind END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'An event''s payload is an object such as ''{"amount": 5}'' (''{}'' for none); the wait_event step that takes it reads it as $.steps.<step>.output.payload.';
    END IF;
    PERFORM wf._check_arg('correlation key', correlation_key, 'key');
    PERFORM wf._check_arg('signal name', name, 'signal');
    PERFORM wf._check_arg('event id', event_id, 'key');
    PERFORM wf._check_payload(payload, 'signal payload', pg_catalog.format('signal "%s"', name), false);
    -- refused whether or not a run declared the key, as wf.signal refuses it
    PERFORM wf._refuse_sealed_lookalikes(payload, 'signal payload',
                                         pg_catalog.format('signal "%s"', name));
    -- under the key's lock, which a start declaring the key takes too: the
    -- event id recorded for the key until now + keep (NULL: the key has had
    -- it within its keep, a repeat for no run), then the live runs in run id
    -- order, so that two senders lock the runs in the same order
    runs := wf._event_runs(correlation_key, event_id, keep);
    IF runs IS NULL THEN
        run_id := NULL;
        outcome := 'duplicate';
        RETURN NEXT;
        RETURN;
    END IF;
    FOREACH rid IN ARRAY runs
    LOOP
        run_id := rid;
        BEGIN
            outcome := wf.signal(rid, name, payload, event_id);
            delivered := true;
        EXCEPTION WHEN object_not_in_prerequisite_state THEN
            -- the condition is the whole class 55: a lock timeout (55P03)
            -- is not a run that ended meanwhile, and changes nothing
            IF SQLSTATE OPERATOR(pg_catalog.<>) '55000' THEN
                RAISE;
            END IF;
            outcome := 'ended';     -- it ended meanwhile
        END;
        RETURN NEXT;
    END LOOP;
    -- no live run has the key (yet): kept for the first run that declares it
    IF NOT delivered THEN
        run_id := NULL;
        outcome := wf._buffer_event(correlation_key, name, payload, event_id, keep);
        RETURN NEXT;
    END IF;
END
$$;
COMMENT ON FUNCTION wf.send_event(text, text, jsonb, text, interval) IS
'Sends a signal to every running or paused run that declared the correlation key ("<name>:<value>"): one row per run with wf.signal''s outcome (consumed, stored, duplicate) or ended; when no live run has the key, one row with a null run id: buffered (kept for keep, for the first run that declares the key and waits for the name) or dropped; an event id the key has had within the keep of its first send: one row with a null run id, duplicate, delivered to no run.';
-- ---------------------------------------------------------------------------

-- ===========================================================================
-- Issue 29, points "Internal helpers are not part of any role's API" and
-- "A monitoring role that reads no payload" (helper h-grants).
-- ===========================================================================

-- ---------------------------------------------------------------------------
-- 29: every job role's EXECUTE set is the documented API
--
-- The functions written in SQL or PL/pgSQL that a job role calls used
-- internal helpers as the caller, so the helpers were granted too: a role
-- could call wf._buffer_event directly, skipping the delivery to live runs.
-- Each such function is now a C entry point (src/api.c, WfCallInternal)
-- that runs its body, an internal function of the same name with a
-- leading underscore, as an API call: as the extension's owner, with the
-- caller as the actor of what it records and its tenant as the tenant.  No
-- function of schema wf whose name begins with "_" is granted to any role;
-- docs/reference.md lists what each role may execute, and
-- test/pgtap/060_privileges.sql checks the catalog against that list.

-- the bodies keep their code under the internal names
ALTER FUNCTION wf.send_event(text, text, jsonb, text, interval) RENAME TO _send_event;
ALTER FUNCTION wf.definition_graph(text, integer, text) RENAME TO _definition_graph;
ALTER FUNCTION wf.run_graph(uuid, text) RENAME TO _run_graph;
ALTER FUNCTION wf.schedule(text, text, text, jsonb, integer) RENAME TO _schedule;
COMMENT ON FUNCTION wf._send_event(text, text, jsonb, text, interval) IS
'Internal: the body of wf.send_event, run as an API call by its entry point.';
COMMENT ON FUNCTION wf._definition_graph(text, integer, text) IS
'Internal: the body of wf.definition_graph, run as an API call by its entry point.';
COMMENT ON FUNCTION wf._run_graph(uuid, text) IS
'Internal: the body of wf.run_graph, run as an API call by its entry point.';

-- the body of wf.definition_graph names its version argument by the
-- function's new name
CREATE OR REPLACE FUNCTION wf._definition_graph(definition text, version integer DEFAULT NULL,
                                                format text DEFAULT 'mermaid')
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d wf.definitions;
BEGIN
    IF format IS NULL OR format NOT IN ('mermaid', 'dot') THEN
        RAISE EXCEPTION 'unsupported graph format "%"', format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use format => ''mermaid'' or format => ''dot''.';
    END IF;
    IF version IS NULL THEN
        SELECT * INTO d FROM wf.definitions x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
          AND x.name OPERATOR(pg_catalog.=) definition
        ORDER BY x.version DESC LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'definition "%" does not exist', definition
                USING ERRCODE = 'undefined_object',
                      HINT = 'Publish it first with wf.publish_definition().';
        END IF;
    ELSE
        SELECT * INTO d FROM wf.definitions x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
          AND x.name OPERATOR(pg_catalog.=) definition
          AND x.version OPERATOR(pg_catalog.=) _definition_graph.version;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'version % of definition "%" does not exist', version, definition
                USING ERRCODE = 'undefined_object';
        END IF;
    END IF;
    RETURN wf._graph_render(d.name || ' v' || d.version, d.spec, format);
END
$$;

-- wf.run_graph's body, as the extension's owner, is not held by row-level
-- security: every read names the run's tenant (the run was found for it)
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
    -- branch a choice took, and whether an approval expired.
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
          FROM wf.events e
          WHERE e.run_id OPERATOR(pg_catalog.=) run
            AND e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
            AND e.step IS NOT NULL
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

-- wf.schedule's body, as the caller (the pg_cron job belongs to it): the
-- entry point has checked the arguments (src/schedule.c); the job's command
-- is wf.fire_schedule
CREATE OR REPLACE FUNCTION wf._schedule(name text,
                                        cron text,
                                        definition text,
                                        input jsonb DEFAULT '{}',
                                        version integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant    text := wf.current_tenant();
    v_id        bigint;
    v_owner     name;
    v_old_job   bigint;
    v_job       bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM wf.definitions d
                   WHERE d.tenant_id OPERATOR(pg_catalog.=) v_tenant
                     AND d.name OPERATOR(pg_catalog.=) _schedule.definition
                     AND (_schedule.version IS NULL
                          OR d.version OPERATOR(pg_catalog.=) _schedule.version)) THEN
        IF version IS NULL THEN
            RAISE EXCEPTION 'definition "%" does not exist', definition
                USING ERRCODE = 'undefined_object',
                      HINT = 'Publish it first with wf.publish_definition().';
        END IF;
        RAISE EXCEPTION 'version % of definition "%" does not exist', version, definition
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                   WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        RAISE EXCEPTION 'extension "pg_cron" is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN pg_catalog.current_setting('cron.database_name', true) IS NULL
                           THEN 'pg_cron is not loaded.'
                           ELSE pg_catalog.format('pg_cron runs its jobs in database "%s" (cron.database_name).',
                                                  pg_catalog.current_setting('cron.database_name', true))
                           END,
                  HINT = 'Add pg_cron to shared_preload_libraries, then run CREATE EXTENSION pg_cron and create schedules in the database named by cron.database_name.';
    END IF;

    SELECT s.schedule_id, s.created_by, s.jobid INTO v_id, v_owner, v_old_job
    FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) v_tenant AND s.name OPERATOR(pg_catalog.=) _schedule.name
    FOR UPDATE;
    IF FOUND THEN
        -- pg_cron jobs belong to roles: replacing another role's job would
        -- leave it running under that role
        IF v_owner OPERATOR(pg_catalog.<>) current_user
           AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
            RAISE EXCEPTION 'schedule "%" belongs to role "%"', name, v_owner
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Replace or unschedule it as that role.';
        END IF;
        UPDATE wf.schedules s
        SET cron = _schedule.cron, definition = _schedule.definition, version = _schedule.version,
            input = _schedule.input, updated_at = pg_catalog.clock_timestamp()
        WHERE s.schedule_id OPERATOR(pg_catalog.=) v_id;
    ELSE
        INSERT INTO wf.schedules (tenant_id, name, cron, definition, version, input)
        VALUES (v_tenant, name, cron, definition, version, input)
        RETURNING schedule_id INTO v_id;
    END IF;

    -- same job name and role: pg_cron updates the job in place
    v_job := cron.schedule(pg_catalog.format('wfengine:%s:%s', v_tenant, name), cron,
                           pg_catalog.format('SELECT wf.fire_schedule(%L)', v_id));
    IF v_old_job IS NOT NULL AND v_old_job OPERATOR(pg_catalog.<>) v_job
       AND EXISTS (SELECT 1 FROM cron.job j WHERE j.jobid OPERATOR(pg_catalog.=) v_old_job) THEN
        PERFORM cron.unschedule(v_old_job);
    END IF;
    UPDATE wf.schedules s SET jobid = v_job WHERE s.schedule_id OPERATOR(pg_catalog.=) v_id;
    RETURN v_job;
END
$$;
COMMENT ON FUNCTION wf._schedule(text, text, text, jsonb, integer) IS
'Internal: the body of wf.schedule, called as the caller by its entry point once the arguments are checked.';

-- the entry points
CREATE FUNCTION wf.send_event(correlation_key text, name text, payload jsonb DEFAULT '{}',
                              event_id text DEFAULT NULL, keep interval DEFAULT '1 day')
RETURNS TABLE (run_id uuid, outcome text)
AS 'MODULE_PATHNAME', 'wfengine_send_event'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.send_event(text, text, jsonb, text, interval) IS
'Sends a signal to every running or paused run that declared the correlation key ("<name>:<value>"): one row per run with wf.signal''s outcome (consumed, stored, duplicate) or ended; when no live run has the key, one row with a null run id: buffered (kept for keep, for the first run that declares the key and waits for the name), duplicate or dropped.';

CREATE FUNCTION wf.definition_graph(definition text, version integer DEFAULT NULL,
                                    format text DEFAULT 'mermaid')
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_definition_graph'
LANGUAGE C STABLE;
COMMENT ON FUNCTION wf.definition_graph(text, integer, text) IS
'The steps of a published definition (the latest version unless one is given) as a Mermaid flowchart (format => ''mermaid'') or a Graphviz DOT digraph (format => ''dot'').';

CREATE FUNCTION wf.run_graph(run uuid, format text DEFAULT 'mermaid')
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_run_graph'
LANGUAGE C STABLE;
COMMENT ON FUNCTION wf.run_graph(uuid, text) IS
'The graph of a run''s definition version, as wf.definition_graph draws it, with the steps the run visited, the edges it took, its current step and where it ended marked.';

CREATE OR REPLACE FUNCTION wf.cancel_runs(reason text, filter jsonb DEFAULT '{}',
                                          max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
AS 'MODULE_PATHNAME', 'wfengine_cancel_runs'
LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION wf.retry_runs(reason text, filter jsonb DEFAULT '{}',
                                         max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
AS 'MODULE_PATHNAME', 'wfengine_retry_runs'
LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION wf.resume_runs(reason text, filter jsonb DEFAULT '{}',
                                          max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
AS 'MODULE_PATHNAME', 'wfengine_resume_runs'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.schedule(name text,
                            cron text,
                            definition text,
                            input jsonb DEFAULT '{}',
                            version integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'wfengine_schedule'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.schedule(text, text, text, jsonb, integer) IS
'Creates or replaces a schedule: a pg_cron job that starts a run of definition at every instant matching cron; returns the pg_cron job id.';

CREATE FUNCTION wf.fire_schedule(schedule_id bigint)
RETURNS uuid
AS 'MODULE_PATHNAME', 'wfengine_fire_schedule'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf.fire_schedule(bigint) IS
'The command of a schedule''s pg_cron job: starts the run of the scheduled instant now belongs to, at most once per instant; NULL when the schedule is gone.';
COMMENT ON FUNCTION wf._fire_schedule(bigint) IS
'Internal: the body of wf.fire_schedule, run as an API call by its entry point.';

CREATE FUNCTION wf.cron_next(cron text, after timestamptz DEFAULT pg_catalog.now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'wfengine_cron_next_fire'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf.cron_next(text, timestamptz) IS
'The earliest instant after "after" that matches the cron expression in the time zone pg_cron reads it in (cron.timezone, else GMT): when pg_cron would next run a job of it; NULL if none within eight years.';

-- the next instant of every schedule, with no internal function
CREATE OR REPLACE VIEW wf.schedule_list WITH (security_invoker = true, security_barrier = true) AS
SELECT s.name,
       s.cron,
       s.definition,
       s.version,
       s.input,
       s.jobid,
       wf.cron_next(s.cron, pg_catalog.now()) AS next_fire_at,
       s.last_instant,
       s.last_run_id,
       s.created_by,
       s.created_at,
       s.updated_at
FROM wf.schedules s
WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();

-- the pg_cron jobs of existing schedules run the new command (pg_cron is
-- installed in one database of the server, where its schedules are)
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        EXECUTE $u$UPDATE cron.job j
                   SET command = pg_catalog.regexp_replace(j.command, '^SELECT wf\._fire_schedule\(',
                                                           'SELECT wf.fire_schedule(')
                   WHERE j.command OPERATOR(pg_catalog.~) '^SELECT wf\._fire_schedule\('''$u$;
    END IF;
END
$$;

-- no internal function is granted to any role
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'wf'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.~~) '\_%'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, wfengine_app, wfengine_worker, '
                                  'wfengine_approver, wfengine_operator, wfengine_admin, '
                                  'wfengine_sensitive, pg_monitor', f);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION wf.send_event(text, text, jsonb, text, interval),
    wf.definition_graph(text, integer, text), wf.run_graph(uuid, text),
    wf.schedule(text, text, text, jsonb, integer), wf.fire_schedule(bigint),
    wf.cron_next(text, timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.send_event(text, text, jsonb, text, interval),
    wf.definition_graph(text, integer, text), wf.run_graph(uuid, text)
    TO wfengine_app;
GRANT EXECUTE ON FUNCTION wf.schedule(text, text, text, jsonb, integer), wf.fire_schedule(bigint)
    TO wfengine_admin;
-- wf.schedule_list reads as its caller
GRANT EXECUTE ON FUNCTION wf.cron_next(text, timestamptz)
    TO wfengine_app, wfengine_worker, wfengine_approver;

-- ---------------------------------------------------------------------------
-- 29: wfengine_monitor, a monitoring role that reads no payload
--
-- The statistics views read the engine's tables with the view owner's
-- rights (the extension's owner, whom row-level security does not hold),
-- no longer with the caller's, and choose the tenants themselves: every
-- tenant for a member of wfengine_monitor and for a role that row-level
-- security does not hold (a superuser, a role with BYPASSRLS), the
-- session's tenant for everyone else.  The choice is a list of tenants the
-- scans compare tenant_id with, as an index condition where the index
-- leads with tenant_id (as row-level security's condition was).  Every
-- tenant with rows has a definition (a run needs one), so the tenants of
-- wf.definitions are every tenant.  The views show counts, ages, queue,
-- definition and step names, never an input, output, context, error or
-- payload; wfengine_monitor may read them and the engine's counters, and
-- no table of schema wf (docs/monitoring.md).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles x
                   WHERE x.rolname OPERATOR(pg_catalog.=) 'wfengine_monitor') THEN
        CREATE ROLE wfengine_monitor NOLOGIN;
    END IF;
END
$$;

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
    SELECT t.tenant_id, t.queue,
           pg_catalog.count(*)
               FILTER (WHERE t.claimed_at OPERATOR(pg_catalog.>)
                       (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) AS claims,
           pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'completed') AS completions,
           pg_catalog.count(*) FILTER (WHERE t.status OPERATOR(pg_catalog.=) 'failed') AS failures
    FROM wf.tasks t
    WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
      AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')
      AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
          CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                    OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
               THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
               ELSE ARRAY[wf.current_tenant()] END)
    GROUP BY t.tenant_id, t.queue
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
           pg_catalog.count(*) FILTER (WHERE t.attempt OPERATOR(pg_catalog.>) 1) AS retries,
           pg_catalog.count(*) FILTER (WHERE t.attempt OPERATOR(pg_catalog.=) 1) AS first_attempts
    FROM wf.tasks t
    JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) t.run_id
    WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'cancelled'])
      AND t.finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '5 minutes')
      AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
          CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                    OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
               THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
               ELSE ARRAY[wf.current_tenant()] END)
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

CREATE OR REPLACE VIEW wf.timer_stats WITH (security_invoker = false, security_barrier = true) AS
SELECT tm.tenant_id, tm.kind,
       pg_catalog.count(*) AS pending,
       pg_catalog.count(*) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.<=) pg_catalog.now()) AS due,
       pg_catalog.count(*) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.=) 'infinity') AS held,
       COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
                pg_catalog.min(tm.fire_at) FILTER (WHERE tm.fire_at OPERATOR(pg_catalog.<=) pg_catalog.now())),
                0) AS firing_lag_seconds
FROM wf.timers tm
WHERE tm.status OPERATOR(pg_catalog.=) 'pending'
  AND tm.tenant_id OPERATOR(pg_catalog.=) ANY (
      CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                OR NOT pg_catalog.row_security_active('wf.timers'::pg_catalog.regclass)
           THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
           ELSE ARRAY[wf.current_tenant()] END)
GROUP BY tm.tenant_id, tm.kind
UNION ALL
SELECT t.tenant_id, 'task_deadline',
       pg_catalog.count(*),
       pg_catalog.count(*) FILTER (WHERE t.deadline_at OPERATOR(pg_catalog.<=) pg_catalog.now()),
       0,
       COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
                pg_catalog.min(t.deadline_at) FILTER (WHERE t.deadline_at OPERATOR(pg_catalog.<=) pg_catalog.now())),
                0)
FROM wf.tasks t
WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL
  AND t.tenant_id OPERATOR(pg_catalog.=) ANY (
      CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                OR NOT pg_catalog.row_security_active('wf.tasks'::pg_catalog.regclass)
           THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
           ELSE ARRAY[wf.current_tenant()] END)
GROUP BY t.tenant_id;

CREATE OR REPLACE VIEW wf.approval_stats WITH (security_invoker = false, security_barrier = true) AS
SELECT a.tenant_id, r.definition_name, a.step,
       pg_catalog.count(*) AS open,
       pg_catalog.count(DISTINCT a.run_id) AS runs,
       pg_catalog.count(*) FILTER (WHERE a.approve_hash IS NULL) AS without_token,
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(a.created_at))
           AS oldest_age_seconds,
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(a.expires_at))
           AS oldest_expiry_passed_seconds
FROM wf.approvals a
JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id
WHERE a.status OPERATOR(pg_catalog.=) 'pending'
  AND r.status OPERATOR(pg_catalog.=) 'running'
  AND a.tenant_id OPERATOR(pg_catalog.=) ANY (
      CASE WHEN pg_catalog.pg_has_role('wfengine_monitor', 'USAGE')
                OR NOT pg_catalog.row_security_active('wf.approvals'::pg_catalog.regclass)
           THEN ARRAY(SELECT DISTINCT d.tenant_id FROM wf.definitions d)
           ELSE ARRAY[wf.current_tenant()] END)
GROUP BY a.tenant_id, r.definition_name, a.step;

GRANT USAGE ON SCHEMA wf TO wfengine_monitor;
GRANT SELECT ON wf.queue_stats, wf.run_stats, wf.timer_stats, wf.approval_stats TO wfengine_monitor;
-- the views name wf.current_tenant() for the callers that see one tenant
-- (PostgreSQL checks EXECUTE on every function a query holds, called or not)
GRANT EXECUTE ON FUNCTION wf.current_tenant(), wf.engine_counters(), wf.timer_lag_histogram(),
    wf.claim_latency_histogram(), wf.worker_status()
    TO wfengine_monitor;

-- ==== issue 29: no tenant can lock wf.schedules ====
-- With UPDATE or DELETE on wf.schedules, a tenant's admin could
-- LOCK TABLE wf.schedules IN ACCESS EXCLUSIVE MODE (PostgreSQL allows it to
-- whoever may update or delete) and hold it: every tenant's wf.schedule and
-- every pg_cron job of every schedule would wait behind it.  The admin keeps
-- INSERT and UPDATE of the columns wf.schedule changes (a lock mode no
-- higher than ROW EXCLUSIVE, which nothing of the engine conflicts with);
-- wf.unschedule deletes as the extension's owner, in an API call.
REVOKE UPDATE, DELETE ON wf.schedules FROM wfengine_admin;
GRANT UPDATE (cron, definition, version, input, updated_at, jobid) ON wf.schedules TO wfengine_admin;

CREATE FUNCTION wf._unschedule(caller name, name text)
RETURNS boolean
LANGUAGE plpgsql STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner     name;
    v_job       bigint;
BEGIN
    SELECT s.created_by, s.jobid INTO v_owner, v_job
    FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
      AND s.name OPERATOR(pg_catalog.=) _unschedule.name
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_owner OPERATOR(pg_catalog.<>) caller
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                WHERE r.rolname OPERATOR(pg_catalog.=) caller) THEN
        RAISE EXCEPTION 'schedule "%" belongs to role "%"', name, v_owner
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Unschedule it as that role.';
    END IF;
    DELETE FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
      AND s.name OPERATOR(pg_catalog.=) _unschedule.name;
    -- without pg_cron (dropped since) there is no job left to remove
    IF v_job IS NOT NULL
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                   WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        IF EXISTS (SELECT 1 FROM cron.job j WHERE j.jobid OPERATOR(pg_catalog.=) v_job) THEN
            PERFORM cron.unschedule(v_job);
        END IF;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION wf._unschedule(name, text) IS
'The body of wf.unschedule, run as the extension''s owner; caller is the role that called wf.unschedule.';
REVOKE ALL ON FUNCTION wf._unschedule(name, text) FROM PUBLIC;

DROP FUNCTION wf.unschedule(text);
CREATE FUNCTION wf.unschedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_unschedule'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf.unschedule(text) IS
'Removes a schedule and its pg_cron job; false when there is no schedule of that name.';
REVOKE ALL ON FUNCTION wf.unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.unschedule(text) TO wfengine_admin;
-- ==== end issue 29: schedules ====

-- ==== issue 29: a schedule's pg_cron job never waits long ====
-- pg_cron runs at most cron.max_running_jobs jobs at once, for every
-- tenant: a job that waited for a lock its own tenant's idle transaction
-- holds (the schedule's row, the tenant's start quota) would keep one of
-- them.  It gives up after 5 seconds instead; its instant is then not
-- started (cron.job_run_details has the error) and the next one is.
ALTER FUNCTION wf._fire_schedule(bigint) SET lock_timeout = '5s';
-- ==== end issue 29: schedule jobs ====

-- ==== issue 32: a tenant in a second database ====
-- A tenant is a role, and roles belong to the whole cluster: a tenant made
-- in one database acts in every database of the cluster that has the
-- extension, with nothing to set up there.  wf.create_tenant says so when
-- the role exists already, instead of leaving the caller to guess.
CREATE OR REPLACE FUNCTION wf.create_tenant(tenant text)
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF tenant !~ '^[a-z][a-z0-9_]{0,39}$' OR tenant OPERATOR(pg_catalog.=) 'default' THEN
        RAISE EXCEPTION 'invalid tenant name "%"', tenant
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A tenant name has 1 to 40 lower-case letters, digits or ''_'', starts with a letter, and is not "default".';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE r.rolname OPERATOR(pg_catalog.=) ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)) THEN
        RAISE EXCEPTION 'tenant "%" exists already', tenant
            USING ERRCODE = 'duplicate_object',
                  DETAIL = pg_catalog.format('Its role %I belongs to the whole cluster.', 'wf_tenant_' OPERATOR(pg_catalog.||) tenant),
                  HINT = 'A tenant acts in every database of the cluster that has the extension, with nothing to create there: use it as it is.';
    END IF;
    EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', 'wf_tenant_' OPERATOR(pg_catalog.||) tenant);
    RETURN ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)::name;
END
$$;
-- ==== end issue 32: tenants ====

-- ==== issue 30: listing runs ====
-- wf.list_runs: the caller's runs a filter selects (the keys of the batch
-- commands, any status), at most max_runs in run id order after "after",
-- so that a caller pages through them; no payloads (input, context and
-- output stay behind wf.run_status and wf.history).  Through the router it
-- is routed by the caller's tenant, whose runs are all on one shard.
CREATE FUNCTION wf.list_runs(filter jsonb DEFAULT '{}', max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, definition_name text, definition_version integer, status text,
               current_step text, created_at timestamptz, finished_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    tenant text := wf.current_tenant();
BEGIN
    IF max_runs IS NULL OR max_runs OPERATOR(pg_catalog.<) 1 OR max_runs OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION 'max_runs must be between 1 and 10000, not %', COALESCE(max_runs::text, 'null')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call again with "after" set to the last run id returned to go on.';
    END IF;
    filter := COALESCE(filter, '{}');
    IF pg_catalog.jsonb_typeof(filter) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'a run filter must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Valid keys: definition, version, status, started_after, started_before, finished_after, finished_before.';
    END IF;
    FOR k IN SELECT pg_catalog.jsonb_object_keys(filter) LOOP
        IF k OPERATOR(pg_catalog.<>) ALL (ARRAY['definition', 'version', 'status', 'started_after',
                                               'started_before', 'finished_after', 'finished_before']) THEN
            RAISE EXCEPTION 'unknown run filter key "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid keys: definition, version, status, started_after, started_before, finished_after, finished_before.';
        END IF;
    END LOOP;
    RETURN QUERY
    SELECT x.run_id, x.definition_name, x.definition_version, x.status, x.current_step, x.created_at, x.finished_at
    FROM wf.runs x
    WHERE x.tenant_id OPERATOR(pg_catalog.=) tenant
      AND (NOT filter OPERATOR(pg_catalog.?) 'status' OR x.status OPERATOR(pg_catalog.=) (filter OPERATOR(pg_catalog.->>) 'status'))
      AND (NOT filter OPERATOR(pg_catalog.?) 'definition' OR x.definition_name OPERATOR(pg_catalog.=) (filter OPERATOR(pg_catalog.->>) 'definition'))
      AND (NOT filter OPERATOR(pg_catalog.?) 'version' OR x.definition_version OPERATOR(pg_catalog.=) (filter OPERATOR(pg_catalog.->>) 'version')::integer)
      AND (NOT filter OPERATOR(pg_catalog.?) 'started_after' OR x.created_at OPERATOR(pg_catalog.>=) (filter OPERATOR(pg_catalog.->>) 'started_after')::timestamptz)
      AND (NOT filter OPERATOR(pg_catalog.?) 'started_before' OR x.created_at OPERATOR(pg_catalog.<) (filter OPERATOR(pg_catalog.->>) 'started_before')::timestamptz)
      AND (NOT filter OPERATOR(pg_catalog.?) 'finished_after' OR x.finished_at OPERATOR(pg_catalog.>=) (filter OPERATOR(pg_catalog.->>) 'finished_after')::timestamptz)
      AND (NOT filter OPERATOR(pg_catalog.?) 'finished_before' OR x.finished_at OPERATOR(pg_catalog.<) (filter OPERATOR(pg_catalog.->>) 'finished_before')::timestamptz)
      AND (after IS NULL OR x.run_id OPERATOR(pg_catalog.>) after)
    ORDER BY x.run_id
    LIMIT max_runs;
END
$$;
COMMENT ON FUNCTION wf.list_runs(jsonb, integer, uuid) IS
'The caller''s runs a filter selects (definition, version, status, started_*/finished_*), at most max_runs in run id order after the run id "after"; no payloads.';
REVOKE ALL ON FUNCTION wf.list_runs(jsonb, integer, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.list_runs(jsonb, integer, uuid) TO wfengine_app;
-- ==== end issue 30: listing runs ====

-- ==== issue 30: the runs a move changed ====
-- The cut-over of a move verifies the runs that changed since the copy's
-- last verification; finding them by scanning the partition's runs would
-- make the cut-over (the time the partition is refused) grow with the
-- partition.  A replica trigger of wf.runs, which fires only in the
-- subscription's apply (and table copy), never for the API, notes every
-- run the move wrote here, with when: an index-driven list.
CREATE TABLE wfshard.moved_runs (
    run_id uuid PRIMARY KEY,
    changed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE wfshard.moved_runs IS
'The runs a move''s subscription wrote on this shard, with when (wf._note_moved_run): what the cut-over verifies. Emptied when a move begins and when it cuts over.';
CREATE INDEX moved_runs_changed_idx ON wfshard.moved_runs (changed_at);
CREATE FUNCTION wf._note_moved_run()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO wfshard.moved_runs (run_id) VALUES (NEW.run_id)
        ON CONFLICT (run_id) DO UPDATE SET changed_at = pg_catalog.clock_timestamp();
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION wf._note_moved_run() FROM PUBLIC;
CREATE TRIGGER runs_moved AFTER INSERT OR UPDATE ON wf.runs
    FOR EACH ROW EXECUTE FUNCTION wf._note_moved_run();
ALTER TABLE wf.runs ENABLE REPLICA TRIGGER runs_moved;

-- ==== end issue 30: the runs a move changed ====
