-- scenario: failures, retries with backoff, exhausted retries, non-retryable errors
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('flaky', '{"steps": [
  {"name": "call", "queue": "flaky_q",
   "retry": {"max_attempts": 3, "initial_interval": "10ms", "backoff_coefficient": 2,
             "max_interval": "1s", "jitter": 0.5, "non_retryable_errors": ["card_declined"]}},
  {"name": "after", "queue": "flaky_after"}]}');

-- retries to success: fail twice, then complete
SELECT wf.start_run('flaky', '{"n": 1}') AS run \gset
SELECT task_id AS t, fence AS f, idempotency_key AS key1 FROM wf.claim_tasks('flaky_q', 'w') \gset
SELECT clock_timestamp() AS before_fail \gset
SELECT wf.fail_task(:t, :f, '{"code": "timeout", "message": "upstream timed out"}');
-- the next attempt waits for its backoff on a durable timer: 10ms, less up to 50% jitter
SELECT attempt, status, fence FROM wf.tasks WHERE run_id = :'run' ORDER BY attempt;
SELECT kind, step, status, payload->'attempt' AS next_attempt,
       fire_at >= :'before_fail'::timestamptz + interval '5 ms' AS not_before_min,
       fire_at <= clock_timestamp() + interval '10 ms' AS not_after_max
FROM wf.timers WHERE run_id = :'run';
SELECT current_step, current_task IS NULL AS no_live_task, wait_generation > 0 AS waiting
FROM wf.runs WHERE run_id = :'run';
SELECT pg_sleep(0.05);
-- the timer fires (the engine worker does this; wf.tick() does it now)
SELECT wf.tick();
SELECT kind, status, outcome FROM wf.timers WHERE run_id = :'run';
SELECT task_id AS t, fence AS f, attempt, idempotency_key = :'key1' AS same_key
FROM wf.claim_tasks('flaky_q', 'w') \gset
\echo attempt :attempt same_key :same_key
SELECT wf.fail_task(:t, :f, '{"code": "timeout"}');
SELECT pg_sleep(0.1);
SELECT wf.tick();
SELECT task_id AS t, fence AS f, attempt FROM wf.claim_tasks('flaky_q', 'w') \gset
\echo attempt :attempt
SELECT wf.complete_task(:t, :f, '{"ok": true}');
SELECT wf.run_status(:'run'), current_step FROM wf.runs WHERE run_id = :'run';
SELECT seq, type, step, attempt, payload->'error' AS error, payload->>'final' AS final,
       payload ? 'next_attempt_at' AS will_retry, payload->>'kind' AS timer, payload->>'outcome' AS outcome
FROM wf.history(:'run') WHERE type <> 'run_started';
SELECT context->'steps'->'call' AS call FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- retries exhausted: the step and the run fail
SELECT wf.start_run('flaky', '{"n": 2}') AS run \gset
DO $$
DECLARE
    t record;
    i int;
BEGIN
    FOR i IN 1..3 LOOP
        PERFORM pg_sleep(0.25);
        PERFORM wf.tick();
        SELECT * INTO t FROM wf.claim_tasks('flaky_q', 'w');
        RAISE NOTICE 'attempt %: %', t.attempt, wf.fail_task(t.task_id, t.fence, '{"code": "boom"}');
    END LOOP;
END
$$;
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT type, step, attempt, payload->>'reason' AS reason, payload->>'final' AS final
FROM wf.history(:'run') WHERE type IN ('task_failed', 'run_failed');
SELECT count(*) AS live_tasks FROM wf.tasks WHERE run_id = :'run' AND status IN ('ready', 'leased');
SELECT wf.verify_run(:'run');

-- a non-retryable failure fails the run at once
SELECT wf.start_run('flaky', '{"n": 3}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('flaky_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "invalid_input"}', false);
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT type, payload->>'reason' AS reason FROM wf.history(:'run') WHERE type = 'run_failed';

-- an error code listed in non_retryable_errors fails the run too
SELECT wf.start_run('flaky', '{"n": 4}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('flaky_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "card_declined", "message": "insufficient funds"}');
SELECT type, payload->>'reason' AS reason, payload->'error'->>'message' AS message
FROM wf.history(:'run') WHERE type = 'run_failed';
-- a later report for the failed run is recorded as a duplicate and changes nothing
SELECT wf.complete_task(:t, :f, '{}');
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- a long backoff is not claimable early
SELECT wf.publish_definition('slow_retry', '{"steps": [
  {"name": "call", "queue": "slow_q", "retry": {"max_attempts": 2, "initial_interval": "1h", "jitter": 0}}]}');
SELECT wf.start_run('slow_retry') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('slow_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '"a plain string error"');
SELECT wf.tick();
SELECT count(*) AS claimable_now FROM wf.claim_tasks('slow_q', 'w');
SELECT fire_at - now() BETWEEN interval '59 minutes' AND interval '61 minutes' AS in_one_hour
FROM wf.timers WHERE run_id = :'run' AND status = 'pending';

-- bad failure reports change nothing
SELECT wf.fail_task(:t, :f, NULL);
SELECT wf.fail_task(:t, :f, '{}', NULL);
