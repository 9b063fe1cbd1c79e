-- scenario: wf.cancel_run: the intent is recorded, unstarted work withdrawn, the attempt
-- in flight settles, then the compensations of completed steps run newest first
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
           coalesce(payload->>'reason', payload->>'final', payload->>'outcome',
                    payload->>'pending', payload->>'compensated')
    FROM wf.history(r) WHERE seq > after ORDER BY seq
$$;
-- complete the one task ready on a queue with an output
CREATE FUNCTION pg_temp.work(q text, output jsonb DEFAULT '{}') RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(t.step || '#' || t.attempt || ' ' || t.input::text || ' -> ' ||
                      wf.complete_task(t.task_id, t.fence, output), '; ')
    FROM wf.claim_tasks(q, 'w') t
$$;
SELECT wf.publish_definition('trip', '{"steps": [
  {"name": "flight", "queue": "trip_q", "compensate": {"activity": "cancel_flight"}},
  {"name": "hotel", "queue": "trip_q", "compensate": {"queue": "trip_undo", "activity": "cancel_hotel",
     "input": {"booking": "$.steps.hotel.output.booking", "guest": "$.input.guest"}}},
  {"name": "charge", "queue": "trip_pay", "compensate": {"queue": "trip_undo", "activity": "refund",
     "retry": {"max_attempts": 1}}},
  {"name": "mail", "queue": "trip_q"}]}');

-- the attempt in flight completes after the cancel: it is compensated too
SELECT wf.start_run('trip', '{"guest": "ann"}') AS run \gset
SELECT pg_temp.work('trip_q', '{"flight": "LH1"}');
SELECT pg_temp.work('trip_q', '{"booking": "H-7"}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('trip_pay', 'w') \gset
SELECT wf.cancel_run(:'run', 'customer cancelled the trip');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.heartbeat(:t, :f);
SELECT e->>'status' AS status, e->>'waiting_for' AS waiting_for, e->'commands' AS commands FROM wf.explain(:'run') e;
SELECT wf.complete_task(:t, :f, '{"payment": "P-9"}');
SELECT wf.complete_task(:t, :f, '{"payment": "P-9"}');
SELECT context->'compensation' AS compensation FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.work('trip_undo', '{"refunded": true}');
SELECT pg_temp.work('trip_undo', '{"cancelled": "H-7"}');
SELECT pg_temp.work('trip_q', '{"cancelled": "LH1"}');
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT * FROM pg_temp.hist(:'run', 5);
-- (the attempts' keys as scheduled, as wf.history shows them: a completed
-- attempt has no row, and wf.events no default key, since 0.3.0)
SELECT step, (payload->>'visit')::int AS visit, payload->>'idempotency_key' ~ '/compensate:[a-z]+/1$' AS stable_key
FROM wf.history(:'run') WHERE type = 'task_scheduled' AND step LIKE 'compensate:%' ORDER BY seq;
SELECT e->>'status' AS status, e->'details'->'compensation'->'done' AS done FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');

-- an unclaimed attempt is withdrawn; only completed steps are undone
SELECT wf.start_run('trip', '{"guest": "bob"}') AS run \gset
SELECT pg_temp.work('trip_q', '{"flight": "AF2"}');
SELECT wf.cancel_run(:'run', 'duplicate booking');
SELECT step, status FROM wf.tasks WHERE run_id = :'run' ORDER BY task_id;
SELECT pg_temp.work('trip_q');
SELECT wf.run_status(:'run');
SELECT wf.verify_run(:'run');

-- nothing done yet: cancelled at once
SELECT wf.start_run('trip', '{"guest": "cy"}') AS run \gset
SELECT wf.cancel_run(:'run', 'changed my mind');
SELECT * FROM pg_temp.hist(:'run');
SELECT wf.verify_run(:'run');

-- the attempt in flight fails after the cancel: nothing of it to undo
SELECT wf.start_run('trip', '{"guest": "dee"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('trip_q', 'w') \gset
SELECT wf.cancel_run(:'run', 'fraud');
SELECT wf.fail_task(:t, :f, '{"code": "sold_out"}', true);
SELECT * FROM pg_temp.hist(:'run', 2);
SELECT wf.verify_run(:'run');

-- the attempt in flight loses its lease: nobody knows whether it booked, so it is undone
SELECT wf.start_run('trip', '{"guest": "eve"}') AS run \gset
SELECT count(*) FROM wf.claim_tasks('trip_q', 'w', 1, '10 ms');
SELECT wf.cancel_run(:'run', 'too slow');
SELECT pg_sleep(0.05);
SELECT wf.tick() > 0 AS fired;
SELECT * FROM pg_temp.hist(:'run', 2);
SELECT pg_temp.work('trip_q');
SELECT wf.run_status(:'run');
SELECT wf.verify_run(:'run');

-- a paused run with a result held: the cancel applies it and undoes it
SELECT wf.start_run('trip', '{"guest": "fay"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('trip_q', 'w') \gset
SELECT wf.pause_run(:'run', 'review');
SELECT wf.complete_task(:t, :f, '{"flight": "BA3"}');
SELECT wf.cancel_run(:'run', 'review failed');
SELECT pg_temp.work('trip_q');
SELECT * FROM pg_temp.hist(:'run', 2);
SELECT wf.verify_run(:'run');

-- a compensation that gives up: compensation_failed, for an operator
SELECT wf.start_run('trip', '{"guest": "gus"}') AS run \gset
SELECT pg_temp.work('trip_q', '{"flight": "KL4"}');
SELECT pg_temp.work('trip_q', '{"booking": "H-8"}');
SELECT pg_temp.work('trip_pay', '{"payment": "P-1"}');
SELECT wf.cancel_run(:'run', 'customer cancelled');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('trip_undo', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "gateway_down"}', true);
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT e->>'status' AS status, e->'details'->>'reason' AS reason, e->'commands' AS commands FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
-- the operator retries it: the same visit and key, the next attempt; the run goes on cancelling
SELECT wf.retry_step(:'run', 'gateway is back');
SELECT step, attempt, input FROM wf.claim_tasks('trip_undo', 'w') \gset
SELECT :'step' AS step, :attempt AS attempt;
SELECT wf.fail_task(task_id, fence, '{"code": "gateway_down"}', false) FROM wf.tasks
WHERE run_id = :'run' AND status = 'leased';
SELECT wf.run_status(:'run');
-- ... and then refunds by hand and skips it: the compensations go on
SELECT wf.skip_step(:'run', '{"refunded": "by hand"}', 'refunded by bank transfer', 'compensate:charge');
SELECT pg_temp.work('trip_undo');
SELECT pg_temp.work('trip_q');
SELECT wf.run_status(:'run');
SELECT jsonb_path_query_array(context, '$.compensation.done[*].step') AS undone FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');

-- refusals
SELECT wf.start_run('trip', '{"guest": "hal"}') AS run \gset
SELECT count(*) FROM wf.claim_tasks('trip_q', 'w');
SELECT wf.cancel_run(:'run', 'stop');
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'run', 'again'));
SELECT pg_temp.err(format('SELECT wf.signal(%L, %L)', :'run', 'go'));
SELECT pg_temp.err(format('SELECT wf.pause_run(%L, %L)', :'run', 'pause'));
SELECT wf.terminate_run(:'run', 'give up on compensation');
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'run', 'ended'));
SELECT wf.cancel_run(:'run', '');
SELECT wf.cancel_run(NULL, 'x');
SELECT wf.cancel_run('00000000-0000-0000-0000-000000000000', 'no such run');
SELECT wf.publish_definition('bad_comp', '{"steps": [{"name": "a", "queue": "q", "compensate": "refund"}]}');
SELECT wf.publish_definition('bad_comp', '{"steps": [{"name": "a", "queue": "q", "compensate": {"activty": "x"}}]}');
SELECT wf.publish_definition('bad_comp', '{"steps": [{"name": "a", "queue": "q", "compensate": {"timeout": {"total": "1h"}}}]}');
SELECT wf.publish_definition('bad_comp', '{"steps": [{"name": "a", "queue": "q", "compensate": {"retry": {"max_attempts": 0}}}]}');
SELECT wf.publish_definition('bad_comp', '{"steps": [{"name": "a", "type": "sleep", "duration": "1s", "compensate": {}}]}');
