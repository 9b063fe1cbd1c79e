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
    wf.start_runs(text, jsonb[], text[], integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wf.start_runs(text, jsonb[], text[], integer) TO wfengine_app;
GRANT EXECUTE ON FUNCTION
    wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval),
    wf.fail_and_claim(bigint, bigint, jsonb, boolean, text, text, integer, interval),
    wf.complete_tasks(bigint[], bigint[], jsonb[]),
    wf.fail_tasks(bigint[], bigint[], jsonb[], boolean[])
    TO wfengine_worker;
