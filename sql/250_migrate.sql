-- scenario: wf.migrate_run moves a live run to another version of its definition
-- when its position exists there and its context fits; otherwise it says why
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>')
        || coalesce(E'\n' || nullif(d, ''), '');
END
$$;
-- v1: a -> b
SELECT wf.publish_definition('mig', '{"steps": [
  {"name": "a", "queue": "mig_a"},
  {"name": "b", "queue": "mig_b", "input": {"x": "$.input.x"}, "retry": {"initial_interval": "1h"}}]}');
-- v2: b moves to another queue, maps more, and a new step c follows
SELECT wf.publish_definition('mig', '{"steps": [
  {"name": "a", "queue": "mig_a"},
  {"name": "b", "queue": "mig_b2", "input": {"x": "$.input.x", "from_a": "$.steps.a.output"}},
  {"name": "c", "queue": "mig_c", "input": {"b": "$.steps.b.output"}}]}');
-- v3: b reads the output of a new step "check" that comes before it
SELECT wf.publish_definition('mig', '{"steps": [
  {"name": "a", "queue": "mig_a"}, {"name": "check", "queue": "mig_check"},
  {"name": "b", "queue": "mig_b", "input": {"ok": "$.steps.check.output"}}]}');
-- v4: b is a wait_event; v5: there is no b
SELECT wf.publish_definition('mig', '{"steps": [
  {"name": "a", "queue": "mig_a"}, {"name": "b", "type": "wait_event", "event": "go"}]}');
SELECT wf.publish_definition('mig', '{"steps": [{"name": "a", "queue": "mig_a"}, {"name": "z", "queue": "mig_z"}]}');

-- a run of v1 at b, its attempt with a worker of the old version
SELECT wf.start_run('mig', '{"x": 1}', NULL, 1) AS run \gset
SELECT wf.complete_task(task_id, fence, '{"a": "done"}') FROM wf.claim_tasks('mig_a', 'w');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('mig_b', 'old-worker') \gset
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 3, %L)', :'run', 'needs check'));
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 4, %L)', :'run', 'b became a wait'));
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 5, %L)', :'run', 'no b'));
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 1, %L)', :'run', 'same'));
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 9, %L)', :'run', 'none'));
SELECT definition_version, status FROM wf.runs WHERE run_id = :'run';
SELECT wf.migrate_run(:'run', 2, 'fix for the b mapping');
SELECT definition_version, status, current_step FROM wf.runs WHERE run_id = :'run';
-- the old version's worker is told to stop; its result is stale
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{"b": "old"}');
SELECT step, attempt, input FROM wf.claim_tasks('mig_b2', 'new-worker') \gset
SELECT :'step' AS step, :attempt AS attempt, :'input' AS input;
SELECT wf.complete_task(task_id, fence, '{"b": "new"}') FROM wf.tasks WHERE run_id = :'run' AND status = 'leased';
SELECT input FROM wf.claim_tasks('mig_c', 'w');
SELECT type, payload->>'from_version' AS from_v, payload->>'to_version' AS to_v, payload->>'reason' AS reason
FROM wf.history(:'run') WHERE type IN ('run_migrated', 'task_cancelled', 'result_stale');
SELECT wf.verify_run(:'run');

-- a retry backoff of the old version is cut short: the next attempt follows the new one
SELECT wf.start_run('mig', '{"x": 2}', NULL, 1) AS run \gset
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('mig_a', 'w');
SELECT wf.fail_task(task_id, fence, '{"code": "bug"}', true) FROM wf.claim_tasks('mig_b', 'w');
SELECT wf.migrate_run(:'run', 2, 'bug fixed in v2');
SELECT step, attempt, input FROM wf.claim_tasks('mig_b2', 'w');
SELECT wf.verify_run(:'run');

-- a paused run: the withdrawn attempt is scheduled under the new version on resume
SELECT wf.start_run('mig', '{"x": 3}', NULL, 1) AS run \gset
SELECT wf.complete_task(task_id, fence, '{"a": 3}') FROM wf.claim_tasks('mig_a', 'w');
SELECT wf.pause_run(:'run', 'hold for the migration');
SELECT wf.migrate_run(:'run', 2, 'v2');
SELECT count(*) FROM wf.claim_tasks('mig_b2', 'w');
SELECT wf.resume_run(:'run', 'go');
SELECT step, attempt, input FROM wf.claim_tasks('mig_b2', 'w');
SELECT wf.verify_run(:'run');

-- refusals
SELECT wf.migrate_run(:'run', 2, '');
SELECT wf.migrate_run(:'run', NULL, 'x');
SELECT wf.terminate_run(:'run', 'done');
SELECT pg_temp.err(format('SELECT wf.migrate_run(%L, 1, %L)', :'run', 'ended'));
