-- scenario: eager start (issue 31): wf.start_and_claim starts a run and
-- hands its first task attempt to the calling worker, leased, in one call
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('sc_flow', '{"steps": [
  {"name": "first", "queue": "sc_q", "input": {"n": "$.input.n"}},
  {"name": "second", "queue": "sc_q"}]}');
SELECT wf.publish_definition('sc_sleepy', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "1h"},
  {"name": "after", "queue": "sc_q"}]}');

-- the first task comes back leased to the worker, with the columns of
-- wf.claim_tasks; a claim of the queue finds nothing left
SELECT task_id AS t, run_id AS r, fence AS f FROM wf.start_and_claim('sc_flow', '{"n": 1}', 'w1') \gset
SELECT step, attempt, fence > 0 AS fenced, input, idempotency_key IS NOT NULL AS has_key,
       lease_expires_at BETWEEN now() + interval '29 seconds' AND now() + interval '31 seconds' AS default_lease,
       queue, activity, deliveries
FROM wf.start_and_claim('sc_flow', '{"n": 2}', 'w1');
SELECT status, worker, deliveries, fence = :f AS same_fence FROM wf.tasks WHERE task_id = :t;
SELECT count(*) AS left_to_claim FROM wf.claim_tasks('sc_q', 'w2', 10)
WHERE run_id = :'r';
-- no event for the lease: the history is that of wf.start_run
SELECT seq, type, step FROM wf.history(:'r') ORDER BY seq;
-- the lease is the worker's: it completes under the fence, and the run goes on
SELECT wf.complete_task(:t, :f, '{"done": 1}');
SELECT current_step, status FROM wf.runs WHERE run_id = :'r';
SELECT wf.verify_run(:'r') AS verified;

-- the lease asked for, and a name for the worker
SELECT lease_expires_at BETWEEN now() + interval '4 minutes' AND now() + interval '6 minutes' AS five_minutes
FROM wf.start_and_claim('sc_flow', '{}', 'w3', '5 minutes');

-- a first step that is not a task: the run's id and NULLs
SELECT task_id IS NULL AS no_task, run_id IS NOT NULL AS has_run, fence IS NULL AS no_fence
FROM wf.start_and_claim('sc_sleepy', '{}', 'w1');

-- an idempotency key: a repeat returns the run, and leases nothing again
SELECT task_id AS kt, run_id AS kr FROM wf.start_and_claim('sc_flow', '{"n": 3}', 'w1', idempotency_key => 'order-7') \gset
SELECT run_id = :'kr' AS same_run, task_id IS NULL AS nothing_leased
FROM wf.start_and_claim('sc_flow', '{"n": 3}', 'w2', idempotency_key => 'order-7');
SELECT count(*) AS runs, min(t.worker) AS worker FROM wf.runs r JOIN wf.tasks t USING (run_id)
WHERE r.idempotency_key = 'order-7';
-- the same key with another input is refused, as by wf.start_run
SELECT * FROM wf.start_and_claim('sc_flow', '{"n": 4}', 'w1', idempotency_key => 'order-7');

-- a tenant that limits its tasks in flight: the first task is leased while
-- there is room (counted), then the run starts with its task ready
SELECT count(*) + 1 AS room_for_one FROM wf.tasks WHERE status = 'leased' \gset
SELECT max_tasks_in_flight = :room_for_one AS limited
FROM wf.set_tenant_policy('default', jsonb_build_object('max_tasks_in_flight', :room_for_one));
SELECT task_id IS NOT NULL AS leased_one FROM wf.start_and_claim('sc_flow', '{}', 'w1');
SELECT task_id IS NULL AS no_room, run_id AS full_run FROM wf.start_and_claim('sc_flow', '{}', 'w1') \gset
\echo :no_room
SELECT status FROM wf.tasks WHERE run_id = :'full_run';
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": null}');

-- refusals: nothing is started
SELECT count(*) AS runs_before FROM wf.runs \gset
SELECT * FROM wf.start_and_claim('sc_flow', '{}', NULL);
SELECT * FROM wf.start_and_claim('sc_flow', '{}', '');
SELECT * FROM wf.start_and_claim('sc_flow', '{}', 'w1', '0 seconds');
SELECT * FROM wf.start_and_claim('sc_flow', '{}', 'w1', NULL);
SELECT * FROM wf.start_and_claim('no_such_flow', '{}', 'w1');
SELECT * FROM wf.start_and_claim(NULL, '{}', 'w1');
SELECT * FROM wf.start_and_claim('sc_flow', NULL, 'w1');
SELECT * FROM wf.start_and_claim('sc_flow', '[1]', 'w1');
SELECT * FROM wf.start_and_claim('sc_flow', '{}', 'w1', idempotency_key => '');
SELECT count(*) = :runs_before AS nothing_started FROM wf.runs;

-- it starts runs and leases tasks: an application login without the
-- worker's role may not call it
SELECT wf.create_tenant('sc_t') AS tenant_role;
CREATE ROLE regress_sc_app LOGIN IN ROLE wfengine_admin, wf_tenant_sc_t;
CREATE ROLE regress_sc_both LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_sc_t;
SET SESSION AUTHORIZATION regress_sc_app;
SELECT wf.publish_definition('sc_flow', '{"steps": [{"name": "only", "queue": "sc_q"}]}');
SELECT * FROM wf.start_and_claim('sc_flow', '{}', 'w1');
SET SESSION AUTHORIZATION regress_sc_both;
SELECT step, deliveries FROM wf.start_and_claim('sc_flow', '{}', 'w1');
RESET SESSION AUTHORIZATION;
SELECT tenant_id, count(*) FROM wf.runs WHERE tenant_id = 'sc_t' GROUP BY 1;
DROP OWNED BY regress_sc_app, regress_sc_both;
DROP ROLE regress_sc_app;
DROP ROLE regress_sc_both;
DROP ROLE wf_tenant_sc_t;
