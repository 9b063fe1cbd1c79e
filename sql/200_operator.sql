-- scenario: operator commands that stop and restart a run's progress:
-- wf.pause_run, wf.resume_run, wf.retry_step, wf.skip_step
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>');
END
$$;
CREATE FUNCTION pg_temp.hist(r uuid, after int DEFAULT 0) RETURNS TABLE (seq int, type text, step text, attempt int, detail text)
LANGUAGE sql AS $$
    SELECT seq, type, step, attempt,
           coalesce(payload->>'reason', payload->>'report', payload->>'outcome')
    FROM wf.history(r) WHERE seq > after ORDER BY seq
$$;
SELECT wf.publish_definition('op', '{"steps": [
  {"name": "charge", "queue": "op_q", "retry": {"max_attempts": 3, "initial_interval": "20ms", "jitter": 0}},
  {"name": "ship", "queue": "op_q2", "input": {"charged": "$.steps.charge.output"}}]}');

-- a result that comes while the run is paused is recorded, held, and applied on resume
SELECT wf.start_run('op', '{"order": 1}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('op_q', 'w1') \gset
SELECT wf.pause_run(:'run', 'fraud check');
SELECT status, current_step, current_task = :t AS same_task FROM wf.runs WHERE run_id = :'run';
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{"charged": 10}');
SELECT wf.complete_task(:t, :f, '{"charged": 10}');
SELECT count(*) AS scheduled FROM wf.claim_tasks('op_q2', 'w2');
SELECT e->>'status' AS status, e->>'waiting_for' AS waiting_for, e->'details'->>'reason' AS reason,
       e->'details'->>'result_held' AS result_held, e->'commands' AS commands
FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
SELECT wf.resume_run(:'run', 'fraud check passed');
SELECT * FROM pg_temp.hist(:'run');
SELECT input FROM wf.claim_tasks('op_q2', 'w2');
SELECT wf.verify_run(:'run');

-- a failure held while paused is applied on resume: its retry policy decides
SELECT wf.start_run('op', '{"order": 2}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('op_q', 'w1') \gset
SELECT wf.pause_run(:'run', 'maintenance');
SELECT wf.fail_task(:t, :f, '{"code": "card_declined"}', false);
SELECT wf.resume_run(:'run', 'maintenance over');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- an attempt nobody has claimed is withdrawn by the pause and scheduled again on resume
SELECT wf.start_run('op', '{"order": 3}') AS run \gset
SELECT wf.pause_run(:'run', 'hold everything');
SELECT count(*) AS claimable FROM wf.claim_tasks('op_q', 'w1');
SELECT status FROM wf.tasks WHERE run_id = :'run';
SELECT wf.resume_run(:'run', 'go');
SELECT attempt, idempotency_key = (SELECT idempotency_key FROM wf.tasks WHERE run_id = :'run' AND attempt = 1) AS same_key
FROM wf.claim_tasks('op_q', 'w1') \gset
SELECT :attempt AS attempt, :'same_key' AS same_key;
SELECT wf.verify_run(:'run');

-- a retry backoff that ends while the run is paused is held, then fires after resume
SELECT wf.start_run('op', '{"order": 4}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('op_q', 'w1') \gset
SELECT wf.fail_task(:t, :f, '{"code": "busy"}', true);
SELECT wf.pause_run(:'run', 'provider outage');
SELECT pg_sleep(0.05);
SELECT wf.tick() > 0 AS fired;
SELECT kind, status, outcome, fire_at = 'infinity' AS held FROM wf.timers WHERE run_id = :'run';
SELECT count(*) AS claimable FROM wf.claim_tasks('op_q', 'w1');
SELECT e->'details'->>'held_timers' AS held_timers FROM wf.explain(:'run') e;
SELECT wf.resume_run(:'run', 'provider back');
SELECT wf.tick() > 0 AS fired;
SELECT attempt FROM wf.claim_tasks('op_q', 'w1');
SELECT * FROM pg_temp.hist(:'run', 3);
SELECT wf.verify_run(:'run');

-- a sleep that ends while paused is held too
SELECT wf.publish_definition('op_sleep', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "20ms"}, {"name": "after", "queue": "op_q3"}]}');
SELECT wf.start_run('op_sleep') AS run \gset
SELECT wf.pause_run(:'run', 'wait');
SELECT pg_sleep(0.05);
SELECT wf.tick() > 0 AS fired;
SELECT current_step, status FROM wf.runs WHERE run_id = :'run';
SELECT wf.resume_run(:'run', 'continue');
SELECT wf.tick() > 0 AS fired;
SELECT current_step, status FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- refusals
SELECT pg_temp.err(format('SELECT wf.resume_run(%L, %L)', :'run', 'not paused'));
SELECT wf.pause_run(:'run', 'first');
SELECT pg_temp.err(format('SELECT wf.pause_run(%L, %L)', :'run', 'twice'));
SELECT pg_temp.err(format('SELECT wf.skip_step(%L, %L, %L)', :'run', '{}', 'while paused'));
SELECT wf.pause_run(:'run', '');
SELECT wf.resume_run(:'run', NULL);
SELECT wf.pause_run(NULL, 'x');
SELECT wf.pause_run('00000000-0000-0000-0000-000000000000', 'no such run');
SELECT wf.terminate_run(:'run', 'done with it');
SELECT pg_temp.err(format('SELECT wf.pause_run(%L, %L)', :'run', 'ended'));
SELECT pg_temp.err(format('SELECT wf.retry_step(%L, %L)', :'run', 'terminated'));

-- wf.retry_step: a failed run runs again from its failed task step, with the context repaired
SELECT wf.publish_definition('op_retry', '{"steps": [
  {"name": "book", "queue": "op_rq", "input": {"room": "$.input.room"}}, {"name": "confirm", "queue": "op_rq2"}]}');
SELECT wf.start_run('op_retry', '{"room": "101"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('op_rq', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "no_such_room"}', false);
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT e->'commands' AS commands FROM wf.explain(:'run') e;
SELECT pg_temp.err(format('SELECT wf.resume_run(%L, %L)', :'run', 'failed, not paused'));
SELECT wf.update_context(:'run', '{"room": "102"}', 'room 101 closed');
SELECT wf.retry_step(:'run', 'booked into another room');
SELECT status, current_step, finished_at FROM wf.runs WHERE run_id = :'run';
SELECT attempt, input, idempotency_key = (SELECT idempotency_key FROM wf.tasks WHERE task_id = :t) AS same_key
FROM wf.claim_tasks('op_rq', 'w');
SELECT * FROM pg_temp.hist(:'run', 3);
SELECT wf.verify_run(:'run');
SELECT pg_temp.err(format('SELECT wf.retry_step(%L, %L)', :'run', 'running'));

-- wf.skip_step: the current step ends with the output given; the worker's late result is stale
SELECT wf.start_run('op', '{"order": 5}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('op_q', 'w1') \gset
SELECT pg_temp.err(format('SELECT wf.skip_step(%L, %L, %L, %L)', :'run', '{}', 'wrong step', 'ship'));
SELECT wf.skip_step(:'run', '{"charged": 0, "waived": true}', 'charged by phone', 'charge');
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{"charged": 10}');
SELECT input FROM wf.claim_tasks('op_q2', 'w2');
SELECT context->'steps'->'charge' AS charge FROM wf.runs WHERE run_id = :'run';
SELECT * FROM pg_temp.hist(:'run', 3);
SELECT wf.verify_run(:'run');
SELECT wf.skip_step(:'run', NULL, 'no output');

-- a failed run at a sleep step cannot be retried but can be skipped
SELECT wf.publish_definition('op_until', '{"steps": [
  {"name": "wait", "type": "sleep", "until": "$.input.at"}, {"name": "after", "queue": "op_uq"}]}');
SELECT wf.start_run('op_until', '{}') AS run \gset
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.err(format('SELECT wf.retry_step(%L, %L)', :'run', 'sleep'));
SELECT wf.skip_step(:'run', '{}', 'no date needed');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- approval steps are not skipped unless the definition allows it; "skippable": false forbids it
SELECT wf.publish_definition('op_appr', '{"steps": [
  {"name": "approve", "type": "approval", "approvers": ["ann"], "notify_queue": "op_nq"},
  {"name": "must", "queue": "op_mq", "skippable": false}]}');
SELECT wf.start_run('op_appr') AS run \gset
SELECT pg_temp.err(format('SELECT wf.skip_step(%L, %L, %L)', :'run', '{}', 'skip approval'));
SELECT wf.publish_definition('op_appr2', '{"steps": [
  {"name": "approve", "type": "approval", "approvers": ["ann"], "notify_queue": "op_nq", "skippable": true},
  {"name": "must", "queue": "op_mq", "skippable": false}]}');
SELECT wf.start_run('op_appr2') AS run \gset
SELECT wf.skip_step(:'run', '{"outcome": "approved", "by": "phone"}', 'approved by phone');
SELECT current_step FROM wf.runs WHERE run_id = :'run';
SELECT count(*) FILTER (WHERE status = 'pending') AS pending_approvals FROM wf.approvals WHERE run_id = :'run';
SELECT pg_temp.err(format('SELECT wf.skip_step(%L, %L, %L)', :'run', '{}', 'skip must'));
SELECT wf.verify_run(:'run');
SELECT wf.publish_definition('op_bad', '{"steps": [{"name": "a", "queue": "q", "skippable": "yes"}]}');

-- operator commands are not for PUBLIC
CREATE ROLE regress_wf_nobody;
SET ROLE regress_wf_nobody;
SELECT wf.pause_run('00000000-0000-0000-0000-000000000000', 'not mine');
SELECT * FROM wf.retry_runs('not mine');
RESET ROLE;
SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'wf' AND p.proname NOT LIKE '\_%'
  AND NOT has_function_privilege('regress_wf_nobody', p.oid, 'EXECUTE') ORDER BY 1;
DROP ROLE regress_wf_nobody;

-- a step total timeout that comes due while an attempt is in flight of a paused run is held,
-- and comes due again on resume even though the attempt is still with its worker
SELECT wf.publish_definition('op_total', '{"steps": [{"name": "slow", "queue": "op_tq", "timeout": {"total": "30ms"}}]}');
SELECT wf.start_run('op_total') AS run \gset
SELECT count(*) FROM wf.claim_tasks('op_tq', 'w', 1, '1 hour');
SELECT wf.pause_run(:'run', 'hold');
SELECT pg_sleep(0.06);
SELECT wf.tick() > 0 AS fired;
SELECT kind, outcome FROM wf.timers WHERE run_id = :'run' AND status = 'pending';
SELECT wf.resume_run(:'run', 'go');
SELECT kind, outcome, fire_at < 'infinity' AS due FROM wf.timers WHERE run_id = :'run' AND status = 'pending';
SELECT wf.tick() > 0 AS fired;
SELECT status, (SELECT payload->>'reason' FROM wf.history(:'run') WHERE type = 'run_failed') AS reason
FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
