-- scenario: durable timers: sleep steps, timeouts, heartbeats, leases, quarantine
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

-- scenario: a sleep step waits on a timer, then the run goes on
SELECT wf.publish_definition('nap', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "200ms"},
  {"name": "after", "queue": "nap_q", "input": {"slept": "$.steps.nap.output.until"}}]}');
SELECT wf.start_run('nap') AS run \gset
SELECT current_step, current_task IS NULL AS no_task, wait_generation > 0 AS waiting
FROM wf.runs WHERE run_id = :'run';
SELECT kind, step, status FROM wf.timers WHERE run_id = :'run';
-- nothing is due yet
SELECT wf.tick();
SELECT count(*) FROM wf.claim_tasks('nap_q', 'w');
SELECT pg_sleep(0.3);
SELECT wf.tick();
SELECT (input->>'slept') IS NOT NULL AS got_until FROM wf.claim_tasks('nap_q', 'w');
SELECT seq, type, step FROM wf.history(:'run');
SELECT wf.verify_run(:'run');
-- a second tick finds nothing: a timer fires once
SELECT wf.tick();

-- scenario: sleep until a timestamp from the run context
SELECT wf.publish_definition('nap_until', '{"steps": [
  {"name": "wait", "type": "sleep", "until": "$.input.at"},
  {"name": "go", "queue": "nap_q"}]}');
SELECT wf.start_run('nap_until', jsonb_build_object('at', now() + interval '1 hour')) AS run \gset
SELECT fire_at = (SELECT (input->>'at')::timestamptz FROM wf.runs WHERE run_id = :'run') AS at_input
FROM wf.timers WHERE run_id = :'run';
-- no timestamp there: the run fails and says why
SELECT wf.start_run('nap_until', '{"at": "tomorrow-ish"}') AS run \gset
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT payload->>'reason' AS reason, payload->'error'->>'code' AS code
FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT wf.verify_run(:'run');
-- sleep steps are validated
SELECT wf.publish_definition('bad', '{"steps": [{"name": "s", "type": "sleep"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "s", "type": "sleep", "duration": "1s", "until": "$.x"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "s", "type": "sleep", "until": "2030-01-01"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "s", "type": "sleep", "duration": "1s", "queue": "q"}]}');

-- scenario: schedule-to-start timeout: nobody claims the attempt in time
SELECT wf.publish_definition('s2s', '{"steps": [{"name": "call", "queue": "s2s_q",
  "timeout": {"schedule_to_start": "100ms"},
  "retry": {"max_attempts": 2, "initial_interval": "1h"}}]}');
SELECT wf.start_run('s2s') AS run \gset
SELECT pg_sleep(0.2);
SELECT wf.tick();
SELECT attempt, status, error->>'code' AS code, error->>'timeout' AS timeout
FROM wf.tasks WHERE run_id = :'run';
SELECT type, attempt FROM wf.history(:'run') WHERE seq > 2;
SELECT wf.verify_run(:'run');

-- scenario: start-to-close timeout fails the attempt and follows the retry policy
SELECT wf.publish_definition('s2c', '{"steps": [{"name": "call", "queue": "s2c_q",
  "timeout": {"start_to_close": "100ms"}, "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('s2c') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('s2c_q', 'w', 1, '1 hour') \gset
SELECT pg_sleep(0.2);
SELECT wf.tick();
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT payload->>'reason' AS reason, payload->'error'->>'timeout' AS timeout
FROM wf.history(:'run') WHERE type = 'run_failed';
-- the engine took the lease over when it timed the attempt out: the worker's late result is stale
SELECT wf.complete_task(:t, :f, '{}');
SELECT wf.verify_run(:'run');

-- scenario: heartbeats keep an attempt alive; silence times it out
SELECT wf.publish_definition('hb', '{"steps": [{"name": "call", "queue": "hb_q",
  "timeout": {"heartbeat": "400ms"}, "retry": {"max_attempts": 2, "initial_interval": "1h"}}]}');
SELECT wf.start_run('hb') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('hb_q', 'w', 1, '1 hour') \gset
SELECT pg_sleep(0.2);
SELECT wf.heartbeat(:t, :f, '{"progress": 0.5}');
SELECT pg_sleep(0.25);
SELECT wf.tick();
SELECT status, heartbeat_details FROM wf.tasks WHERE task_id = :t;
SELECT pg_sleep(0.4);
SELECT wf.tick();
SELECT status, error->>'timeout' AS timeout FROM wf.tasks WHERE task_id = :t;
SELECT wf.heartbeat(:t, :f);
SELECT wf.verify_run(:'run');

-- scenario: a heartbeat extends the lease; a lost lease goes back to the queue
SELECT wf.publish_definition('lease', '{"steps": [{"name": "call", "queue": "lease_q"}]}');
SELECT wf.start_run('lease') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('lease_q', 'w1', 1, '400 ms') \gset
SELECT pg_sleep(0.25);
SELECT wf.heartbeat(:t, :f);
SELECT pg_sleep(0.25);
SELECT wf.tick();
SELECT status, fence, lease_expirations FROM wf.tasks WHERE task_id = :t;
SELECT pg_sleep(0.3);
SELECT wf.tick();
SELECT status, fence, lease_expirations FROM wf.tasks WHERE task_id = :t;
SELECT fence AS f2, deliveries FROM wf.claim_tasks('lease_q', 'w2', 1, '1 hour') \gset
\echo fence :f2 deliveries :deliveries
SELECT wf.heartbeat(:t, :f);
SELECT wf.heartbeat(:t, :f2, '{"step": 1}');
SELECT wf.complete_task(:t, :f);
SELECT wf.complete_task(:t, :f2);
SELECT wf.verify_run(:'run');
-- heartbeat errors
SELECT wf.heartbeat(:t, 99);
SELECT wf.heartbeat(123456789, 1);
SELECT wf.heartbeat(NULL, 1);

-- scenario: a poison task: its leases keep expiring without a result
SET wfengine.poison_threshold = 2;
SET wfengine.quarantine_delays = '300ms';
-- the delays are durations, checked when set
SET wfengine.quarantine_delays = '1 min';
SET wfengine.quarantine_delays = '5m, soon';
SELECT wf.publish_definition('poison', '{"steps": [{"name": "crash", "queue": "poison_q"}]}');
SELECT wf.start_run('poison') AS run \gset
SELECT count(*) FROM wf.claim_tasks('poison_q', 'w', 1, '10 ms');
SELECT pg_sleep(0.05);
SELECT wf.tick();
SELECT count(*) FROM wf.claim_tasks('poison_q', 'w', 1, '10 ms');
SELECT pg_sleep(0.05);
SELECT wf.tick();
-- second expiry: quarantined for 300ms, not claimable now
SELECT status, lease_expirations, available_at > now() + interval '200 ms' AS quarantined
FROM wf.tasks WHERE run_id = :'run';
SELECT count(*) FROM wf.claim_tasks('poison_q', 'w', 1, '10 ms');
SELECT pg_sleep(0.35);
SELECT count(*) FROM wf.claim_tasks('poison_q', 'w', 1, '10 ms');
SELECT pg_sleep(0.05);
SELECT wf.tick();
-- past the last delay: the run is paused for an operator, with the reason
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT type, payload->>'expirations' AS expirations, payload->>'quarantined' AS quarantined,
       payload->>'reason' AS reason
FROM wf.history(:'run') WHERE seq > 2;
SELECT status FROM wf.tasks WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
-- the operator resumes it once the worker is fixed: the next attempt, same idempotency key
SELECT wf.resume_run(:'run', 'crashing worker fixed');
SELECT attempt, idempotency_key = (SELECT idempotency_key FROM wf.tasks WHERE run_id = :'run' AND attempt = 1) AS same_key
FROM wf.claim_tasks('poison_q', 'w', 1, '1 min');
SELECT wf.verify_run(:'run');
RESET wfengine.poison_threshold;
RESET wfengine.quarantine_delays;

-- scenario: a step's total timeout and the run's timeout
SELECT wf.publish_definition('slow_step', '{"steps": [
  {"name": "call", "queue": "total_q", "timeout": {"total": "150ms"}},
  {"name": "next", "queue": "total_q2"}]}');
SELECT wf.start_run('slow_step') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('total_q', 'w', 1, '1 hour') \gset
SELECT pg_sleep(0.2);
SELECT wf.tick();
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT type, payload->>'reason' AS reason FROM wf.history(:'run') WHERE seq > 3;
-- the worker still holding the withdrawn attempt is told to stop
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{}');
SELECT status FROM wf.tasks WHERE task_id = :t;
SELECT wf.verify_run(:'run');
-- a step that finishes in time leaves a stale timer behind; it fires as stale
SELECT wf.start_run('slow_step') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('total_q', 'w', 1, '1 hour') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT pg_sleep(0.2);
SELECT wf.tick();
SELECT type, step, payload->>'kind' AS kind, payload->>'outcome' AS outcome
FROM wf.history(:'run') WHERE type LIKE 'timer%';
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

SELECT wf.publish_definition('deadline', '{"timeout": "150ms", "steps": [
  {"name": "nap", "type": "sleep", "duration": "1h"}]}');
SELECT wf.start_run('deadline') AS run \gset
SELECT kind, status FROM wf.timers WHERE run_id = :'run' ORDER BY timer_id;
SELECT pg_sleep(0.2);
SELECT wf.tick();
SELECT status FROM wf.runs WHERE run_id = :'run';
-- the run's other timers are cancelled with it
SELECT kind, status, outcome FROM wf.timers WHERE run_id = :'run' ORDER BY timer_id;
SELECT wf.verify_run(:'run');
SELECT wf.tick(0);
