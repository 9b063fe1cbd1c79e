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
