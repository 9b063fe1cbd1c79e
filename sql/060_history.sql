-- scenario: the history is append-only and tamper-evident
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('audit', '{"steps": [{"name": "a", "queue": "audit_q"}, {"name": "b", "queue": "audit_q"}]}');
SELECT wf.start_run('audit', '{"who": "alice"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('audit_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"x": 1}');
SELECT seq, type, step, attempt, actor = current_user AS actor_is_me, length(hash) AS hash_hex_len
FROM wf.history(:'run');
-- every hash differs and the snapshot keeps the last one
SELECT count(DISTINCT hash) = count(*) AS distinct_hashes FROM wf.events WHERE run_id = :'run';
SELECT r.last_hash = e.hash AS snapshot_has_last_hash
FROM wf.runs r JOIN wf.events e ON e.run_id = r.run_id AND e.seq = r.seq WHERE r.run_id = :'run';
SELECT wf.verify_run(:'run');

-- events cannot be changed or removed
UPDATE wf.events SET payload = '{}' WHERE run_id = :'run' AND seq = 1;
DELETE FROM wf.events WHERE run_id = :'run';
TRUNCATE wf.events;

-- a superuser who bypasses the trigger is caught by verify_run
-- (the WARNING names the run in a CONTEXT line, hidden here because run ids vary)
\set SHOW_CONTEXT never
ALTER TABLE wf.events DISABLE TRIGGER events_append_only;
BEGIN;
UPDATE wf.events SET payload = jsonb_set(payload, '{input,who}', '"mallory"') WHERE run_id = :'run' AND seq = 1;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.events SET actor = 'someone_else' WHERE run_id = :'run' AND seq = 3;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
DELETE FROM wf.events WHERE run_id = :'run' AND seq = 2;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
-- removing the tail and fixing the snapshot's seq is still caught: last_hash
DELETE FROM wf.events WHERE run_id = :'run' AND seq = 4;
UPDATE wf.runs SET seq = 3 WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
-- swapping two events
UPDATE wf.events SET seq = seq + 100 WHERE run_id = :'run' AND seq IN (3, 4);
UPDATE wf.events SET seq = 4 WHERE run_id = :'run' AND seq = 103;
UPDATE wf.events SET seq = 3 WHERE run_id = :'run' AND seq = 104;
SELECT wf.verify_run(:'run');
ROLLBACK;
ALTER TABLE wf.events ENABLE TRIGGER events_append_only;
-- editing the snapshot alone is caught too
BEGIN;
UPDATE wf.runs SET context = jsonb_set(context, '{input,who}', '"mallory"') WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.runs SET status = 'completed', current_step = NULL WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.runs SET input = '{"who": "mallory"}' WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
ROLLBACK;
-- a completed attempt has no row (since 0.3.0: its result is in the
-- history); a row forged for it with another result is caught
SELECT count(*) AS completed_rows FROM wf.tasks WHERE run_id = :'run' AND task_id = :t;
BEGIN;
INSERT INTO wf.tasks
SELECT (jsonb_populate_record(NULL::wf.tasks, to_jsonb(k) || jsonb_build_object(
        'task_id', :t, 'step', 'a', 'attempt', 1, 'fence', :f, 'status', 'completed',
        'output', '{"x": 2}'::jsonb))).*
FROM wf.tasks k WHERE k.run_id = :'run' AND k.status = 'ready';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
DELETE FROM wf.tasks WHERE run_id = :'run' AND status = 'ready';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.tasks SET status = 'completed' WHERE run_id = :'run' AND status = 'ready';
SELECT wf.verify_run(:'run');
ROLLBACK;
SELECT wf.verify_run(:'run');
\set SHOW_CONTEXT errors

-- unknown runs
SELECT * FROM wf.history('00000000-0000-0000-0000-000000000000');
SELECT wf.verify_run('00000000-0000-0000-0000-000000000000');
