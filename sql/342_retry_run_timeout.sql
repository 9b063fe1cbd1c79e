-- scenario: wf.retry_step after a run timeout gives the run its time limit
-- back, counted from the retry, or the one the operator passes (issue 11)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('bounded', '{"timeout": "200ms", "steps": [
  {"name": "work", "queue": "rt_q"}]}');
SELECT wf.start_run('bounded', '{}') AS run \gset
SELECT pg_sleep(0.25);
SELECT wf.tick() > 0 AS fired;
SELECT wf.run_status(:'run');
SELECT payload->>'reason' AS reason, payload->>'step' AS step FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT count(*) AS pending_timers FROM wf.timers WHERE run_id = :'run' AND status = 'pending';

-- retried as before (two arguments): the definition's timeout, from now
SELECT clock_timestamp() AS before_retry \gset
SELECT wf.retry_step(:'run', 'upstream fixed');
SELECT kind, status, fire_at >= :'before_retry'::timestamptz + interval '200 ms' AS from_the_retry,
       fire_at <= clock_timestamp() + interval '200 ms' AS not_later
FROM wf.timers WHERE run_id = :'run' AND status = 'pending';
SELECT type, payload->>'kind' AS kind FROM wf.history(:'run')
WHERE seq > (SELECT max(seq) FROM wf.history(:'run') WHERE type = 'run_failed') ORDER BY seq;
-- it times out again
SELECT pg_sleep(0.25);
SELECT wf.tick() > 0 AS fired;
SELECT wf.run_status(:'run');
SELECT count(*) AS run_timeouts FROM wf.history(:'run')
WHERE type = 'run_failed' AND payload->>'reason' = 'run_timeout';

-- the operator gives it another limit
SELECT wf.retry_step(:'run', 'one more try', '1 hour');
SELECT kind, fire_at > clock_timestamp() + interval '59 minutes' AS an_hour_from_now,
       fire_at <= clock_timestamp() + interval '1 hour' AS not_later
FROM wf.timers WHERE run_id = :'run' AND status = 'pending';
SELECT pg_sleep(0.25);
SELECT wf.tick();
SELECT wf.run_status(:'run');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('rt_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"done": true}');
SELECT wf.run_status(:'run'), wf.verify_run(:'run');
SELECT count(*) AS pending_timers FROM wf.timers WHERE run_id = :'run' AND status = 'pending';

-- a definition without a timeout: a retry has none, unless one is passed
SELECT wf.publish_definition('unbounded', '{"steps": [
  {"name": "work", "queue": "rt_q2", "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('unbounded', '{}') AS run2 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('rt_q2', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "boom"}', false);
SELECT wf.retry_step(:'run2', 'again');
SELECT count(*) AS run_timeout_timers FROM wf.timers WHERE run_id = :'run2' AND kind = 'run_timeout';
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('rt_q2', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "boom"}', false);
SELECT wf.retry_step(:'run2', 'again, bounded', '100 ms');
SELECT pg_sleep(0.15);
SELECT wf.tick() > 0 AS fired;
SELECT wf.run_status(:'run2'), wf.verify_run(:'run2');
SELECT payload->>'reason' AS reason FROM wf.history(:'run2') WHERE type = 'run_failed' ORDER BY seq;

-- run_timeout must be positive and at most 366 days
SELECT wf.publish_definition('unbounded2', '{"steps": [
  {"name": "work", "queue": "rt_q3", "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('unbounded2', '{}') AS run3 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('rt_q3', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "boom"}', false);
SELECT wf.retry_step(:'run3', 'zero', '0 seconds');
SELECT wf.retry_step(:'run3', 'negative', '-1 second');
SELECT wf.retry_step(:'run3', 'too long', '367 days');
SELECT wf.run_status(:'run3');
