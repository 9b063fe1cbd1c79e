-- scenario: monitoring (issue 14.2): the engine counters count what commits, per verdict;
-- the stats views show each tenant its own queues, runs, timers and approvals; a run's
-- W3C traceparent is checked, recorded in run_started and handed to its workers
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
DROP ROLE IF EXISTS regress_met_app, regress_met_worker, regress_met_other, regress_met_monitor;
DROP ROLE IF EXISTS wf_tenant_met_a, wf_tenant_met_b;
RESET client_min_messages;

-- the counters are cumulative per database: the test looks at what each step adds
CREATE TEMP TABLE seen AS SELECT name, value FROM wf.engine_counters();
-- (sums of microseconds vary from run to run: only that they grew is shown)
CREATE FUNCTION pg_temp.added() RETURNS TABLE (name text, added text)
LANGUAGE sql AS $$
    WITH now_ AS (SELECT name, value FROM wf.engine_counters()),
         d AS (SELECT n.name, n.value - s.value AS added FROM now_ n JOIN seen s USING (name)
               WHERE n.value <> s.value),
         upd AS (UPDATE seen s SET value = n.value FROM now_ n WHERE n.name = s.name)
    SELECT name, CASE WHEN name LIKE '%\_sum\_us' THEN 'grew' ELSE added::text END
    FROM d ORDER BY name
$$;
-- every counter and histogram is listed, with a value
SELECT count(*) AS counters, count(*) FILTER (WHERE value IS NULL) AS nulls FROM wf.engine_counters();
SELECT name FROM wf.engine_counters() ORDER BY name;

SELECT wf.publish_definition('met_flow', '{"steps": [
  {"name": "charge", "queue": "met_q",
   "retry": {"max_attempts": 2, "initial_interval": "10ms", "backoff_coefficient": 1, "jitter": 0}},
  {"name": "ship", "queue": "met_q2"}]}');
SELECT * FROM pg_temp.added();

-- a start, a failure that is retried on a timer, a completion and a duplicate
SELECT wf.start_run('met_flow', '{"n": 1}', NULL, NULL,
                    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') AS run \gset
SELECT * FROM pg_temp.added();
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('met_q', 'w1') \gset
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}');
SELECT * FROM pg_temp.added();
SELECT pg_sleep(0.05);
SELECT wf.tick();
SELECT * FROM pg_temp.added();
SELECT task_id AS t, fence AS f, attempt FROM wf.claim_tasks('met_q', 'w1') \gset
SELECT wf.complete_task(:t, :f, '{}'), wf.complete_task(:t, :f, '{}');
SELECT * FROM pg_temp.added();
-- an old fence is stale
SELECT wf.complete_task(:t, :f - 1, '{}');
SELECT * FROM pg_temp.added();
-- the timer's lag is in its histogram: cumulative, the last bucket holds every firing
SELECT count(*) AS buckets, bool_and(le > 0) AS positive,
       (array_agg(le ORDER BY le DESC))[1] AS last_le
FROM wf.timer_lag_histogram();
SELECT (SELECT count FROM wf.timer_lag_histogram() WHERE le = 'Infinity') =
       (SELECT value FROM wf.engine_counters() WHERE name = 'timer_lag_count') AS all_in_last_bucket;
SELECT bool_and(c >= p) AS cumulative
FROM (SELECT count AS c, lag(count, 1, 0::bigint) OVER (ORDER BY le) AS p FROM wf.timer_lag_histogram()) h;

-- what rolls back is not counted: a transaction, a subtransaction
BEGIN;
SELECT wf.start_run('met_flow', '{"n": 2}') IS NOT NULL AS started;
ROLLBACK;
SELECT * FROM pg_temp.added();
BEGIN;
SAVEPOINT s1;
SELECT wf.start_run('met_flow', '{"n": 3}') IS NOT NULL AS started;
SAVEPOINT s2;
SELECT wf.start_run('met_flow', '{"n": 4}') IS NOT NULL AS started;
RELEASE s2;
ROLLBACK TO s1;
SAVEPOINT s3;
SELECT wf.start_run('met_flow', '{"n": 5}') IS NOT NULL AS started;
RELEASE s3;
COMMIT;
SELECT * FROM pg_temp.added();

-- a claim of several tasks counts each (a claim woken by another session's commit is in
-- test/t/110_metrics.pl)
SELECT count(*) AS claimed FROM wf.claim_tasks('met_q', 'w1', 10);
SELECT * FROM pg_temp.added();

-- the trace context
SELECT wf.run_traceparent(:'run');
SELECT payload->>'traceparent' AS recorded FROM wf.history(:'run') WHERE type = 'run_started';
SELECT r.step, wf.run_traceparent(:'run') FROM wf.history(:'run') r
WHERE r.type = 'task_scheduled' ORDER BY seq;
SELECT wf.verify_run(:'run');
SELECT wf.run_traceparent(wf.start_run('met_flow')) IS NULL AS none_given;
SELECT wf.start_run('met_flow', '{}', traceparent => NULL) IS NOT NULL AS null_is_none;
-- strictly version 00, lower-case hex, the right lengths, no all-zero id
\set VERBOSITY terse
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-00000000000000000000000000000000-00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1g');
SELECT wf.start_run('met_flow', '{}', NULL, NULL, '');
\set VERBOSITY default
-- one signature: four arguments or fewer are not ambiguous
SELECT count(*) AS start_run_signatures FROM pg_proc WHERE oid::regprocedure::text LIKE 'wf.start_run(%';
SELECT pg_get_function_arguments('wf.start_run'::regproc);

-- the views, per tenant (row-level security as the caller)
SELECT wf.create_tenant('met_a'), wf.create_tenant('met_b');
CREATE ROLE regress_met_app IN ROLE wfengine_app, wfengine_admin;
CREATE ROLE regress_met_worker IN ROLE wfengine_worker;
CREATE ROLE regress_met_other IN ROLE wfengine_app, wfengine_admin;
CREATE ROLE regress_met_monitor IN ROLE pg_monitor;
SELECT wf.add_tenant_member('met_a', 'regress_met_app'), wf.add_tenant_member('met_a', 'regress_met_worker'),
       wf.add_tenant_member('met_b', 'regress_met_other');
SET SESSION AUTHORIZATION regress_met_other;
SELECT wf.publish_definition('b_flow', '{"steps": [{"name": "x", "queue": "b_q"}]}');
SELECT wf.start_run('b_flow') IS NOT NULL AS started;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_met_app;
SELECT wf.publish_definition('a_flow', '{"timeout": "1d", "steps": [
  {"name": "work", "queue": "a_q", "retry": {"max_attempts": 2, "initial_interval": "1h"}},
  {"name": "sign", "type": "approval", "approvers": ["alice", "bob"], "notify_queue": "a_mail",
   "expires": "1d"}]}');
SELECT wf.start_run('a_flow', '{"k": 1}') AS a1 \gset
SELECT wf.start_run('a_flow', '{"k": 2}') AS a2 \gset
SELECT wf.start_run('a_flow', '{"k": 3}') AS a3 \gset
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_met_worker;
SELECT count(*) AS claimed FROM wf.claim_tasks('a_q', 'wa', 2);
-- the worker sees the trace context beside the claim: none here
SELECT t.step, wf.run_traceparent(t.run_id) IS NULL AS no_trace FROM wf.claim_tasks('a_q', 'wa', 1) t;
SELECT task_id AS t1, fence AS f1 FROM wf.tasks WHERE run_id = :'a1' AND status = 'leased' \gset
SELECT task_id AS t2, fence AS f2 FROM wf.tasks WHERE run_id = :'a2' AND status = 'leased' \gset
SELECT wf.complete_task(:t1, :f1, '{}');
SELECT wf.fail_task(:t2, :f2, '{"code": "later"}');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_met_app;
SELECT queue, ready, leased, oldest_ready_age_seconds >= 0 AS age_ok, claims_1m, completions_1m,
       failures_1m, expired_leases
FROM wf.queue_stats ORDER BY queue;
SELECT definition_name, definition_version, running, paused, undoing, completed_5m, failed_5m,
       stopped_5m, duration_p50_seconds IS NULL AS no_p50, failure_rate_5m, retries_5m, retries_per_step_5m
FROM wf.run_stats ORDER BY definition_name;
SELECT kind, pending, due, held, firing_lag_seconds FROM wf.timer_stats ORDER BY kind;
SELECT definition_name, step, open, runs, without_token, oldest_age_seconds >= 0 AS age_ok
FROM wf.approval_stats;
-- a tenant's application may not read the counters of the whole database
SELECT name FROM wf.engine_counters() LIMIT 1;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_met_other;
SELECT queue, ready, leased FROM wf.queue_stats ORDER BY queue;
SELECT definition_name, running FROM wf.run_stats;
SELECT count(*) AS approvals FROM wf.approval_stats;
RESET SESSION AUTHORIZATION;
-- a superuser (no row-level security) sees every tenant, by tenant_id
SELECT tenant_id, queue, ready, leased FROM wf.queue_stats ORDER BY tenant_id, queue;
-- pg_monitor reads the counters
SET SESSION AUTHORIZATION regress_met_monitor;
SELECT count(*) > 0 AS readable FROM wf.engine_counters();
SELECT count(*) AS buckets FROM wf.claim_latency_histogram();
RESET SESSION AUTHORIZATION;

DROP EXTENSION wfengine CASCADE;
DROP ROLE regress_met_app, regress_met_worker, regress_met_other, regress_met_monitor;
DROP ROLE wf_tenant_met_a, wf_tenant_met_b;
