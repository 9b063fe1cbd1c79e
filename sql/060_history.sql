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
UPDATE wf.runs SET context = jsonb_set(context, '{input}', input || '{"who": "mallory"}') WHERE run_id = :'run';
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

-- scenario: since 0.3.0 a task_scheduled event leaves out of wf.events what
-- the run's definition and the event give (queue, activity, the default
-- idempotency key, available_at at the event's time, the run's input as it
-- stands); wf.history puts it back, as 0.2.0 stored it: each attempt's
-- event shows what its row in wf.tasks was given.  The attempts: a first
-- step; a step with an input mapping, failed and retried by its timer; a
-- step without one after wf.update_context; the same step again after
-- wf.migrate_run to a version that gives it another queue and activity;
-- and a compensation, on its own queue, after wf.cancel_run.
SELECT wf.publish_definition('fill', '{"steps": [
  {"name": "a", "queue": "fill_q", "activity": "act_a", "compensate": {"activity": "undo_a", "queue": "fill_undo"}},
  {"name": "b", "queue": "fill_q", "input": {"x": "$.steps.a.output.x"},
   "retry": {"max_attempts": 2, "initial_interval": "1ms", "jitter": 0}},
  {"name": "c", "queue": "fill_q"}]}');
SELECT wf.publish_definition('fill', '{"steps": [
  {"name": "a", "queue": "fill_q", "activity": "act_a", "compensate": {"activity": "undo_a", "queue": "fill_undo"}},
  {"name": "b", "queue": "fill_q", "input": {"x": "$.steps.a.output.x"},
   "retry": {"max_attempts": 2, "initial_interval": "1ms", "jitter": 0}},
  {"name": "c", "queue": "fill_q2", "activity": "act_c2"}]}');
SELECT wf.start_run('fill', '{"who": "alice"}', version => 1) AS fill \gset
-- each attempt's row as written, copied before the attempt completes (a
-- completed attempt's row is deleted since 0.3.0), its input as handed out
-- (NULL: the run's input at the time of the copy)
CREATE TEMP TABLE fill_rows (task_id bigint PRIMARY KEY, queue text, activity text, idempotency_key text,
                             available_at timestamptz, visit integer, input jsonb);
INSERT INTO pg_temp.fill_rows SELECT t.task_id, t.queue, t.activity, t.idempotency_key, t.available_at, t.visit,
       COALESCE(t.input, r.context->'input', r.input)
FROM wf.tasks t JOIN wf.runs r ON r.run_id = t.run_id WHERE t.run_id = :'fill' ON CONFLICT DO NOTHING;
SELECT wf.complete_task(task_id, fence, '{"x": 7}') FROM wf.claim_tasks('fill_q', 'w');
SELECT wf.fail_task(task_id, fence, '{"code": "flaky"}') FROM wf.claim_tasks('fill_q', 'w');
SELECT pg_sleep(0.05);
SELECT wf.tick();
INSERT INTO pg_temp.fill_rows SELECT t.task_id, t.queue, t.activity, t.idempotency_key, t.available_at, t.visit,
       COALESCE(t.input, r.context->'input', r.input)
FROM wf.tasks t JOIN wf.runs r ON r.run_id = t.run_id WHERE t.run_id = :'fill' ON CONFLICT DO NOTHING;
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('fill_q', 'w');
SELECT wf.update_context(:'fill', '{"who": "bob"}', 'renamed') IS NOT NULL AS updated;
SELECT wf.migrate_run(:'fill', 2, 'c moves');
SELECT wf.cancel_run(:'fill', 'undo');
INSERT INTO pg_temp.fill_rows SELECT t.task_id, t.queue, t.activity, t.idempotency_key, t.available_at, t.visit,
       COALESCE(t.input, r.context->'input', r.input)
FROM wf.tasks t JOIN wf.runs r ON r.run_id = t.run_id WHERE t.run_id = :'fill' ON CONFLICT DO NOTHING;
-- the rows left: completed attempts (a, b's second) have none
SELECT step, attempt, status FROM wf.tasks WHERE run_id = :'fill' ORDER BY task_id;
-- what wf.events keeps of each task_scheduled (layout: the keys left)
SELECT seq, step, attempt, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(payload) k) AS stored_keys
FROM wf.events WHERE run_id = :'fill' AND type = 'task_scheduled' ORDER BY seq;
-- what wf.history shows: every key, the values the attempt's row was
-- written with (copied above; an input NULL there is the run's input as it
-- stands, since 0.3.0)
SELECT h.step, h.attempt, h.payload->>'queue' AS queue, h.payload->>'activity' AS activity,
       h.payload->'input' AS input,
       h.payload->>'queue' IS NOT DISTINCT FROM t.queue
         AND h.payload->>'activity' IS NOT DISTINCT FROM t.activity
         AND h.payload->>'idempotency_key' = t.idempotency_key
         AND (h.payload->>'available_at')::timestamptz = t.available_at
         AND h.payload->'input' = t.input
         AND h.payload->>'visit' = t.visit::text AS as_its_row
FROM wf.history(:'fill') h LEFT JOIN pg_temp.fill_rows t ON t.task_id = (h.payload->>'task_id')::bigint
WHERE h.type = 'task_scheduled' ORDER BY h.seq;
-- the other events are shown as stored; the chain covers what is stored
SELECT count(*) AS others_as_stored FROM wf.history(:'fill') h JOIN wf.events e ON e.run_id = :'fill' AND e.seq = h.seq
WHERE h.type <> 'task_scheduled' AND h.payload = e.payload AND h.hash = encode(e.hash, 'hex');
SELECT count(*) AS events FROM wf.events WHERE run_id = :'fill';
SELECT wf.verify_run(:'fill');
