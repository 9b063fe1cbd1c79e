-- bench/raw_onecall.sql -- the hand-written equivalent of engine_onecall.sql:
-- claim and complete in one statement and one transaction (the claim's
-- lease fields and the result are written by a single UPDATE of the task
-- row; the run row, the two events and the next task as in raw_cycle.sql).
-- pgbench variables: queue, nsteps.
WITH c AS (
    SELECT t.task_id FROM bench_raw.tasks t
     WHERE t.tenant_id = 'default' AND t.queue = :queue
       AND t.status = 'ready' AND t.available_at <= now()
     ORDER BY t.priority DESC, t.available_at, t.task_id
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), t AS (
    UPDATE bench_raw.tasks t
       SET status = 'completed', fence = t.fence + 1, deliveries = t.deliveries + 1,
           worker = 'w:' || :client_id, claimed_at = now(),
           lease = interval '30 seconds', last_heartbeat_at = NULL,
           lease_expires_at = now() + interval '30 seconds',
           timeout_at = now() + t.start_to_close,
           output = '{"ok": true}', error = NULL, finished_at = now(), deadline_at = NULL
      FROM c WHERE t.task_id = c.task_id
 RETURNING t.task_id, t.fence, t.run_id, t.step, t.visit, t.attempt, t.worker,
           t.input, t.queue, t.activity, substr(t.step, 2)::int AS n,
           t.schedule_to_start, t.start_to_close, t.heartbeat_timeout
), r AS (
    UPDATE bench_raw.runs r
       SET seq = r.seq + 2,
           context = jsonb_set(r.context, ARRAY['steps', t.step],
                               jsonb_build_object('output', '{"ok": true}'::jsonb,
                                                  'attempt', t.attempt, 'visit', t.visit)),
           status = CASE WHEN t.n >= :nsteps THEN 'completed' ELSE 'running' END,
           current_step = CASE WHEN t.n < :nsteps THEN 's' || lpad((t.n + 1)::text, 2, '0') END,
           current_attempt = CASE WHEN t.n < :nsteps THEN 1 END,
           current_task = CASE WHEN t.n < :nsteps THEN nextval('bench_raw.task_id_seq') END,
           step_generation = CASE WHEN t.n < :nsteps THEN r.seq + 2 ELSE r.step_generation END,
           wait_generation = 0,
           output = CASE WHEN t.n >= :nsteps THEN '{"ok": true}'::jsonb END,
           last_hash = '\x00000000000000000000000000000000000000000000000000000000000000ff'::bytea,
           updated_at = now(),
           finished_at = CASE WHEN t.n >= :nsteps THEN now() END
      FROM t
     WHERE r.run_id = t.run_id AND r.status = 'running'
 RETURNING r.run_id, r.tenant_id, r.seq, r.status, r.current_step, r.current_task, r.last_hash,
           t.task_id, t.fence, t.step, t.visit, t.attempt, t.worker, t.input, t.queue, t.activity,
           t.schedule_to_start, t.start_to_close, t.heartbeat_timeout
), e AS (
    INSERT INTO bench_raw.events (run_id, seq, tenant_id, type, step, attempt,
                                  payload, actor, created_at, hash)
    SELECT r.run_id, r.seq - 1, r.tenant_id, 'task_completed', r.step, r.attempt,
           jsonb_build_object('task_id', r.task_id, 'fence', r.fence, 'worker', r.worker,
                              'visit', r.visit, 'output', '{"ok": true}'::jsonb),
           current_user, now(), r.last_hash
      FROM r
    UNION ALL
    SELECT r.run_id, r.seq, r.tenant_id,
           CASE WHEN r.current_task IS NULL THEN 'run_completed' ELSE 'task_scheduled' END,
           r.current_step, CASE WHEN r.current_task IS NOT NULL THEN 1 END,
           CASE WHEN r.current_task IS NULL
                THEN jsonb_build_object('output', '{"ok": true}'::jsonb)
                ELSE jsonb_build_object('task_id', r.current_task, 'queue', r.queue,
                                        'activity', r.activity, 'visit', 1,
                                        'idempotency_key', r.run_id || '/' || r.current_step || '/1',
                                        'available_at', now(), 'input', r.input) END,
           current_user, now(), r.last_hash
      FROM r
), n AS (
    INSERT INTO bench_raw.tasks (task_id, tenant_id, run_id, step, visit, attempt, queue,
                                 activity, status, available_at, idempotency_key, input,
                                 created_at, schedule_to_start, start_to_close,
                                 heartbeat_timeout, deadline_at)
    SELECT r.current_task, r.tenant_id, r.run_id, r.current_step, 1, 1, r.queue,
           r.activity, 'ready', now(), r.run_id || '/' || r.current_step || '/1', r.input,
           now(), r.schedule_to_start, r.start_to_close, r.heartbeat_timeout,
           now() + r.schedule_to_start
      FROM r WHERE r.current_task IS NOT NULL
), x AS (
    UPDATE bench_raw.timers tm
       SET status = 'cancelled', fired_at = now(), outcome = 'run_finished'
      FROM r
     WHERE r.status = 'completed' AND tm.run_id = r.run_id AND tm.status = 'pending'
)
SELECT count(*) AS accepted FROM r;
