-- scenario: an attempt that no worker claimed does not count against
-- max_attempts: pause and resume before any claim use up nothing (issue 11)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('paused_twice', '{"steps": [
  {"name": "call", "queue": "pa_q",
   "retry": {"max_attempts": 2, "initial_interval": "10ms", "jitter": 0}}]}');
SELECT wf.start_run('paused_twice', '{}') AS run \gset

-- two pause/resume cycles before any claim: each withdraws the unclaimed
-- attempt and schedules the next attempt number
SELECT wf.pause_run(:'run', 'maintenance 1');
SELECT wf.resume_run(:'run', 'maintenance 1 over');
SELECT wf.pause_run(:'run', 'maintenance 2');
SELECT wf.resume_run(:'run', 'maintenance 2 over');
SELECT attempt, status, deliveries FROM wf.tasks WHERE run_id = :'run' ORDER BY attempt;

-- the first real failure is not final: one of two attempts is used
SELECT task_id AS t, fence AS f, attempt, idempotency_key AS key FROM wf.claim_tasks('pa_q', 'w') \gset
\echo attempt :attempt
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT wf.run_status(:'run');
SELECT type, attempt, payload->>'final' AS final, payload ? 'next_attempt_at' AS will_retry
FROM wf.history(:'run') WHERE type = 'task_failed' ORDER BY seq;

-- the second claimed attempt is the last one
SELECT pg_sleep(0.05);
SELECT wf.tick() > 0 AS fired;
SELECT task_id AS t, fence AS f, attempt, idempotency_key = :'key' AS same_key
FROM wf.claim_tasks('pa_q', 'w') \gset
\echo attempt :attempt same_key :same_key
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT wf.run_status(:'run');
SELECT type, attempt, payload->>'final' AS final, payload ? 'next_attempt_at' AS will_retry
FROM wf.history(:'run') WHERE type = 'task_failed' ORDER BY seq;
SELECT payload->>'reason' AS reason FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT wf.verify_run(:'run');

-- an attempt that a worker claimed counts, even when a pause withdraws it
-- after its lease expired (it went back to ready)
SELECT wf.publish_definition('claimed_then_paused', '{"steps": [
  {"name": "call", "queue": "pa_q2",
   "retry": {"max_attempts": 2, "initial_interval": "10ms", "jitter": 0}}]}');
SELECT wf.start_run('claimed_then_paused', '{}') AS run2 \gset
SELECT task_id AS t FROM wf.claim_tasks('pa_q2', 'w-dies', 1, '1 millisecond') \gset
SELECT pg_sleep(0.02);
SELECT wf.tick() > 0 AS expired;
SELECT status, deliveries FROM wf.tasks WHERE task_id = :t;
SELECT wf.pause_run(:'run2', 'maintenance');
SELECT wf.resume_run(:'run2', 'maintenance over');
SELECT task_id AS t, fence AS f, attempt FROM wf.claim_tasks('pa_q2', 'w') \gset
\echo attempt :attempt
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT wf.run_status(:'run2'), wf.verify_run(:'run2');
SELECT type, attempt, payload->>'final' AS final FROM wf.history(:'run2') WHERE type = 'task_failed';

-- scenario: a result held while the run is paused, then the run is
-- terminated (or cancelled): the held result is never applied, the attempt
-- keeps the report it was accepted with, and the run verifies (found by the
-- API fuzzer: verify_run said "Task <n> is "completed", but the history
-- cancelled it")
SELECT wf.publish_definition('held_then_ended', '{"steps": [{"name": "a", "queue": "pa_q3"}]}');
SELECT wf.start_run('held_then_ended', '{}') AS run3 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('pa_q3', 'w') \gset
SELECT wf.pause_run(:'run3', 'look first');
SELECT wf.complete_task(:t, :f, '{"done": true}');
SELECT wf.terminate_run(:'run3', 'not wanted');
SELECT status FROM wf.tasks WHERE task_id = :t;
SELECT type FROM wf.history(:'run3') ORDER BY seq;
SELECT wf.run_status(:'run3'), wf.verify_run(:'run3');
SELECT wf.start_run('held_then_ended', '{}') AS run4 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('pa_q3', 'w') \gset
SELECT wf.pause_run(:'run4', 'look first');
SELECT wf.fail_task(:t, :f, '{"code": "boom"}', false);
SELECT wf.cancel_run(:'run4', 'not wanted');
SELECT wf.run_status(:'run4'), wf.verify_run(:'run4');
