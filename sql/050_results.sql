-- scenario: duplicate, stale and forged results are recorded, never applied
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('pay', '{"steps": [
  {"name": "charge", "queue": "res_q"}, {"name": "receipt", "queue": "res_q2"}]}');
SELECT wf.start_run('pay', '{"amount": 10}') AS run \gset

-- the same attempt completed twice: the second is a duplicate
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('res_q', 'w1') \gset
SELECT wf.complete_task(:t, :f, '{"id": "ch_1"}');
SELECT wf.complete_task(:t, :f, '{"id": "ch_1"}');
SELECT wf.complete_task(:t, :f, '{"id": "ch_DIFFERENT"}');
SELECT wf.fail_task(:t, :f, '{"code": "late"}');
-- the first result stands
SELECT context->'steps'->'charge'->'output' AS output FROM wf.runs WHERE run_id = :'run';
SELECT count(*) AS receipt_tasks FROM wf.tasks WHERE run_id = :'run' AND step = 'receipt';

-- a lease expires, another worker claims the same attempt with a new fence
SELECT task_id AS t2, fence AS old_fence FROM wf.claim_tasks('res_q2', 'w-slow', 1, '1 millisecond') \gset
SELECT pg_sleep(0.02);
-- the engine worker notices the expired lease (wf.tick() does it now)
SELECT wf.tick();
SELECT type, step, payload->>'fence' AS fence, payload->>'expirations' AS expirations,
       payload->>'quarantined' AS quarantined
FROM wf.history(:'run') WHERE type = 'lease_expired';
SELECT task_id = :t2 AS same_task, attempt, fence AS new_fence, deliveries
FROM wf.claim_tasks('res_q2', 'w-fast') \gset
\echo same_task :same_task attempt :attempt new_fence :new_fence deliveries :deliveries
-- the old worker's late result is stale; the new worker's is accepted
SELECT wf.complete_task(:t2, :old_fence, '{"from": "slow"}');
SELECT wf.fail_task(:t2, :old_fence, '{"code": "slow"}');
SELECT wf.complete_task(:t2, :new_fence, '{"from": "fast"}');
SELECT wf.complete_task(:t2, :old_fence, '{"from": "slow"}');
SELECT status, output FROM wf.runs WHERE run_id = :'run';
SELECT seq, type, step, attempt, payload->>'fence' AS fence, payload->>'current_fence' AS current_fence,
       payload->>'report' AS report
FROM wf.history(:'run');
SELECT wf.verify_run(:'run');

-- a fence that was never issued, an unknown task, NULLs: errors, nothing written
SELECT seq AS seq_before FROM wf.runs WHERE run_id = :'run' \gset
SELECT wf.complete_task(:t2, 99, '{}');
SELECT wf.complete_task(:t2, 0, '{}');
SELECT wf.fail_task(:t2, -1, '{}');
SELECT wf.complete_task(987654321, 1, '{}');
SELECT wf.complete_task(NULL, 1, '{}');
SELECT wf.complete_task(:t2, NULL, '{}');
SELECT seq = :seq_before AS nothing_appended FROM wf.runs WHERE run_id = :'run';

-- an oversize result is refused before anything is written
SELECT wf.start_run('pay', '{"amount": 11}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('res_q', 'w1') \gset
SET wfengine.max_payload_size = '1kB';
SELECT wf.complete_task(:t, :f, jsonb_build_object('blob', repeat('x', 5000)));
SELECT wf.fail_task(:t, :f, jsonb_build_object('blob', repeat('x', 5000)));
RESET wfengine.max_payload_size;
SELECT status FROM wf.tasks WHERE task_id = :t;
-- the worker can still report a small result
SELECT wf.complete_task(:t, :f, '{"stored_at": "s3://bucket/key"}');
-- a SQL NULL output is stored as JSON null
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('res_q2', 'w1') \gset
SELECT wf.complete_task(:t, :f, NULL);
SELECT status, output FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
