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
SELECT count(DISTINCT hash) = count(*) AS distinct_hashes FROM wf.history(:'run');
SELECT encode(r.last_hash, 'hex') = (SELECT h.hash FROM wf.history(r.run_id) h ORDER BY h.seq DESC LIMIT 1)
       AS snapshot_has_last_hash
FROM wf.runs r WHERE r.run_id = :'run';
-- layout (since 0.3.0): a task_scheduled rides in the row of the event
-- before it, which stores the hash of its last event
SELECT e.seq, e.type, e.more->0->>0 AS more, e.hash = r.last_hash AS stores_last_hash
FROM wf.events e JOIN wf.runs r ON r.run_id = e.run_id WHERE e.run_id = :'run' ORDER BY e.seq;
SELECT h.seq, h.hash = encode(e.hash, 'hex') AS stored_hash
FROM wf.history(:'run') h LEFT JOIN wf.events e ON e.run_id = :'run' AND e.seq = h.seq ORDER BY h.seq;
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
-- an event taken out of the row that holds it
UPDATE wf.events SET more = NULL WHERE run_id = :'run' AND seq = 1;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.events SET more = (more::jsonb || more::jsonb)::json WHERE run_id = :'run' AND seq = 3;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.events SET more = '[["no_such_event", "a", 1, {}]]' WHERE run_id = :'run' AND seq = 1;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
UPDATE wf.events SET more = '[{"type": "task_scheduled"}, ["run_completed", null, null, {}]]'
WHERE run_id = :'run' AND seq = 1;
SELECT wf.verify_run(:'run');
-- wf.history still reads it: the element as an event of no type, and no
-- hash for the events before the row's last (which alone is stored)
SELECT seq, type, hash IS NULL AS no_hash FROM wf.history(:'run');
ROLLBACK;
BEGIN;
DELETE FROM wf.events WHERE run_id = :'run' AND seq = 1;
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
-- removing the tail and fixing the snapshot's seq is still caught: last_hash
DELETE FROM wf.events WHERE run_id = :'run' AND seq = 3;
UPDATE wf.runs SET seq = 2 WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
ROLLBACK;
BEGIN;
-- swapping two rows
UPDATE wf.events SET seq = seq + 100 WHERE run_id = :'run' AND seq IN (1, 3);
UPDATE wf.events SET seq = 3 WHERE run_id = :'run' AND seq = 101;
UPDATE wf.events SET seq = 1 WHERE run_id = :'run' AND seq = 103;
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
-- what wf.events keeps of each task_scheduled (layout: the keys left, and
-- the event whose row holds it, column more)
CREATE TEMP VIEW fill_stored AS
SELECT e.seq, e.type, e.step, e.attempt, e.payload, NULL::text AS in_row_of FROM wf.events e WHERE e.run_id = :'fill'
UNION ALL
SELECT e.seq + m.n::int, m.x->>0, m.x->>1, (m.x->>2)::int, (m.x->3)::jsonb, e.type
FROM wf.events e, json_array_elements(e.more) WITH ORDINALITY m(x, n) WHERE e.run_id = :'fill';
SELECT seq, step, attempt, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(payload) k) AS stored_keys, in_row_of
FROM pg_temp.fill_stored WHERE type = 'task_scheduled' ORDER BY seq;
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
-- the other events are shown as stored; the chain covers what is stored,
-- and each row's hash is that of its last event
SELECT count(*) AS others_as_stored FROM wf.history(:'fill') h JOIN pg_temp.fill_stored e ON e.seq = h.seq
WHERE h.type <> 'task_scheduled' AND h.type = e.type AND h.payload = e.payload;
SELECT count(*) AS rows_hash_of_last FROM wf.events e JOIN wf.history(:'fill') h
  ON h.seq = e.seq + coalesce(json_array_length(e.more), 0) AND h.hash = encode(e.hash, 'hex')
WHERE e.run_id = :'fill';
SELECT count(*) AS rows, sum(1 + coalesce(json_array_length(more), 0)) AS events
FROM wf.events WHERE run_id = :'fill';
SELECT wf.verify_run(:'fill');
