-- scenario: wf.claim_tasks_any: one claim over several queues
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('on_a', '{"steps": [{"name": "a", "queue": "any_a"}]}');
SELECT wf.publish_definition('on_b', '{"steps": [{"name": "b", "queue": "any_b"}]}');
SELECT count(wf.start_run('on_a', jsonb_build_object('n', n))) FROM generate_series(1, 2) n;
SELECT count(wf.start_run('on_b', jsonb_build_object('n', n))) FROM generate_series(1, 2) n;

-- scenario: the queues in the order given: all it can from the first, then the next
SELECT queue, step, input->>'n' AS n FROM wf.claim_tasks_any(ARRAY['any_a', 'any_b'], 'w', 3);
SELECT queue, step, input->>'n' AS n FROM wf.claim_tasks_any(ARRAY['any_b', 'any_a'], 'w', 3);
-- nothing left: no rows, at once without a wait
SELECT count(*) FROM wf.claim_tasks_any(ARRAY['any_a', 'any_b'], 'w', 3);
-- a queue named twice counts once; an unknown queue is just empty
SELECT wf.start_run('on_a', '{"n": 3}') IS NOT NULL AS started;
SELECT queue, input->>'n' AS n FROM wf.claim_tasks_any(ARRAY['nobody', 'any_a', 'any_a'], 'w', 5);
-- the leases are ordinary: a result is accepted with the fence
SELECT wf.complete_task(t.task_id, t.fence, '{"ok": true}')
FROM wf.tasks t WHERE t.queue = 'any_a' AND t.status = 'leased' ORDER BY t.task_id LIMIT 1;

-- scenario: a wait over several queues: empty after the wait, not before
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM wf.claim_tasks_any(ARRAY['any_a', 'any_b'], 'w', 1, wait => '200 milliseconds');
SELECT clock_timestamp() - :'t0' >= interval '200 milliseconds' AS waited,
       clock_timestamp() - :'t0' < interval '5 seconds' AS not_much_longer;
-- a task of the second queue that becomes available later is claimed then,
-- with no commit to wake the claimer
SELECT wf.start_run('on_b', '{"n": 9}') IS NOT NULL AS started;
SELECT clock_timestamp() + interval '300 milliseconds' AS avail \gset
UPDATE wf.tasks SET available_at = :'avail' WHERE queue = 'any_b' AND status = 'ready';
SELECT queue, input->>'n' AS n FROM wf.claim_tasks_any(ARRAY['any_a', 'any_b'], 'w', 1, wait => '20 seconds');
SELECT claimed_at >= :'avail' AS not_before_available,
       claimed_at < :'avail'::timestamptz + interval '10 seconds' AS long_before_the_deadline
FROM wf.tasks WHERE queue = 'any_b' AND run_id IN (SELECT run_id FROM wf.runs WHERE input->>'n' = '9');

-- scenario: bad input is refused, naming the argument
SELECT * FROM wf.claim_tasks_any(ARRAY[]::text[], 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a', NULL], 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a', ''], 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY[['any_a'], ['any_b']], 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY(SELECT 'q' || g FROM generate_series(1, 65) g), 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], '');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 0);
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 1, '0 seconds');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 1, '30 seconds', '6 minutes');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 1, '30 seconds', '1 second');
ROLLBACK;
-- a NULL queue list, worker, max_tasks or lease is refused, as in the other
-- functions of 0.2.0 (wf.complete_and_claim); only a NULL wait means "no wait"
SELECT * FROM wf.claim_tasks_any(NULL, 'w');
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], NULL);
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', NULL);
SELECT * FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 1, NULL);
DO $$ BEGIN PERFORM * FROM wf.claim_tasks_any(NULL, 'w');
EXCEPTION WHEN null_value_not_allowed THEN RAISE NOTICE '22004 (null_value_not_allowed): %', SQLERRM; END $$;
SELECT count(*) FROM wf.claim_tasks_any(ARRAY['any_a'], 'w', 1, '30 seconds', NULL);
