-- scenario: "on_failure": "compensate" (a saga): a run that would fail undoes its completed
-- steps, newest first, and ends compensated (or compensation_failed, for an operator);
-- wf.cancel_run of a failed run compensates it the same way and ends it cancelled
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
-- fail the one task ready on a queue for good
CREATE FUNCTION pg_temp.fail(q text, code text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(t.step || '#' || t.attempt || ' -> ' ||
                      wf.fail_task(t.task_id, t.fence, jsonb_build_object('code', code), false), '; ')
    FROM wf.claim_tasks(q, 'w') t
$$;

-- the saga: four steps, the third (charge) fails for good
SELECT wf.publish_definition('order', '{"on_failure": "compensate", "steps": [
  {"name": "reserve", "queue": "ord_q", "compensate": {"activity": "release"}},
  {"name": "ship_label", "queue": "ord_q", "compensate": {"queue": "ord_undo", "activity": "void_label",
     "input": {"label": "$.steps.ship_label.output.label", "why": "$.failure.reason"}}},
  {"name": "charge", "queue": "ord_pay", "retry": {"max_attempts": 1},
     "compensate": {"queue": "ord_undo", "activity": "refund"}},
  {"name": "notify", "queue": "ord_q"}]}');
SELECT wf.start_run('order', '{"item": "lamp"}') AS run \gset
SELECT pg_temp.work('ord_q', '{"reservation": "R-1"}');
SELECT pg_temp.work('ord_q', '{"label": "L-2"}');
SELECT pg_temp.fail('ord_pay', 'card_declined');
-- not failed: compensating, with the failure recorded
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT wf.run_status(:'run');
SELECT context->'failure'->>'step' AS step, context->'failure'->'attempt' AS attempt,
       context->'failure'->>'reason' AS reason, context->'failure'->'error' AS error,
       context->'compensation' AS compensation
FROM wf.runs WHERE run_id = :'run';
SELECT e->>'status' AS status, e->>'waiting_for' AS waiting_for, e->'details'->'failure'->>'reason' AS failure,
       e->'commands' AS commands FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
-- it takes no signals, context changes, pauses or cancels meanwhile
SELECT pg_temp.err(format('SELECT wf.signal(%L, %L)', :'run', 'go'));
SELECT pg_temp.err(format('SELECT wf.pause_run(%L, %L)', :'run', 'hold on'));
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'run', 'stop'));
SELECT pg_temp.err(format('SELECT wf.retry_step(%L, %L)', :'run', 'again'));
-- newest first: ship_label's compensation (with the failure in its input), then reserve's
SELECT pg_temp.work('ord_q');
SELECT pg_temp.work('ord_undo', '{"voided": "L-2"}');
SELECT wf.run_status(:'run');
SELECT pg_temp.work('ord_q', '{"released": "R-1"}');
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT * FROM pg_temp.hist(:'run', 8);
-- each compensation undoes one visit of one step, under a stable idempotency key
-- (as scheduled, as wf.history shows it: a completed attempt has no row, and
-- wf.events no default key, since 0.3.0)
SELECT step, (payload->>'visit')::int AS visit, attempt,
       payload->>'idempotency_key' = :'run' || '/' || step || '/1' AS stable_key
FROM wf.history(:'run') WHERE type = 'task_scheduled' ORDER BY seq;
SELECT e->>'status' AS status, e->'details'->>'reason' AS reason, e->'details'->>'at_step' AS at_step,
       e->'details'->'failure'->'error' AS error,
       jsonb_path_query_array(e->'details', '$.compensation.done[*].step') AS undone,
       e->'commands' AS commands
FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
-- a compensated run has ended
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'run', 'late'));
SELECT pg_temp.err(format('SELECT wf.retry_step(%L, %L)', :'run', 'late'));
SELECT pg_temp.err(format('SELECT wf.terminate_run(%L, %L)', :'run', 'late'));

-- a failure before anything compensable completed: compensated at once, nothing undone
SELECT wf.start_run('order', '{"item": "desk"}') AS run \gset
SELECT pg_temp.fail('ord_q', 'out_of_stock');
SELECT * FROM pg_temp.hist(:'run');
SELECT wf.verify_run(:'run');

-- a compensation that gives up: compensation_failed; retry_step and skip_step work
-- from there as after a cancel, and the run goes on compensating (not cancelling)
SELECT wf.start_run('order', '{"item": "sofa"}') AS run \gset
SELECT pg_temp.work('ord_q', '{"reservation": "R-3"}');
SELECT pg_temp.work('ord_q', '{"label": "L-4"}');
SELECT pg_temp.fail('ord_pay', 'card_declined');
SELECT pg_temp.fail('ord_undo', 'carrier_down');
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT e->>'status' AS status, e->'details'->>'at_step' AS at_step, e->'details'->>'reason' AS reason,
       e->'details'->'failure'->>'step' AS failed_step, e->'details'->'failure'->'error'->>'code' AS failure,
       e->'commands' AS commands FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
SELECT wf.retry_step(:'run', 'carrier is back');
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT step, attempt, idempotency_key = :'run' || '/compensate:ship_label/1' AS same_key
FROM wf.tasks WHERE run_id = :'run' AND status = 'ready';
SELECT pg_temp.fail('ord_undo', 'carrier_down');
SELECT wf.run_status(:'run');
SELECT wf.skip_step(:'run', '{"voided": "by phone"}', 'voided with the carrier by phone', 'compensate:ship_label');
SELECT wf.run_status(:'run');
SELECT pg_temp.work('ord_q');
SELECT wf.run_status(:'run');
SELECT jsonb_path_query_array(context, '$.compensation.done[*]') AS done FROM wf.runs WHERE run_id = :'run';
SELECT * FROM pg_temp.hist(:'run', 8);
SELECT wf.verify_run(:'run');

-- ... or the operator gives up on them: wf.terminate_run
SELECT wf.start_run('order', '{"item": "rug"}') AS run \gset
SELECT pg_temp.work('ord_q', '{"reservation": "R-5"}');
SELECT pg_temp.work('ord_q', '{"label": "L-6"}');
SELECT pg_temp.fail('ord_pay', 'card_declined');
SELECT pg_temp.work('ord_undo', '{"voided": "L-6"}');
SELECT pg_temp.fail('ord_q', 'warehouse_down');
SELECT wf.run_status(:'run');
-- a compensation completed before this one gave up: the retry still goes on compensating
SELECT wf.retry_step(:'run', 'warehouse is back');
SELECT pg_temp.fail('ord_q', 'warehouse_down');
SELECT wf.terminate_run(:'run', 'warehouse gone for good');
SELECT status, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT count(*) AS live_tasks FROM wf.tasks WHERE run_id = :'run' AND status IN ('ready', 'leased');
SELECT wf.verify_run(:'run');

-- a compensating run can be terminated too
SELECT wf.start_run('order', '{"item": "vase"}') AS run \gset
SELECT pg_temp.work('ord_q', '{"reservation": "R-7"}');
SELECT pg_temp.fail('ord_q', 'no_label');
SELECT wf.run_status(:'run');
SELECT wf.terminate_run(:'run', 'release by hand');
SELECT step, status FROM wf.tasks WHERE run_id = :'run' ORDER BY task_id;
SELECT wf.verify_run(:'run');

-- a step that completes and a failure in the same transaction (the next step is an approval
-- with no approvers): the step just completed is undone too
SELECT wf.publish_definition('gate', '{"on_failure": "compensate", "steps": [
  {"name": "book", "queue": "gate_q", "compensate": {"activity": "unbook"}},
  {"name": "ok", "type": "approval", "approvers": "$.input.approvers", "notify_queue": "gate_mail"}]}');
SELECT wf.start_run('gate', '{"approvers": []}') AS run \gset
SELECT pg_temp.work('gate_q', '{"booked": true}');
SELECT * FROM pg_temp.hist(:'run');
SELECT pg_temp.work('gate_q');
SELECT wf.run_status(:'run');
SELECT wf.verify_run(:'run');

-- an attempt that timed out after a worker claimed it: nobody knows whether it did its
-- work, so the failing step is undone too (first), as a lost attempt of a cancelled run is
SELECT wf.publish_definition('slow', '{"on_failure": "compensate", "steps": [
  {"name": "hold", "queue": "slow_q", "compensate": {"activity": "unhold"}},
  {"name": "pay", "queue": "slow_q", "retry": {"max_attempts": 1}, "timeout": {"start_to_close": "50ms"},
     "compensate": {"activity": "refund"}}]}');
SELECT wf.start_run('slow', '{}') AS run \gset
SELECT pg_temp.work('slow_q');
SELECT count(*) FROM wf.claim_tasks('slow_q', 'w');
SELECT pg_sleep(0.1);
SELECT wf.tick() > 0 AS fired;
SELECT context->'failure'->>'reason' AS reason, context->'failure'->'error'->>'timeout' AS timeout,
       jsonb_path_query_array(context, '$.compensation.pending[*].step') AS pending
FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.work('slow_q');
SELECT pg_temp.work('slow_q');
SELECT wf.run_status(:'run');
SELECT wf.verify_run(:'run');

-- the run timeout of a saga: the same way back
SELECT wf.publish_definition('late', '{"on_failure": "compensate", "timeout": "100ms", "steps": [
  {"name": "hold", "queue": "late_q", "compensate": {"activity": "unhold"}},
  {"name": "nap", "type": "sleep", "duration": "1h"}]}');
SELECT wf.start_run('late', '{}') AS run \gset
SELECT pg_temp.work('late_q');
SELECT pg_sleep(0.15);
SELECT wf.tick() > 0 AS fired;
SELECT wf.run_status(:'run'), context->'failure'->>'reason' AS reason FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.work('late_q');
SELECT wf.run_status(:'run');
SELECT kind, status, outcome FROM wf.timers WHERE run_id = :'run' ORDER BY timer_id;
SELECT wf.verify_run(:'run');

-- a run timeout while a worker holds the attempt: that step is undone too; while the
-- attempt waits for a worker: it did nothing, only the steps before are undone
SELECT wf.publish_definition('late2', '{"on_failure": "compensate", "timeout": "100ms", "steps": [
  {"name": "hold", "queue": "late2_q", "compensate": {"activity": "unhold"}},
  {"name": "pay", "queue": "late2_q", "compensate": {"activity": "refund"}}]}');
SELECT wf.start_run('late2', '{"claimed": true}') AS run \gset
SELECT wf.start_run('late2', '{"claimed": false}') AS run2 \gset
SELECT pg_temp.work('late2_q');
SELECT pg_temp.work('late2_q');
SELECT count(*) FROM wf.claim_tasks('late2_q', 'w') t WHERE t.run_id = :'run';
SELECT pg_sleep(0.15);
SELECT wf.tick() > 0 AS fired;
SELECT input->>'claimed' AS claimed, status, jsonb_path_query_array(context, '$.compensation.pending[*].step') AS pending
FROM wf.runs WHERE run_id IN (:'run', :'run2') ORDER BY 1 DESC;
SELECT wf.verify_run(:'run') AND wf.verify_run(:'run2') AS verified;

-- without "on_failure" a run fails as before ...
SELECT wf.publish_definition('trip', '{"steps": [
  {"name": "flight", "queue": "trip_q", "compensate": {"activity": "cancel_flight"}},
  {"name": "hotel", "queue": "trip_q", "compensate": {"activity": "cancel_hotel"}},
  {"name": "charge", "queue": "trip_q", "retry": {"max_attempts": 1}},
  {"name": "mail", "queue": "trip_q"}]}');
SELECT wf.start_run('trip', '{}') AS run \gset
SELECT pg_temp.work('trip_q', '{"flight": "LH1"}');
SELECT pg_temp.work('trip_q', '{"booking": "H-7"}');
SELECT pg_temp.fail('trip_q', 'card_declined');
SELECT wf.run_status(:'run');
SELECT e->'commands' AS commands FROM wf.explain(:'run') e;
-- ... and wf.cancel_run of the failed run compensates it newest first and ends it cancelled
SELECT wf.cancel_run(:'run', 'customer gave up');
SELECT status, current_step, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.work('trip_q');
SELECT pg_temp.work('trip_q');
SELECT status, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
SELECT * FROM pg_temp.hist(:'run', 8);
SELECT step, payload->>'idempotency_key' = :'run' || '/' || step || '/1' AS stable_key
FROM wf.history(:'run') WHERE type = 'task_scheduled' AND step LIKE 'compensate:%' ORDER BY seq;
SELECT wf.verify_run(:'run');

-- a failed run with nothing to compensate is cancelled at once
SELECT wf.start_run('trip', '{}') AS run \gset
SELECT pg_temp.fail('trip_q', 'no_seats');
SELECT wf.cancel_run(:'run', 'clean up');
SELECT * FROM pg_temp.hist(:'run');
SELECT wf.verify_run(:'run');
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'run', 'twice'));

-- the definition validator
SELECT wf.publish_definition('bad', '{"on_failure": "retry", "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"on_failure": true, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"on_failure": "compensate", "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('fine', '{"on_failure": "fail", "steps": [{"name": "a", "queue": "q"}]}') > 0 AS published;

-- every run of this file replays to its snapshot
SELECT status, count(*) AS runs, bool_and(wf.verify_run(run_id)) AS verified
FROM wf.runs GROUP BY status ORDER BY status;
