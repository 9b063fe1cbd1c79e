-- scenario: run commands: wf.terminate_run ends a run at once, without compensation;
-- wf.update_context changes the input later steps see
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('term', '{"timeout": "1d", "steps": [
  {"name": "work", "queue": "term_q"}, {"name": "after", "queue": "term_q2"}]}');
SELECT wf.start_run('term') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('term_q', 'w') \gset
SELECT wf.terminate_run(:'run', 'customer withdrew the order');
SELECT status, current_step, current_task, finished_at IS NOT NULL AS finished FROM wf.runs WHERE run_id = :'run';
-- the worker is told to stop; its late result is stale
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{}');
SELECT kind, status, outcome FROM wf.timers WHERE run_id = :'run';
SELECT type, actor = current_user AS by_me, payload->>'reason' AS reason, payload->>'old_status' AS old_status
FROM wf.history(:'run') WHERE seq > 3;
SELECT e->>'status' AS status, e->>'waiting_for' AS waiting_for, e->'details'->>'reason' AS reason
FROM wf.explain(:'run') e;
SELECT wf.verify_run(:'run');
-- refusals
SELECT wf.terminate_run(:'run', '');
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>');
END
$$;
SELECT pg_temp.err(format('SELECT wf.terminate_run(%L, %L)', :'run', 'again'));
SELECT wf.terminate_run('00000000-0000-0000-0000-000000000000', 'no such run');

-- scenario: wf.update_context: later steps map the new input; old values are recorded
SELECT wf.publish_definition('ship', '{"steps": [
  {"name": "pack", "queue": "uc_pack"},
  {"name": "send", "queue": "uc_send", "input": {"to": "$.input.address", "note": "$.input.note"}}]}');
SELECT wf.start_run('ship', '{"address": "Old Street 1", "note": "fragile", "gift": true}') AS run \gset
SELECT wf.update_context(:'run', '{"address": "New Road 2", "note": null, "floor": 3}', 'customer moved');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('uc_pack', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT input FROM wf.claim_tasks('uc_send', 'w');
SELECT type, payload->>'reason' AS reason, payload->'old' AS old FROM wf.history(:'run') WHERE type = 'context_updated';
SELECT input AS original_input FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
SELECT wf.update_context(:'run', '[1]', 'not an object');
SELECT wf.update_context(:'run', '{}', 'empty');
SELECT wf.update_context(:'run', '{"a": 1}', '');
SELECT pg_temp.err(format('SELECT wf.update_context(%L, %L, %L)', (SELECT run_id FROM wf.runs WHERE status = 'terminated' LIMIT 1), '{"a": 1}', 'late'));

-- scenario: an attempt keeps the input it was scheduled with.  The row of an
-- attempt of a step without an input mapping holds no copy of the input (NULL:
-- the run's input as it stands, which the claim hands out); wf.update_context
-- first writes the input it replaces into such rows: the queued attempt, a
-- leased one and its retry get the old input, the steps after the new one
SELECT wf.publish_definition('keep', '{"steps": [{"name": "one", "queue": "uc_keep"},
  {"name": "two", "queue": "uc_keep", "retry": {"max_attempts": 2, "initial_interval": "1ms", "jitter": 0}},
  {"name": "three", "queue": "uc_keep"}]}');
SELECT wf.start_run('keep', '{"a": 1}') AS krun \gset
SELECT step, input IS NULL AS no_copy FROM wf.tasks WHERE run_id = :'krun';
SELECT wf.update_context(:'krun', '{"a": 2}', 'changed while queued');
SELECT step, input FROM wf.tasks WHERE run_id = :'krun';
SELECT task_id AS t, fence AS f, input FROM wf.claim_tasks('uc_keep', 'w') \gset
SELECT :'input' AS claimed_input;
SELECT task_id AS t, fence AS f, step, input FROM wf.complete_and_claim(:t, :f, '{}', 'uc_keep', 'w') \gset
SELECT :'step' AS step, :'input' AS claimed_input;
SELECT wf.update_context(:'krun', '{"a": 3}', 'changed while leased');
SELECT wf.fail_task(:t, :f, '{"code": "again"}');
SELECT pg_sleep(0.01);
SELECT wf.tick() >= 1 AS retry_fired;
SELECT task_id AS t, fence AS f, step, attempt, input FROM wf.claim_tasks('uc_keep', 'w') \gset
SELECT :'step' AS step, :'attempt' AS attempt, :'input' AS claimed_input;
SELECT step, input FROM wf.complete_and_claim(:t, :f, '{}', 'uc_keep', 'w');
-- the rows left (completed attempts leave wf.tasks since 0.3.0): the failed
-- attempt of two keeps its copy, three holds none
SELECT step, attempt, input IS NULL AS no_copy, input FROM wf.tasks WHERE run_id = :'krun' ORDER BY task_id;
-- the input of every attempt as scheduled, the completed ones included
SELECT step, attempt, payload->'input' AS input FROM wf.history(:'krun') WHERE type = 'task_scheduled' ORDER BY seq;
SELECT wf.verify_run(:'krun');
