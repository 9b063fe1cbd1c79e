-- scenario: wait_event steps wait for a named signal from outside
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

SELECT wf.publish_definition('ship', '{"steps": [
  {"name": "pack", "queue": "sg_pack"},
  {"name": "paid", "type": "wait_event", "event": "payment_received"},
  {"name": "send", "queue": "sg_send"}]}');

-- a signal that arrives while the run waits is consumed at once
SELECT wf.start_run('ship', '{"order": 1}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('sg_pack', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"box": 7}');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT e->>'waiting_for' AS waiting_for, e->'details'->>'event' AS event, e->'commands' AS commands
FROM wf.explain(:'run') e;
SELECT wf.signal(:'run', 'something_else');
SELECT current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.signal(:'run', 'payment_received', '{"amount": 12}', 'pay-1');
SELECT current_step, context->'steps'->'paid'->'output' AS paid FROM wf.runs WHERE run_id = :'run';
-- the same event id again is recorded and ignored
SELECT wf.signal(:'run', 'payment_received', '{"amount": 12}', 'pay-1');
SELECT count(*) AS live_tasks FROM wf.tasks WHERE run_id = :'run' AND status IN ('ready', 'leased');
SELECT seq, type, step, payload->>'outcome' AS outcome FROM wf.history(:'run') ORDER BY seq;
SELECT wf.verify_run(:'run');

-- a signal that arrives early is kept until the run gets to the step
SELECT wf.start_run('ship', '{"order": 2}') AS early \gset
SELECT wf.signal(:'early', 'payment_received', '{"amount": 30}', 'pay-2');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('sg_pack', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"box": 8}');
SELECT current_step, context->'steps'->'paid'->'output'->'payload' AS paid FROM wf.runs WHERE run_id = :'early';
SELECT wf.verify_run(:'early');

-- errors change nothing
SELECT wf.signal(:'run', '');
SELECT wf.signal(NULL, 'x');
SELECT wf.signal('00000000-0000-0000-0000-000000000000', 'payment_received');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "w", "type": "wait_event"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "w", "type": "wait_event", "event": "e", "queue": "q"}]}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('sg_send', 'w') \gset
SELECT wf.complete_task(:t, :f);
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('sg_send', 'w') \gset
SELECT wf.complete_task(:t, :f);
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>');
END
$$;
SELECT pg_temp.err(format('SELECT wf.signal(%L, %L)', :'run', 'payment_received'));
SELECT count(*) AS signals_kept FROM wf.signals WHERE run_id = :'run';
SELECT status FROM wf.runs WHERE run_id IN (:'run', :'early');

-- a waiting run can be terminated; its history still replays
SELECT wf.publish_definition('hold', '{"steps": [{"name": "w", "type": "wait_event", "event": "go"}]}');
SELECT wf.start_run('hold') AS held \gset
SELECT status, current_step FROM wf.runs WHERE run_id = :'held';
SELECT wf.terminate_run(:'held', 'customer withdrew');
SELECT status, wf.verify_run(:'held') AS verified FROM wf.runs WHERE run_id = :'held';
SELECT pg_temp.err(format('SELECT wf.signal(%L, %L)', :'held', 'go'));

-- scenario: "timeout": {"total": ...} bounds the wait; a signal in time
-- leaves a stale timer
SELECT wf.publish_definition('bounded', '{"steps": [
  {"name": "w", "type": "wait_event", "event": "go", "timeout": {"total": "150ms"}},
  {"name": "after", "queue": "sg_after"}]}');
SELECT wf.start_run('bounded') AS late \gset
SELECT wf.start_run('bounded') AS prompt \gset
SELECT e->>'waiting_for' AS waiting_for,
       (e->'details'->>'timeout_at')::timestamptz - (e->'details'->>'since')::timestamptz AS bounded_by
FROM wf.explain(:'late') e;
SELECT wf.signal(:'prompt', 'go');
SELECT pg_sleep(0.2);
SELECT wf.tick() >= 2 AS fired;
SELECT status, current_step FROM wf.runs WHERE run_id = :'late';
SELECT type, step, payload->>'outcome' AS outcome, payload->>'reason' AS reason, payload->'error'->>'code' AS code
FROM wf.history(:'late') WHERE seq > 2 ORDER BY seq;
SELECT status, current_step FROM wf.runs WHERE run_id = :'prompt';
SELECT type, payload->>'outcome' AS outcome FROM wf.history(:'prompt') WHERE type = 'timer_fired';
SELECT wf.verify_run(:'late') AND wf.verify_run(:'prompt') AS verified;
SELECT wf.publish_definition('bad', '{"steps": [{"name": "w", "type": "wait_event", "event": "e", "timeout": {"heartbeat": "1s"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "w", "type": "wait_event", "event": "e", "timeout": "1 day"}]}');
