-- bench/raw_cycle.sql -- the same writes as engine_cycle.sql, hand-written as
-- plain SQL against bench_raw: one statement per transaction, no hashing, no
-- validation, no definition lookup (the step graph s01 -> s02 -> ... -> sNN is
-- hard-coded through the nsteps variable).
--
-- Claim: WF_PLAN_CLAIM (src/spi_util.c) verbatim, on bench_raw.tasks.
-- Complete: what wf.complete_task writes per accepted result (report_result
-- in src/result.c, then WF_PLAN_TRANSITION): the task row is locked and
-- finished (fence-checked), then the run row is locked and rewritten (seq + 2, context.steps.<step>, current step/attempt/task,
-- last_hash, ...), two events are appended (task_completed, then
-- task_scheduled or run_completed, with payloads of the same shape) and the
-- next task row is inserted unless the run is done; a finished run's pending
-- timers are cancelled (there are none here, but the engine looks too).
-- pgbench variables: queue, nsteps (-D queue=q20 -D nsteps=20).
WITH c AS (
    SELECT t.task_id FROM bench_raw.tasks t
     WHERE t.tenant_id = 'default' AND t.queue = :queue
       AND t.status = 'ready' AND t.available_at <= now()
     ORDER BY t.priority DESC, t.available_at, t.task_id
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE bench_raw.tasks t
       SET status = 'leased', fence = t.fence + 1, deliveries = t.deliveries + 1,
           worker = 'w:' || :client_id, claimed_at = now(),
           lease = interval '30 seconds', last_heartbeat_at = NULL,
           lease_expires_at = now() + interval '30 seconds',
           timeout_at = now() + t.start_to_close,
           deadline_at = LEAST(now() + interval '30 seconds', now() + t.start_to_close,
                               now() + t.heartbeat_timeout)
      FROM c WHERE t.task_id = c.task_id
 RETURNING t.task_id, t.run_id, t.step, t.attempt, t.fence, t.idempotency_key,
           t.input, t.lease_expires_at, t.queue, t.activity, t.deliveries, t.deadline_at
)
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence FROM u \gset
\if :task_id > 0
WITH t AS (
    UPDATE bench_raw.tasks t
       SET status = 'completed', output = '{"ok": true}', error = NULL, finished_at = now(),
           deadline_at = NULL
     WHERE t.task_id = :task_id AND t.fence = :fence AND t.status IN ('ready', 'leased')
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
\endif
