-- scenario: a fence names one delivery, even when the claim that drew it
-- never committed (issue 11)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('fenced', '{"steps": [
  {"name": "ship", "queue": "fence_q"}, {"name": "after", "queue": "fence_after"}]}');
SELECT wf.start_run('fenced', '{"order": 1}') AS run \gset

-- a claim in a transaction that rolls back: its worker saw a fence
BEGIN;
SELECT task_id AS t, fence AS f1 FROM wf.claim_tasks('fence_q', 'w-rolled-back') \gset
ROLLBACK;
SELECT status, fence, deliveries, worker FROM wf.tasks WHERE task_id = :t;

-- the next claim of the same attempt gets another, higher fence
SELECT task_id = :t AS same_task, fence AS f2, deliveries FROM wf.claim_tasks('fence_q', 'w-real') \gset
\echo same_task :same_task deliveries :deliveries
SELECT :f2 <> :f1 AS different_fence, :f2 > :f1 AS higher_fence;

-- the first claimer's report carries a fence the task never committed:
-- it is older than the current lease, so it is stale, never accepted
SELECT wf.complete_task(:t, :f1, '{"by": "w-rolled-back"}');
SELECT wf.fail_task(:t, :f1, '{"code": "late"}', true);
SELECT wf.heartbeat(:t, :f1);
-- a fence above the current one was never issued for the task
SELECT wf.complete_task(:t, :f2 + 1, '{"by": "forger"}');
-- the holder of the lease is accepted, once
SELECT wf.heartbeat(:t, :f2);
SELECT wf.complete_task(:t, :f2, '{"by": "w-real"}');
SELECT wf.complete_task(:t, :f2, '{"by": "w-real"}');
SELECT context->'steps'->'ship'->'output' AS output FROM wf.runs WHERE run_id = :'run';
SELECT type, step, (payload->>'fence')::bigint = :f1 AS old_fence,
       (payload->>'fence')::bigint = :f2 AS real_fence,
       (payload->>'current_fence')::bigint = :f2 AS current_is_real, payload->>'worker' AS worker
FROM wf.history(:'run') WHERE type IN ('task_completed', 'result_stale', 'result_duplicate')
ORDER BY seq;

-- a claim that rolls back with no claim after it: its fence is never issued
SELECT task_id AS ta FROM wf.tasks WHERE run_id = :'run' AND step = 'after' \gset
BEGIN;
SELECT fence AS f3 FROM wf.claim_tasks('fence_after', 'w-rolled-back') \gset
ROLLBACK;
SELECT status, fence FROM wf.tasks WHERE task_id = :ta;
SELECT wf.complete_task(:ta, :f3, '{"by": "w-rolled-back"}');
SELECT fence AS f4 FROM wf.claim_tasks('fence_after', 'w-real') \gset
SELECT :f4 > :f3 AS higher_fence;
SELECT wf.complete_task(:ta, :f3, '{"by": "w-rolled-back"}');
SELECT wf.complete_task(:ta, :f4, '{"by": "w-real"}');
SELECT wf.run_status(:'run'), wf.verify_run(:'run');

-- every lease of every task has its own fence
SELECT wf.publish_definition('fenced_many', '{"steps": [{"name": "s", "queue": "fence_many"}]}');
SELECT count(wf.start_run('fenced_many', jsonb_build_object('n', n))) FROM generate_series(1, 5) n;
BEGIN;
SELECT count(*) AS claimed_and_rolled_back FROM wf.claim_tasks('fence_many', 'w', 5);
ROLLBACK;
CREATE TEMP TABLE many AS SELECT task_id, fence FROM wf.claim_tasks('fence_many', 'w', 5);
SELECT count(*) AS leases, count(DISTINCT fence) AS fences, min(fence) > :f4 AS above_earlier FROM many;

-- the engine taking a lease over (a start_to_close timeout) draws a new
-- fence too: the late worker's result is stale
SELECT wf.publish_definition('fenced_timeout', '{"steps": [
  {"name": "slow", "queue": "fence_slow", "timeout": {"start_to_close": "50ms"}, "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('fenced_timeout', '{}') AS trun \gset
SELECT task_id AS tt, fence AS ft FROM wf.claim_tasks('fence_slow', 'w-slow', 1, '1 hour') \gset
SELECT pg_sleep(0.1);
SELECT wf.tick();
SELECT status, fence > :ft AS engine_fence FROM wf.tasks WHERE task_id = :tt;
SELECT wf.complete_task(:tt, :ft, '{"late": true}');
SELECT wf.run_status(:'trun'), wf.verify_run(:'trun');

-- fences are drawn from wf.fence_seq, on top of the timeline bits
SELECT (:f4 & ((1::bigint << 44) - 1)) <= pg_catalog.pg_sequence_last_value('wf.fence_seq') AS drawn_from_sequence;
