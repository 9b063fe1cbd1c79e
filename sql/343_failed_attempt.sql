-- scenario: run_failed names the attempt the run failed at, not 0 (issue 11)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('twice', '{"steps": [
  {"name": "call", "queue": "fa_q",
   "retry": {"max_attempts": 2, "initial_interval": "10ms", "jitter": 0}}]}');

-- the last attempt fails for good (attempts exhausted)
SELECT wf.start_run('twice', '{}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('fa_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT pg_sleep(0.05);
SELECT wf.tick() > 0 AS fired;
SELECT task_id AS t, fence AS f, attempt FROM wf.claim_tasks('fa_q', 'w') \gset
\echo attempt :attempt
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT type, attempt, payload->>'attempt' AS failed_attempt, payload->>'step' AS step,
       payload->>'reason' AS reason
FROM wf.history(:'run') WHERE type IN ('task_failed', 'run_failed') ORDER BY seq;
SELECT wf.verify_run(:'run');

-- a non-retryable failure of the first attempt
SELECT wf.start_run('twice', '{}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('fa_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "declined"}', false);
SELECT payload->>'attempt' AS failed_attempt, payload->>'reason' AS reason
FROM wf.history(:'run') WHERE type = 'run_failed';

-- a run timeout while an attempt is in flight names that attempt
SELECT wf.publish_definition('timed', '{"timeout": "100ms", "steps": [{"name": "call", "queue": "fa_q2"}]}');
SELECT wf.start_run('timed', '{}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('fa_q2', 'w', 1, '1 hour') \gset
SELECT pg_sleep(0.15);
SELECT wf.tick() > 0 AS fired;
SELECT payload->>'attempt' AS failed_attempt, payload->>'reason' AS reason
FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT wf.verify_run(:'run');

-- ... and one while the run waits for a retry names the attempt that failed
SELECT wf.publish_definition('timed_retry', '{"timeout": "100ms", "steps": [
  {"name": "call", "queue": "fa_q3", "retry": {"max_attempts": 5, "initial_interval": "1h"}}]}');
SELECT wf.start_run('timed_retry', '{}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('fa_q3', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "flaky"}', true);
SELECT pg_sleep(0.15);
SELECT wf.tick() > 0 AS fired;
SELECT payload->>'attempt' AS failed_attempt, payload->>'reason' AS reason
FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT wf.verify_run(:'run');
