-- scenario: wf.explain says where a run is and why it waits
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('ex', '{"steps": [
  {"name": "work", "queue": "ex_q", "retry": {"max_attempts": 2, "initial_interval": "1h"}},
  {"name": "nap", "type": "sleep", "duration": "1h"},
  {"name": "ok", "type": "approval", "approvers": ["liz"], "notify_queue": "ex_mail"}]}');
SELECT wf.start_run('ex', '{"n": 1}') AS ahead \gset
SELECT wf.start_run('ex', '{"n": 2}') AS run \gset
SELECT e->>'status' AS status, e->>'step' AS step, e->>'waiting_for' AS waiting_for,
       e->'details'->>'queue' AS queue, e->'details'->>'ahead' AS ahead, e->'commands' AS commands
FROM wf.explain(:'run') e;
-- a worker holds it
SELECT task_id AS t0, fence AS f0 FROM wf.claim_tasks('ex_q', 'w1') \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('ex_q', 'w2') \gset
SELECT e->>'waiting_for' AS waiting_for, e->'details'->>'worker' AS worker, e->'details'->>'attempt' AS attempt
FROM wf.explain(:'run') e;
-- a failure: backing off until the retry
SELECT wf.fail_task(:t, :f, '{"code": "busy"}');
SELECT e->>'waiting_for' AS waiting_for, e->'details'->>'next_attempt' AS next_attempt,
       (e->'details'->>'until')::timestamptz > now() + interval '40 minutes' AS within_the_hour
FROM wf.explain(:'run') e;
-- the other run sleeps, then waits for approval
SELECT wf.complete_task(:t0, :f0, '{}');
SELECT e->>'step' AS step, e->>'waiting_for' AS waiting_for FROM wf.explain(:'ahead') e;
UPDATE wf.timers SET fire_at = now() - interval '1 second' WHERE run_id = :'ahead' AND status = 'pending';
SELECT wf.tick() > 0 AS fired;
SELECT e->>'step' AS step, e->>'waiting_for' AS waiting_for, e->'details'->'approval'->'pending' AS pending,
       e->'details'->'notification'->>'waiting_for' AS notification, e->'commands' AS commands
FROM wf.explain(:'ahead') e;
SELECT wf.explain('00000000-0000-0000-0000-000000000000');
